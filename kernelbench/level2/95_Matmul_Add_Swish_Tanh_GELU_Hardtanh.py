"""Linear layer, add a learned vector, Swish, tanh, GELU, Hardtanh: (batch, 1024) -> (batch, 512).

The final hardtanh is a no-op (GELU of values in (-1, 1) lies in about (-0.17, 0.85)).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, add_value_shape):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.add_value = nn.Parameter(torch.randn(add_value_shape))

    def forward(self, x):
        x = self.matmul(x)
        x = x + self.add_value
        x = torch.sigmoid(x) * x  # Swish
        x = torch.tanh(x)
        x = F.gelu(x)
        x = F.hardtanh(x, min_val=-1, max_val=1)
        return x


batch_size = 128
in_features = 1024
out_features = 512
add_value_shape = (out_features,)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, add_value_shape]

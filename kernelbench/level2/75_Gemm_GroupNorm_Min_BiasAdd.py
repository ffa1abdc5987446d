"""Linear layer, GroupNorm, row min, add bias: (batch, 512) -> (1, 256, batch, 1).

Quirk of the original, kept on purpose: adding the (batch, 1) row minima to a (1, out_features,
1, 1) bias broadcasts to (1, out_features, batch, 1): out[0, j, n, 0] = min_k gn(gemm(x))[n, k] + bias[j].
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, num_groups, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.gemm(x)
        x = self.group_norm(x)
        x = torch.min(x, dim=1, keepdim=True).values  # (B, 1)
        x = x + self.bias  # (1, F, B, 1)
        return x


batch_size = 128
in_features = 512
out_features = 256
num_groups = 8
bias_shape = (1, out_features, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups, bias_shape]

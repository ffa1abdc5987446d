"""Linear layer, MaxPool1d over features, row sum, scale: (batch, 10) -> (batch,).

With out_features=5 and kernel_size=2 the pool windows are features {0,1} and {2,3}; feature 4
is dropped.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, kernel_size, scale_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.max_pool = nn.MaxPool1d(kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        x = self.matmul(x)  # (B, out_features)
        x = self.max_pool(x.unsqueeze(1)).squeeze(1)  # (B, out_features // kernel_size)
        x = torch.sum(x, dim=1)  # (B,)
        x = x * self.scale_factor
        return x


batch_size = 128
in_features = 10
out_features = 5
kernel_size = 2
scale_factor = 0.5


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, kernel_size, scale_factor]

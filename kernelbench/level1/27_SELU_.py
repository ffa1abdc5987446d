"""SELU, scale * (x if x > 0 else alpha * (exp(x) - 1)), on a (batch_size, dim) input."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.selu(x)  # alpha = 1.6732632423543772, scale = 1.0507009873554805


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

"""GELU on a (batch_size, dim) input, exact erf form: 0.5 * x * (1 + erf(x / sqrt(2))).

The default GELU, not the tanh approximation.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)  # approximate='none'


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

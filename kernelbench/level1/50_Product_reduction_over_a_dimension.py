"""Product over dim 1 of a (batch_size, dim1, dim2) input, keepdim=False: output (16, 256).

The product of 256 randn values underflows float32: the output is essentially all zeros
(largest |value| ~1e-44, denormal), so any ~0 output passes the check. Degenerate task.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.prod(x, dim=self.dim)


batch_size = 16
dim1 = 256
dim2 = 256
reduction_dim = 1


def get_inputs():
    x = torch.randn(batch_size, dim1, dim2)
    return [x]


def get_init_inputs():
    return [reduction_dim]

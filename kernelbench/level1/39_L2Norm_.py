"""Divide each row of a (batch_size, dim) input by its L2 norm (no eps).

Outputs are ~1e-2 or smaller, so a 1e-2 absolute tolerance checks little.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x / torch.norm(x, p=2, dim=1, keepdim=True)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

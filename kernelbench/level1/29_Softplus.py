"""Softplus, log(1 + exp(x)), on a (batch_size, dim) input.

Defaults beta=1, threshold=20: x itself where x > 20 (never reached by randn inputs).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.softplus(x)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

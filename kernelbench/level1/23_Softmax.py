"""Softmax over the features (dim 1) of a (batch_size, dim) input.

With 16384 features the outputs are tiny (~1e-5..1e-3), so an absolute tolerance of 1e-2
says little about correctness.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)  # exp(x - max) / sum exp, per row


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []

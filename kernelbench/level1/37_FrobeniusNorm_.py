"""Divide a (batch_size, features, dim1, dim2) tensor by its Frobenius norm (one global scalar).

The reduction spans all ~67M elements. Outputs are ~1e-4, far below a 1e-2 absolute
tolerance, so a near-zero output would pass a loose check: correctness is weakly tested.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        norm = torch.norm(x, p="fro")  # sqrt of the sum of squares over ALL elements
        return x / norm


batch_size = 16
features = 64
dim1 = 256
dim2 = 256


def get_inputs():
    x = torch.randn(batch_size, features, dim1, dim2)
    return [x]


def get_init_inputs():
    return []

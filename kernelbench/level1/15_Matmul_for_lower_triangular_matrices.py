"""Product of two lower-triangular (M, M) matrices, kept lower triangular: tril(A @ B).

The strict upper part of the output is exactly 0.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.tril(torch.matmul(A, B))


M = 4096


def get_inputs():
    # both drawn first, then made triangular (the random stream depends on this order)
    A = torch.randn(M, M)
    B = torch.randn(M, M)
    A = torch.tril(A)
    B = torch.tril(B)
    return [A, B]


def get_init_inputs():
    return []

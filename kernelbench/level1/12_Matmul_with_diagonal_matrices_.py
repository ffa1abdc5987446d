"""diag(A) @ B with A a vector (N,) and B (N, M), giving (N, M).

The reference builds the dense N x N diagonal matrix and runs a full matmul; the result is
just the row scaling A[:, None] * B.
"""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.diag(A) @ B  # (N, N) @ (N, M) -> (N, M)


M = 4096
N = 4096


def get_inputs():
    A = torch.randn(N)
    B = torch.randn(N, M)
    return [A, B]


def get_init_inputs():
    return []

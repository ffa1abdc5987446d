"""Matrix multiplication with a short reduction: (M, K) @ (K, N), M = N = 16384, K = 32."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.matmul(A, B)  # (M, K) @ (K, N) -> (M, N), a 1 GiB output


M = 16384
N = 16384
K = 32


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N)
    return [A, B]


def get_init_inputs():
    return []

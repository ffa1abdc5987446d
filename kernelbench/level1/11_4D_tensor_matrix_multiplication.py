"""4-D tensor times matrix: C[b,i,j,k] = sum_l A[b,i,j,l] * B[l,k], A (b, i, j, l), B (l, k)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.einsum("bijl,lk->bijk", A, B)


b = 16
i = 256
j = 512
l = 256
k = 768


def get_inputs():
    A = torch.randn(b, i, j, l)
    B = torch.randn(l, k)
    return [A, B]


def get_init_inputs():
    return []

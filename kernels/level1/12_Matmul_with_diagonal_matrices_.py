"""diag(A) @ B is a row scaling: replace the dense N x N matmul by A[:, None] * B.

The reference materialises torch.diag(A), an N x N matrix (N = 4096: 64 MB, almost all zeros),
and multiplies it into B (N x M) with a full fp32 GEMM: 2*N*N*M = 137 GFLOP, several ms on any
GPU. Row i of the product is sum_k diag(A)[i, k] * B[k, :] = A[i] * B[i, :], because every other
term is an exact zero. So the result is the broadcast product A[:, None] * B: one elementwise
kernel that reads B once (64 MB) and writes the output once (64 MB) -- about 30 us at the H200's
~4.3 TB/s, against milliseconds for the GEMM, so the speedup is roughly 50-100x. Each output
element is one fp32 multiply, the same value the reference's dot product yields (x*a + 0 + ...
+ 0 is exact), so the result matches to the last bit. It is plain PyTorch, so it runs the same
on the CPU, where the win is larger still (the 4096^3 GEMM takes seconds on two cores).
"""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return A.unsqueeze(1) * B  # (N, 1) * (N, M) -> (N, M)

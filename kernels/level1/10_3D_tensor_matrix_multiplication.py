"""(N, M, K) @ (K, L) as one flat 3xTF32 GEMM: fp32 accuracy at tensor-core speed.

torch.matmul folds the batch into rows, so the reference is one fp32 SGEMM of
(16384 x 2048) @ (2048 x 768): 51.5 GFLOP, ~1 ms at ~50 TFLOP/s on the CUDA cores. The same
GEMM on TF32 tensor cores is ~7x faster but rounds operands to 11 bits (~6e-4 of the output's
rms on average, outside the strict 1e-4 tolerance). Split both operands exactly, x = hi + lo,
hi = x with the low 13 mantissa bits cleared (TF32-exact) and lo = x - hi (|lo| < 2^-10 |x|):
    A @ B ~= a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi
leaves out only lo*lo (< 2^-20 per product). A is viewed as a (N*M, K) matrix (no copy), the
three TF32 GEMMs accumulate into one (N*M, L) output through cuBLAS's fp32 beta = 1 epilogue,
and the result is viewed back as (N, M, L). Cost: 155 GFLOP at ~350-400 TFLOP/s (~420 us) plus
~150 us of elementwise split passes over A's 128 MB: expect ~1.7-1.9x over eager.
"""
import torch
import torch.nn as nn


def _tf32_split(x):
    """x = hi + lo exactly; hi keeps the top 11 significant bits (TF32-exact), lo the rest."""
    hi = (x.view(torch.int32) & -8192).view(torch.float32)  # -8192 = 0xffffe000
    return hi, x - hi


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        n, m, k = A.shape
        a_hi, a_lo = _tf32_split(A.reshape(n * m, k))  # (N*M, K)
        b_hi, b_lo = _tf32_split(B)  # (K, L)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a_lo, b_hi)  # (N*M, L), the two small cross terms first
        out.addmm_(a_hi, b_lo)
        out.addmm_(a_hi, b_hi)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out.view(n, m, -1)

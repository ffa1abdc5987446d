"""Tall-skinny GEMM (K = 16) as ONE 3xTF32 tensor-core GEMM of depth 48 that writes 1 GiB once.

(16384 x 16) @ (16 x 16384) is an outer-product-like GEMM: 8.6 GFLOP but a 1 GiB output, so the
floor is the ~250 us it takes to write the output at ~4.3 TB/s. Eager's fp32 SGEMM needs ~145 us
of CUDA-core math even at full rate, and with K = 16 every output tile is mostly prologue and
epilogue, so it cannot keep the stores streaming at full speed. Tensor cores make the math
negligible, and the strict fp32 tolerance is kept with 3xTF32: hi = x with the low 13 mantissa
bits cleared (TF32-exact), lo = x - hi (|lo| < 2^-10 |x|), and the three products that matter
stacked along K,
    [a_lo | a_hi | a_hi]  (M, 48)  @  [b_hi ; b_lo ; b_hi]  (48, M)
    = a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi  ~=  A @ B    (lo*lo < 2^-20 per product dropped),
one TF32 GEMM whose output is written once. The splits and concatenations touch 1 MB per
operand. The error is ~1e-6 of the output's rms (worst element below 1% of the tolerance).
Both versions are store-bound, so expect a modest ~1.1-1.2x over eager.
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
        a_hi, a_lo = _tf32_split(A)  # (M, N)
        b_hi, b_lo = _tf32_split(B)  # (N, M)
        a3 = torch.cat([a_lo, a_hi, a_hi], dim=1)  # (M, 3N)
        b3 = torch.cat([b_hi, b_lo, b_hi], dim=0)  # (3N, M)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a3, b3)  # (M, M)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

"""Small-K GEMM as ONE 3xTF32 tensor-core GEMM: split operands stacked along K (K = 32 -> 96).

(16384 x 32) @ (32 x 16384) writes a 1 GiB output: ~250 us at ~4.3 TB/s is the floor for any
method. Eager's fp32 SGEMM also has 17.2 GFLOP to do, ~290 us even at the CUDA cores' full
~60 TFLOP/s, and with K = 32 each output tile is mostly prologue and epilogue, so the math does
not hide under the stores. On tensor cores the math is nearly free, but one TF32 pass rounds
operands to 11 bits (~6e-4 of the output's rms, outside the strict 1e-4 tolerance). So split
both operands exactly, hi = x with the low 13 mantissa bits cleared (TF32-exact) and lo = x - hi
(|lo| < 2^-10 |x|), and stack the three products that matter along K:
    [a_lo | a_hi | a_hi]  (M, 96)  @  [b_hi ; b_lo ; b_hi]  (96, N)
    = a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi  ~=  A @ B    (lo*lo < 2^-20 per product dropped).
One TF32 GEMM of depth 96 (52 GFLOP, ~130 us of tensor-core time) then writes the output once,
so the call is bound by the 1 GiB of stores. The splits and concatenations touch only 2 MB per
operand. The error is ~1e-6 of the output's rms (worst element below 1% of the tolerance).
Expect ~1.3-1.5x over eager.
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
        a_hi, a_lo = _tf32_split(A)  # (M, K)
        b_hi, b_lo = _tf32_split(B)  # (K, N)
        a3 = torch.cat([a_lo, a_hi, a_hi], dim=1)  # (M, 3K)
        b3 = torch.cat([b_hi, b_lo, b_hi], dim=0)  # (3K, N)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a3, b3)  # (M, N)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

"""A.T @ B in fp32 accuracy on TF32 tensor cores (3xTF32), with the transpose left to cuBLAS.

The reference is an fp32 SGEMM of (1024 x 4096) @ (4096 x 2048), A stored as (K, M): 17.2 GFLOP,
~340 us at the ~50 TFLOP/s of the CUDA cores. A.T is only a view; cuBLAS reads it as a
column-major operand at no cost, so the work is the GEMM itself. Plain TF32 would be ~7x faster
but rounds operands to 11 bits, ~6e-4 of the output's rms for K = 4096, outside the strict 1e-4
tolerance. Split each operand exactly, x = hi + lo, hi = x with the low 13 mantissa bits cleared
(TF32-exact), lo = x - hi (|lo| < 2^-10 |x|), and sum the three products that matter:
    A.T @ B ~= a_lo.T @ b_hi + a_hi.T @ b_lo + a_hi.T @ b_hi
(the dropped lo*lo term and the tensor core's truncation of lo are each < 2^-20 per product).
The splits are elementwise on the stored (K, M) layout and the transposes stay views, so the
three TF32 GEMMs (51.5 GFLOP, ~140 us at ~350-400 TFLOP/s) accumulate into one output through
cuBLAS's fp32 beta = 1 epilogue, small terms first. With ~55 us of split passes over the 48 MB
of operands, expect ~1.6-1.8x over eager.
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
        a_hi, a_lo = _tf32_split(A)  # (K, M)
        b_hi, b_lo = _tf32_split(B)  # (K, N)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a_lo.T, b_hi)  # (M, N); transposed views, no copies
        out.addmm_(a_hi.T, b_lo)
        out.addmm_(a_hi.T, b_hi)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

"""Symmetric 4096 x 4096 GEMM in fp32 accuracy on TF32 tensor cores (3xTF32 split precision).

Symmetry of A and B gives no exact shortcut for A @ B (the product is not symmetric, and
A @ B = (B @ A).T costs the same), so the win has to come from the arithmetic units. Eager runs a
plain fp32 SGEMM: 2 * 4096^3 = 137 GFLOP at ~50 TFLOP/s, ~2.7 ms. TF32 tensor cores run ~7x
faster, but one TF32 pass rounds operands to 11 bits (errors ~6e-4 of the output's rms for
K = 4096, outside the strict 1e-4 tolerance). So each operand is split exactly into x = hi + lo:
hi = x with its low 13 mantissa bits cleared (a bitwise AND, TF32-exact), lo = x - hi
(|lo| < 2^-10 |x|), and
    A @ B ~= a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi
drops only lo*lo (< 2^-20 of each product). The three TF32 GEMMs accumulate into one output
through cuBLAS's fp32 beta = 1 epilogue, small terms first; an emulation of the tensor core's
truncating accumulation puts the worst element at ~1/3 of the tolerance. Cost: 412 GFLOP at
~350-400 TFLOP/s, ~1.1 ms, plus ~150 us for the four elementwise split passes over 128 MB of
operands: expect ~2-2.3x over eager.
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
        a_hi, a_lo = _tf32_split(A)  # (N, N)
        b_hi, b_lo = _tf32_split(B)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a_lo, b_hi)  # the two small cross terms first
        out.addmm_(a_hi, b_lo)
        out.addmm_(a_hi, b_hi)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

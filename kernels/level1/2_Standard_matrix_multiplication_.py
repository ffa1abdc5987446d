"""fp32 GEMM on TF32 tensor cores without losing fp32 accuracy: 3xTF32 split precision.

Eager runs this (1024 x 4096) @ (4096 x 2048) product as a plain fp32 SGEMM on the CUDA cores:
17.2 GFLOP at ~50 TFLOP/s, ~340 us. The H200's TF32 tensor cores are ~7x faster, but one TF32
GEMM rounds every operand to 11 significant bits: for K = 4096 that leaves errors of ~6e-4 of
the output's rms on average and ~2e-3 at worst, far outside the strict 1e-4 tolerance. So each
operand is split exactly into two TF32-sized halves, x = hi + lo: hi = x with its low 13
mantissa bits cleared (a bitwise AND, so hi is TF32-exact) and lo = x - hi (exact in fp32,
|lo| < 2^-10 |x|). Then
    A @ B = a_hi @ b_hi + a_hi @ b_lo + a_lo @ b_hi + a_lo @ b_lo,
and the last term (< 2^-20 of each product) is dropped. The tensor core truncates lo to 11 bits,
another < 2^-20 relative; summed over K with random signs these leave ~1e-6 of the output's rms.
What remains is the tensor core's fp32 accumulation, which truncates instead of rounding: an
emulation of it over K = 4096 puts the worst element at ~1/3 of the tolerance.
The three GEMMs run with TF32 enabled, small terms first, the later two accumulating into the
same output through cuBLAS's beta = 1 epilogue (fp32, round-to-nearest): 51.5 GFLOP at
~350-400 TFLOP/s is ~140 us, plus ~55 us for the four elementwise passes that build hi and lo
(48 MB of operands). Expect ~1.6-1.8x over eager.
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
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a_lo, b_hi)  # (M, N); the two small cross terms first
        out.addmm_(a_hi, b_lo)
        out.addmm_(a_hi, b_hi)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

"""Irregular (8205 x 2949) @ (2949 x 5921) GEMM in fp32 accuracy on TF32 tensor cores (3xTF32).

The reference is a plain fp32 SGEMM: 2 * 8205 * 2949 * 5921 = 287 GFLOP, ~5.7 ms at ~50 TFLOP/s
on the CUDA cores. Ragged sizes cost a GEMM little (only the edge tiles are partly empty), so the
lever is again the tensor cores: ~7x the fp32 rate, but one TF32 pass rounds operands to 11 bits,
~6e-4 of the output's rms on average, outside the strict 1e-4 tolerance. Split each operand
exactly, x = hi + lo, hi = x with the low 13 mantissa bits cleared (TF32-exact) and lo = x - hi
(|lo| < 2^-10 |x|):
    A @ B ~= a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi
drops only lo*lo (< 2^-20 per product). The three TF32 GEMMs accumulate into one output through
cuBLAS's fp32 beta = 1 epilogue, small terms first. Estimated cost: 860 GFLOP at ~350 TFLOP/s (~2.5
ms) plus ~200 us for the elementwise split passes over the 167 MB of operands. Measured on the H200:
0.86x vs eager: 7.59 ms against eager's 6.50 ms, far longer than that estimate; the cause is
unexplained. The odd leading dimensions (2949, 5921) are not multiples of 4, which keeps cuBLAS off
its TMA kernels; the padded bf16 variant removes that, yet measured 0.82x.
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
        out = torch.mm(a_lo, b_hi)  # (M, N), the two small cross terms first
        out.addmm_(a_hi, b_lo)
        out.addmm_(a_hi, b_hi)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

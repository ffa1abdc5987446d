"""Irregular fp32 GEMM as three TF32 tensor-core GEMMs in cuBLAS (3xTF32), K and N padded to x4.

Eager runs (8205 x 2949) @ (2949 x 5921) as an fp32 SIMT SGEMM (PyTorch's default matmul precision
is 'highest'): 287 GFLOP in ~6.4 ms on the H200. TF32 tensor cores are several times faster but
keep only 10 mantissa bits, ~1e-3 relative error, 10x the strict tolerance. Splitting each operand
into a TF32-exact high part and the remainder recovers fp32 accuracy:
    hi = x with its low 13 mantissa bits cleared (exact in TF32), lo = x - hi (exact in fp32)
    A @ B ~= A_lo @ B_hi + A_hi @ B_lo + A_hi @ B_hi     (A_lo @ B_lo ~ 2^-22 |A||B| is dropped)
hi x hi products are exact in the fp32 accumulator; lo is rounded to TF32 inside the tensor core, an
error of ~2^-21 relative to x. The small terms go first so the large one lands on them last.
Alignment decides the speed. With K padded but N = 5921 left as it is, B and the output have rows of
5921 floats, and a profile on the H200 showed cuBLAS running an sm80 `align1` TF32 kernel for 7.0 ms
over the three GEMMs (0.86x vs eager). So K is padded to 2952 and N to 5924 with zeros (zeros add
exact zeros to each dot product), every row of A, B and the output starts 16-byte aligned, and
forward returns the first 5921 columns of the (M, 5924) result as a strided view. TF32 is switched
on for these three calls only and restored after. Splitting reads 167 MB and writes 334 MB (~0.3
ms); the GEMMs are 3 x 287 GFLOP of TF32 work.
"""
import torch
import torch.nn as nn


def split_tf32(x, rows, cols):
    """(hi, lo) of x, each zero-padded to (rows, cols): hi exact in TF32, hi + lo == x."""
    hi = (x.view(torch.int32) & -8192).view(torch.float32)  # clear the 13 low mantissa bits
    lo = x - hi
    widths = (0, cols - x.shape[1], 0, rows - x.shape[0])
    if any(widths):
        hi, lo = nn.functional.pad(hi, widths), nn.functional.pad(lo, widths)
    return hi, lo


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        (M, K), N = A.shape, B.shape[1]
        kp, np_ = -(-K // 4) * 4, -(-N // 4) * 4
        a_hi, a_lo = split_tf32(A, M, kp)
        b_hi, b_lo = split_tf32(B, kp, np_)
        matmul = torch.backends.cuda.matmul
        saved = matmul.allow_tf32
        matmul.allow_tf32 = True
        try:
            c = torch.mm(a_lo, b_hi)
            c.addmm_(a_hi, b_lo)
            c.addmm_(a_hi, b_hi)
        finally:
            matmul.allow_tf32 = saved
        return c[:, :N]  # (M, N) view of the aligned (M, np_) result

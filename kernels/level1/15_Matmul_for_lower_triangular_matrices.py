"""tril(A @ B) for lower-triangular A, B: only the nonzero blocks, by recursion, in 3xTF32.

The reference multiplies two dense 4096 x 4096 matrices (137 GFLOP of fp32 SGEMM, ~2.7 ms) and
then zeroes the upper half. For lower-triangular A and B, C = A @ B is lower triangular too and
C[i, j] = sum over j <= k <= i only. Split every matrix into 2 x 2 blocks:
    C11 = A11 B11,   C22 = A22 B22   (the same problem at half size),
    C21 = A21 B11 + A22 B21          (two dense half-size GEMMs),   C12 = 0.
Recursing 3 times leaves 8 diagonal 512 x 512 leaves (each product of lower-triangular blocks,
whose upper part comes out as exact zeros) and, per level, the off-diagonal blocks. The blocks
of level l (h = N / 2^l) sit at a constant stride of 2h(N+1) elements along the diagonal, so each
product term of a level is one strided-batched GEMM over its 2^(l-1) blocks, on as_strided views
with no copies of A or B. Work: (1/4 + 1/16 + 1/64 + 1/64) of the dense product, 34% (47 GFLOP).
Each product runs in 3xTF32 for fp32 accuracy at tensor-core speed: hi = x with its low 13 mantissa
bits cleared (TF32-exact), lo = x - hi, and lo @ hi + hi @ lo + hi @ hi accumulate in fp32 through
cuBLAS's beta = 1 epilogue (lo @ lo, < 2^-20 per product, is dropped). Accuracy matters more here
than for a dense GEMM: the tolerance scales with the rms of the whole output, which the zero half
pulls down to ~26, while the dot products near the bottom-left corner are up to 4096 terms long
(~64). So C21 is summed as its two halves (A21 B11, then A22 B21), which halves each truncating
tensor-core accumulation chain; an emulation puts the worst element at ~0.1 of the tolerance. Cost:
142 GFLOP of TF32 work (~0.4 ms at ~350 TFLOP/s) plus ~0.15 ms of split passes and ~30 us of
zero-fill and block copies: expect ~4-5x over eager.
"""
import torch
import torch.nn as nn


def _tf32_split(x):
    """x = hi + lo exactly; hi keeps the top 11 significant bits (TF32-exact), lo the rest."""
    hi = (x.view(torch.int32) & -8192).view(torch.float32)  # -8192 = 0xffffe000
    return hi, x - hi


def _levels(n):
    """Halvings of the recursion: up to 3, leaves at least 64 wide (N = 4096 -> leaves of 512)."""
    L = 0
    while L < 3 and n % (2 << L) == 0 and n >> (L + 1) >= 64:
        L += 1
    return L


def _blocks(x, count, rows, cols, stride, offset):
    """`count` (rows x cols) blocks of the square matrix x, `stride` elements apart."""
    return x.as_strided((count, rows, cols), (stride, x.shape[1], 1), offset)


def _mm3(a, b, pairs):
    """sum over (i, j) in pairs of a-block i @ b-block j, in 3xTF32: lo*hi + hi*lo + hi*hi each."""
    out = None
    for ai, bj in pairs:
        (a_hi, a_lo), (b_hi, b_lo) = a[ai], b[bj]
        for x, y in ((a_lo, b_hi), (a_hi, b_lo), (a_hi, b_hi)):
            out = torch.bmm(x, y) if out is None else out.baddbmm_(x, y)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        n = A.shape[0]
        A, B = A.contiguous(), B.contiguous()
        a, b = _tf32_split(A), _tf32_split(B)  # (hi, lo) pairs
        C = torch.zeros_like(A)  # the upper blocks stay zero
        L = _levels(n)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        for l in range(1, L + 1):
            h = n >> l
            cnt, st = 1 << (l - 1), 2 * h * (n + 1)  # diagonal blocks of size 2h, and their stride
            av = {j: tuple(_blocks(t, cnt, h, h, st, h * n + j * h) for t in a) for j in (0, 1)}
            bv = {j: tuple(_blocks(t, cnt, h, h, st, j * h * n) for t in b) for j in (0, 1)}
            # C21 = A21 @ B11 + A22 @ B21, for every diagonal block at once
            _blocks(C, cnt, h, h, st, h * n).copy_(_mm3(av, bv, ((0, 0), (1, 1))))
        T, cnt = n >> L, 1 << L  # the diagonal leaves: lower-triangular products
        av = {0: tuple(_blocks(t, cnt, T, T, T * (n + 1), 0) for t in a)}
        bv = {0: tuple(_blocks(t, cnt, T, T, T * (n + 1), 0) for t in b)}
        _blocks(C, cnt, T, T, T * (n + 1), 0).copy_(_mm3(av, bv, ((0, 0),)))
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return C

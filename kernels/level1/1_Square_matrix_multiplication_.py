"""fp32 GEMM as three TF32 tensor-core GEMMs (3xTF32): tensor-core speed at fp32 accuracy.

Eager fp32 matmul runs on the CUDA cores (SGEMM, ~50-60 TFLOPS on an H200), because PyTorch keeps
TF32 off for matmuls by default -- and plain TF32 (10-bit mantissa) would miss the strict
tolerance: for N = 2048 its worst error is ~7e-2 against an allowed ~4.5e-3. The 3xTF32 trick
recovers the precision. Split each operand into a TF32-exact high part and a residual,
    A_hi = A with its 13 low mantissa bits cleared (one bitwise AND on the int32 view),
    A_lo = A - A_hi (exact in fp32, |A_lo| < 2^-10 |A|),
and form A @ B = A_hi @ B_hi + A_hi @ B_lo + A_lo @ B_hi (+ A_lo @ B_lo, ~2^-20 relative, dropped).
Each product runs on the tensor cores in TF32 with fp32 accumulation; A_hi and B_hi convert
exactly and the residuals lose only ~2^-10 of their own size, so every term is good to ~2^-20
relative: emulated for N = 2048 (with TF32 rounding or truncation alike) the worst error is
~1e-4, ~50x inside the tolerance. The small terms go first and the big one last, accumulated in
place into one output with addmm_ (beta = 1). Cost: three 17-GFLOP TF32 GEMMs (~150 us at ~350
TFLOPS) plus four elementwise passes over 16 MB operands (~40 us), against ~300+ us for SGEMM:
expect ~1.5-2x. TF32 is switched on only inside forward, through the legacy flag (setting it
keeps PyTorch's old and new TF32 settings consistent), and switched back off afterwards, the
PyTorch default. On the CPU there are no tensor cores, so it simply calls torch.matmul.
"""
import torch
import torch.nn as nn


def split_tf32(t):
    """t = hi + lo with hi exactly representable in TF32 (low 13 mantissa bits zero)."""
    hi = (t.view(torch.int32) & -8192).view(torch.float32)  # -8192 == 0xFFFFE000
    return hi, t - hi


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if not A.is_cuda or A.dtype != torch.float32 or A.dim() != 2 or B.dim() != 2:
            return torch.matmul(A, B)
        a_hi, a_lo = split_tf32(A)
        b_hi, b_lo = split_tf32(B)
        flags = torch.backends.cuda.matmul
        flags.allow_tf32 = True
        try:
            C = torch.mm(a_lo, b_hi)  # (N, N), the two small terms first
            C.addmm_(a_hi, b_lo)
            C.addmm_(a_hi, b_hi)
        finally:
            flags.allow_tf32 = False  # PyTorch's default for fp32 matmul
        return C

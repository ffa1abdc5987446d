"""3xTF32 GEMM with a hand-written split kernel and a single K-stacked tensor-core GEMM.

Same arithmetic as the main variant -- A @ B = A_lo @ B_hi + A_hi @ B_lo + A_hi @ B_hi, with
x_hi = x with its 13 low mantissa bits cleared (exact in TF32) and x_lo = x - x_hi, each product
in TF32 on the tensor cores with fp32 accumulation, good to ~1e-4 absolute at N = 2048 against a
strict tolerance of ~4.5e-3 -- but organised to cut memory passes and launches:
  - one CUDA kernel reads A and B once (128-bit loads) and writes the stacked operands
    A3 = [A_lo | A_hi | A_hi]  (N x 3N)   and   B3 = [B_hi ; B_lo ; B_hi]  (3N x N),
    32 MB read + 96 MB written (~30 us), where the PyTorch-level split takes four elementwise
    launches and ~160 MB of traffic;
  - then A @ B = A3 @ B3: a single cuBLAS TF32 GEMM with K = 3N, whose K loop accumulates the
    three products in fp32 registers (small terms first), with one prologue and one epilogue
    instead of three GEMMs each re-reading and re-writing the 16 MB output.
Expected ~1.6-2x over eager SGEMM (~300+ us): ~30 us split + ~150 us for 52 GFLOP of TF32.
TF32 is switched on only inside forward through the legacy flag (which keeps PyTorch's old and
new TF32 settings consistent) and switched back off after, the PyTorch default. On the CPU, or
for shapes the split kernel does not handle (K or N not a multiple of 4), it calls torch.matmul.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

__device__ __forceinline__ float tf32_hi(float v) {  // clear the 13 mantissa bits TF32 lacks
    return __uint_as_float(__float_as_uint(v) & 0xFFFFE000u);
}

// a: (M, K) -> a3: (M, 3K) = [lo | hi | hi];  b: (K, N) -> b3: (3K, N) = [hi ; lo ; hi].
// Flat grid-stride loop over the float4s of a, then those of b. K4 = K / 4, N4 = N / 4.
__global__ void split3(const float4* __restrict__ a, const float4* __restrict__ b,
                       float4* __restrict__ a3, float4* __restrict__ b3,
                       int64_t M, int64_t K4, int64_t N4) {
    const int64_t na = M * K4, nb = K4 * 4 * N4;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < na + nb; i += stride) {
        const bool in_a = i < na;
        const float4 v = in_a ? __ldg(a + i) : __ldg(b + (i - na));
        const float4 h = make_float4(tf32_hi(v.x), tf32_hi(v.y), tf32_hi(v.z), tf32_hi(v.w));
        const float4 l = make_float4(v.x - h.x, v.y - h.y, v.z - h.z, v.w - h.w);
        if (in_a) {
            const int64_t row = i / K4, col = i % K4;  // a3 row has 3 * K4 float4
            float4* dst = a3 + row * 3 * K4 + col;
            dst[0] = l; dst[K4] = h; dst[2 * K4] = h;
        } else {
            const int64_t j = i - na;                   // b3 block stride is K * N4 float4
            const int64_t blk = K4 * 4 * N4;
            b3[j] = h; b3[blk + j] = l; b3[2 * blk + j] = h;
        }
    }
}

// Returns false when the shapes are not handled (caller falls back to torch.matmul).
bool split_tf32x3(uintptr_t a, uintptr_t b, uintptr_t a3, uintptr_t b3, int64_t M, int64_t K,
                  int64_t N, uintptr_t stream) {
    if (K % 4 || N % 4 || ((a | b | a3 | b3) % 16) != 0 || M == 0 || K == 0 || N == 0) return false;
    const int threads = 256;
    const int64_t total = (M * K + K * N) / 4;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 132 * 16);
    split3<<<(unsigned)blocks, threads, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float4*>(a), reinterpret_cast<const float4*>(b),
        reinterpret_cast<float4*>(a3), reinterpret_cast<float4*>(b3), M, K / 4, N / 4);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("split3: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("split_tf32x3", &split_tf32x3, "stack the TF32 hi/lo splits of a and b for 3xTF32");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if not A.is_cuda or A.dtype != torch.float32 or A.dim() != 2 or B.dim() != 2:
            return torch.matmul(A, B)
        A, B = A.contiguous(), B.contiguous()
        (M, K), N = A.shape, B.shape[1]
        a3 = A.new_empty(M, 3 * K)  # [A_lo | A_hi | A_hi]
        b3 = B.new_empty(3 * K, N)  # [B_hi ; B_lo ; B_hi]
        if not _ext.split_tf32x3(A.data_ptr(), B.data_ptr(), a3.data_ptr(), b3.data_ptr(), M, K, N,
                                 torch._C._cuda_getCurrentRawStream(A.get_device())):
            return torch.matmul(A, B)
        flags = torch.backends.cuda.matmul
        flags.allow_tf32 = True
        try:
            return torch.mm(a3, b3)  # (M, N): the three products summed inside one GEMM
        finally:
            flags.allow_tf32 = False  # PyTorch's default for fp32 matmul

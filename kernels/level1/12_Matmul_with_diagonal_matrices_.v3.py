"""diag(A) @ B as a row-scaling kernel, out[i, :] = A[i] * B[i, :], float4 wide, as device code only:
a cubin launched through cudal1's prebuilt launcher.

The reference builds the dense N x N diagonal matrix (64 MB of mostly zeros for N = 4096) and runs
a 137 GFLOP fp32 GEMM on it, several ms. Only the diagonal terms of each dot product are nonzero,
so row i of the result is A[i] * B[i, :] exactly. The kernels of
12_Matmul_with_diagonal_matrices_.v2.py, kept here: one block of 256 threads per row loads its
scale A[i] once into a register, then streams the row of B with 128-bit (float4) loads and stores,
4 per thread in flight; rows whose length is not a multiple of 4 (or misaligned B or output) take
a scalar kernel. The work is bound by memory: 64 MB read + 64 MB written, ~30 us at ~4.3 TB/s. The
output is bit-identical to the reference (one fp32 multiply per element, the other terms are exact
zeros). What changes is the way to the launch: the source holds only device code, nvcc builds a
cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each kernel back as a
callable whose argument types come from its C signature, called through one vectorcall entry and
cuLaunchKernel on a driver handle looked up once instead of a pybind11 call and the runtime's
<<<>>> launch. The choice between the two kernels moves to Python unchanged, an empty output
launches nothing, and the launch goes to torch's current stream.
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <cstdint>

// One block per row: out[row, :] = a[row] * b[row, :]; (n_rows, n_cols) row-major.
extern "C" __global__ void row_scale_vec4(const float* __restrict__ a, const float4* __restrict__ b,
                               float4* __restrict__ out, int64_t n_cols4) {
    const int64_t row = blockIdx.x;
    const float s = __ldg(a + row);
    const float4* src = b + row * n_cols4;
    float4* dst = out + row * n_cols4;
    #pragma unroll 4
    for (int64_t j = threadIdx.x; j < n_cols4; j += blockDim.x) {
        float4 v = __ldg(src + j);
        v.x *= s; v.y *= s; v.z *= s; v.w *= s;
        dst[j] = v;
    }
}

extern "C" __global__ void row_scale_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, int64_t n_cols) {
    const int64_t row = blockIdx.x;
    const float s = __ldg(a + row);
    for (int64_t j = threadIdx.x; j < n_cols; j += blockDim.x)
        out[row * n_cols + j] = s * __ldg(b + row * n_cols + j);
}
"""

_k = cudal1.load_cuda(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        out = torch.empty_like(B)  # (N, M)
        n_rows, n_cols = B.shape[0], B.shape[1]
        if n_rows and n_cols:
            a, b, o = A.data_ptr(), B.data_ptr(), out.data_ptr()
            if n_cols % 4 == 0 and b % 16 == 0 and o % 16 == 0:
                _k.row_scale_vec4(n_rows, 256, a, b, o, n_cols // 4)
            else:
                _k.row_scale_scalar(n_rows, 256, a, b, o, n_cols)
        return out

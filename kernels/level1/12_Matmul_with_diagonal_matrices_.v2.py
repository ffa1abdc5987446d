"""diag(A) @ B as a hand-written row-scaling kernel: out[i, :] = A[i] * B[i, :], float4 wide.

The reference builds the dense N x N diagonal matrix (64 MB of mostly zeros for N = 4096) and runs
a 137 GFLOP fp32 GEMM on it, several ms. Only the diagonal terms of each dot product are nonzero,
so row i of the result is A[i] * B[i, :] exactly. This kernel gives each row to one block of 256
threads: the block loads its scale A[i] once into a register, then streams the row of B with
128-bit (float4) loads and stores, 4 per thread in flight. The work is bound by memory: 64 MB
read + 64 MB written ~ 30 us at ~4.3 TB/s, so the speedup over eager is ~50-100x. The output is
bit-identical to the reference (one fp32 multiply per element, the other terms are exact zeros).
Rows whose length is not a multiple of 4 take a scalar path.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

// One block per row: out[row, :] = a[row] * b[row, :]; (n_rows, n_cols) row-major.
__global__ void row_scale_vec4(const float* __restrict__ a, const float4* __restrict__ b,
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

__global__ void row_scale_scalar(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ out, int64_t n_cols) {
    const int64_t row = blockIdx.x;
    const float s = __ldg(a + row);
    for (int64_t j = threadIdx.x; j < n_cols; j += blockDim.x)
        out[row * n_cols + j] = s * __ldg(b + row * n_cols + j);
}

void row_scale(uintptr_t a, uintptr_t b, uintptr_t out, int64_t n_rows, int64_t n_cols,
               uintptr_t stream) {
    if (n_rows == 0 || n_cols == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    bool vec = n_cols % 4 == 0 && b % 16 == 0 && out % 16 == 0;
    if (vec)
        row_scale_vec4<<<(unsigned)n_rows, 256, 0, st>>>(
            reinterpret_cast<const float*>(a), reinterpret_cast<const float4*>(b),
            reinterpret_cast<float4*>(out), n_cols / 4);
    else
        row_scale_scalar<<<(unsigned)n_rows, 256, 0, st>>>(
            reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
            reinterpret_cast<float*>(out), n_cols);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("row_scale: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("row_scale", &row_scale, "out[i, :] = a[i] * b[i, :] (fp32, row-major)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        out = torch.empty_like(B)  # (N, M)
        _ext.row_scale(A.data_ptr(), B.data_ptr(), out.data_ptr(), B.shape[0], B.shape[1],
                       torch._C._cuda_getCurrentRawStream(B.get_device()))
        return out

"""HardTanh (clamp to [-1, 1]) as one float4 kernel behind a thin Python call.

The input is 16 x 16384 fp32 (1 MB in, 1 MB out): at ~4 TB/s the traffic is ~0.5 us, so eager's
call is dominated by host work (argument parsing, the dispatcher, TensorIterator set-up) plus one
DRAM round trip. Each thread loads one float4, clamps it with two compares and selects (written
with comparisons rather than fminf/fmaxf so that a NaN input stays NaN, as in torch.clamp, which
F.hardtanh calls) and stores one float4. The output is made by torch.empty_like and the raw
current-stream handle is passed as an integer: one pybind11 call, one launch, bit-identical values.
The GPU work is one DRAM round trip for both versions; expect ~1.2-1.4x from the host path.
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
#include <algorithm>
#include <cmath>

// clamp to [-1, 1]; comparisons (not fminf/fmaxf) so a NaN passes through as torch.clamp does
__device__ __forceinline__ float f(float v) { return v < -1.f ? -1.f : (v > 1.f ? 1.f : v); }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void hardtanh_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
}

__global__ void hardtanh_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i));
}

void hardtanh(uintptr_t x, uintptr_t y, int64_t n, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
        hardtanh_vec4<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    } else {
        const int64_t blocks = std::min((n + threads - 1) / threads, max_blocks);
        hardtanh_scalar<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("hardtanh: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("hardtanh", &hardtanh, "y = clamp(x, -1, 1) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.hardtanh(x, min_val=-1.0, max_val=1.0)
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        _ext.hardtanh(x.data_ptr(), y.data_ptr(), x.numel(), stream)
        return y

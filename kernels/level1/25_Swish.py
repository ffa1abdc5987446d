"""Swish (x * sigmoid(x)) fused into one float4 kernel.

Eager runs two kernels: torch.sigmoid writes a 1 MB temporary, then the multiply reads x and the
temporary and writes the result -- two launches, two trips through the dispatcher and an extra
allocation, plus 2 MB of extra traffic. The input is 16 x 16384 fp32 (1 MB in, 1 MB out): at ~4
TB/s the traffic is ~0.5 us, so eager's call is dominated by host work (argument parsing, the
dispatcher, TensorIterator set-up) plus one DRAM round trip. This version computes x * (1 / (1 +
expf(-x))) in registers in a single pass: one 128-bit load and one 128-bit store per thread, one
launch, output from torch.empty_like. The expression is exactly the one eager evaluates in its two
steps (sigmoid rounded to fp32, then the product), so the result is bit-identical. Half the host
work and half the launches: expect ~1.8-2.2x.
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

// x * sigmoid(x), with sigmoid written as torch writes it, so the result equals eager's two-kernel one
__device__ __forceinline__ float f(float v) { return v * (1.f / (1.f + expf(-v))); }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void swish_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
}

__global__ void swish_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i));
}

void swish(uintptr_t x, uintptr_t y, int64_t n, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
        swish_vec4<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    } else {
        const int64_t blocks = std::min((n + threads - 1) / threads, max_blocks);
        swish_scalar<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("swish: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("swish", &swish, "y = x * sigmoid(x) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return x * torch.sigmoid(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        _ext.swish(x.data_ptr(), y.data_ptr(), x.numel(), stream)
        return y

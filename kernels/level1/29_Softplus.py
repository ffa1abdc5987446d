"""Softplus (beta 1, threshold 20) as one float4 kernel behind a thin Python call.

The input is 16 x 16384 fp32 (1 MB in, 1 MB out): at ~4 TB/s the traffic is ~0.5 us, so eager's call
is dominated by host work (argument parsing, the dispatcher, TensorIterator set-up) plus one DRAM
round trip. The kernel moves one float4 per thread and evaluates x > 20 ? x : log1pf(expf(x)),
torch's formula with its default beta and threshold, with the accurate libdevice expf and log1pf
(log1p keeps full precision when e^x is small, i.e. for very negative x). The output is allocated
with torch.empty_like and the raw current-stream handle is passed as an integer, so a forward is one
pybind11 call and one launch. The transcendentals cost ~40 instructions per element, still hidden
behind the DRAM latency, so any gain had to come from the leaner host path. Measured on the H200:
0.59x vs eager -- with 2 MB moved the call is launch-bound (a few % of peak HBM bandwidth), and in
the judge this path costs ~11 us more per call than eager's (26.9 against 16.0 us; part of it is our
call path: a pybind11 call alone costs ~5 us per call in the judge, whichever CUDA runtime is
linked).
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

// torch's softplus with beta = 1, threshold = 20: x above the threshold, else log1p(exp(x))
__device__ __forceinline__ float f(float v) { return v > 20.f ? v : log1pf(expf(v)); }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void softplus_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
}

__global__ void softplus_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i));
}

void softplus(uintptr_t x, uintptr_t y, int64_t n, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
        softplus_vec4<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    } else {
        const int64_t blocks = std::min((n + threads - 1) / threads, max_blocks);
        softplus_scalar<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("softplus: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("softplus", &softplus, "y = softplus(x) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.softplus(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        _ext.softplus(x.data_ptr(), y.data_ptr(), x.numel(), stream)
        return y

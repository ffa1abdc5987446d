"""ELU as one float4 kernel behind a thin Python call.

The input is 16 x 16384 fp32 (1 MB in, 1 MB out): at ~4 TB/s the traffic is ~0.5 us, so eager's call
is dominated by host work (argument parsing, the dispatcher, TensorIterator set-up) plus one DRAM
round trip. The kernel moves one float4 per thread (128-bit load and store) and computes x > 0 ? x :
alpha * expm1f(x), the form torch's ELU kernel uses, so small negative inputs keep full relative
precision. alpha is a float argument of the launch, read from the module, so any alpha works without
a rebuild. The output comes from torch.empty_like and the raw current-stream handle goes straight to
the launch. The kernel is as latency-bound as eager's, so any gain had to come from the lighter host
path. Measured on the H200: 0.60x vs eager -- with 2 MB moved the call is launch-bound (a few % of
peak HBM bandwidth), and in the judge this path costs ~9 us more per call than eager's (23.5 against
14.0 us; part of it is our call path: a pybind11 call alone costs ~5 us per call in the judge,
whichever CUDA runtime is linked).
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

// x > 0 ? x : alpha * (e^x - 1); expm1f keeps full relative accuracy for small negative x
__device__ __forceinline__ float f(float v, float alpha) { return v > 0.f ? v : expm1f(v) * alpha; }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void elu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4, float alpha) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x, alpha), f(v.y, alpha), f(v.z, alpha), f(v.w, alpha));
    }
}

__global__ void elu_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n, float alpha) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i), alpha);
}

void elu(uintptr_t x, uintptr_t y, int64_t n, float alpha, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
        elu_vec4<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, alpha);
    } else {
        const int64_t blocks = std::min((n + threads - 1) / threads, max_blocks);
        elu_scalar<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, alpha);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("elu: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("elu", &elu, "y = elu(x, alpha) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, alpha: float = 1.0):
        super().__init__()
        self.alpha = alpha

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.elu(x, alpha=self.alpha)
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        _ext.elu(x.data_ptr(), y.data_ptr(), x.numel(), self.alpha, stream)
        return y

"""minGPT's tanh GELU via the sigmoid identity, fused, two float4 per thread.

Same memory plan as the main variant -- one read and one write of the (2000, 2000) tensor,
32 MB, ~8 us at ~4.3 TB/s, against ~300 MB over eight kernels for eager -- with a cheaper
formula: 0.5 (1 + tanh(z)) = 1 / (1 + e^(-2z)), so y = x / (1 + exp(-2 c (x + 0.044715 x^3))).
That is one expf (accurate to 2 ulp, no fast-math) and one IEEE division instead of tanhf's longer
sequence, and it avoids the reference's cancellation in 1 + tanh(z) for negative z (there the
reference itself carries a ~1e-7 absolute error, far below the 1e-4 * rms tolerance; the two
forms agree to a few ulps elsewhere). For very negative x, exp overflows to inf and x / inf gives
-0, as 0.5 x (1 + tanh) does. Each thread handles two float4 (8 elements) with both loads issued
before any math, halving the thread count and doubling the bytes in flight per thread; stores are
128-bit. The kernel stays bound by DRAM bandwidth, so expect about the main variant's ~6-8x;
the difference is fewer instructions per byte, which matters only where the ALUs are contended.
Sizes that are not a multiple of 8, or misaligned pointers, take a scalar kernel.
"""
import math

import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

// 0.5 x (1 + tanh(z)) == x * sigmoid(2 z) == x / (1 + exp(-2 z)),  z = c (x + 0.044715 x^3)
__device__ __forceinline__ float gelu(float x, float c) {
    const float inner = c * (x + 0.044715f * (x * x * x));
    return x / (1.f + expf(-2.f * inner));
}

__device__ __forceinline__ float4 gelu4(float4 v, float c) {
    return make_float4(gelu(v.x, c), gelu(v.y, c), gelu(v.z, c), gelu(v.w, c));
}

// Thread i handles float4 i and float4 i + half (two coalesced streams, both loads first).
__global__ void gelu_vec8(const float4* __restrict__ x, float4* __restrict__ y, int64_t half, float c) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < half) {
        const float4 a = __ldg(x + i), b = __ldg(x + i + half);
        y[i] = gelu4(a, c);
        y[i + half] = gelu4(b, c);
    }
}

__global__ void gelu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n, float c) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu(__ldg(x + i), c);
}

void gelu_tanh(uintptr_t x, uintptr_t y, int64_t n, double c, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    if (n % 8 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t half = n / 8;  // float4s in each half
        gelu_vec8<<<(unsigned)((half + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), half, (float)c);
    } else {
        gelu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, (float)c);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("gelu_tanh: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("gelu_tanh", &gelu_tanh, "y = x / (1 + exp(-2 c (x + 0.044715 x^3))), fp32, contiguous");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.gelu_tanh(x.data_ptr(), y.data_ptr(), x.numel(), math.sqrt(2.0 / math.pi),
                       torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

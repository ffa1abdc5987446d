"""minGPT's tanh GELU as one fused elementwise kernel: one read and one write per element.

The reference is a chain of eight elementwise kernels over a (2000, 2000) fp32 tensor: pow(x, 3),
* 0.044715, + x, * sqrt(2/pi), tanh, + 1, 0.5 * x, and the final product. Each reads 16-32 MB and
writes a 16 MB temporary, ~300 MB of traffic in all, ~70 us at the H200's ~4.3 TB/s, plus eight
launches. The minimum is one read and one write of the tensor: 32 MB, ~8 us. Here each thread
loads one float4 (128-bit, coalesced), evaluates 0.5 x (1 + tanh(c (x + 0.044715 x^3))) for its
four values in registers with the same operations in the same order (x*x*x, tanhf -- accurate to
2 ulp, no fast-math), and stores one float4. The arithmetic (~25 instructions per element) hides
under the memory time, so the kernel runs near bandwidth. Expect ~6-8x. Sizes that are not a
multiple of 4, or misaligned pointers, take a scalar kernel.
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

__device__ __forceinline__ float gelu(float x, float c) {
    const float inner = c * (x + 0.044715f * (x * x * x));
    return 0.5f * x * (1.f + tanhf(inner));
}

__global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float c) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        const float4 v = __ldg(x + i);
        y[i] = make_float4(gelu(v.x, c), gelu(v.y, c), gelu(v.z, c), gelu(v.w, c));
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
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        gelu_vec4<<<(unsigned)((n4 + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, (float)c);
    } else {
        gelu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, (float)c);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("gelu_tanh: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("gelu_tanh", &gelu_tanh, "y = 0.5 x (1 + tanh(c (x + 0.044715 x^3))), fp32, contiguous");
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

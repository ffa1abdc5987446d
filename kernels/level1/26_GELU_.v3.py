"""Exact GELU as device code only: a cubin launched through cudal1's prebuilt launcher.

The (16, 16384) fp32 input is 1 MB, so the kernel runs for a few microseconds and the judge's clock
(one synchronous call) mostly measures the host's way to the GPU. This version keeps the kernels of
the lean version (26_GELU_.v2.py) unchanged (x * 0.5 * (1 + erff(x / sqrt 2)) with the accurate
erff, eager's formula; not the tanh approximation, which would be off by ~1e-3) and its call path,
a vectorcall entry that packs the arguments itself and launches with cuLaunchKernel on a driver
handle looked up once, but the host code is no longer the solution's: the source holds only device
code, nvcc builds a cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each
kernel back as a callable whose argument types come from its C signature. The launch configuration
moves to Python unchanged: 256 threads, at most 8192 blocks (a grid-stride loop covers the rest),
the float4 kernel when n % 4 == 0 and both pointers are 16-byte aligned, else the scalar one. The
output is still a fresh torch.empty_like, the launch goes to torch's current stream, and a CPU or
non-fp32 input still falls back to torch.nn.functional.gelu.
The lean version measured 0.74x vs eager on the H200 (21.3 us against 15.7 us).
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <cstdint>

// exact (erf) GELU, written as torch's CUDA kernel writes it: x * 0.5 * (1 + erf(x / sqrt 2))
__device__ __forceinline__ float f(float v) {
    return v * 0.5f * (1.f + erff(v * 0.70710678118654752440f));
}

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
extern "C" __global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
}

extern "C" __global__ void gelu_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i));
}
"""

_k = cudal1.load_cuda(CUDA_SRC)
THREADS, MAX_BLOCKS = 256, 8192  # beyond MAX_BLOCKS the grid-stride loop takes over


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.gelu(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        xp, yp, n = x.data_ptr(), y.data_ptr(), x.numel()
        if n > 0:
            vec = n % 4 == 0 and xp % 16 == 0 and yp % 16 == 0  # one float4 per thread per step
            m = n // 4 if vec else n
            blocks = min((m + THREADS - 1) // THREADS, MAX_BLOCKS)
            (_k.gelu_vec4 if vec else _k.gelu_scalar)(blocks, THREADS, xp, yp, m)
        return y

"""minGPT's tanh GELU as device code only: a cubin launched through cudal1's prebuilt launcher.

The input is (2000, 2000) fp32 (16 MB in, 16 MB out, ~8 us at the H200's ~4.3 TB/s). This version
keeps the kernels of the lean version (88_MinGPTNewGelu.v3.py) exactly (one float4 per thread, 0.5 x
(1 + tanh(c (x + 0.044715 x^3))) with the reference's operations in its order and accurate tanhf; a
scalar kernel for sizes that are not a multiple of 4 or misaligned pointers) and its call path, a
vectorcall entry that packs the arguments itself and launches with cuLaunchKernel on a driver handle
looked up once, but the host code is no longer the solution's: the source holds only device code,
nvcc builds a cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each kernel
back as a callable whose argument types come from its C signature. The launch shapes move to Python
unchanged (256 threads, one element or one float4 per thread, nothing launched for an empty input);
sqrt(2 / pi) is still computed once at import as a Python double and rounded to float when the
launcher packs it, as the C cast did. The output is still a fresh torch.empty_like and the launch
goes to torch's current stream.
The lean version measured 4.43x vs eager on the H200 (29.5 us against 0.131 ms).
Not yet measured on the GPU.
"""
import math

import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <cstdint>

__device__ __forceinline__ float gelu(float x, float c) {
    const float inner = c * (x + 0.044715f * (x * x * x));
    return 0.5f * x * (1.f + tanhf(inner));
}

extern "C" __global__ void gelu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4, float c) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        const float4 v = __ldg(x + i);
        y[i] = make_float4(gelu(v.x, c), gelu(v.y, c), gelu(v.z, c), gelu(v.w, c));
    }
}

extern "C" __global__ void gelu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n, float c) {
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = gelu(__ldg(x + i), c);
}
"""

_k = cudal1.load_cuda(CUDA_SRC)
C = math.sqrt(2.0 / math.pi)  # the reference's scalar, in Python double precision
THREADS = 256


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        xp, yp, n = x.data_ptr(), y.data_ptr(), x.numel()
        if n:
            vec = n % 4 == 0 and xp % 16 == 0 and yp % 16 == 0  # one float4 per thread
            m = n // 4 if vec else n
            (_k.gelu_vec4 if vec else _k.gelu_scalar)((m + THREADS - 1) // THREADS, THREADS, xp, yp, m, C)
        return y

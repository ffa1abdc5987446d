"""ReLU as device code only: a cubin launched through cudal1's prebuilt launcher.

The (16, 16384) fp32 input is 1 MB, so the kernel runs for a few microseconds and the judge's clock
(one synchronous call) mostly measures the host's way to the GPU. This version keeps the float4
kernel of the lean version (19_ReLU.v3.py) and the same call path, a vectorcall entry that packs
the arguments itself and launches with cuLaunchKernel on a driver handle looked up once, but the
host code is no longer the solution's: the source holds only `extern "C" __global__` kernels,
nvcc builds a cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each kernel
back as a callable whose argument types come from its C signature. The choice between the float4
and the scalar kernel moves to Python (alignment and a multiple of four elements), and the launch
goes to torch's current stream. The output is still a fresh torch.empty_like.
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
__device__ __forceinline__ float relu1(float v) { return v <= 0.f ? 0.f : v; }  // NaN stays NaN

extern "C" __global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}

extern "C" __global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu1(__ldg(x + i));
}
"""

_k = cudal1.load_cuda(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        xp, yp, n = x.data_ptr(), y.data_ptr(), x.numel()
        if n % 4 == 0 and xp % 16 == 0 and yp % 16 == 0:  # one float4 per thread
            _k.relu_vec4((n // 4 + 255) // 256, 256, xp, yp, n // 4)
        else:  # an empty x makes a grid of 0 blocks: nothing is launched
            _k.relu_scalar((n + 255) // 256, 256, xp, yp, n)
        return y

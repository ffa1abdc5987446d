"""Softmax over rows (row in registers of one 1024-thread block) as device code only: a cubin
launched through cudal1's prebuilt launcher.

The (16, 16384) fp32 input is 1 MB in, 1 MB out, so the kernel runs for a few microseconds and the
judge's clock (one synchronous call) mostly measures the host's way to the GPU. This version keeps
the kernel of the lean version (23_Softmax.v3.py) as it is -- one block per row, each thread holding
ITEMS float4 of the row in registers, max and sum by warp-shuffle + shared-memory reductions,
accurate expf, one read and one write per element -- and the same call path, a vectorcall entry
that packs the arguments itself and launches with cuLaunchKernel on a driver handle looked up once,
but the host code is no longer the solution's: the source holds only device code, nvcc builds a
cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each kernel back as a
callable whose argument types come from its C signature. A template cannot have C linkage, so the
kernel's body becomes a __device__ template and each of the four instantiations (ITEMS = 1, 2, 4,
8) is an `extern "C" __global__` of its own that calls it; the code each runs is the same. The host
logic moves to Python unchanged: the ITEMS choice, a grid of one block per row, and torch.softmax
for inputs that are not 2-D, rows not a multiple of 4, longer than 32768 or misaligned. The output
is still a fresh torch.empty_like and the launch goes to torch's current stream.
The lean version measured 0.94x vs eager on the H200 (24.1 us against 22.7 us).
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <cstdint>

constexpr int THREADS = 1024;

// Reduce over the block; `red` holds one slot per warp. Every thread gets the result.
template <bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = IS_MAX ? fmaxf(v, u) : v + u;
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = red[lane];  // THREADS / 32 == 32 warps: one slot per lane
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = IS_MAX ? fmaxf(v, u) : v + u;
    }
    __syncthreads();  // red is reused by the next reduction
    return v;
}

// One block per row; each thread keeps ITEMS float4 of the row in registers.
template <int ITEMS>
__device__ __forceinline__ void softmax_rows(const float* __restrict__ x,
                                             float* __restrict__ y, int dim4) {
    __shared__ float red[32];
    const float4* xr = reinterpret_cast<const float4*>(x) + (int64_t)blockIdx.x * dim4;
    float4* yr = reinterpret_cast<float4*>(y) + (int64_t)blockIdx.x * dim4;
    float4 v[ITEMS];
    float m = -INFINITY;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = threadIdx.x + k * THREADS;
        v[k] = i < dim4 ? __ldg(xr + i) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    }
    m = block_reduce<true>(m, red);
    float s = 0.f;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {  // padding lanes hold -inf: expf(-inf) == 0
        v[k].x = expf(v[k].x - m); v[k].y = expf(v[k].y - m);
        v[k].z = expf(v[k].z - m); v[k].w = expf(v[k].w - m);
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    s = block_reduce<false>(s, red);
    const float inv = 1.f / s;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        int i = threadIdx.x + k * THREADS;
        if (i < dim4) yr[i] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
    }
}

// The four instantiations, under C names the launcher can look up: ITEMS float4 per thread.
extern "C" __global__ void __launch_bounds__(THREADS) softmax_rows_1(const float* __restrict__ x,
                                                                     float* __restrict__ y, int dim4) {
    softmax_rows<1>(x, y, dim4);
}
extern "C" __global__ void __launch_bounds__(THREADS) softmax_rows_2(const float* __restrict__ x,
                                                                     float* __restrict__ y, int dim4) {
    softmax_rows<2>(x, y, dim4);
}
extern "C" __global__ void __launch_bounds__(THREADS) softmax_rows_4(const float* __restrict__ x,
                                                                     float* __restrict__ y, int dim4) {
    softmax_rows<4>(x, y, dim4);
}
extern "C" __global__ void __launch_bounds__(THREADS) softmax_rows_8(const float* __restrict__ x,
                                                                     float* __restrict__ y, int dim4) {
    softmax_rows<8>(x, y, dim4);
}
"""

_k = cudal1.load_cuda(CUDA_SRC)
THREADS = 1024  # as in the source
ROWS = (_k.softmax_rows_1, _k.softmax_rows_2, _k.softmax_rows_4, _k.softmax_rows_8)  # ITEMS 1, 2, 4, 8


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)  # (batch_size, dim)
        if x.dim() == 2:
            rows, dim = x.shape
            xp, yp = x.data_ptr(), y.data_ptr()
            if dim % 4 == 0 and xp % 16 == 0 and yp % 16 == 0 and dim <= 8 * 4 * THREADS:
                if rows and dim:
                    dim4 = dim // 4
                    items = (dim4 + THREADS - 1) // THREADS  # float4 per thread: 1..8
                    kernel = ROWS[0 if items <= 1 else 1 if items <= 2 else 2 if items <= 4 else 3]
                    kernel(rows, THREADS, xp, yp, dim4)
                return y
        return torch.softmax(x, dim=1)

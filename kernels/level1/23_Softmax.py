"""Softmax over rows in one read: each row lives in registers of one 1024-thread block.

For a (16, 16384) input the row (64 KB) fits in the registers of a single block: 1024 threads x 4
float4 each. The kernel loads the row once with 128-bit loads (all 16 loads per thread in flight at
once, so the block pays about one DRAM round trip), takes the row max with a warp-shuffle +
shared-memory block reduction, exponentiates in registers (expf, accurate to an ulp, no fast-math),
reduces the sum the same way, and writes exp(x - max) * (1 / sum) back with 128-bit stores. Memory
traffic is the minimum, one read and one write per element, and there is one launch behind a thin
Python call (raw stream handle, torch.empty_like). Eager's block softmax also keeps to one block per
row (at best staging the row in shared memory), so the device time is similar; at 1 MB the call is
bound by DRAM latency and host overhead, so any gain had to come mostly from the leaner call path.
Rows longer than 32768, or not a multiple of 4, fall back to torch.softmax. Measured on the H200:
0.71x vs eager -- with 2 MB moved the call is launch-bound (a few % of peak HBM bandwidth), and in
the judge this path costs ~10 us more per call than eager's (34.6 against 24.8 us; part of it is our
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
__global__ void __launch_bounds__(THREADS) softmax_rows(const float* __restrict__ x,
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

// Returns false when the shape is not handled here (the caller falls back).
bool softmax(uintptr_t x, uintptr_t y, int64_t rows, int64_t dim, uintptr_t stream) {
    if (dim % 4 != 0 || x % 16 != 0 || y % 16 != 0 || dim > 8 * 4 * THREADS) return false;
    if (rows == 0 || dim == 0) return true;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int dim4 = (int)(dim / 4);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const int items = (dim4 + THREADS - 1) / THREADS;  // float4 per thread: 1..8
    if (items <= 1)      softmax_rows<1><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, dim4);
    else if (items <= 2) softmax_rows<2><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, dim4);
    else if (items <= 4) softmax_rows<4><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, dim4);
    else                 softmax_rows<8><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, dim4);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("softmax: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("softmax", &softmax, "row softmax of a (rows, dim) fp32 tensor; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)  # (batch_size, dim)
        if x.dim() == 2 and _ext.softmax(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1],
                                         torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return torch.softmax(x, dim=1)

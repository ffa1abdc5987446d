"""Sum over a middle dimension as one coalesced, float4-wide column reduction.

View the input as (outer, R, inner) and reduce R (here (16, 256, 256) -> (16, 1, 256)). Along R the
elements are `inner` floats apart, so the natural parallel layout is: threads side by side along
`inner` (coalesced 128-bit loads, 4 columns per thread) and the R rows split among 32 groups of
threads that each walk every 32nd row, followed by a shared-memory tree over the 32 partial sums. A
block of 8 x 32 threads covers 32 columns, so the (16, 256, 256) case runs as 128 blocks -- about
one per SM -- with 8 independent float4 loads per thread, putting the whole 4 MB input in flight at
once: the kernel costs roughly one DRAM round trip plus the read time. Eager's generic reduction
picks a strategy at run time and pays the dispatcher; at this size the call is latency- and
overhead-bound. Summation order differs from torch (32 strided partial sums, then a tree), well
inside fp32 tolerance. Shapes whose inner size is not a multiple of 4 fall back to torch.sum.
Measured on the H200: 0.57x vs eager -- with 4 MB moved the call is launch-bound (a few % of peak
HBM bandwidth), and in the judge this path costs ~24 us more per call than eager's (55.7 against
31.7 us; part of it is our call path: a pybind11 call alone costs ~5 us per call in the judge,
whichever CUDA runtime is linked).
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

constexpr int COLS4 = 8;   // float4 columns per block (32 floats)
constexpr int SLICES = 32; // row groups per block

// x: (outer, R, inner4) float4, y: (outer, inner4). grid = (ceil(inner4 / COLS4), outer).
__global__ void __launch_bounds__(COLS4 * SLICES) sum_mid(const float4* __restrict__ x,
                                                          float4* __restrict__ y,
                                                          int64_t R, int64_t inner4) {
    __shared__ float4 part[SLICES][COLS4];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * COLS4 + tx;
    const int64_t o = blockIdx.y;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (col < inner4) {
        const float4* p = x + o * R * inner4 + col;
        #pragma unroll 8
        for (int64_t r = ty; r < R; r += SLICES) {
            float4 v = __ldg(p + r * inner4);
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    part[ty][tx] = acc;
    __syncthreads();
    #pragma unroll
    for (int s = SLICES / 2; s > 0; s >>= 1) {  // tree over the 32 row groups
        if (ty < s) {
            float4 a = part[ty][tx], b = part[ty + s][tx];
            part[ty][tx] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        }
        __syncthreads();
    }
    if (ty == 0 && col < inner4) y[o * inner4 + col] = part[0][tx];
}

// Returns false when the layout is not handled (caller falls back to torch.sum).
bool sum_dim(uintptr_t x, uintptr_t y, int64_t outer, int64_t R, int64_t inner, uintptr_t stream) {
    if (inner % 4 != 0 || x % 16 != 0 || y % 16 != 0 || outer > 65535) return false;
    if (outer == 0 || inner == 0) return true;
    if (R == 0) return false;  // empty sum: let torch write the zeros
    const int64_t inner4 = inner / 4;
    dim3 grid((unsigned)((inner4 + COLS4 - 1) / COLS4), (unsigned)outer);
    sum_mid<<<grid, dim3(COLS4, SLICES), 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), R, inner4);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("sum_dim: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("sum_dim", &sum_dim, "y[o, i] = sum_r x[o, r, i] (fp32); false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = x.shape
        out = x.new_empty(shape[:d] + (1,) + shape[d + 1:])  # keepdim=True
        if _ext.sum_dim(x.data_ptr(), out.data_ptr(), math.prod(shape[:d]), shape[d],
                        math.prod(shape[d + 1:]),
                        torch._C._cuda_getCurrentRawStream(x.get_device())):
            return out
        return torch.sum(x, dim=self.dim, keepdim=True)

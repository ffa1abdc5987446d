"""LogSoftmax over rows, one block per row with the row in registers: one read, one write.

The input is (16, 16384) fp32: 16 rows of 64 KB. This variant keeps the classic layout, one
1024-thread block per row, but reads the row exactly once: each thread loads its four float4 (all
128-bit loads in flight together) and keeps them in registers for the whole kernel. Only 16 of the
132 SMs work, each pulling 64 KB, so the load takes a little longer than when the row is spread over
several SMs (e.g. by a thread-block cluster per row), but there is no cluster launch or
distributed-shared-memory exchange. The block takes the row max and then the sum of exp(x - max)
with warp-shuffle + shared-memory reductions (the values never leave registers between the two), and
writes (x - max) - log(sum), torch's epilogue, with 128-bit stores. Eager's kernel re-reads the row
for each of its passes and pays the dispatcher on top; this one moves the minimum 2 MB behind one
thin pybind11 call. Rows longer than 32768 or not a multiple of 4 fall back to torch.log_softmax.
Measured on the H200: 0.70x vs eager -- with 2 MB moved the call is launch-bound (a few % of peak
HBM bandwidth), and in the judge this path costs ~9 us more per call than eager's (30.4 against 21.2
us; part of it is our call path: a pybind11 call alone costs ~5 us per call in the judge, whichever
CUDA runtime is linked).
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
#include <cmath>

constexpr int THREADS = 1024;
constexpr int WARPS = THREADS / 32;

// Sum (or max) over the block; every thread gets the result. `red` is reused after a barrier.
template <bool IS_MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = IS_MAX ? fmaxf(v, u) : v + u;
    }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = red[threadIdx.x & 31];  // WARPS == 32: one partial per lane, reduced again in every warp
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = IS_MAX ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    return v;
}

// One block per row; thread t holds float4s t, t + 1024, ... of the row in registers.
template <int ITEMS>
__global__ void __launch_bounds__(THREADS) log_softmax_rows(const float* __restrict__ x,
        float* __restrict__ y, int dim4) {
    __shared__ float red[WARPS];
    const float4* xr = reinterpret_cast<const float4*>(x) + (int64_t)blockIdx.x * dim4;
    float4* yr = reinterpret_cast<float4*>(y) + (int64_t)blockIdx.x * dim4;
    float4 v[ITEMS];
    float m = -INFINITY;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {  // all loads in flight together
        const int i = threadIdx.x + k * THREADS;
        v[k] = i < dim4 ? __ldg(xr + i) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    }
    m = block_reduce<true>(m, red);
    float s = 0.f;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k)  // padding holds -inf: expf(-inf) = 0
        s += (expf(v[k].x - m) + expf(v[k].y - m)) + (expf(v[k].z - m) + expf(v[k].w - m));
    const float logsum = logf(block_reduce<false>(s, red));
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = threadIdx.x + k * THREADS;
        if (i < dim4)
            yr[i] = make_float4((v[k].x - m) - logsum, (v[k].y - m) - logsum,
                                (v[k].z - m) - logsum, (v[k].w - m) - logsum);
    }
}

// Returns false when the shape is not handled (the caller falls back to torch).
bool run(uintptr_t x, uintptr_t y, int64_t rows, int64_t dim, uintptr_t stream) {
    if (dim % 4 != 0 || x % 16 != 0 || y % 16 != 0 || dim > 8LL * THREADS * 4) return false;
    if (rows == 0 || dim == 0) return true;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int dim4 = (int)(dim / 4);
    const int items = (dim4 + THREADS - 1) / THREADS;  // float4 per thread: 1..8
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const unsigned grid = (unsigned)rows;
    if (items <= 1)      log_softmax_rows<1><<<grid, THREADS, 0, st>>>(xp, yp, dim4);
    else if (items <= 2) log_softmax_rows<2><<<grid, THREADS, 0, st>>>(xp, yp, dim4);
    else if (items <= 4) log_softmax_rows<4><<<grid, THREADS, 0, st>>>(xp, yp, dim4);
    else                 log_softmax_rows<8><<<grid, THREADS, 0, st>>>(xp, yp, dim4);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("log_softmax_rows: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("run", &run, "row log-softmax of a (rows, dim) fp32 tensor; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int = 1):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 2 or self.dim not in (1, -1):
            return torch.log_softmax(x, dim=self.dim)
        x = x.contiguous()
        y = torch.empty_like(x)  # (batch_size, dim)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        if _ext.run(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], stream):
            return y
        return torch.log_softmax(x, dim=self.dim)

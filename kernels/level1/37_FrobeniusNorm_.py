"""Frobenius normalisation as two bandwidth-bound passes, the second walking memory backwards.

x / ||x||_F for a (16, 64, 256, 256) fp32 input (268 MB) needs the norm of all 67M elements
before the first output, so at least two reads and one write: 804 MB, ~190 us at ~4.3 TB/s.
Eager is already close to that floor (a norm reduction, then a broadcast divide), so the room
left is small and comes from the cache: the H200's 50 MB L2 still holds the tail of x when the
first pass ends. Pass 1 is a persistent grid (2 blocks per SM) that streams x with 128-bit
loads, squares and adds each float4 in fp32 and accumulates per thread in fp64 (no precision
loss over 67M terms), then reduces the block in fp64 and writes one partial per block -- no
atomics, no memset. Pass 2 starts with every block adding the few hundred partials in the same
fixed order (deterministic, identical in all blocks, ~2 KB from L2), takes the square root, and
divides (IEEE division, as eager) while walking x from the END: the part pass 1 read last is
still in L2, so those reads skip DRAM; its loads and stores are marked streaming (evict-first)
so they do not push out the cached tail before it is used. Two launches behind one pybind11
call. Expect ~1.05-1.15x: the op is bandwidth-bound in both versions.
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
#include <algorithm>

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ double block_sum(double v, double* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = red[0];
    #pragma unroll
    for (int w = 1; w < WARPS; ++w) r += red[w];
    __syncthreads();
    return r;
}

// Pass 1: partial[block] = sum of x^2 over this block's grid-stride share (n4 float4 + tail).
__global__ void __launch_bounds__(THREADS) sumsq_partials(const float4* __restrict__ x, int64_t n4,
        const float* __restrict__ tail, int ntail, double* __restrict__ partial) {
    __shared__ double red[WARPS];
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    int64_t i = blockIdx.x * (int64_t)THREADS + threadIdx.x;
    double acc = 0.0;
    for (; i + 3 * stride < n4; i += 4 * stride) {  // four 128-bit loads in flight per thread
        float4 v[4];
        #pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = __ldg(x + i + k * stride);
        #pragma unroll
        for (int k = 0; k < 4; ++k)
            acc += (double)((v[k].x * v[k].x + v[k].y * v[k].y) + (v[k].z * v[k].z + v[k].w * v[k].w));
    }
    for (; i < n4; i += stride) {
        const float4 v = __ldg(x + i);
        acc += (double)((v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w));
    }
    if (blockIdx.x == 0 && threadIdx.x < ntail) acc += (double)tail[threadIdx.x] * tail[threadIdx.x];
    acc = block_sum(acc, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// Pass 2: every block sums the partials (same order everywhere), then y = x / norm, last element first.
__global__ void __launch_bounds__(THREADS) divide_backwards(const float4* __restrict__ x,
        float4* __restrict__ y, int64_t n4, const float* __restrict__ xtail, float* __restrict__ ytail,
        int ntail, const double* __restrict__ partial, int nparts) {
    __shared__ double red[WARPS];
    double acc = 0.0;
    for (int j = threadIdx.x; j < nparts; j += THREADS) acc += partial[j];
    const float norm = (float)sqrt(block_sum(acc, red));
    const int64_t stride = (int64_t)gridDim.x * THREADS;
    if (blockIdx.x == 0 && threadIdx.x < ntail) ytail[threadIdx.x] = xtail[threadIdx.x] / norm;
    for (int64_t i = blockIdx.x * (int64_t)THREADS + threadIdx.x; i < n4; i += stride) {
        const int64_t j = n4 - 1 - i;  // mirrored: consecutive threads still touch consecutive float4
        const float4 v = __ldcs(x + j);
        __stcs(y + j, make_float4(v.x / norm, v.y / norm, v.z / norm, v.w / norm));
    }
}

static int grid_blocks() {  // a persistent grid: what fits on the device at once
    static int blocks = 0;
    if (blocks == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sumsq_partials, THREADS, 0);
        blocks = std::max(1, sms * std::max(per_sm, 1));
    }
    return blocks;
}

int64_t num_partials() { return grid_blocks(); }

// Returns false for unaligned tensors (the caller falls back).
bool frobenius_normalize(uintptr_t x, uintptr_t y, int64_t n, uintptr_t partial, uintptr_t stream) {
    if (x % 16 != 0 || y % 16 != 0) return false;
    if (n == 0) return true;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int blocks = grid_blocks();
    const int64_t n4 = n / 4;
    const int ntail = (int)(n - 4 * n4);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float* xt = reinterpret_cast<const float*>(x) + 4 * n4;
    float* yt = reinterpret_cast<float*>(y) + 4 * n4;
    double* part = reinterpret_cast<double*>(partial);
    sumsq_partials<<<blocks, THREADS, 0, st>>>(x4, n4, xt, ntail, part);
    divide_backwards<<<blocks, THREADS, 0, st>>>(x4, reinterpret_cast<float4*>(y), n4, xt, yt, ntail,
                                                 part, blocks);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("frobenius_normalize: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("num_partials", &num_partials, "fp64 partial sums the caller must provide room for");
    m.def("frobenius_normalize", &frobenius_normalize, "y = x / ||x||_F (fp32, contiguous); false if unaligned");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_partials = None

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return x / torch.norm(x, p="fro")
        if self.num_partials is None:
            self.num_partials = _ext.num_partials()  # device-dependent grid size, fixed per process
        x = x.contiguous()
        y = torch.empty_like(x)
        partial = torch.empty(self.num_partials, dtype=torch.float64, device=x.device)  # all written
        if _ext.frobenius_normalize(x.data_ptr(), y.data_ptr(), x.numel(), partial.data_ptr(),
                                    torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return x / torch.norm(x, p="fro")

"""MSE loss as a two-pass reduction with a per-call workspace: no module-global state at all.

Eager `torch.mean((predictions - targets) ** 2)` runs three kernels (subtract, square, mean) and
moves 12 MB for 4 MB of input. Like the main variant, this one reads each input once: 128 blocks
of 256 threads (one wave on 132 SMs), four 128-bit loads per input per thread in flight before
any arithmetic, squares summed in registers, then a warp-shuffle + shared-memory block reduction.
The difference is how the 128 block sums become one number. The main variant lets the last block
to finish (an atomic ticket) add them, which needs scratch memory that lives in the module, so
two calls on concurrent streams would collide. Here the partials go to a workspace tensor taken
from PyTorch's caching allocator for each call (no cudaMalloc, no memset: every slot is written
before it is read), and a second, single-block kernel on the same stream adds them in index order
and divides by n. Stream order replaces the atomic ticket, the result is deterministic, and any
number of calls can run concurrently. The price is a second launch (~2-3 us of host time, its GPU
start overlapped with the first kernel's tail) and one more small allocation, so expect ~1.7-2.5x
against eager instead of the main variant's ~2-3x. Sizes that are not a multiple of 4, or
misaligned pointers, take a scalar path in the first kernel.
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

constexpr int THREADS = 256;
constexpr int UNROLL = 4;        // float4 loads per input in flight per thread
constexpr int MAX_BLOCKS = 1024;  // also the workspace size the caller provides

// Sum over the block; the result is valid in thread 0.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float red[THREADS / 32];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? red[lane] : 0.f;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

__device__ __forceinline__ float sq(float d) { return d * d; }

// Pass 1: partial[blockIdx.x] = sum of (p - t)^2 over this block's share.
__global__ void __launch_bounds__(THREADS) mse_partial(const float* __restrict__ p,
                                                       const float* __restrict__ t, int64_t n,
                                                       int64_t n4, float* __restrict__ partial) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    float s = 0.f;
    const int64_t step = (int64_t)gridDim.x * THREADS * UNROLL;
    for (int64_t base = (int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x; base < n4; base += step) {
        float4 a[UNROLL], b[UNROLL];
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {  // all loads first: one round trip for the lot
            const int64_t i = base + (int64_t)u * THREADS;
            a[u] = i < n4 ? __ldg(p4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            b[u] = i < n4 ? __ldg(t4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u)  // padding lanes add nothing
            if (base + (int64_t)u * THREADS < n4)
                s += (sq(a[u].x - b[u].x) + sq(a[u].y - b[u].y)) + (sq(a[u].z - b[u].z) + sq(a[u].w - b[u].w));
    }
    // scalar tail (all of it when the vector path is off)
    for (int64_t i = 4 * n4 + (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * THREADS)
        s += sq(__ldg(p + i) - __ldg(t + i));

    s = block_sum(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

// Pass 2 (one block): out = (sum of the partials, in index order) / n.
__global__ void __launch_bounds__(THREADS) mse_final(const float* __restrict__ partial, int blocks,
                                                     int64_t n, float* __restrict__ out) {
    float v = 0.f;
    for (int i = threadIdx.x; i < blocks; i += THREADS) v += partial[i];
    v = block_sum(v);
    if (threadIdx.x == 0) *out = v / (float)n;
}

// ws: a workspace of at least MAX_BLOCKS floats (contents ignored)
void mse(uintptr_t p, uintptr_t t, int64_t n, uintptr_t ws, uintptr_t out, uintptr_t stream) {
    const bool vec = p % 16 == 0 && t % 16 == 0;
    const int64_t n4 = vec ? n / 4 : 0;
    int64_t blocks = ((vec ? n4 : n) + THREADS * UNROLL - 1) / (THREADS * UNROLL);
    blocks = blocks < 1 ? 1 : (blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    float* partial = reinterpret_cast<float*>(ws);
    mse_partial<<<(unsigned)blocks, THREADS, 0, st>>>(reinterpret_cast<const float*>(p),
                                                      reinterpret_cast<const float*>(t), n, n4, partial);
    mse_final<<<1, THREADS, 0, st>>>(partial, (int)blocks, n, reinterpret_cast<float*>(out));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("mse: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("mse", &mse, "out[()] = mean((p - t)^2) over n fp32 elements (two passes, workspace ws)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        if predictions.shape != targets.shape or predictions.numel() == 0:
            return torch.mean((predictions - targets) ** 2)  # broadcasting / empty: torch's rules
        p, t = predictions.contiguous(), targets.contiguous()
        ws = torch.empty(1024, device=p.device)  # one partial per block of pass 1
        out = torch.empty((), device=p.device)
        _ext.mse(p.data_ptr(), t.data_ptr(), p.numel(), ws.data_ptr(), out.data_ptr(),
                 torch._C._cuda_getCurrentRawStream(p.device.index))
        return out

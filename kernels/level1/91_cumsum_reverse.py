"""Reverse row cumsum in one pass: a suffix scan, no flips, one 1024-thread block per row.

Eager `torch.cumsum(x.flip(1), 1).flip(1)` makes three passes over a (128, 4000) tensor: a flip
into a temporary, torch's generic inner-dim scan (blocks of 512 threads shaped (128 x 4): 32
blocks for 128 rows, each walking its rows in 256-element chunks with several __syncthreads per
chunk), and a second flip into the output -- three launches and 12 MB of traffic where 4 MB is
the minimum. Here the flips disappear: out[j] = sum of x[j:] is a suffix scan, computed in place
of the prefix scan by running it right to left. Each row gets its own 1024-thread block (128
blocks, one wave); thread i loads elements 4i..4i+3 with one coalesced 128-bit load, forms the
suffix sums of its four values in registers, the thread totals of each warp are suffix-scanned
with __shfl_down_sync, the 32 warp totals by warp 0 through shared memory, and each thread writes
its results with one 128-bit store. Rows longer than 4096 walk their 4096-element tiles from the
last to the first, carrying the sum of everything to the right. fp32 throughout; the sums are
re-associated (a tree instead of torch's chunked order), which moves outputs by ~1e-5 against a
tolerance of 1e-4 * rms(out) ~ 4.5e-3. Expect ~3-6x: one launch instead of three and a third of
the traffic. Rows that are not a multiple of 4, or misaligned pointers, use scalar loads and
stores in the same kernel; a scan dim other than the last falls back to torch.
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
constexpr int WARPS = THREADS / 32;
constexpr int TILE = 4 * THREADS;  // elements per tile: one float4 per thread

// Exclusive suffix sum of v over the block: the sum over all threads with a higher index.
// `total` gets the block's sum.
__device__ __forceinline__ float block_suffix_excl(float v, float& total) {
    __shared__ float warp_sum[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float inc = v;  // inclusive suffix scan within the warp: lanes lane..31
    #pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float u = __shfl_down_sync(0xffffffffu, inc, d);
        if (lane + d < 32) inc += u;
    }
    float excl = __shfl_down_sync(0xffffffffu, inc, 1);
    if (lane == 31) excl = 0.f;
    if (lane == 0) warp_sum[warp] = inc;
    __syncthreads();
    if (warp == 0) {  // suffix-scan the 32 warp totals
        float w = warp_sum[lane];
        #pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const float u = __shfl_down_sync(0xffffffffu, w, d);
            if (lane + d < 32) w += u;
        }
        warp_sum[lane] = w;
    }
    __syncthreads();
    const float after = warp == WARPS - 1 ? 0.f : warp_sum[warp + 1];
    total = warp_sum[0];
    __syncthreads();  // warp_sum is rewritten by the next tile
    return after + excl;
}

// One block per row of length L. VEC: L % 4 == 0 and 16-byte aligned rows (float4 loads/stores).
template <bool VEC>
__global__ void __launch_bounds__(THREADS) rev_cumsum_rows(const float* __restrict__ x,
                                                           float* __restrict__ y, int64_t L) {
    const float* xr = x + blockIdx.x * L;
    float* yr = y + blockIdx.x * L;
    float carry = 0.f;  // sum of all later tiles
    for (int64_t t0 = (L - 1) / TILE * TILE; t0 >= 0; t0 -= TILE) {  // last tile first
        const int64_t j = t0 + 4 * threadIdx.x;  // this thread's 4 elements: j .. j+3
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);  // padding adds 0
        if (VEC) {
            if (j < L) v = __ldg(reinterpret_cast<const float4*>(xr + j));
        } else {
            if (j < L) v.x = __ldg(xr + j);
            if (j + 1 < L) v.y = __ldg(xr + j + 1);
            if (j + 2 < L) v.z = __ldg(xr + j + 2);
            if (j + 3 < L) v.w = __ldg(xr + j + 3);
        }
        v.z += v.w;  // local inclusive suffix scan
        v.y += v.z;
        v.x += v.y;
        float total;
        const float base = carry + block_suffix_excl(v.x, total);
        const float4 o = make_float4(base + v.x, base + v.y, base + v.z, base + v.w);
        if (VEC) {
            if (j < L) *reinterpret_cast<float4*>(yr + j) = o;
        } else {
            if (j < L) yr[j] = o.x;
            if (j + 1 < L) yr[j + 1] = o.y;
            if (j + 2 < L) yr[j + 2] = o.z;
            if (j + 3 < L) yr[j + 3] = o.w;
        }
        carry += total;
    }
}

void rev_cumsum(uintptr_t x, uintptr_t y, int64_t rows, int64_t L, uintptr_t stream) {
    if (rows == 0 || L == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    if (L % 4 == 0 && x % 16 == 0 && y % 16 == 0)
        rev_cumsum_rows<true><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    else
        rev_cumsum_rows<false><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("rev_cumsum: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("rev_cumsum", &rev_cumsum, "y[r, j] = sum of x[r, j:] for a (rows, L) fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim not in (-1, x.dim() - 1) or x.dtype != torch.float32 or x.numel() >= 2**31:
            return torch.cumsum(x.flip(self.dim), dim=self.dim).flip(self.dim)
        x = x.contiguous()
        y = torch.empty_like(x)
        L = x.shape[-1] if x.dim() else 1
        _ext.rev_cumsum(x.data_ptr(), y.data_ptr(), x.numel() // max(L, 1), L,
                        torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

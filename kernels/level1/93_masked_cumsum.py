"""Masked cumsum in one kernel: the x * mask product is folded into the scan's loads.

Eager `torch.cumsum(x * mask, dim=1)` runs two kernels over (128, 4000): the product writes a
2 MB temporary (reading 2 MB of x and 0.5 MB of bool mask), and torch's generic inner-dim scan
reads it back -- with blocks of 512 threads shaped (128 x 4), only 32 blocks for 128 rows, each
walking its rows in 256-element chunks with several __syncthreads per chunk. Here each row gets
its own 1024-thread block (128 blocks, one wave): thread i loads x[4i..4i+3] with one 128-bit load
and the four mask bytes with one 32-bit load, multiplies x by 1.0 or 0.0 exactly as torch's
bool->float promotion does (so inf * 0 is still NaN), scans the four values in registers, the
thread totals of each warp with __shfl_up_sync and the 32 warp totals by warp 0 through shared
memory, and writes its results with one 128-bit store. Rows longer than 4096 loop over tiles
carrying the running sum. fp32 throughout; the sums are re-associated (a tree instead of torch's
chunked order), which moves outputs by ~1e-5 against a tolerance of 1e-4 * rms(out) ~ 3e-3.
Expect ~2-4x: one launch instead of two, no temporary, a scan that fills the GPU. Rows that are
not a multiple of 4, or misaligned pointers, use scalar accesses in the same kernel; a scan dim
other than the last, or a mask of another shape, falls back to torch.
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

// Exclusive prefix of v over the block in thread order; `total` gets the block's sum.
__device__ __forceinline__ float block_scan_excl(float v, float& total) {
    __shared__ float warp_sum[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float inc = v;  // inclusive scan within the warp
    #pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float u = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc += u;
    }
    float excl = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 0) excl = 0.f;
    if (lane == 31) warp_sum[warp] = inc;
    __syncthreads();
    if (warp == 0) {  // scan the 32 warp totals
        float w = warp_sum[lane];
        #pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w += u;
        }
        warp_sum[lane] = w;
    }
    __syncthreads();
    const float before = warp == 0 ? 0.f : warp_sum[warp - 1];
    total = warp_sum[WARPS - 1];
    __syncthreads();  // warp_sum is rewritten by the next tile
    return before + excl;
}

__device__ __forceinline__ float keep(float x, uint8_t m) { return x * (m ? 1.f : 0.f); }  // x * mask

// One block per row of length L. VEC: L % 4 == 0, 16-byte aligned x and y, 4-byte aligned mask.
template <bool VEC>
__global__ void __launch_bounds__(THREADS) masked_cumsum_rows(const float* __restrict__ x,
                                                              const uint8_t* __restrict__ mask,
                                                              float* __restrict__ y, int64_t L) {
    const float* xr = x + blockIdx.x * L;
    const uint8_t* mr = mask + blockIdx.x * L;
    float* yr = y + blockIdx.x * L;
    float carry = 0.f;  // sum of all earlier tiles
    for (int64_t t0 = 0; t0 < L; t0 += TILE) {
        const int64_t j = t0 + 4 * threadIdx.x;  // this thread's 4 elements: j .. j+3
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);  // padding adds 0
        if (VEC) {
            if (j < L) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(xr + j));
                const uchar4 m = __ldg(reinterpret_cast<const uchar4*>(mr + j));
                v = make_float4(keep(a.x, m.x), keep(a.y, m.y), keep(a.z, m.z), keep(a.w, m.w));
            }
        } else {
            if (j < L) v.x = keep(__ldg(xr + j), __ldg(mr + j));
            if (j + 1 < L) v.y = keep(__ldg(xr + j + 1), __ldg(mr + j + 1));
            if (j + 2 < L) v.z = keep(__ldg(xr + j + 2), __ldg(mr + j + 2));
            if (j + 3 < L) v.w = keep(__ldg(xr + j + 3), __ldg(mr + j + 3));
        }
        v.y += v.x;  // local inclusive scan
        v.z += v.y;
        v.w += v.z;
        float total;
        const float base = carry + block_scan_excl(v.w, total);
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

void masked_cumsum(uintptr_t x, uintptr_t mask, uintptr_t y, int64_t rows, int64_t L, uintptr_t stream) {
    if (rows == 0 || L == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    const uint8_t* mp = reinterpret_cast<const uint8_t*>(mask);
    float* yp = reinterpret_cast<float*>(y);
    if (L % 4 == 0 && x % 16 == 0 && y % 16 == 0 && mask % 4 == 0)
        masked_cumsum_rows<true><<<(unsigned)rows, THREADS, 0, st>>>(xp, mp, yp, L);
    else
        masked_cumsum_rows<false><<<(unsigned)rows, THREADS, 0, st>>>(xp, mp, yp, L);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("masked_cumsum: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("masked_cumsum", &masked_cumsum, "row cumsum of x * mask, (rows, L) fp32 x and bool mask");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x, mask):
        if (self.dim not in (-1, x.dim() - 1) or x.dim() == 0 or x.dtype != torch.float32
                or mask.dtype != torch.bool or mask.shape != x.shape or x.numel() >= 2**31):
            return torch.cumsum(x * mask, dim=self.dim)
        x, mask = x.contiguous(), mask.contiguous()
        y = torch.empty_like(x)
        L = x.shape[-1]
        _ext.masked_cumsum(x.data_ptr(), mask.data_ptr(), y.data_ptr(), x.numel() // max(L, 1), L,
                           torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

"""Row cumprod with one 1024-thread block per row: one float4 per thread, warp-shuffle scan.

torch.cumprod over the last dim of a (128, 4000) tensor uses its generic inner-dim scan: blocks of
512 threads shaped (128 x 4), so 32 blocks for 128 rows (a quarter of the H200's 132 SMs), each
walking its rows in 256-element chunks with several __syncthreads per chunk. The data is only
2 MB in and 2 MB out (~1 us of bandwidth), so that serial chunk loop is the cost. Here each row
gets its own 1024-thread block (128 blocks, one wave): thread i loads elements 4i..4i+3 with one
coalesced 128-bit load (the whole 16 KB row in one DRAM round trip), multiplies its four values
together in registers, the thread products of each warp are scanned with __shfl_up_sync, the 32
warp products by warp 0 through shared memory, and each thread writes base * its local prefix with
one 128-bit store. Rows longer than 4096 loop over 4096-element tiles carrying the running
product. Accuracy: a product of j fp32 factors has relative error <= ~j ulps in any order, and the
running product of randn values underflows to 0 after a few hundred steps, so outputs with any
weight agree with torch to ~1e-6 relative, far inside the 1e-4 tolerance. Expect ~2-4x. Rows that
are not a multiple of 4, or misaligned pointers, use scalar loads and stores in the same kernel; a
scan dim other than the last falls back to torch.
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

// Exclusive prefix product of v over the block in thread order; `total` gets the block's product.
__device__ __forceinline__ float block_scan_excl(float v, float& total) {
    __shared__ float warp_prod[WARPS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float inc = v;  // inclusive scan within the warp
    #pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float u = __shfl_up_sync(0xffffffffu, inc, d);
        if (lane >= d) inc *= u;
    }
    float excl = __shfl_up_sync(0xffffffffu, inc, 1);
    if (lane == 0) excl = 1.f;
    if (lane == 31) warp_prod[warp] = inc;
    __syncthreads();
    if (warp == 0) {  // scan the 32 warp totals
        float w = warp_prod[lane];
        #pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const float u = __shfl_up_sync(0xffffffffu, w, d);
            if (lane >= d) w *= u;
        }
        warp_prod[lane] = w;
    }
    __syncthreads();
    const float before = warp == 0 ? 1.f : warp_prod[warp - 1];
    total = warp_prod[WARPS - 1];
    __syncthreads();  // warp_prod is rewritten by the next tile
    return before * excl;
}

// One block per row of length L. VEC: L % 4 == 0 and 16-byte aligned rows (float4 loads/stores).
template <bool VEC>
__global__ void __launch_bounds__(THREADS) cumprod_rows(const float* __restrict__ x,
                                                        float* __restrict__ y, int64_t L) {
    const float* xr = x + blockIdx.x * L;
    float* yr = y + blockIdx.x * L;
    float carry = 1.f;  // product of all earlier tiles
    for (int64_t t0 = 0; t0 < L; t0 += TILE) {
        const int64_t j = t0 + 4 * threadIdx.x;  // this thread's 4 elements: j .. j+3
        float4 v = make_float4(1.f, 1.f, 1.f, 1.f);  // padding multiplies by 1
        if (VEC) {
            if (j < L) v = __ldg(reinterpret_cast<const float4*>(xr + j));
        } else {
            if (j < L) v.x = __ldg(xr + j);
            if (j + 1 < L) v.y = __ldg(xr + j + 1);
            if (j + 2 < L) v.z = __ldg(xr + j + 2);
            if (j + 3 < L) v.w = __ldg(xr + j + 3);
        }
        v.y *= v.x;  // local inclusive scan
        v.z *= v.y;
        v.w *= v.z;
        float total;
        const float base = carry * block_scan_excl(v.w, total);
        const float4 o = make_float4(base * v.x, base * v.y, base * v.z, base * v.w);
        if (VEC) {
            if (j < L) *reinterpret_cast<float4*>(yr + j) = o;
        } else {
            if (j < L) yr[j] = o.x;
            if (j + 1 < L) yr[j + 1] = o.y;
            if (j + 2 < L) yr[j + 2] = o.z;
            if (j + 3 < L) yr[j + 3] = o.w;
        }
        carry *= total;
    }
}

void cumprod(uintptr_t x, uintptr_t y, int64_t rows, int64_t L, uintptr_t stream) {
    if (rows == 0 || L == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    if (L % 4 == 0 && x % 16 == 0 && y % 16 == 0)
        cumprod_rows<true><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    else
        cumprod_rows<false><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("cumprod: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("cumprod", &cumprod, "inclusive prefix product of each row of a (rows, L) fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if self.dim not in (-1, x.dim() - 1) or x.dtype != torch.float32 or x.numel() >= 2**31:
            return torch.cumprod(x, dim=self.dim)
        x = x.contiguous()
        y = torch.empty_like(x)
        L = x.shape[-1] if x.dim() else 1
        _ext.cumprod(x.data_ptr(), y.data_ptr(), x.numel() // max(L, 1), L,
                     torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

"""Exclusive cumsum in one kernel: no zeros tensor, no cat, no slice copy -- one scan pass.

The task's forward builds zeros_like(x[:, :1]), concatenates it in front of x (a full copy into a
(128, 4001) temporary), slices off the last batch row ([:-1] cuts dim 0, a quirk kept from the
benchmark) and runs torch's generic inner-dim scan on the (127, 4001) view: three launches, an
extra 4 MB of traffic, and a scan whose blocks of 512 threads (shaped 128 x 4) cover only 32 of
the H200's 132 SMs, walking each row in 256-element chunks. Here the output is written directly:
out[r, 0] = 0 and out[r, 1 + j] = x[r, 0] + ... + x[r, j] for r < rows - 1. Each output row
gets its own 1024-thread block (127 blocks, one wave); thread i loads input elements 4i..4i+3
with one coalesced 128-bit load, scans them in registers, the thread totals of each warp are
scanned with __shfl_up_sync, the 32 warp totals by warp 0 through shared memory, and each thread
writes its four results (scalar stores: the output rows are 4001 floats, so not 16-byte aligned).
Rows longer than 4096 loop over tiles carrying the running sum. fp32 throughout; the sums are
re-associated (a tree instead of torch's chunked order), which moves outputs by ~1e-5 against a
tolerance of 1e-4 * rms(out) ~ 4.5e-3. Expect ~3-5x: one launch instead of three, no temporary.
Inputs that are not 2-D, or a scan dim other than 1, fall back to the reference expression.
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

// One block per output row: x rows have length L, y rows L + 1 (y[r, 0] = 0).
// VEC: L % 4 == 0 and a 16-byte aligned x (float4 loads); stores are scalar.
template <bool VEC>
__global__ void __launch_bounds__(THREADS) excl_cumsum_rows(const float* __restrict__ x,
                                                            float* __restrict__ y, int64_t L) {
    const float* xr = x + blockIdx.x * L;
    float* yr = y + blockIdx.x * (L + 1) + 1;  // yr[j] = x[0] + ... + x[j]
    if (threadIdx.x == 0) yr[-1] = 0.f;
    float carry = 0.f;  // sum of all earlier tiles
    for (int64_t t0 = 0; t0 < L; t0 += TILE) {
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
        v.y += v.x;  // local inclusive scan
        v.z += v.y;
        v.w += v.z;
        float total;
        const float base = carry + block_scan_excl(v.w, total);
        const float4 o = make_float4(base + v.x, base + v.y, base + v.z, base + v.w);
        if (j < L) yr[j] = o.x;
        if (j + 1 < L) yr[j + 1] = o.y;
        if (j + 2 < L) yr[j + 2] = o.z;
        if (j + 3 < L) yr[j + 3] = o.w;
        carry += total;
    }
}

// y (rows, L + 1) from the first `rows` rows of x (., L)
void excl_cumsum(uintptr_t x, uintptr_t y, int64_t rows, int64_t L, uintptr_t stream) {
    if (rows == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    if (L % 4 == 0 && x % 16 == 0)
        excl_cumsum_rows<true><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    else
        excl_cumsum_rows<false><<<(unsigned)rows, THREADS, 0, st>>>(xp, yp, L);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("excl_cumsum: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("excl_cumsum", &excl_cumsum, "y[r] = [0, cumsum(x[r])] for the first rows rows of x");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if x.dim() != 2 or self.dim not in (1, -1) or x.shape[0] < 2 or x.dtype != torch.float32:
            zeros = torch.zeros_like(x.select(self.dim, 0).unsqueeze(self.dim))
            return torch.cumsum(torch.cat((zeros, x), dim=self.dim)[:-1], dim=self.dim)
        x = x.contiguous()
        rows, L = x.shape[0] - 1, x.shape[1]  # [:-1] drops the last batch row
        y = torch.empty(rows, L + 1, device=x.device)
        _ext.excl_cumsum(x.data_ptr(), y.data_ptr(), rows, L,
                         torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

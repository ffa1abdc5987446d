"""Argmax over a middle dimension as a column reduction with all loads in flight at once.

The input is (16, 256, 256) fp32 = 4 MB reduced over the middle dimension to 16 x 256 outputs: the
traffic floor is ~1 us at ~4 TB/s, so the call is bound by latency and host overhead. Eager's
reduction for this layout runs 4096 threads that each own 4 adjacent outputs and walk 64 rows with 4
loads in flight, ~16 dependent DRAM round trips. Here a 512-thread block covers 32 outputs (one per
lane, so each row's load is a coalesced 128-byte segment) and splits the 256 rows into 16
interleaved groups, one per thread: 16 independent loads per thread issued back to back, 128 blocks,
the whole 4 MB requested in about one round trip. Thread 0 of each lane then merges the 16 partials
from shared memory. Each thread keeps (value, row) and replaces it only on a strictly larger value,
and the merge breaks ties by the lower row, so the first maximum wins, as in torch.argmax; a NaN
counts as the maximum (first NaN wins), also as in torch. The result is written as int64 directly.
Measured on the H200: 0.87x vs eager -- with 4 MB moved the call is launch-bound (a few % of peak
HBM bandwidth), and in the judge this path costs ~4 us more per call than eager's (32.9 against 28.6
us; part of it is our call path: a pybind11 call alone costs ~5 us per call in the judge, whichever
CUDA runtime is linked).
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
#include <cmath>

#define OUT_T long long
#define INIT (-INFINITY)
// v beats best: larger, or NaN (torch.argmax treats NaN as the maximum; the first NaN row wins)
#define BETTER(v, best) ((v) > (best) || ((v) != (v) && (best) == (best)))
#define SAME(v, best) ((v) == (best) || ((v) != (v) && (best) != (best)))
#define RESULT ((long long)arg)

// The input is viewed as (B, R, N) and reduced over R; output o = b * N + j. A block is 32
// outputs (lanes, coalesced along N) x 16 row groups: thread t scans rows t, t + 16, ... in
// ascending order, all 16 loads of an R = 256 column in flight at once, then thread 0 of each
// lane merges the 16 partials through shared memory. Max/min are exact, so the split does not
// change the result.
constexpr int LANES = 32, GROUPS = 16, U = 16;

__global__ void __launch_bounds__(LANES * GROUPS) dim_reduce(const float* __restrict__ x,
        OUT_T* __restrict__ y, int64_t n_out, int R, int N) {
    __shared__ float sv[GROUPS][LANES];
    __shared__ int si[GROUPS][LANES];
    const int lane = threadIdx.x, t = threadIdx.y;
    const int64_t o = (int64_t)blockIdx.x * LANES + lane;
    const bool live = o < n_out;
    const float* base = x + (live ? (o / N) * (int64_t)R * N + o % N : 0);
    float best = INIT;
    int arg = R;  // "no row yet": the first row scanned is always taken
    if (live) {
        int r = t;
        for (; r + (U - 1) * GROUPS < R; r += U * GROUPS) {
            float v[U];
            #pragma unroll
            for (int u = 0; u < U; ++u) v[u] = __ldg(base + (int64_t)(r + u * GROUPS) * N);
            #pragma unroll
            for (int u = 0; u < U; ++u)
                if (arg == R || BETTER(v[u], best)) { best = v[u]; arg = r + u * GROUPS; }
        }
        for (; r < R; r += GROUPS) {
            const float v = __ldg(base + (int64_t)r * N);
            if (arg == R || BETTER(v, best)) { best = v; arg = r; }
        }
    }
    sv[t][lane] = best;
    si[t][lane] = arg;
    __syncthreads();
    if (t == 0 && live) {
        for (int g = 1; g < GROUPS; ++g) {  // ties (equal values, or both NaN) go to the lower row
            const float v = sv[g][lane];
            const int i = si[g][lane];
            if (BETTER(v, best) || (SAME(v, best) && i < arg)) { best = v; arg = i; }
        }
        y[o] = RESULT;
    }
}

bool reduce(uintptr_t x, uintptr_t y, int64_t B, int64_t R, int64_t N, uintptr_t stream) {
    if (B * R * N >= ((int64_t)1 << 31) || R < 1) return false;
    const int64_t n_out = B * N;
    const dim3 block(LANES, GROUPS), grid((unsigned)((n_out + LANES - 1) / LANES));
    dim_reduce<<<grid, block, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<OUT_T*>(y), n_out, (int)R, (int)N);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("reduce: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("reduce", &reduce, "reduce a contiguous (B, R, N) fp32 tensor over R; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.argmax(x, dim=self.dim)
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = x.shape
        y = torch.empty(shape[:d] + shape[d + 1:], dtype=torch.int64, device=x.device)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        if _ext.reduce(x.data_ptr(), y.data_ptr(), math.prod(shape[:d]), shape[d],
                       math.prod(shape[d + 1:]), stream):
            return y
        return torch.argmax(x, dim=self.dim)

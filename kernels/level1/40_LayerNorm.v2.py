"""LayerNorm over 4M-element rows (statistics spread over the whole GPU, then one fused pass) as
device code only: three cubin kernels launched through cudal1's prebuilt launcher.

Each of the 16 rows normalises 64*256*256 = 4,194,304 elements. Eager's CUDA LayerNorm gives
each row to one block (grid = M = 16 blocks), so 16 of the 132 SMs stream the whole 256 MB tensor
(twice) and the rest sit idle. The kernels of 40_LayerNorm.py, kept here, spread the work over
every SM in three launches:
  1. partial sums: 128 blocks per row (2048 in all), each streams 32K elements with float4 loads
     and adds x - p and (x - p)^2 in fp32 (p = the row's first element, a shift that keeps the
     variance accurate when the mean is large next to the spread), then reduces in double;
  2. one warp per row combines its 128 partials in double -> mean and rstd = 1/sqrt(var + eps);
  3. apply: each thread owns one float4 column j of the (features, dim1, dim2) shape, loads
     weight[j] and bias[j] once and walks the 16 rows, writing (x - mean) * rstd * w + b; blocks
     run in reverse order, so the first ones reuse the tail of x that pass 1 left in the 50 MB L2.
Traffic is about the floor for a two-pass norm: x read twice, y written once, w and b once
(~800 MB, ~190 us at ~4.3 TB/s) with every SM busy; statistics are in double, so the result is at
least as accurate as eager's fp32 Welford. What changes is the host: the source holds only device
code, nvcc builds a cubin from it (no host compiler, no pybind11), and cudal1.load_cuda hands each
kernel back as a callable whose argument types come from its C signature, so the three launches
are three calls from Python, each a vectorcall entry and cuLaunchKernel on a driver handle looked
up once. The grids, the workspace layout (M x chunks partials as double2, then M float2 stats, in
one float64 tensor) and the fallback to F.layer_norm (rows not a multiple of 4, empty, or
misaligned) move to Python unchanged; the launches go to torch's current stream.
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CUDA_SRC = r"""
#include <cstdint>

constexpr int THREADS = 256;
constexpr int64_t CHUNK4 = 8192;  // float4 per partial-sum block (32 per thread)

__device__ __forceinline__ double warp_sum(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Pass 1. Block b handles chunk c = b / M of row r = b % M; writes (sum(x-p), sum((x-p)^2)).
extern "C" __global__ void __launch_bounds__(THREADS) ln_partial(const float4* __restrict__ x, double2* ws,
                                                      int64_t M, int64_t n4, int64_t chunks) {
    __shared__ double red[2][THREADS / 32];
    const int64_t r = blockIdx.x % M, c = blockIdx.x / M;
    const float4* row = x + r * n4;
    const float p = __ldg(reinterpret_cast<const float*>(row));  // shift: the row's first element
    const int64_t begin = c * CHUNK4, end = min(begin + CHUNK4, n4);
    float s1 = 0.f, s2 = 0.f;
    #pragma unroll 8
    for (int64_t i = begin + threadIdx.x; i < end; i += THREADS) {
        float4 v = __ldg(row + i);
        float a = v.x - p, b = v.y - p, d = v.z - p, e = v.w - p;
        s1 += (a + b) + (d + e);
        s2 += (a * a + b * b) + (d * d + e * e);
    }
    double d1 = warp_sum((double)s1), d2 = warp_sum((double)s2);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) { red[0][warp] = d1; red[1][warp] = d2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        d1 = d2 = 0.0;
        for (int w = 0; w < THREADS / 32; ++w) { d1 += red[0][w]; d2 += red[1][w]; }
        ws[r * chunks + c] = make_double2(d1, d2);
    }
}

// Pass 2. One warp per row: stats[r] = (mean, rstd).
extern "C" __global__ void ln_stats(const float* __restrict__ x, const double2* __restrict__ ws,
                         float2* __restrict__ stats, int64_t n, int64_t chunks, double eps) {
    const int64_t r = blockIdx.x;
    double s1 = 0.0, s2 = 0.0;
    for (int64_t c = threadIdx.x; c < chunks; c += 32) {
        double2 v = ws[r * chunks + c];
        s1 += v.x; s2 += v.y;
    }
    s1 = warp_sum(s1); s2 = warp_sum(s2);
    if (threadIdx.x == 0) {
        const double p = x[r * n];
        const double dm = s1 / (double)n;                 // mean of x - p
        const double var = fmax(s2 / (double)n - dm * dm, 0.0);
        stats[r] = make_float2((float)(p + dm), (float)(1.0 / sqrt(var + eps)));
    }
}

// Pass 3. Thread j owns float4 column j: y[r, j] = (x[r, j] - mean_r) * rstd_r * w[j] + b[j].
extern "C" __global__ void __launch_bounds__(THREADS) ln_apply(const float4* __restrict__ x,
                                                    const float4* __restrict__ w,
                                                    const float4* __restrict__ b,
                                                    const float2* __restrict__ stats,
                                                    float4* __restrict__ y, int64_t M, int64_t n4) {
    const int64_t blk = gridDim.x - 1 - blockIdx.x;  // reverse order: start where pass 1 ended
    const int64_t j = blk * THREADS + threadIdx.x;
    if (j >= n4) return;
    const float4 wj = __ldg(w + j), bj = __ldg(b + j);
    #pragma unroll 4
    for (int64_t r = 0; r < M; ++r) {
        const float2 st = __ldg(stats + r);
        const float4 v = __ldg(x + r * n4 + j);
        float4 o;
        o.x = (v.x - st.x) * st.y * wj.x + bj.x;
        o.y = (v.y - st.x) * st.y * wj.y + bj.y;
        o.z = (v.z - st.x) * st.y * wj.z + bj.z;
        o.w = (v.w - st.x) * st.y * wj.w + bj.w;
        y[r * n4 + j] = o;
    }
}
"""

_k = cudal1.load_cuda(CUDA_SRC)
THREADS = 256  # as in the source
CHUNK = 4 * 8192  # elements per partial-sum block, as CHUNK4 in the source


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)  # eps=1e-5, affine

    def forward(self, x):
        ln = self.ln
        x = x.contiguous()
        n = ln.weight.numel()
        M = x.numel() // n
        chunks = -(-n // CHUNK)
        ws = torch.empty(2 * M * chunks + M, dtype=torch.float64, device=x.device)  # partials, stats
        y = torch.empty_like(x)
        w, b = ln.weight.contiguous(), ln.bias.contiguous()
        xp, wp, bp, yp, part = x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), ws.data_ptr()
        if n % 4 != 0 or n == 0 or M == 0 or (xp | wp | bp | yp | part) % 16 != 0:
            return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
        n4 = n // 4
        stats = part + 16 * M * chunks  # M float2 after the M * chunks double2 partials
        _k.ln_partial(M * chunks, THREADS, xp, part, M, n4, chunks)
        _k.ln_stats(M, 32, xp, part, stats, n, chunks, ln.eps)
        _k.ln_apply((n4 + THREADS - 1) // THREADS, THREADS, xp, wp, bp, stats, yp, M, n4)
        return y

"""LayerNorm over 4M-element rows: spread the statistics over the whole GPU, then one fused pass.

Each of the 16 rows normalises 64*256*256 = 4,194,304 elements. Eager's CUDA LayerNorm gives
each row to one block (grid = M = 16 blocks), for the statistics and the normalisation alike, so
16 of the 132 SMs stream the whole 256 MB tensor (twice) and the rest sit idle: the call is
limited by what 16 SMs can pull from memory. Here the work is spread over every SM in three
launches from one C++ call:
  1. partial sums: 128 blocks per row (2048 in all), each streams 32K elements with float4 loads
     and adds x - p and (x - p)^2 in fp32 (p = the row's first element, a shift that keeps the
     variance accurate when the mean is large next to the spread), then reduces in double;
  2. one warp per row combines its 128 partials in double -> mean and rstd = 1/sqrt(var + eps);
  3. apply: each thread owns one float4 column j of the (features, dim1, dim2) shape, loads
     weight[j] and bias[j] once and walks the 16 rows, writing (x - mean) * rstd * w + b -- so
     weight and bias are read from memory once instead of once per row. Blocks run in reverse
     order, so the first ones reuse the tail of x that pass 1 left in the 50 MB L2.
Traffic is about the floor for a two-pass norm: x read twice, y written once, w and b once
(~800 MB, ~190 us at ~4.3 TB/s) with every SM busy; eager is bound by 16 SMs. Expect ~3-8x.
Statistics are in double, so the result is at least as accurate as eager's fp32 Welford.
Rows whose size is not a multiple of 4 fall back to F.layer_norm.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

constexpr int THREADS = 256;
constexpr int64_t CHUNK4 = 8192;  // float4 per partial-sum block (32 per thread)

__device__ __forceinline__ double warp_sum(double v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Pass 1. Block b handles chunk c = b / M of row r = b % M; writes (sum(x-p), sum((x-p)^2)).
__global__ void __launch_bounds__(THREADS) ln_partial(const float4* __restrict__ x, double2* ws,
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
__global__ void ln_stats(const float* __restrict__ x, const double2* __restrict__ ws,
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
__global__ void __launch_bounds__(THREADS) ln_apply(const float4* __restrict__ x,
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

static void check(const char* what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// x, y: (M, n) fp32; w, b: (n,); ws: scratch of >= 16 * M * ceil(n / 4 / CHUNK4) + 8 * M bytes.
// Returns false when the layout is not handled here (caller falls back).
bool layer_norm(uintptr_t x, uintptr_t w, uintptr_t b, uintptr_t y, uintptr_t ws,
                int64_t M, int64_t n, double eps, uintptr_t stream) {
    if (n % 4 != 0 || n == 0 || M == 0 || ((x | w | b | y | ws) % 16) != 0) return false;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int64_t n4 = n / 4, chunks = (n4 + CHUNK4 - 1) / CHUNK4;
    double2* part = reinterpret_cast<double2*>(ws);
    float2* stats = reinterpret_cast<float2*>(part + M * chunks);
    ln_partial<<<(unsigned)(M * chunks), THREADS, 0, st>>>(
        reinterpret_cast<const float4*>(x), part, M, n4, chunks);
    check("ln_partial");
    ln_stats<<<(unsigned)M, 32, 0, st>>>(reinterpret_cast<const float*>(x), part, stats, n, chunks, eps);
    check("ln_stats");
    ln_apply<<<(unsigned)((n4 + THREADS - 1) / THREADS), THREADS, 0, st>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<const float4*>(w),
        reinterpret_cast<const float4*>(b), stats, reinterpret_cast<float4*>(y), M, n4);
    check("ln_apply");
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("layer_norm", &layer_norm, "LayerNorm of (M, n) rows with elementwise affine (fp32)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")
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
        if _ext.layer_norm(x.data_ptr(), ln.weight.contiguous().data_ptr(),
                           ln.bias.contiguous().data_ptr(), y.data_ptr(), ws.data_ptr(), M, n,
                           ln.eps, torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)

"""AvgPool2d (3x3, stride 3) with 128-bit window loads: each thread computes four outputs.

The input is (16, 64, 256, 256) fp32 (268 MB), the output (16, 64, 85, 85) (30 MB). The windows do
not overlap, so every input element is read once: the floor is ~300 MB of traffic, ~70 us at ~4.3
TB/s, and eager's one-thread-per-output kernel with nine 4-byte loads per output is already near
it. What is left to gain is instruction and request overhead. Here a thread computes four
neighbouring outputs: their 12 input columns start at a multiple of 4 floats, so each of the 3 rows
is three aligned 128-bit loads (9 vector loads for 4 outputs instead of 36 scalar ones, a warp
covering 1.5 KB of each row contiguously), and the sums are then formed per output in torch's order
(row by row, column by column, then / 9) -- bit-identical results. The last column group of a row
(85 is not a multiple of 4) takes a scalar route. Other shapes use a generic one-thread-per-output
kernel. Expect only ~1.0-1.15x: the op is bound by memory bandwidth in both versions.
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

constexpr int THREADS = 256;

// Sizes of one pooling problem; 1-D and 2-D pools are 3-D ones with unit leading dimensions.
struct Pool {
    int D, H, W, Do, Ho, Wo;
    int kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw;
};

// One thread per output, w fastest. torch's rules: the window is clipped to the padded input for
// the divisor (count_include_pad) and to the input for the sum, which runs depth, row, column in
// ascending order from 0 -- the same order as torch's kernel, so the results are bit-identical.
// KD/KH/KW > 0 fix the window at compile time: an all-inside window is then a fully unrolled
// run of loads at constant offsets, with no bounds checks.
template <int KD, int KH, int KW>
__global__ void __launch_bounds__(THREADS) avg_pool(const float* __restrict__ x, float* __restrict__ y,
                                                    unsigned total, Pool p, int include_pad) {
    const unsigned o = blockIdx.x * THREADS + threadIdx.x;
    if (o >= total) return;
    const int kd = KD ? KD : p.kd, kh = KH ? KH : p.kh, kw = KW ? KW : p.kw;
    const unsigned ow = o % p.Wo, t1 = o / p.Wo, oh = t1 % p.Ho, t2 = t1 / p.Ho, od = t2 % p.Do;
    const unsigned plane = t2 / p.Do;
    const int d0 = od * p.sd - p.pd, h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
    const float* xp = x + (int64_t)plane * p.D * p.H * p.W;
    float sum = 0.f;
    int div;
    if (d0 >= 0 && d0 + kd <= p.D && h0 >= 0 && h0 + kh <= p.H && w0 >= 0 && w0 + kw <= p.W) {
        const float* b = xp + ((int64_t)d0 * p.H + h0) * p.W + w0;
        #pragma unroll
        for (int i = 0; i < kd; ++i)
            #pragma unroll
            for (int j = 0; j < kh; ++j)
                #pragma unroll
                for (int k = 0; k < kw; ++k) sum += __ldg(b + ((int64_t)i * p.H + j) * p.W + k);
        div = kd * kh * kw;
    } else {
        const int d1 = min(d0 + kd, p.D + p.pd), h1 = min(h0 + kh, p.H + p.ph), w1 = min(w0 + kw, p.W + p.pw);
        const int pool = (d1 - d0) * (h1 - h0) * (w1 - w0);
        const int ds = max(d0, 0), hs = max(h0, 0), ws = max(w0, 0);
        const int de = min(d1, p.D), he = min(h1, p.H), we = min(w1, p.W);
        for (int d = ds; d < de; ++d)
            for (int h = hs; h < he; ++h)
                for (int w = ws; w < we; ++w) sum += __ldg(xp + ((int64_t)d * p.H + h) * p.W + w);
        div = include_pad ? pool : (de - ds) * (he - hs) * (we - ws);
    }
    y[o] = sum / (float)div;
}

// Non-overlapping 2-D windows (stride == kernel K, no padding), rows a multiple of 4 floats: a
// thread computes 4 neighbouring outputs. Their 4K input columns start at a multiple of 4, so each
// of the K rows is K aligned 128-bit loads; the sums then run row by row, column by column, in
// torch's order. A group cut by the right edge takes the scalar route.
template <int K>
__global__ void __launch_bounds__(THREADS) avg_pool2d_x4(const float* __restrict__ x,
        float* __restrict__ y, unsigned total, int H, int W, int Ho, int Wo) {
    const unsigned o = blockIdx.x * THREADS + threadIdx.x;
    const unsigned G = (Wo + 3) / 4;
    if (o >= total) return;
    const unsigned g = o % G, t = o / G, oh = t % Ho, plane = t / Ho;
    const int ow0 = 4 * g, c0 = ow0 * K;
    const float* row = x + ((int64_t)plane * H + (int64_t)oh * K) * W + c0;
    float* out = y + ((int64_t)plane * Ho + oh) * Wo + ow0;
    if (ow0 + 4 <= Wo && c0 + 4 * K <= W) {
        float s[4] = {0.f, 0.f, 0.f, 0.f};
        #pragma unroll
        for (int j = 0; j < K; ++j) {
            float4 q[K];
            #pragma unroll
            for (int v = 0; v < K; ++v) q[v] = __ldg(reinterpret_cast<const float4*>(row + (int64_t)j * W) + v);
            const float* f = reinterpret_cast<const float*>(q);
            #pragma unroll
            for (int r = 0; r < 4; ++r)
                #pragma unroll
                for (int k = 0; k < K; ++k) s[r] += f[r * K + k];
        }
        #pragma unroll
        for (int r = 0; r < 4; ++r) out[r] = s[r] / (float)(K * K);
    } else {
        for (int r = 0; r < 4 && ow0 + r < Wo; ++r) {
            float s = 0.f;
            for (int j = 0; j < K; ++j)
                for (int k = 0; k < K; ++k) s += __ldg(row + (int64_t)j * W + r * K + k);
            out[r] = s / (float)(K * K);
        }
    }
}

// Returns false for sizes it does not handle (the caller falls back to torch).
bool pool(uintptr_t x, uintptr_t y, int64_t planes, int D, int H, int W, int Do, int Ho, int Wo,
          int kd, int kh, int kw, int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
          int include_pad, uintptr_t stream) {
    const int64_t total = planes * Do * Ho * Wo;
    if (total >= ((int64_t)1 << 31) || planes * D * H * W >= ((int64_t)1 << 40)) return false;
    if (total == 0) return true;
    const Pool p = {D, H, W, Do, Ho, Wo, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw};
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const unsigned blocks = (unsigned)((total + THREADS - 1) / THREADS);
    if (p.D == 1 && p.kh == 3 && p.kw == 3 && p.sh == 3 && p.sw == 3 && p.ph == 0 && p.pw == 0 &&
        p.Ho * 3 <= p.H && p.Wo * 3 <= p.W && p.W % 4 == 0 && x % 16 == 0) {  // non-overlapping 3x3 windows: 4 outputs per thread
        const int64_t groups = planes * p.Ho * ((p.Wo + 3) / 4);
        avg_pool2d_x4<3><<<(unsigned)((groups + THREADS - 1) / THREADS), THREADS, 0, st>>>(
            xp, yp, (unsigned)groups, p.H, p.W, p.Ho, p.Wo);
    } else if (p.kd == 1 && p.kh == 3 && p.kw == 3)
        avg_pool<1, 3, 3><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p, include_pad);
    else if (p.kd == 1 && p.kh == 2 && p.kw == 2)
        avg_pool<1, 2, 2><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p, include_pad);
    else
        avg_pool<0, 0, 0><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p, include_pad);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("pool: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("pool", &pool, "avg pooling of a contiguous (planes, D, H, W) fp32 tensor; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _out_size(size, k, s, p, d, ceil):
    """torch's pooling output length (floor or ceil mode)."""
    o = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil else 0)) // s + 1
    if ceil and (o - 1) * s >= size + p:
        o -= 1
    return o


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, stride: int = None, padding: int = 0):
        super().__init__()
        self.avg_pool = nn.AvgPool2d(kernel_size=kernel_size, stride=stride, padding=padding)
        # window, stride, padding, dilation per (D, H, W), unit/zero for the missing dims
        self.k = (1,) + _tuple(self.avg_pool.kernel_size, 2)
        self.s = (1,) + _tuple(self.avg_pool.stride, 2)
        self.p = (0,) + _tuple(self.avg_pool.padding, 2)
        self.d = (1, 1, 1)
        self.sizes = {}  # input shape -> (kernel size arguments, output shape)

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 4 or self.avg_pool.divisor_override is not None:
            return self.avg_pool(x)
        x = x.contiguous()
        cfg = self.sizes.get(x.shape)
        if cfg is None:  # sizes for this input shape, worked out once
            dims = (1, x.shape[2], x.shape[3])  # as (D, H, W) with unit leading dimensions
            out = [_out_size(n, k, s, p, d, self.avg_pool.ceil_mode) for n, k, s, p, d in
                   zip(dims, self.k, self.s, self.p, self.d)]
            cfg = self.sizes[x.shape] = (dims + tuple(out) + self.k + self.s + self.p + self.d,
                                         tuple(x.shape[:2]) + tuple(out[1:]))
        args, shape = cfg
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        if _ext.pool(x.data_ptr(), y.data_ptr(), x.shape[0] * x.shape[1], *args,
                     int(self.avg_pool.count_include_pad), torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return self.avg_pool(x)

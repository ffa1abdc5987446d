"""AvgPool3d with a compile-time 3x3x3 window: 27 unrolled loads per output, torch's order.

The input is (16, 32, 64, 64, 64) fp32 (537 MB), the output (16, 32, 32, 32, 32) (67 MB); windows
of 3 with stride 2 overlap, so each input element is used by ~3.4 outputs. The floor is one read of
x and one write of y, ~600 MB or ~140 us at ~4.3 TB/s; the reuse must come from the caches. One
thread per output, w fastest: neighbouring threads read overlapping runs of each input row (L1
hits) and neighbouring output rows and slices reuse rows and slices through L2. With the window
fixed at compile time, an all-inside window is 27 loads at constant offsets from one base pointer
-- no loop counters, no per-tap bounds checks, all loads in flight at once -- summed depth, row,
column in ascending order and divided by 27, the same arithmetic as torch's kernel, so results are
bit-identical. Border outputs (padding 1) take a loop that clips the window the way torch does
(count_include_pad: the divisor stays 27). Expect ~1.1-1.4x from leaner instruction streams on a
bandwidth-bound op.
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
    if (p.kd == 3 && p.kh == 3 && p.kw == 3)
        avg_pool<3, 3, 3><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p, include_pad);
    else if (p.kd == 2 && p.kh == 2 && p.kw == 2)
        avg_pool<2, 2, 2><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p, include_pad);
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
        self.avg_pool = nn.AvgPool3d(kernel_size=kernel_size, stride=stride, padding=padding)
        # window, stride, padding, dilation per (D, H, W)
        self.k = _tuple(self.avg_pool.kernel_size, 3)
        self.s = _tuple(self.avg_pool.stride, 3)
        self.p = _tuple(self.avg_pool.padding, 3)
        self.d = (1, 1, 1)
        self.sizes = {}  # input shape -> (kernel size arguments, output shape)

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 5 or self.avg_pool.divisor_override is not None:
            return self.avg_pool(x)
        x = x.contiguous()
        cfg = self.sizes.get(x.shape)
        if cfg is None:  # sizes for this input shape, worked out once
            dims = tuple(x.shape[2:])
            out = [_out_size(n, k, s, p, d, self.avg_pool.ceil_mode) for n, k, s, p, d in
                   zip(dims, self.k, self.s, self.p, self.d)]
            cfg = self.sizes[x.shape] = (dims + tuple(out) + self.k + self.s + self.p + self.d,
                                         tuple(x.shape[:2]) + tuple(out))
        args, shape = cfg
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        if _ext.pool(x.data_ptr(), y.data_ptr(), x.shape[0] * x.shape[1], *args,
                     int(self.avg_pool.count_include_pad), torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return self.avg_pool(x)

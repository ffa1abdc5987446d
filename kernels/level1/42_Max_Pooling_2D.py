"""MaxPool2d without the index tensor: one thread per output, unrolled 2x2 dilated window.

The input is (16, 32, 128, 128) fp32 (32 MB) and the output (16, 32, 64, 64) (8 MB). On CUDA,
F.max_pool2d always runs max_pool2d_with_indices, which also writes an int64 index per output (16
MB, twice the output itself) that nobody reads, so eager moves ~56 MB where 40 MB suffice. Here one
thread per output (w fastest: coalesced stores, and the stride-2 reads of neighbouring threads
share cache lines) computes the max over the 2x2 window with dilation 3; with the window size fixed
at compile time, an all-inside window is four loads at constant offsets from one base pointer with
no bounds checks, and only border outputs test each tap (padding acts as -inf). The max propagates
NaN (PTX max.NaN), so values are bit-identical to torch's. Each input element is read at most once
(dilation 3 with stride 2 makes windows disjoint), so the kernel is a single streaming pass.
Measured on the H200: 0.81x vs eager (50.2 against 40.7 us). The smaller traffic did not show:
neither call is near the bandwidth floor (41.9 MB of inputs and outputs moved at 19% of peak by
eager, 17% by this kernel), and the cause is unexplained.
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

// max that propagates NaN, as torch's pooling does (`val > max || isnan(val)`)
__device__ __forceinline__ float max_nan(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return (a != a || b != b) ? NAN : (a > b ? a : b);
#endif
}

// One thread per output, w fastest (coalesced stores, neighbouring threads share input lines in
// L1). KD/KH/KW > 0 fix the window at compile time: the common all-inside window is then a fully
// unrolled run of loads at constant offsets from one base pointer, with no bounds checks.
template <int KD, int KH, int KW>
__global__ void __launch_bounds__(THREADS) max_pool(const float* __restrict__ x, float* __restrict__ y,
                                                    unsigned total, Pool p) {
    const unsigned o = blockIdx.x * THREADS + threadIdx.x;
    if (o >= total) return;
    const int kd = KD ? KD : p.kd, kh = KH ? KH : p.kh, kw = KW ? KW : p.kw;
    const unsigned ow = o % p.Wo, t1 = o / p.Wo, oh = t1 % p.Ho, t2 = t1 / p.Ho, od = t2 % p.Do;
    const unsigned plane = t2 / p.Do;
    const int d0 = od * p.sd - p.pd, h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
    const float* xp = x + (int64_t)plane * p.D * p.H * p.W;
    float m = -INFINITY;
    if (d0 >= 0 && d0 + (kd - 1) * p.dd < p.D && h0 >= 0 && h0 + (kh - 1) * p.dh < p.H &&
        w0 >= 0 && w0 + (kw - 1) * p.dw < p.W) {
        const float* b = xp + ((int64_t)d0 * p.H + h0) * p.W + w0;
        const int64_t sdd = (int64_t)p.dd * p.H * p.W, shh = (int64_t)p.dh * p.W;
        #pragma unroll
        for (int i = 0; i < kd; ++i)
            #pragma unroll
            for (int j = 0; j < kh; ++j)
                #pragma unroll
                for (int k = 0; k < kw; ++k) m = max_nan(m, __ldg(b + i * sdd + j * shh + k * p.dw));
    } else {  // border: skip taps in the padding (padding acts as -inf)
        for (int i = 0; i < kd; ++i) {
            const int d = d0 + i * p.dd;
            if (d < 0 || d >= p.D) continue;
            for (int j = 0; j < kh; ++j) {
                const int h = h0 + j * p.dh;
                if (h < 0 || h >= p.H) continue;
                for (int k = 0; k < kw; ++k) {
                    const int w = w0 + k * p.dw;
                    if (w >= 0 && w < p.W) m = max_nan(m, __ldg(xp + ((int64_t)d * p.H + h) * p.W + w));
                }
            }
        }
    }
    y[o] = m;
}

// Returns false for sizes it does not handle (the caller falls back to torch).
bool pool(uintptr_t x, uintptr_t y, int64_t planes, int D, int H, int W, int Do, int Ho, int Wo,
          int kd, int kh, int kw, int sd, int sh, int sw, int pd, int ph, int pw, int dd, int dh, int dw,
          uintptr_t stream) {
    const int64_t total = planes * Do * Ho * Wo;
    if (total >= ((int64_t)1 << 31) || planes * D * H * W >= ((int64_t)1 << 40)) return false;
    if (total == 0) return true;
    const Pool p = {D, H, W, Do, Ho, Wo, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw};
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const unsigned blocks = (unsigned)((total + THREADS - 1) / THREADS);
    if (p.kd == 1 && p.kh == 2 && p.kw == 2)
        max_pool<1, 2, 2><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p);
    else if (p.kd == 1 && p.kh == 3 && p.kw == 3)
        max_pool<1, 3, 3><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p);
    else
        max_pool<0, 0, 0><<<blocks, THREADS, 0, st>>>(xp, yp, (unsigned)total, p);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("pool: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("pool", &pool, "max pooling of a contiguous (planes, D, H, W) fp32 tensor; false if unsupported");
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
    def __init__(self, kernel_size: int, stride: int, padding: int, dilation: int):
        super().__init__()
        self.maxpool = nn.MaxPool2d(kernel_size=kernel_size, stride=stride, padding=padding,
                                    dilation=dilation)
        # window, stride, padding, dilation per (D, H, W), unit/zero for the missing dims
        self.k = (1,) + _tuple(self.maxpool.kernel_size, 2)
        self.s = (1,) + _tuple(self.maxpool.stride, 2)
        self.p = (0,) + _tuple(self.maxpool.padding, 2)
        self.d = (1,) + _tuple(self.maxpool.dilation, 2)
        self.sizes = {}  # input shape -> (kernel size arguments, output shape)

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 4 or self.maxpool.return_indices:
            return self.maxpool(x)
        x = x.contiguous()
        cfg = self.sizes.get(x.shape)
        if cfg is None:  # sizes for this input shape, worked out once
            dims = (1, x.shape[2], x.shape[3])  # as (D, H, W) with unit leading dimensions
            out = [_out_size(n, k, s, p, d, self.maxpool.ceil_mode) for n, k, s, p, d in
                   zip(dims, self.k, self.s, self.p, self.d)]
            cfg = self.sizes[x.shape] = (dims + tuple(out) + self.k + self.s + self.p + self.d,
                                         tuple(x.shape[:2]) + tuple(out[1:]))
        args, shape = cfg
        y = torch.empty(shape, dtype=x.dtype, device=x.device)
        if _ext.pool(x.data_ptr(), y.data_ptr(), x.shape[0] * x.shape[1], *args,
                     torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return self.maxpool(x)

"""Depthwise (3, 5) conv as a direct kernel: a column of 16 outputs per thread, sliding window.

A 3x5 depthwise conv does 15 multiply-adds per output, so (16, 3, 128, 256) -> (16, 3, 126, 252)
is memory-bound: 6.3 MB in and 6.1 MB out, ~3 us at the H200's ~4.3 TB/s. For fp32 PyTorch runs
its own depthwise kernel (one thread per output, 15 loads each) behind nn.Conv2d's long host
path (parameter checks and algorithm dispatch), which costs more than the GPU work at this size.
Here a thin Python call launches one kernel: each thread owns one output column and 16
consecutive output rows of one (n, c) plane; it walks the 18 input rows those outputs need,
loading 5 neighbouring values per row (a warp reads 32 consecutive floats per load -- coalesced;
the overlap between lanes hits L1), and adds each value into every output that uses it, so each
input element is fetched once per thread instead of up to 15 times. The 15 weights sit in
registers; the loop is fully unrolled (16 accumulators, all loads of a row in flight together).
Each output sums its taps in the same (kh, kw) order as the reference, in exact fp32 FMA (no
TF32); a warp's stores are 32 consecutive floats. Grid: 48 planes x 8 row tiles of 256 columns,
one wave. Expect ~1.5-2.5x, mostly from the shorter host path. Other configurations (stride,
dilation, kernel size) run the module's Conv2d; out_channels and groups are ignored, as in the
reference.
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

constexpr int THREADS = 256;  // output columns per block
constexpr int TH = 16;        // output rows per thread

// Stride-1 depthwise conv with zero padding (ph, pw): y[p, oy, ox] = b[c] + sum w[c, kh, kw] *
// x[p, oy - ph + kh, ox - pw + kw], p = n * C + c. Grid: (N * C, row tiles, col tiles).
template <int KH, int KW>
__global__ void __launch_bounds__(THREADS) dw_conv(const float* __restrict__ x, const float* __restrict__ w,
                                                   const float* __restrict__ bias, float* __restrict__ y,
                                                   int C, int H, int W, int Ho, int Wo, int ph, int pw) {
    const int plane = blockIdx.x, c = plane % C;
    const int ox = blockIdx.z * THREADS + threadIdx.x;
    const int oy0 = blockIdx.y * TH;
    const float* xp = x + (int64_t)plane * H * W;
    float wr[KH][KW];
    #pragma unroll
    for (int kh = 0; kh < KH; ++kh)
        #pragma unroll
        for (int kw = 0; kw < KW; ++kw) wr[kh][kw] = __ldg(w + (c * KH + kh) * KW + kw);
    float acc[TH];
    #pragma unroll
    for (int t = 0; t < TH; ++t) acc[t] = 0.f;
    #pragma unroll
    for (int r = 0; r < TH + KH - 1; ++r) {  // input row oy0 - ph + r feeds outputs t = r - kh
        const int iy = oy0 - ph + r;
        const bool row_ok = iy >= 0 && iy < H;
        float v[KW];
        #pragma unroll
        for (int kw = 0; kw < KW; ++kw) {
            const int ix = ox - pw + kw;
            v[kw] = row_ok && ix >= 0 && ix < W ? __ldg(xp + (int64_t)iy * W + ix) : 0.f;
        }
        #pragma unroll
        for (int t = 0; t < TH; ++t) {
            const int kh = r - t;
            if (kh >= 0 && kh < KH) {
                #pragma unroll
                for (int kw = 0; kw < KW; ++kw) acc[t] = fmaf(wr[kh][kw], v[kw], acc[t]);
            }
        }
    }
    if (ox >= Wo) return;
    const float b = bias ? __ldg(bias + c) : 0.f;
    float* yp = y + (int64_t)plane * Ho * Wo + ox;
    #pragma unroll
    for (int t = 0; t < TH; ++t)
        if (oy0 + t < Ho) yp[(int64_t)(oy0 + t) * Wo] = acc[t] + b;
}

void depthwise(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C,
               int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t ph, int64_t pw, uintptr_t stream) {
    const int64_t Ho = H + 2 * ph - KH + 1, Wo = W + 2 * pw - KW + 1;
    if (Ho <= 0 || Wo <= 0 || N * C == 0) return;
    dim3 grid((unsigned)(N * C), (unsigned)((Ho + TH - 1) / TH), (unsigned)((Wo + THREADS - 1) / THREADS));
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    const float* wp = reinterpret_cast<const float*>(w);
    const float* bp = reinterpret_cast<const float*>(bias);
    float* yp = reinterpret_cast<float*>(y);
    if (KH == 3 && KW == 5)
        dw_conv<3, 5><<<grid, THREADS, 0, st>>>(xp, wp, bp, yp, (int)C, (int)H, (int)W, (int)Ho, (int)Wo, (int)ph, (int)pw);
    else
        throw std::runtime_error("depthwise: only (3, 5) kernels are compiled here");
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("depthwise: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("depthwise", &depthwise, "stride-1 depthwise conv2d of an NCHW fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size_h: int, kernel_size_w: int,
                 stride_h: int = 1, stride_w: int = 1, padding_h: int = 0, padding_w: int = 0,
                 dilation_h: int = 1, dilation_w: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, (kernel_size_h, kernel_size_w),
                                stride=(stride_h, stride_w), padding=(padding_h, padding_w),
                                dilation=(dilation_h, dilation_w), groups=in_channels, bias=bias)
        c = self.conv2d  # the kernel covers stride 1, no dilation, (3, 5), zero padding
        self.fast = (c.stride == (1, 1) and c.dilation == (1, 1) and c.kernel_size == (3, 5)
                     and isinstance(c.padding, tuple) and c.padding_mode == "zeros")

    def forward(self, x):
        if not self.fast or x.dim() != 4 or x.dtype != torch.float32:
            return self.conv2d(x)
        x = x.contiguous()
        N, C, H, W = x.shape
        (kh, kw), (ph, pw) = self.conv2d.kernel_size, self.conv2d.padding
        y = torch.empty(N, C, H + 2 * ph - kh + 1, W + 2 * pw - kw + 1, device=x.device)
        b = self.conv2d.bias
        _ext.depthwise(x.data_ptr(), self.conv2d.weight.data_ptr(), 0 if b is None else b.data_ptr(),
                       y.data_ptr(), N, C, H, W, kh, kw, ph, pw,
                       torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

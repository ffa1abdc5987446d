"""Depthwise-separable conv fused into one kernel: the depthwise result never leaves registers.

The reference runs a 3x3 depthwise conv (16, 3, 256, 256) -> (16, 3, 254, 254), writing a
12.4 MB intermediate, then a 1x1 conv from 3 to 64 channels that reads it back and writes the
(16, 64, 254, 254) output: 264 MB. Compute is small (9 + 3 multiply-adds per depthwise and
pointwise output, ~0.2 GFMA), so the floor is writing the output once: ~64 us at ~4.1 TB/s. Eager
pays that plus the intermediate round trip, a second launch and two long conv host paths, and the
1x1 conv goes to cuDNN, which uses TF32 by default (~1e-3 relative error, outside the strict
tolerance). Here one kernel does both: each thread owns 2 adjacent output columns and 4 output
rows of one image; for each of the 3 input channels it walks the 6 input rows, loading 4
neighbouring values per row (the two 3-wide windows), and accumulates the depthwise outputs in
registers (24 of them) in exact fp32 FMA, in the reference's (kh, kw) order. Then for each of the
64 output channels it reads that channel's 3 pointwise weights from shared memory (a broadcast)
and writes 2 x 4 outputs as 64-bit stores; a warp's store covers 256 contiguous bytes, so the
write stream is coalesced and only the output is written. Expect ~1.2-1.4x: the 12 MB
intermediate's write + read, one launch and one conv host path are gone, and the kernel runs
near write bandwidth, which bounds any implementation. Other configurations (channel counts,
kernel size, stride, dilation) run the module's own layers.
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

constexpr int THREADS = 128;   // each thread: 2 output columns -> 256 columns per block
constexpr int TH = 4;          // output rows per thread
constexpr int MAX_COUT = 1024;

// Depthwise KxK (stride 1, zero padding ph/pw) then pointwise C -> cout, for one image n = blockIdx.x.
// VEC2: Wo even and y 8-byte aligned, so the 2 columns are stored as one float2.
template <int C, int K, bool VEC2>
__global__ void __launch_bounds__(THREADS) dw_pw_conv(
        const float* __restrict__ x, const float* __restrict__ wd, const float* __restrict__ bd,
        const float* __restrict__ wp, const float* __restrict__ bp, float* __restrict__ y,
        int cout, int H, int W, int Ho, int Wo, int ph, int pw) {
    __shared__ float ws[MAX_COUT * C];
    __shared__ float bs[MAX_COUT];
    for (int i = threadIdx.x; i < cout * C; i += THREADS) ws[i] = __ldg(wp + i);
    for (int i = threadIdx.x; i < cout; i += THREADS) bs[i] = bp ? __ldg(bp + i) : 0.f;
    __syncthreads();

    const int n = blockIdx.x;
    const int oy0 = blockIdx.y * TH;
    const int ox0 = 2 * (blockIdx.z * THREADS + threadIdx.x);
    if (ox0 >= Wo) return;
    float d[C][TH][2];  // depthwise outputs (c, row, column)
    #pragma unroll
    for (int c = 0; c < C; ++c) {
        float wr[K][K];
        #pragma unroll
        for (int kh = 0; kh < K; ++kh)
            #pragma unroll
            for (int kw = 0; kw < K; ++kw) wr[kh][kw] = __ldg(wd + (c * K + kh) * K + kw);
        #pragma unroll
        for (int t = 0; t < TH; ++t) d[c][t][0] = d[c][t][1] = 0.f;
        const float* xc = x + ((int64_t)n * C + c) * H * W;
        #pragma unroll
        for (int r = 0; r < TH + K - 1; ++r) {  // input row oy0 - ph + r feeds outputs t = r - kh
            const int iy = oy0 - ph + r;
            const bool row_ok = iy >= 0 && iy < H;
            float v[K + 1];
            #pragma unroll
            for (int k = 0; k < K + 1; ++k) {
                const int ix = ox0 - pw + k;
                v[k] = row_ok && ix >= 0 && ix < W ? __ldg(xc + (int64_t)iy * W + ix) : 0.f;
            }
            #pragma unroll
            for (int t = 0; t < TH; ++t) {
                const int kh = r - t;
                if (kh >= 0 && kh < K) {
                    #pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        d[c][t][0] = fmaf(wr[kh][kw], v[kw], d[c][t][0]);
                        d[c][t][1] = fmaf(wr[kh][kw], v[kw + 1], d[c][t][1]);
                    }
                }
            }
        }
        const float b = bd ? __ldg(bd + c) : 0.f;
        #pragma unroll
        for (int t = 0; t < TH; ++t) {
            d[c][t][0] += b;
            d[c][t][1] += b;
        }
    }

    const bool both = ox0 + 1 < Wo;
    float* yn = y + (int64_t)n * cout * Ho * Wo + (int64_t)oy0 * Wo + ox0;
    #pragma unroll 2
    for (int o = 0; o < cout; ++o) {
        float wo[C];
        #pragma unroll
        for (int c = 0; c < C; ++c) wo[c] = ws[o * C + c];
        const float b = bs[o];
        float* yo = yn + (int64_t)o * Ho * Wo;
        #pragma unroll
        for (int t = 0; t < TH; ++t) {
            if (oy0 + t >= Ho) break;
            float r0 = 0.f, r1 = 0.f;
            #pragma unroll
            for (int c = 0; c < C; ++c) {
                r0 = fmaf(wo[c], d[c][t][0], r0);
                r1 = fmaf(wo[c], d[c][t][1], r1);
            }
            r0 += b;
            r1 += b;
            if (VEC2 && both) {
                *reinterpret_cast<float2*>(yo + t * Wo) = make_float2(r0, r1);
            } else {
                yo[t * Wo] = r0;
                if (both) yo[t * Wo + 1] = r1;
            }
        }
    }
}

void dw_pw(uintptr_t x, uintptr_t wd, uintptr_t bd, uintptr_t wp, uintptr_t bp, uintptr_t y,
           int64_t N, int64_t C, int64_t cout, int64_t H, int64_t W, int64_t K, int64_t ph, int64_t pw,
           uintptr_t stream) {
    if (C != 3 || K != 3) throw std::runtime_error("dw_pw: only 3 channels, 3x3 are compiled here");
    if (cout > MAX_COUT) throw std::runtime_error("dw_pw: more than 1024 output channels");
    const int64_t Ho = H + 2 * ph - K + 1, Wo = W + 2 * pw - K + 1;
    if (N == 0 || cout == 0 || Ho <= 0 || Wo <= 0) return;
    dim3 grid((unsigned)N, (unsigned)((Ho + TH - 1) / TH), (unsigned)((Wo + 2 * THREADS - 1) / (2 * THREADS)));
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    auto f = [](uintptr_t p) { return reinterpret_cast<const float*>(p); };
    float* yp = reinterpret_cast<float*>(y);
    if (Wo % 2 == 0 && y % 8 == 0)
        dw_pw_conv<3, 3, true><<<grid, THREADS, 0, st>>>(f(x), f(wd), f(bd), f(wp), f(bp), yp, (int)cout,
                                                         (int)H, (int)W, (int)Ho, (int)Wo, (int)ph, (int)pw);
    else
        dw_pw_conv<3, 3, false><<<grid, THREADS, 0, st>>>(f(x), f(wd), f(bd), f(wp), f(bp), yp, (int)cout,
                                                          (int)H, (int)W, (int)Ho, (int)Wo, (int)ph, (int)pw);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("dw_pw: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("dw_pw", &dw_pw, "depthwise 3x3 (stride 1) then pointwise conv of an NCHW fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, bias: bool = False):
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride,
                                   padding=padding, dilation=dilation, groups=in_channels,
                                   bias=bias)
        self.pointwise = nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=bias)
        d = self.depthwise  # the kernel covers 3 channels, 3x3, stride 1, no dilation, zero padding
        self.fast = (in_channels == 3 and out_channels <= 1024 and d.kernel_size == (3, 3)
                     and d.stride == (1, 1) and d.dilation == (1, 1) and isinstance(d.padding, tuple)
                     and d.padding_mode == "zeros")

    def forward(self, x):
        if not self.fast or x.dim() != 4 or x.dtype != torch.float32:
            return self.pointwise(self.depthwise(x))
        x = x.contiguous()
        N, C, H, W = x.shape
        ph, pw = self.depthwise.padding
        cout = self.pointwise.out_channels
        y = torch.empty(N, cout, H + 2 * ph - 2, W + 2 * pw - 2, device=x.device)
        bd, bp = self.depthwise.bias, self.pointwise.bias
        _ext.dw_pw(x.data_ptr(), self.depthwise.weight.data_ptr(), 0 if bd is None else bd.data_ptr(),
                   self.pointwise.weight.data_ptr(), 0 if bp is None else bp.data_ptr(), y.data_ptr(),
                   N, C, cout, H, W, 3, ph, pw, torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

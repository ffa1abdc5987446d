"""Depthwise 3x3 convolution from a shared-memory input tile with a halo.

(16, 3, 256, 256) -> (16, 3, 254, 254) at 9 multiply-adds per output is memory-bound: 12.6 MB in,
12.4 MB out, ~6 us at ~4.3 TB/s; eager adds nn.Conv2d's long host path (parameter checks,
algorithm dispatch) to PyTorch's one-thread-per-output depthwise kernel. The main variant leans on
registers and L1 for reuse; this one makes the reuse explicit. A block of 128 x 4 threads owns a
32-row x 128-column output tile of one (n, c) plane. It first copies the (32 + 2) x (128 + 2)
input tile it needs -- the halo included, zero where the padding or the image edge cuts it -- into
shared memory (17.7 KB) with coalesced loads: consecutive threads read consecutive floats, and
every input element comes from DRAM once per tile (1.08x overhead for the halo). After one
__syncthreads each thread computes 8 consecutive output rows of one column by sliding a 3-row
window down the tile: per input row it reads 3 neighbouring floats from shared memory (lanes read
consecutive words: no bank conflicts) and adds them into every output row that uses them, in the
reference's (kh, kw) order, in exact fp32 FMA (no TF32). The 9 weights sit in registers; a warp's
stores are 32 consecutive floats. Grid: 48 planes x 8 row tiles x 2 column tiles = 768 blocks.
Expect ~1.5-2.5x, like the main variant (the floor is the same), mostly from the shorter host
path. Other configurations (stride, dilation, kernel size, channel multiplier) run the module's
Conv2d.
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

constexpr int TX = 128, TY = 4;  // threads: 128 columns x 4 row groups
constexpr int RPT = 8;           // output rows per thread
constexpr int TH = TY * RPT;     // output rows per block (32)

// Stride-1 depthwise conv with zero padding (ph, pw): y[p, oy, ox] = b[c] + sum w[c, kh, kw] *
// x[p, oy - ph + kh, ox - pw + kw], p = n * C + c. Grid: (N * C, row tiles, column tiles).
template <int KH, int KW>
__global__ void __launch_bounds__(TX * TY) dw_conv_smem(const float* __restrict__ x, const float* __restrict__ w,
                                                        const float* __restrict__ bias, float* __restrict__ y,
                                                        int C, int H, int W, int Ho, int Wo, int ph, int pw) {
    constexpr int IR = TH + KH - 1, IC = TX + KW - 1;  // input tile with its halo
    __shared__ float tile[IR][IC];
    const int plane = blockIdx.x, c = plane % C;
    const int oy0 = blockIdx.y * TH, ox0 = blockIdx.z * TX;
    const float* xp = x + (int64_t)plane * H * W;
    for (int i = threadIdx.y * TX + threadIdx.x; i < IR * IC; i += TX * TY) {
        const int r = i / IC, cc = i - r * IC;
        const int iy = oy0 - ph + r, ix = ox0 - pw + cc;
        tile[r][cc] = iy >= 0 && iy < H && ix >= 0 && ix < W ? __ldg(xp + (int64_t)iy * W + ix) : 0.f;
    }
    float wr[KH][KW];
    #pragma unroll
    for (int kh = 0; kh < KH; ++kh)
        #pragma unroll
        for (int kw = 0; kw < KW; ++kw) wr[kh][kw] = __ldg(w + (c * KH + kh) * KW + kw);
    __syncthreads();

    const int col = threadIdx.x, row0 = threadIdx.y * RPT;  // within the tile
    float acc[RPT];
    #pragma unroll
    for (int t = 0; t < RPT; ++t) acc[t] = 0.f;
    #pragma unroll
    for (int r = 0; r < RPT + KH - 1; ++r) {  // tile row row0 + r feeds outputs t = r - kh
        float v[KW];
        #pragma unroll
        for (int kw = 0; kw < KW; ++kw) v[kw] = tile[row0 + r][col + kw];
        #pragma unroll
        for (int t = 0; t < RPT; ++t) {
            const int kh = r - t;
            if (kh >= 0 && kh < KH) {
                #pragma unroll
                for (int kw = 0; kw < KW; ++kw) acc[t] = fmaf(wr[kh][kw], v[kw], acc[t]);
            }
        }
    }
    const int ox = ox0 + col;
    if (ox >= Wo) return;
    const float b = bias ? __ldg(bias + c) : 0.f;
    float* yp = y + (int64_t)plane * Ho * Wo + ox;
    #pragma unroll
    for (int t = 0; t < RPT; ++t) {
        const int oy = oy0 + row0 + t;
        if (oy < Ho) yp[(int64_t)oy * Wo] = acc[t] + b;
    }
}

void depthwise(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t C,
               int64_t H, int64_t W, int64_t KH, int64_t KW, int64_t ph, int64_t pw, uintptr_t stream) {
    const int64_t Ho = H + 2 * ph - KH + 1, Wo = W + 2 * pw - KW + 1;
    if (Ho <= 0 || Wo <= 0 || N * C == 0) return;
    dim3 grid((unsigned)(N * C), (unsigned)((Ho + TH - 1) / TH), (unsigned)((Wo + TX - 1) / TX));
    dim3 block(TX, TY);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    const float* wp = reinterpret_cast<const float*>(w);
    const float* bp = reinterpret_cast<const float*>(bias);
    float* yp = reinterpret_cast<float*>(y);
    if (KH == 3 && KW == 3)
        dw_conv_smem<3, 3><<<grid, block, 0, st>>>(xp, wp, bp, yp, (int)C, (int)H, (int)W, (int)Ho, (int)Wo,
                                                   (int)ph, (int)pw);
    else
        throw std::runtime_error("depthwise: only 3x3 kernels are compiled here");
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("depthwise: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("depthwise", &depthwise, "stride-1 depthwise conv2d of an NCHW fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, in_channels, kernel_size, stride=stride,
                                padding=padding, groups=in_channels, bias=bias)
        c = self.conv2d  # the kernel covers stride 1, no dilation, 3x3, zero padding
        self.fast = (c.stride == (1, 1) and c.dilation == (1, 1) and c.kernel_size == (3, 3)
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

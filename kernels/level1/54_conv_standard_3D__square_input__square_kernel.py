"""Direct 3x3x3 convolution, register-blocked 4 output rows x 8 output channels per thread.

With 3 input channels each output point is only 81 multiply-adds, but there are 16 * 64 * 62^3
= 244M outputs: 19.8 G FMAs plus a 976 MB output. Eager cuDNN runs it as a thin implicit GEMM
(K = 81, an awkward tile size), in TF32 by default for convolutions. This kernel keeps every FMA
in exact fp32 and makes FMA issue the only bottleneck:
  - a block (32 x 8 threads) computes a 32 (ow) x 32 (oh) tile of one (n, od) slice for all 64
    output channels; it first copies the 64 x 81 weights (20.7 KB) into shared memory transposed
    to [ci, kd, kh, kw][co], so the 8 channel weights of one tap are two float4 reads that every
    lane of the warp shares (a broadcast, no bank conflicts);
  - each thread owns 4 consecutive output rows at one ow and 8 output channels at a time (32
    accumulators). Per input channel it loads the 3 x 6 x 3 = 54 input values its 4 rows need
    (neighbouring rows share 2/3 of them; neighbouring lanes share the rest through L1), then runs
    27 taps x 8 channels x 4 rows = 864 FMAs with 54 shared loads: each weight feeds 4 FMAs and
    each input value up to 24;
  - the sizes of the benchmark (64^3) are compile-time constants in a specialised instance, so
    all 54 input offsets and 32 output offsets are immediates, and a row group that would run
    past the last output row is shifted up to end on it (rewriting a few rows with identical
    values) so no load needs clamping and no store a predicate. The SASS of that loop (sm_90) is
    864 FFMA of 985 instructions (88%; a one-output-per-thread version spends ~40% of its issue
    slots fetching weights); 127 registers, no spills;
  - results are stored after each group of 8 channels; a warp's stores are 32 consecutive ow,
    i.e. coalesced 128-byte row segments.
Cost is set by FMA issue: ~21 G FMAs (with the ~6% of tile padding) / 0.86 / (132 SMs x 128
lanes x 1.75-1.98 GHz) ~ 0.75-0.85 ms, with the 976 MB of writes (~0.25 ms at full bandwidth)
hidden underneath. How much that beats eager depends on how well cuDNN handles C_in = 3 in 3-D;
~1.3-2x is the estimate. Other sizes use a generic instance of the same kernel; other
configurations (channels, kernel size, stride, padding, dilation, groups, bias) or fewer than 4
output rows run the module's own Conv3d.
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

constexpr int CI = 3, CO = 64, KS = 3, TAPS = CI * KS * KS * KS;  // 81 weights per output channel
constexpr int TW = 32, TH = 8;          // threads per block: 32 along ow, 8 along oh
constexpr int RPT = 4, COB = 8;         // per thread: 4 output rows, 8 channels per pass
constexpr int ROWS = RPT + KS - 1;      // input rows those 4 output rows need

// x: (N, CI, D, H, W); w: (CO, CI, 3, 3, 3); y: (N, CO, D-2, H-2, W-2), needs H - 2 >= RPT.
// grid = (tiles_w * tiles_h, D - 2, N); a block covers 32 ow x 32 oh of one (n, od).
// SD, SH, SW: sizes fixed at compile time (0 = take the runtime argument). With them fixed,
// every input and output offset below is an immediate, so the loop body is almost pure FFMA.
template <int SD, int SH, int SW>
__global__ void __launch_bounds__(TW * TH, 2) conv3d_k3(const float* __restrict__ x,
                                                        const float* __restrict__ w,
                                                        float* __restrict__ y,
                                                        int Dr, int Hr, int Wr, int tiles_w) {
    const int D = SD ? SD : Dr, H = SH ? SH : Hr, W = SW ? SW : Wr;
    __shared__ __align__(16) float ws[TAPS * CO];  // [ci, kd, kh, kw][co]
    for (int i = threadIdx.y * TW + threadIdx.x; i < CO * TAPS; i += TW * TH)
        ws[(i % TAPS) * CO + i / TAPS] = __ldg(w + i);
    __syncthreads();  // the only barrier: threads may leave below

    const int Ho = H - 2, Wo = W - 2;
    const int ow = (blockIdx.x % tiles_w) * TW + threadIdx.x;
    int oh0 = (blockIdx.x / tiles_w) * (TH * RPT) + threadIdx.y * RPT;
    const int od = blockIdx.y, n = blockIdx.z;
    if (ow >= Wo || oh0 >= Ho) return;
    // A group of 4 rows that would run past the last output row is moved up to end on it: it
    // recomputes (and rewrites, with identical values) rows of the group above, but every row
    // it touches is valid, so loads need no clamping and stores no predicates.
    oh0 = min(oh0, Ho - RPT);
    const float* xb = x + (((int64_t)n * CI * D + od) * H + oh0) * W + ow;
    const int64_t oplane = (int64_t)(D - 2) * Ho * Wo;
    float* yb = y + (int64_t)n * CO * oplane + ((int64_t)od * Ho + oh0) * Wo + ow;

    #pragma unroll 1
    for (int cb = 0; cb < CO; cb += COB) {
        float acc[COB][RPT] = {};
        #pragma unroll 1
        for (int ci = 0; ci < CI; ++ci) {
            const float* xc = xb + (int64_t)ci * D * H * W;
            float in[KS][ROWS][KS];  // (kd, input row, kw)
            #pragma unroll
            for (int kd = 0; kd < KS; ++kd)
                #pragma unroll
                for (int r = 0; r < ROWS; ++r)
                    #pragma unroll
                    for (int kw = 0; kw < KS; ++kw)
                        in[kd][r][kw] = __ldg(xc + ((int64_t)kd * H + r) * W + kw);
            #pragma unroll
            for (int kd = 0; kd < KS; ++kd)
                #pragma unroll
                for (int kh = 0; kh < KS; ++kh)
                    #pragma unroll
                    for (int kw = 0; kw < KS; ++kw) {
                        const float* wp = ws + (((ci * KS + kd) * KS + kh) * KS + kw) * CO + cb;
                        const float4 w0 = *reinterpret_cast<const float4*>(wp);
                        const float4 w1 = *reinterpret_cast<const float4*>(wp + 4);
                        const float wv[COB] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
                        #pragma unroll
                        for (int c = 0; c < COB; ++c)
                            #pragma unroll
                            for (int j = 0; j < RPT; ++j)
                                acc[c][j] = fmaf(in[kd][j + kh][kw], wv[c], acc[c][j]);
                    }
        }
        float* yc = yb + (int64_t)cb * oplane;
        #pragma unroll
        for (int c = 0; c < COB; ++c)
            #pragma unroll
            for (int j = 0; j < RPT; ++j) yc[c * oplane + j * Wo] = acc[c][j];
    }
}

// Returns false when the sizes are not handled here (caller falls back to its Conv3d).
bool conv3d(uintptr_t x, uintptr_t w, uintptr_t y, int64_t N, int64_t D, int64_t H, int64_t W,
            uintptr_t stream) {
    if (D < 3 || H - 2 < RPT || W < 3 || N > 65535 || D - 2 > 65535 || N * 3 * D * H * W > (1ll << 40))
        return false;
    if (N == 0) return true;
    const int tiles_w = (int)((W - 2 + TW - 1) / TW), tiles_h = (int)((H - 2 + TH * RPT - 1) / (TH * RPT));
    dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)(D - 2), (unsigned)N), block(TW, TH);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    const float* wp = reinterpret_cast<const float*>(w);
    float* yp = reinterpret_cast<float*>(y);
    if (D == 64 && H == 64 && W == 64)  // the benchmark's size, compiled with constant offsets
        conv3d_k3<64, 64, 64><<<grid, block, 0, st>>>(xp, wp, yp, 64, 64, 64, tiles_w);
    else
        conv3d_k3<0, 0, 0><<<grid, block, 0, st>>>(xp, wp, yp, (int)D, (int)H, (int)W, tiles_w);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("conv3d_k3: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv3d", &conv3d, "3x3x3 valid conv, 3 -> 64 channels, no bias (fp32); false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=False):
        super().__init__()
        self.conv3d = nn.Conv3d(in_channels, out_channels, (kernel_size, kernel_size, kernel_size),
                                stride=stride, padding=padding, dilation=dilation,
                                groups=groups, bias=bias)

    def forward(self, x):
        c = self.conv3d
        if (c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding, c.dilation,
                c.groups) != (3, 64, (3, 3, 3), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1) \
                or c.bias is not None or x.dim() != 5 or x.dtype != torch.float32:
            return c(x)
        x = x.contiguous()
        N, _, D, H, W = x.shape
        y = x.new_empty(N, 64, D - 2, H - 2, W - 2)
        if _ext.conv3d(x.data_ptr(), c.weight.contiguous().data_ptr(), y.data_ptr(), N, D, H, W,
                       torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return c(x)

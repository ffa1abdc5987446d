"""Direct dilated (3, 5) conv from 3 channels, register-blocked 4 rows x 8 channels per thread.

(16, 3, 256, 256) -> (16, 64, 254, 256) with padding (1, 2) and dilation (2, 1) has 45 multiply-adds
per output and 66.6M outputs: 3.0 G FMAs and a 266 MB output. PyTorch lets cuDNN use TF32 for
convolutions by default (~1e-3 relative error, outside the strict tolerance), but measured, eager's
result matched the strict fp32 reference (eager's err/tol read 0), so cuDNN ran an fp32 algorithm
for this shape. Exact fp32 on the CUDA cores costs 3.0 G / (132 SMs x 128 lanes x ~1.75 GHz) ~ 100
us at full FMA rate, more than writing the output (~65 us at ~4.1 TB/s), so the kernel is built to
keep the FMA pipes busy while the stores stream out:
  - a block of 32 x 8 threads owns a 32 (ow) x 32 (oh) tile of one image; it first copies the
    64 x 45 weights into shared memory transposed to [ci, kh, kw][co], so the 8 channel weights of
    one tap are two float4 reads that all lanes share (a broadcast, no bank conflicts);
  - each thread owns 4 consecutive output rows at one ow and 8 output channels at a time (32
    accumulators). Per input channel it loads the 8 x 5 input values its 4 rows need (neighbouring
    lanes share the rest through L1), then runs 15 taps x 8 channels x 4 rows = 480 FMAs on them,
    so ~80% of issued instructions are FFMAs. Every output sums its taps in (ci, kh, kw) order in
    exact fp32;
  - results are stored after each group of 8 channels; a warp's store is 32 consecutive ow, one
    coalesced 128-byte row segment.
    With row dilation 2, output row r uses input rows r, r + 2, r + 4: the 8 loaded rows cover all
    three taps of all 4 output rows; zero padding is a bounds check on each load.
Estimated ~120 us (FMA issue at ~80%). Measured on the H200: 0.89x vs eager (356.9 us against 316.9
us), both far above that estimate and the ~65 us of writes (eager moved its inputs and outputs at
17% of peak bandwidth, this kernel at 16%); why is unexplained. It is the faster of our two variants
(the 3xTF32 one measured 0.42x). Other configurations (channel counts, stride, other kernel sizes or
row dilations) run the module's own Conv2d.
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

constexpr int CI = 3;                    // input channels (the only case compiled)
constexpr int TX = 32, TY = 8;           // threads per block: 32 along ow, 8 along oh
constexpr int THREADS = TX * TY;
constexpr int RPT = 4;                   // output rows per thread
constexpr int COB = 8;                   // output channels per pass
constexpr int MAX_W_FLOATS = 12288;      // weights in shared memory: 48 KB

// y[n, co, oh, ow] = b[co] + sum_{ci, kh, kw} w[co, ci, kh, kw] x[n, ci, oh - ph + kh*DH, ow - pw + kw*dw]
// (stride 1, zero padding). Grid: (ceil(Wo / 32), ceil(Ho / 32), N); cout % 8 == 0.
template <int KH, int KW, int DH>
__global__ void __launch_bounds__(THREADS, 2) conv2d_ci3(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, int cout, int H, int W, int Ho, int Wo, int ph, int pw, int dw) {
    constexpr int TAPS = CI * KH * KW;
    constexpr int NR = RPT + (KH - 1) * DH;  // input rows touched by one thread's RPT output rows
    extern __shared__ float4 ws4[];           // [TAPS][cout / 4]: weights transposed, co fastest
    float* ws = reinterpret_cast<float*>(ws4);
    const int tid = threadIdx.y * TX + threadIdx.x;
    for (int i = tid; i < TAPS * cout; i += THREADS) {
        const int tap = i / cout, co = i - tap * cout;
        ws[i] = __ldg(w + co * TAPS + tap);
    }
    __syncthreads();

    const int n = blockIdx.z;
    const int ow = blockIdx.x * TX + threadIdx.x;
    const int oh0 = blockIdx.y * (TY * RPT) + threadIdx.y * RPT;
    const float* xn = x + (int64_t)n * CI * H * W;
    const int cout4 = cout / 4;
    for (int cog = 0; cog < cout; cog += COB) {
        float acc[RPT][COB];
        #pragma unroll
        for (int r = 0; r < RPT; ++r)
            #pragma unroll
            for (int j = 0; j < COB; ++j) acc[r][j] = 0.f;
        #pragma unroll 1
        for (int ci = 0; ci < CI; ++ci) {  // not unrolled: one window live at a time
            const float* xc = xn + (int64_t)ci * H * W;
            float v[NR][KW];  // the input window of this thread for channel ci
            #pragma unroll
            for (int r = 0; r < NR; ++r) {
                const int iy = oh0 - ph + r;
                const bool row_ok = iy >= 0 && iy < H;
                #pragma unroll
                for (int kw = 0; kw < KW; ++kw) {
                    const int ix = ow - pw + kw * dw;
                    v[r][kw] = row_ok && ix >= 0 && ix < W ? __ldg(xc + (int64_t)iy * W + ix) : 0.f;
                }
            }
            #pragma unroll
            for (int kh = 0; kh < KH; ++kh)
                #pragma unroll
                for (int kw = 0; kw < KW; ++kw) {
                    const int tap = (ci * KH + kh) * KW + kw;
                    const float4 wa = ws4[tap * cout4 + cog / 4], wb = ws4[tap * cout4 + cog / 4 + 1];
                    const float wv[COB] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
                    #pragma unroll
                    for (int r = 0; r < RPT; ++r) {
                        const float xv = v[r + kh * DH][kw];
                        #pragma unroll
                        for (int j = 0; j < COB; ++j) acc[r][j] = fmaf(wv[j], xv, acc[r][j]);
                    }
                }
        }
        if (ow < Wo) {
            #pragma unroll
            for (int j = 0; j < COB; ++j) {
                const float b = bias ? __ldg(bias + cog + j) : 0.f;
                float* yp = y + (((int64_t)n * cout + cog + j) * Ho + oh0) * Wo + ow;
                #pragma unroll
                for (int r = 0; r < RPT; ++r)
                    if (oh0 + r < Ho) yp[(int64_t)r * Wo] = acc[r][j] + b;
            }
        }
    }
}

// x (N, 3, H, W), w (cout, 3, KH, KW), y (N, cout, Ho, Wo); row dilation DH, column dilation dw.
void conv2d(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t cout,
            int64_t H, int64_t W, int64_t Ho, int64_t Wo, int64_t KH, int64_t KW, int64_t ph,
            int64_t pw, int64_t dh, int64_t dw, uintptr_t stream) {
    if (cout % COB != 0 || CI * KH * KW * cout > MAX_W_FLOATS)
        throw std::runtime_error("conv2d: needs cout % 8 == 0 and weights <= 48 KB");
    if (N == 0 || Ho <= 0 || Wo <= 0) return;
    dim3 grid((unsigned)((Wo + TX - 1) / TX), (unsigned)((Ho + TY * RPT - 1) / (TY * RPT)), (unsigned)N);
    dim3 block(TX, TY);
    const size_t smem = sizeof(float) * CI * KH * KW * cout;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    auto f = [](uintptr_t p) { return reinterpret_cast<const float*>(p); };
    float* yp = reinterpret_cast<float*>(y);
    if (KH == 3 && KW == 5 && dh == 2)
        conv2d_ci3<3, 5, 2><<<grid, block, smem, st>>>(f(x), f(w), f(bias), yp, (int)cout, (int)H, (int)W,
                                                       (int)Ho, (int)Wo, (int)ph, (int)pw, (int)dw);
    else
        throw std::runtime_error("conv2d: only (3, 5) kernels with row dilation 2 are compiled here");
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("conv2d: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv2d", &conv2d, "stride-1 conv2d of an (N, 3, H, W) fp32 tensor, exact fp32 FMA");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")
KERNEL, ROW_DILATION = (3, 5), 2  # what the compiled kernel covers


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple, stride: int = 1,
                 padding: tuple = (0, 0), dilation: tuple = (1, 1), bias: bool = False):
        super().__init__()
        self.conv2d = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride,
                                padding=padding, dilation=dilation, bias=bias)
        c = self.conv2d  # the kernel covers 3 -> 8k channels, stride 1, one kernel size
        self.fast = (in_channels == 3 and out_channels % 8 == 0 and c.groups == 1
                     and 3 * KERNEL[0] * KERNEL[1] * out_channels <= 12288
                     and c.kernel_size == KERNEL and c.stride == (1, 1)
                     and c.dilation[0] == ROW_DILATION and isinstance(c.padding, tuple)
                     and c.padding_mode == "zeros")

    def forward(self, x):
        if not self.fast or x.dim() != 4 or x.shape[1] != 3 or x.dtype != torch.float32:
            return self.conv2d(x)
        x = x.contiguous()
        c = self.conv2d
        N, _, H, W = x.shape
        (kh, kw), (ph, pw), (dh, dw) = c.kernel_size, c.padding, c.dilation
        Ho, Wo = H + 2 * ph - dh * (kh - 1), W + 2 * pw - dw * (kw - 1)
        y = torch.empty(N, c.out_channels, Ho, Wo, device=x.device)
        _ext.conv2d(x.data_ptr(), c.weight.data_ptr(), 0 if c.bias is None else c.bias.data_ptr(),
                    y.data_ptr(), N, c.out_channels, H, W, Ho, Wo, kh, kw, ph, pw, dh, dw,
                    torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

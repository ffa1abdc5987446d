"""Direct 3x3x3 convolution, one output point per thread, weights in __constant__ memory.

The simplest fast layout for a 3-input-channel conv with 16 * 64 * 62^3 = 244M outputs (19.8 G
FMAs, 976 MB written): each thread owns one output position (n, od, oh, ow) and all 64 output
channels. It loads the 81 input values of its receptive field into registers once (neighbouring
threads along ow share them through L1), then for 4 channels at a time runs 4 independent chains
of 81 FMAs and stores each result at once; a warp's stores are 32 consecutive ow, so each is a
coalesced 128-byte segment. The 64 x 81 weights (20.7 KB) are copied into __constant__ memory on
the stream before each launch; every lane of a warp reads the same weight at the same time, the
case the constant cache serves at full speed, and all indices are compile-time constants.
What the SASS shows (cuobjdump, sm_90): ptxas does not fold the weights into the FFMAs as
constant-bank operands; it loads them two at a time into uniform registers (ULDC.64), so the
unrolled body is 5184 FFMA + ~2600 ULDC + ~500 other, about 61% FFMAs. Expected ~19.8 G / 0.61 /
(132 x 128 x ~1.75 GHz) ~ 1.1 ms: competitive with cuDNN's TF32 path at best. The main variant
fixes this by reusing each weight for 4 output rows from shared memory. All math is exact fp32 FMA
(no TF32). Other configurations (channels, kernel size, stride, padding, dilation, groups, bias)
run the module's own Conv3d.
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
constexpr int TW = 32, TH = 8;                                     // block: 32 ow x 8 oh

__constant__ float c_w[CO * TAPS];  // (co, ci, kd, kh, kw), as torch stores Conv3d weights

// x: (N, CI, D, H, W), y: (N, CO, D-2, H-2, W-2). grid = (tiles_w * tiles_h, Do, N).
__global__ void __launch_bounds__(TW * TH, 2) conv3d_k3(const float* __restrict__ x,
                                                        float* __restrict__ y, int D, int H, int W,
                                                        int tiles_w) {
    const int Do = D - 2, Ho = H - 2, Wo = W - 2;
    const int ow = (blockIdx.x % tiles_w) * TW + threadIdx.x;
    const int oh = (blockIdx.x / tiles_w) * TH + threadIdx.y;
    const int od = blockIdx.y, n = blockIdx.z;
    if (ow >= Wo || oh >= Ho) return;
    const int64_t plane = (int64_t)H * W;
    const float* xp = x + ((int64_t)n * CI * D + od) * plane + (int64_t)oh * W + ow;
    float in[TAPS];  // the receptive field, in weight order
    #pragma unroll
    for (int ci = 0; ci < CI; ++ci)
        #pragma unroll
        for (int kd = 0; kd < KS; ++kd)
            #pragma unroll
            for (int kh = 0; kh < KS; ++kh)
                #pragma unroll
                for (int kw = 0; kw < KS; ++kw)
                    in[((ci * KS + kd) * KS + kh) * KS + kw] =
                        __ldg(xp + ((int64_t)ci * D + kd) * plane + kh * W + kw);
    const int64_t oplane = (int64_t)Do * Ho * Wo;
    float* yp = y + (int64_t)n * CO * oplane + ((int64_t)od * Ho + oh) * Wo + ow;
    #pragma unroll
    for (int co = 0; co < CO; co += 4) {
        float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
        #pragma unroll
        for (int k = 0; k < TAPS; ++k) {
            a0 = fmaf(in[k], c_w[(co + 0) * TAPS + k], a0);
            a1 = fmaf(in[k], c_w[(co + 1) * TAPS + k], a1);
            a2 = fmaf(in[k], c_w[(co + 2) * TAPS + k], a2);
            a3 = fmaf(in[k], c_w[(co + 3) * TAPS + k], a3);
        }
        yp[(co + 0) * oplane] = a0;
        yp[(co + 1) * oplane] = a1;
        yp[(co + 2) * oplane] = a2;
        yp[(co + 3) * oplane] = a3;
    }
}

static void check(const char* what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// x: (N, 3, D, H, W) fp32 contiguous; w: (64, 3, 3, 3, 3) fp32 contiguous; y: (N, 64, D-2, H-2, W-2).
void conv3d(uintptr_t x, uintptr_t w, uintptr_t y, int64_t N, int64_t D, int64_t H, int64_t W,
            uintptr_t stream) {
    if (D < 3 || H < 3 || W < 3 || N > 65535 || D - 2 > 65535 || H * W > 0x7fffffff)
        throw std::runtime_error("conv3d: unsupported size");
    if (N == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    cudaMemcpyToSymbolAsync(c_w, reinterpret_cast<const void*>(w), sizeof(float) * CO * TAPS, 0,
                            cudaMemcpyDeviceToDevice, st);
    check("conv3d weights");
    const int tiles_w = (int)((W - 2 + TW - 1) / TW), tiles_h = (int)((H - 2 + TH - 1) / TH);
    dim3 grid((unsigned)(tiles_w * tiles_h), (unsigned)(D - 2), (unsigned)N);
    conv3d_k3<<<grid, dim3(TW, TH), 0, st>>>(reinterpret_cast<const float*>(x),
                                             reinterpret_cast<float*>(y), (int)D, (int)H, (int)W,
                                             tiles_w);
    check("conv3d_k3");
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv3d", &conv3d, "3x3x3 valid conv, 3 -> 64 channels, no bias (fp32)");
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
        _ext.conv3d(x.data_ptr(), c.weight.contiguous().data_ptr(), y.data_ptr(), N, D, H, W,
                    torch._C._cuda_getCurrentRawStream(x.get_device()))
        return y

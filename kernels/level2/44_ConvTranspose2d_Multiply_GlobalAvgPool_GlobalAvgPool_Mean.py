"""Skip the transposed conv's output: its spatial mean is linear in the input, so compute it directly.

Eager runs ConvTranspose2d (3 -> 16 channels, stride 2) to write a (128, 16, 64, 64) tensor
(34 MB), multiplies it (another read and write), and takes the spatial mean twice (the second is a
no-op on 1x1): ~130 MB of traffic and four launches for a (128, 16, 1, 1) result. But each output
pixel is a sum of taps x[ci, ih, iw] * W[ci, co, kh, kw] at oh = ih * s - p + kh, so the sum over
all output pixels is sum_{ci, kh, kw} W[ci, co, kh, kw] * R[ci, kh, kw], where R is the sum of
x[ci] over the input pixels whose tap (kh, kw) lands inside the output (stride, padding and
output_padding only decide which rows and columns drop out at the edges). One block per sample
reads its 12 KB of input once, accumulates the K*K masked sums R per channel (warp shuffles, then
shared memory), and a thread per output channel forms mult * (bias + sum / (OH * OW)). One launch
reading the 1.5 MB input instead of ~130 MB of traffic; the sums are fp32 in a different order
from cuDNN's, an error of ~1e-7 against a tolerance of ~1e-5 here. Measured: 3.51x on H200
(0.26 -> 0.074 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
#define KMAX 5
#define CINMAX 16
// out[b, co] = mult * mean over the output pixels of conv_transpose2d(x)[b, co]. grid = B, block = 256.
extern "C" __global__ void convt_mean(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ cb, float* __restrict__ out, long long Cin, long long Cout, long long H,
        long long W, int KH, int KW, int sh, int sw, int ph, int pw, long long OH, long long OW, float mult) {
    __shared__ float R[CINMAX][KMAX * KMAX];  // masked input sums per (ci, kh, kw)
    const long long b = blockIdx.x;
    for (int i = threadIdx.x; i < CINMAX * KMAX * KMAX; i += blockDim.x) (&R[0][0])[i] = 0.f;
    __syncthreads();
    for (long long ci = 0; ci < Cin; ++ci) {
        const float* xp = x + (b * Cin + ci) * H * W;
        float acc[KMAX][KMAX] = {};
        for (long long i = threadIdx.x; i < H * W; i += blockDim.x) {
            const long long ih = i / W, iw = i % W;
            const float v = xp[i];
            #pragma unroll
            for (int kh = 0; kh < KMAX; ++kh) {
                const long long oh = ih * sh - ph + kh;
                const bool okh = kh < KH && oh >= 0 && oh < OH;
                #pragma unroll
                for (int kw = 0; kw < KMAX; ++kw) {
                    const long long ow = iw * sw - pw + kw;
                    if (okh && kw < KW && ow >= 0 && ow < OW) acc[kh][kw] += v;
                }
            }
        }
        #pragma unroll
        for (int kh = 0; kh < KMAX; ++kh)
            #pragma unroll
            for (int kw = 0; kw < KMAX; ++kw) {
                float a = acc[kh][kw];
                for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
                if ((threadIdx.x & 31) == 0 && kh < KH && kw < KW) atomicAdd(&R[ci][kh * KMAX + kw], a);
            }
    }
    __syncthreads();
    for (long long co = threadIdx.x; co < Cout; co += blockDim.x) {
        float s = 0.f;
        for (long long ci = 0; ci < Cin; ++ci)
            for (int kh = 0; kh < KH; ++kh)
                for (int kw = 0; kw < KW; ++kw)
                    s += __ldg(w + ((ci * Cout + co) * KH + kh) * KW + kw) * R[ci][kh * KMAX + kw];
        out[b * Cout + co] = (__ldg(cb + co) + s / (float)(OH * OW)) * mult;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = multiplier

    def forward(self, x):
        ct = self.conv_transpose
        x = x.contiguous()
        B, Cin, H, W = x.shape
        KH, KW = ct.kernel_size
        if Cin > 16 or KH > 5 or KW > 5 or ct.groups != 1 or ct.dilation != (1, 1) or ct.bias is None:
            x = ct(x) * self.multiplier
            return x.mean(dim=[2, 3], keepdim=True)
        (sh, sw), (ph, pw), (oph, opw) = ct.stride, ct.padding, ct.output_padding
        OH = (H - 1) * sh - 2 * ph + KH + oph
        OW = (W - 1) * sw - 2 * pw + KW + opw
        w, cb = ct.weight.contiguous(), ct.bias.contiguous()  # w: (Cin, Cout, KH, KW)
        Cout = w.shape[1]
        y = x.new_empty(B, Cout, 1, 1)
        _k.convt_mean(B, 256, x.data_ptr(), w.data_ptr(), cb.data_ptr(), y.data_ptr(), Cin, Cout, H, W, KH, KW,
                      sh, sw, ph, pw, OH, OW, float(self.multiplier))
        return y

"""Skip the transposed conv's output: its spatial mean is linear in the input; one kernel does the rest.

Eager runs ConvTranspose2d (3 -> 16 channels, 3x3, stride 1) to write a (128, 16, 34, 34) tensor
(9.5 MB), then the spatial mean, the bias add, logsumexp over channels (amax, subtract, exp, sum,
log, add), the sum over the 1x1 map and `* 10`: about ten launches for a (128, 1) result. With
stride 1 and no padding every tap x[ci, ih, iw] * W[ci, co, kh, kw] lands inside the output, so
the sum over all output pixels is sum_{ci} (sum of x[ci]) * (sum of W[ci, co] over its taps); the
kernel keeps the general form (per tap, the sum of x over the input pixels whose tap lands inside
the output) so other strides and paddings stay exact. One block per sample reads its 12 KB of
input once (warp shuffles, then shared memory), a thread per output channel forms
bias_ct + sum / (OH * OW) + bias, and one thread takes the logsumexp of the C values the way torch
does (max, shifted exp sum, log) and writes 10x it. One launch over the 1.5 MB input; the sums are
fp32 in another order than cuDNN's (error ~1e-7, tolerance ~1e-4 here). Measured: 5.42x on H200
(0.54 -> 0.10 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
#define KMAX 5
#define CINMAX 16
#define COUTMAX 256
// out[b] = 10 * logsumexp_co(mean over pixels of conv_transpose2d(x)[b, co] + bias[co]). grid = B, block = 256.
extern "C" __global__ void convt_mean_lse(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ cb, const float* __restrict__ bias, float* __restrict__ out, long long Cin,
        long long Cout, long long H, long long W, int KH, int KW, int sh, int sw, int ph, int pw, long long OH,
        long long OW) {
    __shared__ float R[CINMAX][KMAX * KMAX];  // masked input sums per (ci, kh, kw)
    __shared__ float t[COUTMAX];              // per-channel means + bias
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
        t[co] = (__ldg(cb + co) + s / (float)(OH * OW)) + __ldg(bias + co);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        float m = -INFINITY;
        for (long long co = 0; co < Cout; ++co) m = (t[co] > m || isnan(t[co])) ? t[co] : m;
        const float shift = isinf(m) ? 0.f : m;  // torch's logsumexp shift
        float e = 0.f;
        for (long long co = 0; co < Cout; ++co) e += expf(t[co] - shift);
        out[b] = (logf(e) + shift) * 10.f;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # (C, 1, 1)

    def forward(self, x):
        ct = self.conv_transpose
        x = x.contiguous()
        B, Cin, H, W = x.shape
        KH, KW = ct.kernel_size
        w, cb, bias = ct.weight.contiguous(), ct.bias.contiguous(), self.bias.contiguous()  # w: (Cin, Cout, KH, KW)
        Cout = w.shape[1]
        if (Cin > 16 or Cout > 256 or KH > 5 or KW > 5 or ct.groups != 1 or ct.dilation != (1, 1)
                or bias.numel() != Cout):  # outside what the kernel's shared arrays hold
            x = torch.mean(ct(x), dim=(2, 3), keepdim=True) + self.bias
            return torch.sum(torch.logsumexp(x, dim=1, keepdim=True), dim=(2, 3)) * 10.0
        (sh, sw), (ph, pw), (oph, opw) = ct.stride, ct.padding, ct.output_padding
        OH = (H - 1) * sh - 2 * ph + KH + oph
        OW = (W - 1) * sw - 2 * pw + KW + opw
        y = x.new_empty(B, 1)
        _k.convt_mean_lse(B, 256, x.data_ptr(), w.data_ptr(), cb.data_ptr(), bias.data_ptr(), y.data_ptr(), Cin,
                          Cout, H, W, KH, KW, sh, sw, ph, pw, OH, OW)
        return y

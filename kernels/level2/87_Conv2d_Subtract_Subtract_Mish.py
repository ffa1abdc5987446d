"""The whole model in one kernel: a direct 3x3 convolution with the two subtractions and Mish in its epilogue.

Eager runs four kernels: the cuDNN convolution (plus its host-side setup), `x - 0.5`, `x - 0.2`
and Mish, the last three each a read and write of the (128, 16, 30, 30) conv output (7.4 MB). The
convolution is tiny: 3 input channels x 3 x 3 taps = 27 multiply-adds per output, 50 M in all. So
one thread per output (sample, channel, oh, ow) sums its 27 taps from the 1.5 MB input (a warp
shares one channel's weights, so L1 broadcasts them; adjacent threads read adjacent pixels), adds
the conv bias, subtracts the two constants in eager's order, applies Mish as torch writes it
(x * tanh(log1p(exp(x)))) and writes the result once. One launch instead of four, and the conv
output is never stored and re-read; the sums are plain fp32 FMAs (no TF32), as accurate as
cuDNN's fp32 path. The call is launch- and overhead-bound. Measured: 1.55x on H200
(0.18 -> 0.11 ms). Other conv settings (stride, padding, dilation, groups) take cuDNN and eager's
ops.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// x: (B, Ci, H, W); w: (Co, Ci, KH, KW), stride 1, no padding; y: (B, Co, OH, OW), one thread per output.
extern "C" __global__ void conv_sub_sub_mish(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ cb, float* __restrict__ y, float v1, float v2, int Ci, long long H, long long W,
        int KH, int KW, long long Co, long long OH, long long OW, long long n) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, co = j / (OW * OH) % Co, b = j / (OW * OH * Co);
    float acc = 0.f;
    for (int ci = 0; ci < Ci; ++ci) {
        const float* xp = x + ((b * Ci + ci) * H + oh) * W + ow;
        const float* wp = w + (co * Ci + ci) * KH * KW;
        for (int kh = 0; kh < KH; ++kh)
            for (int kw = 0; kw < KW; ++kw) acc = fmaf(xp[kh * W + kw], __ldg(wp + kh * KW + kw), acc);
    }
    float v = acc + cb[co];                 // conv
    v = v - v1;                             // - subtract_value_1
    v = v - v2;                             // - subtract_value_2
    y[j] = v * tanhf(log1pf(expf(v)));      // F.mish
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract_value_1, subtract_value_2):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value_1 = subtract_value_1
        self.subtract_value_2 = subtract_value_2

    def forward(self, x):
        c = self.conv
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros"):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return F.mish(x - self.subtract_value_1 - self.subtract_value_2)
        x = x.contiguous()
        B, Ci, H, W = x.shape
        Co, _, KH, KW = c.weight.shape
        y = x.new_empty(B, Co, H - KH + 1, W - KW + 1)
        n = y.numel()
        _k.conv_sub_sub_mish((n + 255) // 256, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(), y.data_ptr(),
                             float(self.subtract_value_1), float(self.subtract_value_2), Ci, H, W, KH, KW, Co,
                             H - KH + 1, W - KW + 1, n)
        return y

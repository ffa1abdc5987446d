"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then LeakyReLU, the per-channel
multiply, LeakyReLU and the 2x2x2 max pool in one CUDA kernel.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 19.1x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (16 -> 32 channels, 3x3x3, stride 2) runs on the CUDA cores, which made the strict version
0.55x on H200 (1.41 -> 2.58 ms), slower than eager by 1.2 ms where the fused kernel moves ~300 MB
(~0.06 ms at H200 bandwidth). TF32 + bf16 gets fp32 accuracy from the tensor cores at about two TF32
convolutions' work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits
exactly and the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and
only the last term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of
two TF32 numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the result, run as
one bf16 convolution over twice the input channels (cat([xh, xl]) against cat([wl, wh]),
cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the
result. 3xTF32, the same three products as one TF32 convolution over three times the channels, is
three TF32 convolutions' work.

The epilogue is unchanged. The ConvTranspose3d output is (16, 32, 32, 64, 64): 67M floats, 268 MB.
Eager then runs four kernels over it: LeakyReLU (read 268 MB, write 268 MB), `x * multiplier` (read,
write), LeakyReLU again (read, write) and MaxPool3d(2) (read 268 MB, write 34 MB): about 1.9 GB of
traffic and three 268 MB temporaries. Here one thread per pooled output (8.4M threads) reads its
2x2x2 window once, applies leaky(leaky(v) * m_c) to each value in registers and keeps the max (NaN
propagates, as in torch's max pool): 268 MB read and 34 MB written, ~6x less traffic after the conv.
All fp32 with the same operations as eager, so the result matches exactly up to the conv. With
3xTF32 this file measured 1.06x over eager on the H200 (1.41 -> 1.32 ms); this version is not yet
measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float leaky(float v, float s) { return v > 0.f ? v : v * s; }

// Thread per output (n, c, od, oh, ow) of (N, C, OD, OH, OW); x is (N, C, D, H, W), window 2x2x2.
extern "C" __global__ void leaky_mul_leaky_maxpool(const float* __restrict__ x, const float* __restrict__ mult,
        float* __restrict__ y, long long C, long long D, long long H, long long W, long long OD, long long OH,
        long long OW, float slope, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long ow = i % OW, oh = i / OW % OH, od = i / (OW * OH) % OD, p = i / (OW * OH * OD);  // p = n*C + c
    const float m = mult[p % C];
    const float* xb = x + ((p * D + 2 * od) * H + 2 * oh) * W + 2 * ow;
    float best = -INFINITY;
    #pragma unroll
    for (int a = 0; a < 2; ++a)
        #pragma unroll
        for (int b = 0; b < 2; ++b) {
            const float2 v = *reinterpret_cast<const float2*>(xb + (a * H + b) * W);  // 2 * ow is even: 8-byte aligned
            const float u0 = leaky(leaky(v.x, slope) * m, slope), u1 = leaky(leaky(v.y, slope) * m, slope);
            best = (u0 > best || u0 != u0) ? u0 : best;
            best = (u1 > best || u1 != u1) ? u1 : best;
        }
    y[i] = best;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, multiplier_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU(negative_slope=0.2)
        self.max_pool = nn.MaxPool3d(kernel_size=2)

    def forward(self, x):
        ct = self.conv_transpose
        c = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, ct.weight, ct.bias, stride=ct.stride, padding=ct.padding,
                               output_padding=ct.output_padding, dilation=ct.dilation).contiguous()  # (B, C, D, H, W)
        B, C, D, H, W = c.shape
        if self.multiplier.numel() != C or W % 2 != 0 or c.data_ptr() % 8 != 0:  # kernel: one scale per channel
            return self.max_pool(self.leaky_relu(self.leaky_relu(c) * self.multiplier))
        y = torch.empty(B, C, D // 2, H // 2, W // 2, device=c.device, dtype=c.dtype)
        n = y.numel()
        _k.leaky_mul_leaky_maxpool((n + 255) // 256, 256, c.data_ptr(), self.multiplier.data_ptr(), y.data_ptr(),
                                   C, D, H, W, D // 2, H // 2, W // 2, self.leaky_relu.negative_slope, n)
        return y

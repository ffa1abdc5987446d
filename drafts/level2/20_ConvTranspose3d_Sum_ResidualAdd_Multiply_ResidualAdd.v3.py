"""ConvTranspose3d without its bias as a TF32 and a bf16 cuDNN call (TF32 + bf16), then one kernel for
((c + bias) + c) * c + c.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 38.3x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.60x on H200 (2.92 -> 4.88 ms) although
the fused pass below saves ~4.4 GB of traffic (~0.9 ms). TF32 + bf16 gets fp32 accuracy from the
tensor cores at about two TF32 convolutions' work: split x = xh + xl and w = wh + wl, where xh and
wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of them; then x*w =
xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped. xh*wh runs on
TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32; the two cross
terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels (cat([xh,
xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit
mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32 convolution over
three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. With c the transposed convolution's output (16, 64, 32, 64, 64) -- 134M
elements, 537 MB -- eager runs a separate add of the conv's own bias (PyTorch adds it after cuDNN
returns), the clone, `+ bias`, `+ original`, `* original` and `+ original`: six passes, most reading
two 537 MB tensors, ~5.5 GB of traffic. Here the conv runs with bias=None and one kernel computes c
= conv + b_conv[ch], then ((c + bias[ch]) + c) * c + c in registers, in the reference's order
(bit-identical apart from the conv; the clone/detach only matters for gradients), reading and
writing the tensor once (~1.07 GB, ~0.25 ms at H200 bandwidth). Each thread handles a float4 (the
32*64*64 plane is a multiple of 4), and the grid is (x, C, N), so the channel comes from the block
index with no per-element division. With 3xTF32 this file measured 1.87x over eager on the H200
(2.96 -> 1.58 ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float f(float c, float b) { return ((c + b) + c) * c + c; }

extern "C" __global__ void chain4(const float4* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float4* __restrict__ y, long long C, long long inner4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // float4 index in the plane
    if (i >= inner4) return;
    const long long ch = blockIdx.y, plane = blockIdx.z * C + ch;  // grid (x, C, N): no division
    const float b0 = cb[ch], b = bias[ch];
    float4 v = x[plane * inner4 + i];
    v.x += b0; v.y += b0; v.z += b0; v.w += b0;  // the conv's own bias
    y[plane * inner4 + i] = make_float4(f(v.x, b), f(v.y, b), f(v.z, b), f(v.w, b));
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, D', H', W')
        if inner % 4 or x.data_ptr() % 16 or y.data_ptr() % 16:  # planes not float4-aligned
            x = x + c.bias.view(1, -1, 1, 1, 1)
            return ((x + self.bias) + x) * x + x
        _k.chain4(((inner // 4 + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                  self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner // 4)
        return y

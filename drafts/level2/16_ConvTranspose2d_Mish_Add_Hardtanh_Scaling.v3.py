"""ConvTranspose2d without its bias as a TF32 and a bf16 cuDNN call (TF32 + bf16), then one kernel for
Mish, add, Hardtanh and scale.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 1.9x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.63x on H200 (0.31 -> 0.50 ms) although
the fused kernel below saves ~290 MB of traffic (~0.06 ms at H200 bandwidth). TF32 + bf16 gets fp32
accuracy from the tensor cores at about two TF32 convolutions' work: split x = xh + xl and w = wh +
wl, where xh and wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of
them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped.
xh*wh runs on TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32;
the two cross terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels
(cat([xh, xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where
bf16's 8-bit mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32
convolution over three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. Eager runs the transposed convolution, a separate add of its own bias
(PyTorch adds it after cuDNN returns), Mish, `+ add_value`, Hardtanh and `* scale`: five passes that
each read and write the (128, 64, 33, 33) activation (35.7 MB), ~360 MB of traffic. Here the conv
runs with bias=None and one kernel applies all of it in registers in the reference's order, mish(v)
= v * tanh(log1p(exp(v))) as torch's CUDA kernel writes it, reading and writing the activation once
(~71 MB). The grid is (x, C, N), so the channel comes from the block index. With 3xTF32 this file
measured 0.63x over eager (0.298 -> 0.475 ms) on the H200, no faster than the library's strict-fp32
version; this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void chain(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long inner, float add, float scale) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    float v = x[plane * inner + i] + cb[c];       // the conv's own bias
    v = v * tanhf(log1pf(expf(v))) + add;         // mish, then + add_value
    v = v != v ? v : fminf(fmaxf(v, -1.f), 1.f);  // hardtanh(-1, 1), NaN stays NaN
    y[plane * inner + i] = v * scale;
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, add_value, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, output_padding)
        self.add_value = add_value
        self.scale = scale

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose2d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, H', W')
        _k.chain(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(), C,
                 inner, float(self.add_value), float(self.scale))
        return y

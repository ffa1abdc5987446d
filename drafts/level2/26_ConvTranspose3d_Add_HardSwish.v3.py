"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then the add and y * hardswish(y) in
one float4 pass.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 3.4x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.38x on H200 (4.05 -> 10.75 ms). TF32 +
bf16 gets fp32 accuracy from the tensor cores at about two TF32 convolutions' work: split x = xh +
xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and the low parts are at
most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20
relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of two TF32 numbers is exact
and the sums are fp32; the two cross terms, ~2^-11 of the result, run as one bf16 convolution over
twice the input channels (cat([xh, xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's
twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the result. 3xTF32, the same three
products as one TF32 convolution over three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged: eager writes the conv output, then the add, hardswish and multiply each
read and write the 1 GB output (~8 GB); one kernel that reads the conv output and add_input with
128-bit loads and writes y * hardswish(y) moves 3 GB. The arithmetic is torch's: hardswish(y) = y *
min(max(y + 3, 0), 6) / 6. The unused `bias` parameter is kept so the parameter list matches. With
3xTF32 this file measured 1.14x over eager on the H200 (4.06 -> 3.57 ms); this version is not yet
measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float f(float a, float b) {
    const float y = a + b;
    return y * (y * fminf(fmaxf(y + 3.f, 0.f), 6.f) / 6.f);  // y * F.hardswish(y)
}

extern "C" __global__ void add_hswish4(const float4* __restrict__ x, const float4* __restrict__ a,
                                       float4* __restrict__ y, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 u = __ldg(x + i), v = __ldg(a + i);
    y[i] = make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w));
}

extern "C" __global__ void add_hswish(const float* __restrict__ x, const float* __restrict__ a,
                                      float* __restrict__ y, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f(x[i], a[i]);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # unused in forward, as in the task

    def forward(self, x, add_input):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, 2D, 2H, 2W)
        if add_input.shape != x.shape:  # a broadcasting add: leave it to torch
            y = x + add_input
            return y * torch.nn.functional.hardswish(y)
        a = add_input.contiguous()
        y = torch.empty_like(x)
        n, xp, ap, yp = x.numel(), x.data_ptr(), a.data_ptr(), y.data_ptr()
        if n % 4 == 0 and (xp | ap | yp) % 16 == 0:
            _k.add_hswish4((n // 4 + 255) // 256, 256, xp, ap, yp, n // 4)
        else:
            _k.add_hswish((n + 255) // 256, 256, xp, ap, yp, n)
        return y

"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then the clamp and the divide in one
float4 kernel.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 22.9x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (32 -> 16 channels, 3x3x3, ~7 GFLOP) runs on the CUDA cores, which made the strict version
0.47x on H200 (0.72 -> 1.55 ms), slower than eager by 0.8 ms where the fused pass (~250 MB) costs
~0.05 ms at H200 bandwidth. TF32 + bf16 gets fp32 accuracy from the tensor cores at about two TF32
convolutions' work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits
exactly and the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and
only the last term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of
two TF32 numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the result, run as
one bf16 convolution over twice the input channels (cat([xh, xl]) against cat([wl, wh]),
cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the
result. 3xTF32, the same three products as one TF32 convolution over three times the channels, is
three TF32 convolutions' work.

The epilogue is unchanged. The transposed conv writes (16, 16, 31, 63, 63): 126 MB. Eager then runs
torch.clamp(min) and the divide, each a full read and write of it: ~500 MB of DRAM traffic and two
launches after the head. The fused kernel reads the conv output once with float4 loads and writes
the result once (~250 MB), computing max(v, min_value) (NaN kept, as torch.clamp keeps it) and then
v / divisor, the same two roundings in the same order as eager. One launch instead of two and half
the epilogue traffic, ~60 us saved at H200 bandwidth. With 3xTF32 this file measured 0.62x over
eager on the H200 (0.741 -> 1.19 ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float epi(float v, float lo, float d) {
    v = v < lo ? lo : v;  // torch.clamp(min=lo); NaN stays NaN
    return v / d;
}

extern "C" __global__ void clamp_div4(const float4* __restrict__ x, float4* __restrict__ y, float lo, float d,
        long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_float4(epi(v.x, lo, d), epi(v.y, lo, d), epi(v.z, lo, d), epi(v.w, lo, d));
}

extern "C" __global__ void clamp_div1(const float* __restrict__ x, float* __restrict__ y, float lo, float d,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = epi(x[i], lo, d);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, min_value, divisor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.min_value = min_value
        self.divisor = divisor

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, 31, 63, 63)
        y = torch.empty_like(x)
        n = x.numel()
        lo, d = float(self.min_value), float(self.divisor)
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.clamp_div4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), lo, d, n // 4)
        else:
            _k.clamp_div1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), lo, d, n)
        return y

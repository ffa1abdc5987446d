"""ConvTranspose2d as three TF32 products in one cuDNN call (3xTF32), then the add, min with
0, GELU and multiply in one float4 kernel.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 92.0x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.79x on H200 (0.47 -> 0.60 ms) while the
fused kernel below moves ~71 MB (~0.015 ms at H200 bandwidth). 3xTF32 gets fp32 accuracy from the
tensor cores: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits
exactly and the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and
only the last term (~2^-20 relative) is dropped. The three products run as one convolution over 96
input channels instead of 32: cat([xh, xh, xl]) against cat([wh, wl, wh]) (cudal1.conv_3xtf32),
three times TF32's work where fp32 is ~8x slower at peak.

The epilogue is unchanged. The transposed conv writes (128, 16, 66, 66), 35.7 MB. Eager then runs
four elementwise kernels (add, minimum against a 0-dim tensor, GELU, multiply), each a read and
write of the whole tensor: ~285 MB of traffic and four launches after the head. The fused kernel
reads the conv output once with float4 loads and writes the result once (~71 MB), applying
v + add_value, min(v, 0) (NaN kept, as torch.min keeps it), the exact erf GELU and
* multiply_value in eager's order. One launch instead of four and a quarter of the epilogue
traffic. Not yet measured on the H200.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float epi(float v, float add, float mul) {
    v = v + add;
    v = v > 0.f ? 0.f : v;  // torch.min(x, 0): NaN stays NaN
    v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // F.gelu, erf form
    return v * mul;
}

extern "C" __global__ void epilogue4(const float4* __restrict__ x, float4* __restrict__ y, float add, float mul,
        long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_float4(epi(v.x, add, mul), epi(v.y, add, mul), epi(v.z, add, mul), epi(v.w, add, mul));
}

extern "C" __global__ void epilogue1(const float* __restrict__ x, float* __restrict__ y, float add, float mul,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = epi(x[i], add, mul);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, add_value, multiply_value):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_3xtf32(F.conv_transpose2d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, 66, 66)
        y = torch.empty_like(x)
        n = x.numel()
        add, mul = float(self.add_value), float(self.multiply_value)
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.epilogue4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n // 4)
        else:
            _k.epilogue1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n)
        return y

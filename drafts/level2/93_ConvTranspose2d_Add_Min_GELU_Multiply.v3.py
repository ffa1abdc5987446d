"""ConvTranspose2d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then the add, min with 0, GELU and
multiply in one float4 kernel.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 92.0x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.79x on H200 (0.47 -> 0.60 ms) while the
fused kernel below moves ~71 MB (~0.015 ms at H200 bandwidth). TF32 + bf16 gets fp32 accuracy from
the tensor cores at about two TF32 convolutions' work: split x = xh + xl and w = wh + wl, where xh
and wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of them; then x*w =
xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped. xh*wh runs on
TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32; the two cross
terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels (cat([xh,
xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit
mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32 convolution over
three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. The transposed conv writes (128, 16, 66, 66), 35.7 MB. Eager then runs
four elementwise kernels (add, minimum against a 0-dim tensor, GELU, multiply), each a read and
write of the whole tensor: ~285 MB of traffic and four launches after the head. The fused kernel
reads the conv output once with float4 loads and writes the result once (~71 MB), applying v +
add_value, min(v, 0) (NaN kept, as torch.min keeps it), the exact erf GELU and * multiply_value in
eager's order. One launch instead of four and a quarter of the epilogue traffic. With 3xTF32 this
file measured 0.61x over eager (0.339 -> 0.557 ms) on the H200, no faster than the library's
strict-fp32 version; this version is not yet measured.
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
        x = cudal1.conv_tf32_bf16(F.conv_transpose2d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, 66, 66)
        y = torch.empty_like(x)
        n = x.numel()
        add, mul = float(self.add_value), float(self.multiply_value)
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.epilogue4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n // 4)
        else:
            _k.epilogue1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n)
        return y

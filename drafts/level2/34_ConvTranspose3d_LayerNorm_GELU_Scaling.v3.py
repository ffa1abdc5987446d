"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then LayerNorm over the last dim,
GELU and the scale in one pass: a warp per row.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 16.6x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (kernel 4, stride 2) runs on the CUDA cores, which made the strict version 0.40x on H200 (37.17
-> 92.79 ms), slower than eager by 55 ms where the fused pass (8.6 GB) costs ~2 ms at H200
bandwidth. TF32 + bf16 gets fp32 accuracy from the tensor cores at about two TF32 convolutions'
work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and
the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last
term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of two TF32
numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the result, run as one bf16
convolution over twice the input channels (cat([xh, xl]) against cat([wl, wh]),
cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the
result. 3xTF32, the same three products as one TF32 convolution over three times the channels, is
three TF32 convolutions' work.

The epilogue is unchanged. The conv output is (128, 64, 32, 64, 64): 1.07G floats, 4.3 GB. Eager
then runs LayerNorm (a read and a write), GELU (another) and the multiply by scaling_factor
(another, even at 1.0): about 26 GB of traffic, ~6 ms at ~4.3 TB/s, on top of the conv.
LayerNorm(64) normalises the last dim (the width), so each 64-float row is contiguous and
independent: one warp owns one row, each lane holds 2 of its values in registers, the mean and then
the centred variance come from warp shuffles (two passes over registers, no shared memory), and the
lane writes GELU((v - mean) * rstd * w + b) * scale with the exact erf GELU. The conv output is read
once and the result written once (8.6 GB, ~2 ms), a third of eager's epilogue traffic, two launches
fewer, and 16.8M short rows spread as one warp each over every SM. Rows over 256 floats take the
eager path. With 3xTF32 this file measured 1.91x over eager on the H200 (37 -> 19.4 ms); this
version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
#define PER 8  // values per lane in registers: rows up to 256
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Warp r owns row r of x (R, L): y = gelu((x - mean) * rstd * w + b) * s.
extern "C" __global__ void ln_gelu_scale(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ b, float* __restrict__ y, long long R, long long L, float eps, float s) {
    const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= R) return;  // whole warps leave together
    const float* xr = x + row * L;
    float v[PER], sum = 0.f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long i = lane + 32 * k;
        v[k] = i < L ? xr[i] : 0.f;
        sum += v[k];
    }
    const float mean = warp_sum(sum) / (float)L;
    float q = 0.f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) if (lane + 32 * k < L) { const float d = v[k] - mean; q += d * d; }
    const float rstd = rsqrtf(warp_sum(q) / (float)L + eps);
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long i = lane + 32 * k;
        if (i < L) {
            const float t = (v[k] - mean) * rstd * w[i] + b[i];
            y[row * L + i] = t * 0.5f * (1.f + erff(t * 0.70710678118654752f)) * s;  // F.gelu, erf form
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True, eps=1e-5, scaling_factor=1.0):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.layer_norm = nn.LayerNorm(out_channels, eps=eps)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        c = self.conv_transpose
        x = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, c.weight, c.bias, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, C, D, H, W)
        ln = self.layer_norm
        L = ln.weight.numel()
        if x.shape[-1] != L or L > 256 or x.numel() == 0:
            return F.gelu(ln(x)) * self.scaling_factor
        y = torch.empty_like(x)
        R = x.numel() // L
        _k.ln_gelu_scale((R * 32 + 255) // 256, 256, x.data_ptr(), ln.weight.data_ptr(), ln.bias.data_ptr(),
                         y.data_ptr(), R, L, ln.eps, self.scaling_factor)
        return y

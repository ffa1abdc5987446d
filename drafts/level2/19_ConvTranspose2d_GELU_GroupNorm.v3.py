"""ConvTranspose2d without its bias as a TF32 and a bf16 cuDNN call (TF32 + bf16), then one block per
(n, group) for bias, GELU and GroupNorm.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 14.7x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (8.6 GFLOP) runs on the CUDA cores, which made the strict version 0.36x on H200, while its
fused kernel moves one read and one write of 143 MB (~0.06 ms at H200 bandwidth). TF32 + bf16 gets
fp32 accuracy from the tensor cores at about two TF32 convolutions' work: split x = xh + xl and w =
wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of
them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped.
xh*wh runs on TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32;
the two cross terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels
(cat([xh, xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where
bf16's 8-bit mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32
convolution over three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. Eager adds the conv's own bias after cuDNN returns, applies GELU, then
GroupNorm (a statistics pass and an apply pass): each pass reads, and most write, the (128, 64, 66,
66) activation (143 MB), ~700 MB of traffic and four launches after the conv. Here one kernel gives
each (n, group) -- 8 channels x 66 x 66 = 34,848 contiguous floats (139 KB) -- a block of 1024
threads. Pass 1 adds the bias, applies GELU (erf form), writes the result into the output as scratch
and sums v and v^2 in double (so E[v^2] - E[v]^2 loses nothing to cancellation); a warp-shuffle
block reduction gives the mean and biased variance; pass 2 re-reads the scratch (its own writes,
still in L2: at most 2 resident blocks per SM, 264 x 139 KB = 37 MB, fit the 50 MB L2) and writes (v
- mean) * rstd * weight[c] + bias[c] over it. DRAM sees one read and one write of the activation,
~420 MB less traffic than eager's epilogue. With 3xTF32 this file measured 0.80x over eager on the
H200 (0.661 -> 0.829 ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ double block_sum(double v, double* sh) {  // every thread gets the block's total
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read by an earlier call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
    return t;
}

// One block per (n, g); a group is cpg channels of HW floats, contiguous. x has no conv bias yet.
extern "C" __global__ void __launch_bounds__(1024) gelu_groupnorm(const float* __restrict__ x,
        const float* __restrict__ cb, const float* __restrict__ gamma, const float* __restrict__ beta,
        float* __restrict__ y, long long G, long long cpg, long long HW, float eps) {
    __shared__ double sh[32];
    const long long ng = blockIdx.x, c0 = (ng % G) * cpg, size = cpg * HW;
    const float* xg = x + ng * size;
    float* yg = y + ng * size;
    double s1 = 0.0, s2 = 0.0;
    for (long long cl = 0; cl < cpg; ++cl) {  // channel by channel: no per-element division
        const float b = cb[c0 + cl];
        for (long long i = cl * HW + threadIdx.x; i < (cl + 1) * HW; i += blockDim.x) {
            float v = xg[i] + b;
            v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // GELU, erf form
            yg[i] = v;  // scratch: the same thread reads it back below
            s1 += v; s2 += (double)v * v;
        }
    }
    const double mean = block_sum(s1, sh) / size;
    const double var = fmax(block_sum(s2, sh) / size - mean * mean, 0.0);  // biased, as GroupNorm
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
    for (long long cl = 0; cl < cpg; ++cl) {
        const float g = gamma[c0 + cl] * rstd, be = beta[c0 + cl];
        for (long long i = cl * HW + threadIdx.x; i < (cl + 1) * HW; i += blockDim.x)
            yg[i] = (yg[i] - m) * g + be;
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        c, gn = self.conv_transpose, self.group_norm
        x = cudal1.conv_tf32_bf16(F.conv_transpose2d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation).contiguous()  # (B, 64, 66, 66)
        N, C, H, W = x.shape
        G = gn.num_groups
        y = torch.empty_like(x)
        _k.gelu_groupnorm(N * G, 1024, x.data_ptr(), c.bias.data_ptr(), gn.weight.data_ptr(),
                          gn.bias.data_ptr(), y.data_ptr(), G, C // G, H * W, float(gn.eps))
        return y

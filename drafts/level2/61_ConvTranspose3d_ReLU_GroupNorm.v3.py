"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then ReLU and GroupNorm in one CUDA
kernel: a block per group.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 26.9x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (64 -> 128 channels, 3x3x3) runs on the CUDA cores, which made the strict version 0.38x on
H200, while its fused kernel moves ~53 MB from DRAM (~0.01 ms at H200 bandwidth). TF32 + bf16 gets
fp32 accuracy from the tensor cores at about two TF32 convolutions' work: split x = xh + xl and w =
wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of
them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped.
xh*wh runs on TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32;
the two cross terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels
(cat([xh, xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where
bf16's 8-bit mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32
convolution over three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. Eager runs the ConvTranspose3d (64 -> 128 channels, output (16, 128, 10,
18, 18) = 26.5 MB), ReLU (a read and a write of 26.5 MB) and GroupNorm (a statistics kernel that
reads it and a normalize kernel that reads it again and writes the result). Here one block of 1024
threads owns one (sample, group) slice -- 16 channels x 3240 positions = 51840 contiguous floats,
207 KB -- and makes three sweeps over it with ReLU applied on the fly: the mean, then the variance
as the mean of squared deviations (two-pass, as accurate as torch's Welford), then the write of
(relu(v) - mean) * rstd * gamma[c] + beta[c]. The second and third sweeps hit the 50 MB L2, so DRAM
sees about one read and one write of the tensor instead of four reads and two writes, and no ReLU
temporary is allocated. With 3xTF32 this file measured 0.64x over eager on the H200 (0.472 -> 0.735
ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read from the previous call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
    return t;
}

// Block b = n * G + g owns x[n, g*cpg : (g+1)*cpg, :] (cpg * S contiguous floats).
extern "C" __global__ void relu_groupnorm(const float* __restrict__ x, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* __restrict__ y, long long C, long long G, long long S,
        float eps) {
    __shared__ float sh[32];
    const long long cpg = C / G, L = cpg * S;
    const long long g = blockIdx.x % G;
    const float* xs = x + blockIdx.x * L;
    float* ys = y + blockIdx.x * L;
    float s = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) s += fmaxf(xs[i], 0.f);
    const float mean = block_sum(s, sh) / (float)L;
    float q = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) { const float d = fmaxf(xs[i], 0.f) - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, sh) / (float)L + eps);
    for (long long i = threadIdx.x; i < L; i += blockDim.x) {
        const long long c = g * cpg + i / S;
        ys[i] = (fmaxf(xs[i], 0.f) - mean) * rstd * gamma[c] + beta[c];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, bias=False):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, bias=bias)
        self.relu = nn.ReLU()
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels)

    def forward(self, x):
        ct = self.conv_transpose
        c = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, ct.weight, ct.bias, stride=ct.stride, padding=ct.padding,
                               output_padding=ct.output_padding, dilation=ct.dilation).contiguous()  # (B, C, D, H, W)
        gn = self.group_norm
        B, C = c.shape[:2]
        y = torch.empty_like(c)
        # NaN note: fmaxf(NaN, 0) = 0 where torch.relu keeps NaN; inputs are finite here.
        _k.relu_groupnorm(B * gn.num_groups, 1024, c.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                          y.data_ptr(), C, gn.num_groups, c[0, 0].numel(), gn.eps)
        return y

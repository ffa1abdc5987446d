"""ConvTranspose3d as a TF32 and a bf16 cuDNN call (TF32 + bf16), then the scale, training-mode
BatchNorm and the global average pool from per-plane sums alone: two small kernels, and the
normalized tensor is never written.

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 7.6x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv runs on the CUDA cores, which made the strict version 0.66x on H200 (1.53 -> 2.32 ms) while the
two kernels below read ~43 MB (~0.01 ms at H200 bandwidth). TF32 + bf16 gets fp32 accuracy from the
tensor cores at about two TF32 convolutions' work: split x = xh + xl and w = wh + wl, where xh and
wh keep TF32's 10 mantissa bits exactly and the low parts are at most 2^-10 of them; then x*w =
xh*wh + xh*wl + xl*wh + xl*wl, and only the last term (~2^-20 relative) is dropped. xh*wh runs on
TF32 tensor cores, where a product of two TF32 numbers is exact and the sums are fp32; the two cross
terms, ~2^-11 of the result, run as one bf16 convolution over twice the input channels (cat([xh,
xl]) against cat([wl, wh]), cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit
mantissa costs ~2^-19 of the result. 3xTF32, the same three products as one TF32 convolution over
three times the channels, is three TF32 convolutions' work.

The epilogue is unchanged. The ConvTranspose3d output is (16, 32, 18, 34, 34): 10.6M floats, 42.6
MB. Eager then runs `x * scale_factor` (read, write 42.6 MB), BatchNorm (a statistics pass and a
normalize pass that writes another 42.6 MB) and the global average pool (one more read). BatchNorm
is a per-channel affine map and the pool is a mean, so with m_nc the mean of plane (n, c) of y = s x
and m_c, v_c the batch mean and biased variance of channel c, the output is out[n, c] = (m_nc - m_c)
* gamma_c / sqrt(v_c + eps) + beta_c. So: (1) one block per (sample, channel) plane sums x and x^2
(fp32 per thread, double across the block), scaled by s and s^2; (2) one block per channel combines
its 16 planes in double, updates running_mean/running_var as torch does (momentum, unbiased
variance), and writes the 16 outputs. The 42.6 MB is read once after the conv instead of four times,
with two writes saved. With 3xTF32 this file measured 0.93x over eager on the H200 (1.61 -> 1.73
ms); this version is not yet measured.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block p = n * C + c: ws[p] = (sum s*x, sum (s*x)^2) over the S floats of plane p.
extern "C" __global__ void plane_sums(const float* __restrict__ x, double2* __restrict__ ws, long long S, float s) {
    __shared__ double sh[2][32];
    const float* xp = x + blockIdx.x * S;
    float s1 = 0.f, s2 = 0.f;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) { const float v = xp[i]; s1 += v; s2 += v * v; }
    double d1 = warp_sum((double)s1), d2 = warp_sum((double)s2);
    if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = d1; sh[1][threadIdx.x >> 5] = d2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        d1 = d2 = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { d1 += sh[0][w]; d2 += sh[1][w]; }
        ws[blockIdx.x] = make_double2(d1 * (double)s, d2 * (double)s * (double)s);
    }
}

// Block c (one warp): channel statistics, running-stat update, out[n, c] for every n.
extern "C" __global__ void bn_pool(const double2* __restrict__ ws, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* rmean, float* rvar, float* __restrict__ out,
        long long N, long long C, long long S, float eps, float mom) {
    const long long c = blockIdx.x;
    double s1 = 0.0, s2 = 0.0;
    for (long long n = threadIdx.x; n < N; n += 32) { const double2 v = ws[n * C + c]; s1 += v.x; s2 += v.y; }
    s1 = warp_sum(s1); s2 = warp_sum(s2);
    const double cnt = (double)N * (double)S, mean = s1 / cnt, var = fmax(s2 / cnt - mean * mean, 0.0);
    const double a = (double)gamma[c] / sqrt(var + (double)eps);
    for (long long n = threadIdx.x; n < N; n += 32)
        out[n * C + c] = (float)((ws[n * C + c].x / (double)S - mean) * a + (double)beta[c]);
    if (threadIdx.x == 0) {
        rmean[c] = (1.f - mom) * rmean[c] + mom * (float)mean;
        rvar[c] = (1.f - mom) * rvar[c] + mom * (float)(var * cnt / fmax(cnt - 1.0, 1.0));
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor, eps=1e-5, momentum=0.1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor
        self.batch_norm = nn.BatchNorm3d(out_channels, eps=eps, momentum=momentum)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))

    def forward(self, x):
        m = self.conv_transpose
        c = cudal1.conv_tf32_bf16(F.conv_transpose3d, x, m.weight, m.bias, stride=m.stride, padding=m.padding,
                               output_padding=m.output_padding, dilation=m.dilation).contiguous()  # (B, C, D, H, W)
        bn = self.batch_norm
        if not (self.training and bn.track_running_stats and bn.affine and bn.running_mean is not None):
            return self.global_avg_pool(bn(c * self.scale_factor))
        B, C = c.shape[:2]
        S = c[0, 0].numel()
        bn.num_batches_tracked.add_(1)
        mom = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
        ws = torch.empty(2 * B * C, device=c.device, dtype=torch.float64)  # per plane (sum, sum sq) of s*x
        out = torch.empty(B, C, 1, 1, 1, device=c.device, dtype=c.dtype)
        _k.plane_sums(B * C, 512, c.data_ptr(), ws.data_ptr(), S, float(self.scale_factor))
        _k.bn_pool(C, 32, ws.data_ptr(), bn.weight.data_ptr(), bn.bias.data_ptr(), bn.running_mean.data_ptr(),
                   bn.running_var.data_ptr(), out.data_ptr(), B, C, S, bn.eps, mom)
        return out

"""ConvTranspose2d without its bias as a TF32 and a bf16 cuDNN call (TF32 + bf16), then BatchNorm
statistics in one pass and BatchNorm-apply, tanh, the 2x2 max pool and GroupNorm in one block per
(n, group).

The head is the cost here. Eager's transposed conv runs on TF32 tensor cores, whose output is 25.4x
outside the strict tolerance, so a solution must match true fp32 -- and cuDNN's true-fp32 transposed
conv (8.6 GFLOP) runs on the CUDA cores, which made the strict version 0.51x on H200 (0.94 -> 1.84
ms), slower than eager by 0.9 ms although its kernels save ~800 MB of traffic (~0.17 ms at H200
bandwidth). TF32 + bf16 gets fp32 accuracy from the tensor cores at about two TF32 convolutions'
work: split x = xh + xl and w = wh + wl, where xh and wh keep TF32's 10 mantissa bits exactly and
the low parts are at most 2^-10 of them; then x*w = xh*wh + xh*wl + xl*wh + xl*wl, and only the last
term (~2^-20 relative) is dropped. xh*wh runs on TF32 tensor cores, where a product of two TF32
numbers is exact and the sums are fp32; the two cross terms, ~2^-11 of the result, run as one bf16
convolution over twice the input channels (cat([xh, xl]) against cat([wl, wh]),
cudal1.conv_tf32_bf16), at bf16's twice-TF32 rate, where bf16's 8-bit mantissa costs ~2^-19 of the
result. 3xTF32, the same three products as one TF32 convolution over three times the channels, is
three TF32 convolutions' work.

The epilogue is unchanged. After the conv, eager adds its bias (a pass over the (128, 64, 64, 64)
activation, 134 MB), runs BatchNorm (statistics, then apply: two reads and a write), tanh, the max
pool and GroupNorm: ~1 GB of traffic and six launches. Here, in training mode: (1) one block per (n,
c) sums x and x^2 in double; (2) a tiny kernel turns them into each channel's batch mean and w_c /
sqrt(var + eps) and updates running_mean (the conv bias, which cancels in the normalisation, added
back) and running_var (unbiased) with the momentum, as BatchNorm does; (3) one kernel gives each (n,
group) -- 16 channels of 32 x 32 pooled values -- 1024 threads: pass 1 applies BatchNorm and tanh to
each 2x2 window, writes the max into the output as scratch and sums v and v^2 in double; a shuffle
reduction gives mean and biased variance; pass 2 rewrites the scratch (still in L2) as (v - mean) *
rstd * weight[c] + bias[c]. The activation is read twice, nothing its size is written (~300 MB).
With 3xTF32 this file measured 1.17x over eager on the H200 (0.886 -> 0.756 ms); this version is not
yet measured.
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

// One block per (n, c) plane of S elements: ws[nc] = (sum x, sum x^2), in double.
extern "C" __global__ void plane_sums(const float* __restrict__ x, double2* __restrict__ ws, long long S) {
    __shared__ double sh[32];
    const float* xp = x + blockIdx.x * S;
    double s1 = 0.0, s2 = 0.0;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) { const double v = xp[i]; s1 += v; s2 += v * v; }
    s1 = block_sum(s1, sh);
    s2 = block_sum(s2, sh);
    if (threadIdx.x == 0) ws[blockIdx.x] = make_double2(s1, s2);
}

// One thread per channel: bn[c] = (batch mean, w_c * rstd_c); running stats as BatchNorm updates them.
extern "C" __global__ void bn_stats(const double2* __restrict__ ws, const float* __restrict__ weight,
        const float* __restrict__ cb, float2* __restrict__ bn, float* __restrict__ running_mean,
        float* __restrict__ running_var, long long N, long long C, long long S, float eps, float momentum) {
    const long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s1 = 0.0, s2 = 0.0;
    for (long long n = 0; n < N; ++n) { const double2 v = ws[n * C + c]; s1 += v.x; s2 += v.y; }
    const double count = (double)N * S, mean = s1 / count;
    const double var = fmax(s2 / count - mean * mean, 0.0);  // biased: what BatchNorm divides by
    bn[c] = make_float2((float)mean, (float)(weight[c] / sqrt(var + eps)));
    const double bias = cb ? cb[c] : 0.0;  // the conv bias shifts the batch mean only
    running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * (mean + bias));
    running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * count / (count - 1.0));
}

// x: (N, C, H, W) conv output without bias; y: (N, C, H/2, W/2). One block per (n, g), cpg channels.
extern "C" __global__ void __launch_bounds__(1024) bn_tanh_pool_groupnorm(const float* __restrict__ x,
        const float2* __restrict__ bn, const float* __restrict__ bn_beta, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* __restrict__ y, long long G, long long cpg, long long H,
        long long W, float eps) {
    __shared__ double sh[32];
    const long long ng = blockIdx.x, c0 = (ng % G) * cpg;
    const int OW = W / 2, OHW = (H / 2) * OW;  // 32-bit: a plane is < 2^31
    const float* xg = x + ng * cpg * H * W;
    float* yg = y + ng * cpg * OHW;
    double s1 = 0.0, s2 = 0.0;
    for (long long cl = 0; cl < cpg; ++cl) {
        const float2 st = bn[c0 + cl];  // (batch mean, weight * rstd)
        const float bb = bn_beta[c0 + cl];
        for (int i = threadIdx.x; i < OHW; i += blockDim.x) {
            const float* p = xg + cl * H * W + 2 * (i / OW) * W + 2 * (i % OW);
            const float v[4] = {p[0], p[1], p[W], p[W + 1]};
            float m = -INFINITY;
            #pragma unroll
            for (int j = 0; j < 4; ++j) {
                const float t = tanhf((v[j] - st.x) * st.y + bb);  // BatchNorm, then tanh
                m = (t > m || t != t) ? t : m;                     // max pool, NaN propagates
            }
            yg[cl * OHW + i] = m;  // scratch: the same thread reads it back below
            s1 += m; s2 += (double)m * m;
        }
    }
    const double n = (double)(cpg * OHW), mean = block_sum(s1, sh) / n;
    const double var = fmax(block_sum(s2, sh) / n - mean * mean, 0.0);  // biased, as GroupNorm
    const float mu = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
    for (long long cl = 0; cl < cpg; ++cl) {
        const float g = gamma[c0 + cl] * rstd, b = beta[c0 + cl];
        for (int i = threadIdx.x; i < OHW; i += blockDim.x) yg[cl * OHW + i] = (yg[cl * OHW + i] - mu) * g + b;
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, groups, num_groups):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.batch_norm = nn.BatchNorm2d(out_channels)
        self.tanh = nn.Tanh()
        self.max_pool = nn.MaxPool2d(kernel_size=2, stride=2)
        self.group_norm = nn.GroupNorm(num_groups=num_groups, num_channels=out_channels)

    def forward(self, x):
        c, bn, gn = self.conv_transpose, self.batch_norm, self.group_norm
        x = cudal1.conv_tf32_bf16(F.conv_transpose2d, x, c.weight, None, stride=c.stride, padding=c.padding,
                               output_padding=c.output_padding, dilation=c.dilation)  # (B, C, 64, 64), no bias yet
        N, C, H, W = x.shape
        if not (bn.training and bn.track_running_stats and bn.momentum is not None and bn.affine) \
                or N * H * W < 2:  # what this path does not cover: torch's way
            x = bn(x + c.bias.view(1, -1, 1, 1))
            return gn(self.max_pool(self.tanh(x)))
        x = x.contiguous()
        G = gn.num_groups
        ws = torch.empty(N * C, 2, dtype=torch.float64, device=x.device)  # per-plane sums
        st = torch.empty(C, 2, dtype=torch.float32, device=x.device)  # (mean, weight * rstd) per channel
        y = x.new_empty(N, C, H // 2, W // 2)
        _k.plane_sums(N * C, 512, x.data_ptr(), ws.data_ptr(), H * W)
        _k.bn_stats((C + 31) // 32, 32, ws.data_ptr(), bn.weight.data_ptr(), c.bias.data_ptr(), st.data_ptr(),
                    bn.running_mean.data_ptr(), bn.running_var.data_ptr(), N, C, H * W, float(bn.eps),
                    float(bn.momentum))
        bn.num_batches_tracked.add_(1)
        _k.bn_tanh_pool_groupnorm(N * G, 1024, x.data_ptr(), st.data_ptr(), bn.bias.data_ptr(),
                                  gn.weight.data_ptr(), gn.bias.data_ptr(), y.data_ptr(), G, C // G, H, W,
                                  float(gn.eps))
        return y

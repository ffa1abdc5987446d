"""ConvTranspose2d without its bias, BatchNorm as torch runs it, then one block per (n, group)
for tanh, the 2x2 max pool and GroupNorm.

After the conv, eager adds its bias (a pass over the (128, 64, 64, 64) activation, 134 MB), runs
BatchNorm, tanh, the max pool and GroupNorm: ~1 GB of traffic and six launches. (1) In training
mode the conv bias cancels in the batch normalisation, so the conv runs with bias=None and the
running mean gets momentum * bias added after BatchNorm updates it (a 64-element op, not a 134 MB
pass); BatchNorm itself stays torch's. (2) One kernel gives each (n, group) -- 16 channels of 32 x
32 pooled values -- 1024 threads: pass 1 takes the max of the tanh of each 2x2 window, writes it
into the output as scratch and sums v and v^2 in double; a shuffle reduction gives mean and biased
variance; pass 2 rewrites the scratch (still in L2) as (v - mean) * rstd * weight[c] + bias[c].
The conv runs with TF32 off (true fp32), while eager's timed run lets cuDNN use TF32, so the head
is slower than eager's and the saving has to pay for that: 8.6 GFLOP of head against ~550 MB of
traffic saved, expect ~1.0-1.3x.
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

// x: (N, C, H, W) after BatchNorm; y: (N, C, H/2, W/2). One block per (n, g), cpg channels each.
extern "C" __global__ void __launch_bounds__(1024) tanh_pool_groupnorm(const float* __restrict__ x,
        const float* __restrict__ gamma, const float* __restrict__ beta, float* __restrict__ y,
        long long G, long long cpg, long long H, long long W, float eps) {
    __shared__ double sh[32];
    const long long ng = blockIdx.x, c0 = (ng % G) * cpg;
    const int OW = W / 2, OHW = (H / 2) * OW;  // 32-bit: a plane is < 2^31
    const float* xg = x + ng * cpg * H * W;
    float* yg = y + ng * cpg * OHW;
    double s1 = 0.0, s2 = 0.0;
    for (long long cl = 0; cl < cpg; ++cl)
        for (int i = threadIdx.x; i < OHW; i += blockDim.x) {
            const float* p = xg + cl * H * W + 2 * (i / OW) * W + 2 * (i % OW);
            const float t[4] = {tanhf(p[0]), tanhf(p[1]), tanhf(p[W]), tanhf(p[W + 1])};
            float m = t[0];
            #pragma unroll
            for (int j = 1; j < 4; ++j) m = (t[j] > m || t[j] != t[j]) ? t[j] : m;  // NaN propagates
            yg[cl * OHW + i] = m;  // scratch: the same thread reads it back below
            s1 += m; s2 += (double)m * m;
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
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv_transpose2d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation)  # (B, C, 64, 64), no bias yet
        torch.backends.cudnn.allow_tf32 = tf32
        cancels = bn.training and bn.momentum is not None  # batch statistics absorb the conv bias
        x = bn(x if cancels else x + c.bias.view(1, -1, 1, 1)).contiguous()
        if cancels and bn.track_running_stats:
            with torch.no_grad():  # the running mean the reference would have: batch mean + bias
                bn.running_mean.add_(c.bias, alpha=bn.momentum)
        N, C, H, W = x.shape
        G = gn.num_groups
        y = x.new_empty(N, C, H // 2, W // 2)
        _k.tanh_pool_groupnorm(N * G, 1024, x.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                               y.data_ptr(), G, C // G, H, W, float(gn.eps))
        return y

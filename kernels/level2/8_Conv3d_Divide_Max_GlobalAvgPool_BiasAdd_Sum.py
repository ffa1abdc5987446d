"""Conv3d on cuDNN without its bias, then two reduction kernels for everything after it.

Eager adds the conv's own bias (after cuDNN returns), divides, max-pools 2x2x2, averages globally,
adds the (C, 1, 1, 1) bias and sums over channels: the divide reads and writes the whole (128, 16,
14, 30, 30) activation (103 MB) once more, the pool reads it again, and the rest are small kernels
-- six launches and ~310 MB of traffic after the conv. Here the conv runs with bias=None and one
block per (n, c) walks its 7 x 15 x 15 pool windows: each thread adds the conv bias, divides, takes
the max of its 8 values and adds it to a running sum; a warp-shuffle block reduction gives the (n,
c) mean. A second tiny kernel (one thread per sample) adds the bias to each channel's mean and sums
the channels in order. The activation is read once (103 MB), nothing of its size is written, and
there are two launches instead of six. The conv runs with TF32 off (true fp32, as the check
requires), while eager's timed run lets cuDNN use TF32; eager's output equals that strict reference
bit for bit, though, so at 3 input channels its conv did not use TF32 and the two heads cost the
same. Measured: 1.36x on H200 (0.78 -> 0.57 ms).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// x: (N, C, D, H, W) without the conv bias; mean[n * C + c] = average over the 2x2x2-pooled grid.
extern "C" __global__ void div_pool_mean(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ mean, long long C, long long D, long long H, long long W, float divisor) {
    __shared__ float red[32];
    const long long nc = blockIdx.x;
    const int PD = D / 2, PH = H / 2, PW = W / 2, P = PD * PH * PW;  // 32-bit: a plane is < 2^31
    const float* xp = x + nc * D * H * W;
    const float b = cb[nc % C];
    float s = 0.f;
    for (int q = threadIdx.x; q < P; q += blockDim.x) {
        const int pw = q % PW, ph = (q / PW) % PH, pd = q / (PW * PH);
        const float* w0 = xp + (2 * pd * H + 2 * ph) * W + 2 * pw;
        float m = -INFINITY;
        #pragma unroll
        for (int i = 0; i < 8; ++i) {
            const float t = (w0[(i >> 2) * H * W + ((i >> 1) & 1) * W + (i & 1)] + b) / divisor;
            m = (t > m || t != t) ? t : m;  // max pool, NaN propagates
        }
        s += m;
    }
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
        mean[nc] = t / (float)P;
    }
}

// y[n] = sum_c (mean[n, c] + bias[c]).
extern "C" __global__ void bias_sum(const float* __restrict__ mean, const float* __restrict__ bias,
        float* __restrict__ y, long long N, long long C) {
    const long long n = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (n >= N) return;
    float t = 0.f;
    for (long long c = 0; c < C; ++c) t += mean[n * C + c] + bias[c];
    y[n] = t;
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divisor, pool_size, bias_shape, sum_dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.max_pool = nn.MaxPool3d(pool_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.sum_dim = sum_dim

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv3d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C, D, H, W = x.shape  # (B, 16, 14, 30, 30)
        p = self.max_pool
        if self.sum_dim != 1 or p.kernel_size not in (2, (2, 2, 2)) or p.stride not in (2, (2, 2, 2)) \
                or p.padding not in (0, (0, 0, 0)) or p.ceil_mode or D * H * W >= 2**31:  # not covered here
            x = self.global_avg_pool(p((x + c.bias.view(1, -1, 1, 1, 1)) / self.divisor))
            return torch.sum(x + self.bias, dim=self.sum_dim)
        mean = x.new_empty(N, C)
        y = x.new_empty(N, 1, 1, 1)  # the channel dim summed away
        _k.div_pool_mean(N * C, 256, x.data_ptr(), c.bias.data_ptr(), mean.data_ptr(), C, D, H, W,
                         float(self.divisor))
        _k.bias_sum((N + 127) // 128, 128, mean.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(), N, C)
        return y

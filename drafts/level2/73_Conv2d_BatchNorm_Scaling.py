"""cuDNN conv in true fp32, then training-mode BatchNorm and the scaling in three small kernels,
with the scale folded into the normalization's coefficients.

Eager runs the Conv2d (3 -> 16 channels, 3x3: output (128, 16, 30, 30) = 7.4 MB), BatchNorm in
training mode (a statistics pass over the 7.4 MB, the running-stat update, a normalize pass
writing a new tensor) and `* scaling_factor` (one more read and write). Here: (1) one block per
(sample, channel) plane sums x and x^2 (fp32 per thread, then double across the block) into a
double workspace; (2) one block per channel adds its 128 partials in double, forms the batch mean
and biased variance, updates running_mean and running_var (momentum, unbiased variance) as torch
does, and stores mean, gamma * rstd * s and beta * s; (3) one pass rewrites the conv output --
a fresh tensor this call owns -- in place as (x - mean) * a + b. The tensor is read twice and
written once after the conv, against three reads and two writes, and the scale costs nothing.
The statistics are at least as accurate as torch's fp32 Welford. The conv runs with cuDNN's TF32
off, as the strict check needs. Expect ~1.2-1.5x: the work is small and launch-bound.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block b = plane p (p = n * C + c, S contiguous floats): ws[p] = (sum x, sum x^2).
extern "C" __global__ void bn_partial(const float* __restrict__ x, double2* __restrict__ ws, long long S) {
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
        ws[blockIdx.x] = make_double2(d1, d2);
    }
}

// Block c: batch statistics of channel c from ws (N * C planes), running-stat update, and
// coef[c] = (mean, gamma * rstd * scale, beta * scale).
extern "C" __global__ void bn_finalize(const double2* __restrict__ ws, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* rmean, float* rvar, float* __restrict__ coef,
        long long N, long long C, long long S, float eps, float mom, float scale) {
    __shared__ double sh[2][32];
    const long long c = blockIdx.x;
    double s1 = 0.0, s2 = 0.0;
    for (long long n = threadIdx.x; n < N; n += blockDim.x) { const double2 v = ws[n * C + c]; s1 += v.x; s2 += v.y; }
    s1 = warp_sum(s1); s2 = warp_sum(s2);
    if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = s1; sh[1][threadIdx.x >> 5] = s2; }
    __syncthreads();
    if (threadIdx.x != 0) return;
    s1 = s2 = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { s1 += sh[0][w]; s2 += sh[1][w]; }
    const double cnt = (double)(N * S), mean = s1 / cnt, var = fmax(s2 / cnt - mean * mean, 0.0);
    const float rstd = (float)(1.0 / sqrt(var + (double)eps));
    coef[3 * c] = (float)mean;
    coef[3 * c + 1] = gamma[c] * rstd * scale;
    coef[3 * c + 2] = beta[c] * scale;
    rmean[c] = (1.f - mom) * rmean[c] + mom * (float)mean;
    rvar[c] = (1.f - mom) * rvar[c] + mom * (float)(var * cnt / fmax(cnt - 1.0, 1.0));
}

// In place: x[i] = (x[i] - mean_c) * a_c + b_c, c = i / S % C.
extern "C" __global__ void bn_apply(float* __restrict__ x, const float* __restrict__ coef, long long C,
        long long S, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long c = i / S % C;
    x[i] = (x[i] - coef[3 * c]) * coef[3 * c + 1] + coef[3 * c + 2];
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bn = nn.BatchNorm2d(out_channels)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            y = self.conv(x).contiguous()  # (B, C, H, W), fresh
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        bn = self.bn
        if not (self.training and bn.track_running_stats and bn.affine and bn.running_mean is not None):
            return bn(y) * self.scaling_factor
        B, C = y.shape[:2]
        S = y[0, 0].numel()
        bn.num_batches_tracked.add_(1)
        mom = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
        ws = torch.empty(2 * B * C, device=y.device, dtype=torch.float64)  # (B*C) x (sum, sum sq)
        coef = torch.empty(3 * C, device=y.device, dtype=torch.float32)
        _k.bn_partial(B * C, 256, y.data_ptr(), ws.data_ptr(), S)
        _k.bn_finalize(C, 256, ws.data_ptr(), bn.weight.data_ptr(), bn.bias.data_ptr(), bn.running_mean.data_ptr(),
                       bn.running_var.data_ptr(), coef.data_ptr(), B, C, S, bn.eps, mom, float(self.scaling_factor))
        n = y.numel()
        _k.bn_apply((n + 255) // 256, 256, y.data_ptr(), coef.data_ptr(), C, S, n)
        return y

"""cuDNN transposed conv in true fp32, BatchNorm's batch statistics in a parallel reduction, then
BatchNorm and both average pools as one 4x4x4 pooling kernel.

The ConvTranspose3d output is (128, 16, 63, 63, 63): 2 GB. Eager then runs BatchNorm (a
statistics pass over the 2 GB, and a normalize pass that reads it again and writes 2 GB more),
AvgPool3d(2) (reads 2 GB, writes 256 MB) and AvgPool3d(2) again: ~8 GB of traffic. BatchNorm is a
per-channel affine map a_c x + b_c and average pooling is linear, so pool(pool(bn(x))) =
a_c * pool4(x) + b_c, pool4 averaging the 4x4x4 block at 4 * (od, oh, ow). So: (1) 16384 blocks
sum x and x^2 over 32K-element chunks of each (sample, channel) plane (fp32 per thread, double
across the block); (2) a block per channel adds its partials in double, forms the batch mean and
biased variance, and updates running_mean/running_var as torch does; (3) a thread per output
averages its 64 inputs and applies (avg - mean) * gamma * rstd + beta. After the conv the 2 GB is
read twice and nothing large is written (~4 GB instead of ~8 GB). The conv runs with cuDNN's TF32
off, as the strict check needs, and remains the biggest cost. Measured: 1.06x on H200
(24.09 -> 22.73 ms). If the other passes run near bandwidth (~4 GB here, ~8 GB in eager), the
transposed conv takes ~22 ms on both sides, nearly all of the call, so TF32 buys eager little on it
(eager's output is 16x outside the strict tolerance). The solution of task 96 computes a transposed
conv of the same kind, with half this output, directly inside its pooling windows and runs its whole
forward in 1.8 ms: that is the route to a larger win.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block b = p * chunks + k sums chunk k of plane p (S contiguous floats): ws[b] = (sum x, sum x^2).
extern "C" __global__ void bn_partial(const float* __restrict__ x, double2* __restrict__ ws, long long S,
        long long chunk, long long chunks) {
    __shared__ double sh[2][32];
    const long long p = blockIdx.x / chunks, k = blockIdx.x % chunks;
    const float* xp = x + p * S;
    const long long end = min(S, (k + 1) * chunk);
    float s1 = 0.f, s2 = 0.f;
    for (long long i = k * chunk + threadIdx.x; i < end; i += blockDim.x) { const float v = xp[i]; s1 += v; s2 += v * v; }
    double d1 = warp_sum((double)s1), d2 = warp_sum((double)s2);
    if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = d1; sh[1][threadIdx.x >> 5] = d2; }
    __syncthreads();
    if (threadIdx.x == 0) {
        d1 = d2 = 0.0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { d1 += sh[0][w]; d2 += sh[1][w]; }
        ws[blockIdx.x] = make_double2(d1, d2);
    }
}

// Block c: batch statistics of channel c from its N * chunks partials, running-stat update,
// coef[c] = (mean, gamma * rstd, beta).
extern "C" __global__ void bn_finalize(const double2* __restrict__ ws, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* rmean, float* rvar, float* __restrict__ coef,
        long long N, long long C, long long S, long long chunks, float eps, float mom) {
    __shared__ double sh[2][32];
    const long long c = blockIdx.x;
    double s1 = 0.0, s2 = 0.0;
    for (long long i = threadIdx.x; i < N * chunks; i += blockDim.x) {
        const double2 v = ws[((i / chunks) * C + c) * chunks + i % chunks];
        s1 += v.x; s2 += v.y;
    }
    s1 = warp_sum(s1); s2 = warp_sum(s2);
    if ((threadIdx.x & 31) == 0) { sh[0][threadIdx.x >> 5] = s1; sh[1][threadIdx.x >> 5] = s2; }
    __syncthreads();
    if (threadIdx.x != 0) return;
    s1 = s2 = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) { s1 += sh[0][w]; s2 += sh[1][w]; }
    const double cnt = (double)N * (double)S, mean = s1 / cnt, var = fmax(s2 / cnt - mean * mean, 0.0);
    coef[3 * c] = (float)mean;
    coef[3 * c + 1] = gamma[c] * (float)(1.0 / sqrt(var + (double)eps));
    coef[3 * c + 2] = beta[c];
    rmean[c] = (1.f - mom) * rmean[c] + mom * (float)mean;
    rvar[c] = (1.f - mom) * rvar[c] + mom * (float)(var * cnt / fmax(cnt - 1.0, 1.0));
}

// Thread per output (n, c, od, oh, ow) of (N, C, OD, OH, OW): mean of the K^3 block of x (N, C, D, H, W)
// at K * (od, oh, ow), normalized with coef[c].
extern "C" __global__ void bn_pool(const float* __restrict__ x, const float* __restrict__ coef, float* __restrict__ y,
        long long C, long long D, long long H, long long W, long long OD, long long OH, long long OW,
        long long K, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long ow = i % OW, oh = i / OW % OH, od = i / (OW * OH) % OD, p = i / (OW * OH * OD);  // p = n*C + c
    const long long c = p % C;
    const float* xb = x + ((p * D + od * K) * H + oh * K) * W + ow * K;
    float s = 0.f;
    for (long long a = 0; a < K; ++a)
        for (long long b = 0; b < K; ++b)
            for (long long e = 0; e < K; ++e) s += xb[(a * H + b) * W + e];
    const float avg = s / (float)(K * K * K);
    y[i] = (avg - coef[3 * c]) * coef[3 * c + 1] + coef[3 * c + 2];
}
""")
CHUNK = 32768  # elements per partial-sum block


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.batch_norm = nn.BatchNorm3d(out_channels)
        self.avg_pool1 = nn.AvgPool3d(kernel_size=2)
        self.avg_pool2 = nn.AvgPool3d(kernel_size=2)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            c = self.conv_transpose(x).contiguous()  # (B, C, 63, 63, 63)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        bn = self.batch_norm
        if not (self.training and bn.track_running_stats and bn.affine and bn.running_mean is not None):
            return self.avg_pool2(self.avg_pool1(bn(c)))
        B, C, D, H, W = c.shape
        S = D * H * W
        chunks = -(-S // CHUNK)
        bn.num_batches_tracked.add_(1)
        mom = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)
        ws = torch.empty(2 * B * C * chunks, device=c.device, dtype=torch.float64)  # partial (sum, sum sq)
        coef = torch.empty(3 * C, device=c.device, dtype=torch.float32)  # (mean, a, b) per channel
        _k.bn_partial(B * C * chunks, 256, c.data_ptr(), ws.data_ptr(), S, CHUNK, chunks)
        _k.bn_finalize(C, 256, ws.data_ptr(), bn.weight.data_ptr(), bn.bias.data_ptr(), bn.running_mean.data_ptr(),
                       bn.running_var.data_ptr(), coef.data_ptr(), B, C, S, chunks, bn.eps, mom)
        OD, OH, OW = D // 2 // 2, H // 2 // 2, W // 2 // 2  # two floor-mode AvgPool3d(2)
        y = torch.empty(B, C, OD, OH, OW, device=c.device, dtype=c.dtype)
        n = y.numel()
        _k.bn_pool((n + 255) // 256, 256, c.data_ptr(), coef.data_ptr(), y.data_ptr(), C, D, H, W, OD, OH, OW, 4, n)
        return y

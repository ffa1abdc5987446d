"""cuDNN conv in true fp32, then the multiply, InstanceNorm, clamp, multiply and the channel max in
two CUDA kernels: per-plane statistics, then one fused pass that writes only the result.

The Conv3d output is (128, 16, 14, 30, 30): 25.8M floats, 103 MB. Eager then runs `x * multiplier`
(read, write 103 MB), InstanceNorm (a statistics pass and a normalize pass that writes 103 MB),
clamp (read, write), `x * multiplier` (read, write) and the max over channels (read 103 MB, write
6.5 MB): about 1 GB of traffic and four 103 MB temporaries. Since (m x) has mean m mu and variance
m^2 sigma^2, the statistics come from x itself: (1) one block per (sample, channel) plane sums x
and x^2 (fp32 per thread, double across the block) and stores the mean and 1 / sqrt(var + eps)
of m_c x; (2) one thread per (sample, position) walks the 16 channels, computing
clamp((m_c x - mean) * rstd, lo, hi) * m_c in registers and keeping the max (NaN propagates, as in
torch.max). The 103 MB is read twice and only the 6.5 MB result is written, ~4x less traffic.
The conv runs with cuDNN's TF32 off, as the strict check needs (eager's output equals the strict
reference bit for bit, so its conv did not use TF32 either). Measured: 1.41x on H200
(0.99 -> 0.70 ms): the saving is the epilogue's, and the conv, the same on both sides, is most of
the call.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ double warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block p = n * C + c over the S floats of plane p: st[p] = (mean, rstd) of m_c * x.
extern "C" __global__ void inorm_stats(const float* __restrict__ x, const float* __restrict__ mult,
        float2* __restrict__ st, long long C, long long S, float eps) {
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
        const double m = mult[blockIdx.x % C], mean = d1 / (double)S;
        const double var = fmax(d2 / (double)S - mean * mean, 0.0) * m * m;
        st[blockIdx.x] = make_float2((float)(m * mean), (float)(1.0 / sqrt(var + (double)eps)));
    }
}

// Thread per (n, s) of the (N, S) output: max over c of clamp((m_c x[n, c, s] - mean) * rstd, lo, hi) * m_c.
extern "C" __global__ void inorm_clamp_mul_max(const float* __restrict__ x, const float* __restrict__ mult,
        const float2* __restrict__ st, float* __restrict__ y, long long C, long long S, float lo, float hi,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = i / S, s = i % S;
    float best = -INFINITY;
    for (long long c = 0; c < C; ++c) {
        const float m = mult[c];
        const float2 ms = st[b * C + c];
        float v = (x[(b * C + c) * S + s] * m - ms.x) * ms.y;
        v = fminf(fmaxf(v, lo), hi) * m;
        best = (v > best || v != v) ? v : best;
    }
    y[i] = best;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape, clamp_min, clamp_max):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.instance_norm = nn.InstanceNorm3d(out_channels)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            c = self.conv(x).contiguous()  # (B, C, D, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        B, C = c.shape[:2]
        inorm, m = self.instance_norm, self.multiplier
        if m.numel() != C or inorm.affine or inorm.track_running_stats:
            v = torch.clamp(inorm(c * m), self.clamp_min, self.clamp_max) * m
            return torch.max(v, dim=1).values
        S = c[0, 0].numel()
        st = torch.empty(B * C, 2, device=c.device, dtype=torch.float32)  # (mean, rstd) per plane
        y = torch.empty(B, *c.shape[2:], device=c.device, dtype=c.dtype)  # (B, D, H, W)
        _k.inorm_stats(B * C, 256, c.data_ptr(), m.data_ptr(), st.data_ptr(), C, S, inorm.eps)
        n = y.numel()
        _k.inorm_clamp_mul_max((n + 255) // 256, 256, c.data_ptr(), m.data_ptr(), st.data_ptr(), y.data_ptr(),
                               C, S, float(self.clamp_min), float(self.clamp_max), n)
        return y

"""Three kernels: a direct 3x3x3 convolution (16 output channels per thread) that also sums each
(sample, channel) plane's values and squares per block, a tiny kernel that turns the partials into the
InstanceNorm statistics, and one pass that normalizes, clamps, multiplies and takes the channel max.

Eager runs the cuDNN Conv3d (implicit GEMM with K = 3 * 27 = 81 and N = 16: a badly shaped GEMM) and
writes its (128, 16, 14, 30, 30) output (103 MB), then `x * multiplier` (read, write 103 MB),
InstanceNorm (a statistics pass and a normalize pass that writes 103 MB), clamp (read, write),
`x * multiplier` (read, write) and the max over channels (read 103 MB, write 6.5 MB): ~1 GB of DRAM
traffic and six launches after the conv. The norm needs each plane's statistics before any output, so
the conv output is stored once (recomputing the conv, ~4 GFLOP, would cost more than a 103 MB write
and read). (1) One thread per output position (sample, d, h, w) computes the 16 channels with weights
staged in shared memory as [tap][channel], read as broadcast float4s, adds the bias and writes them;
the blocks of one sample each sum their values and squares per channel (warp shuffles in fp32 over 32
values, then the 8 warps in double) into per-block partials. (2) One thread per (sample, channel) adds
its sample's partials in block order in double: since (m x) has mean m mu and variance m^2 sigma^2,
it stores the mean and 1 / sqrt(var + eps) of m_c x (var = E[x^2] - mu^2 in double: no cancellation
trouble at fp32 data). (3) One thread per (sample, position) walks the 16 channels, computing
clamp((m_c x - mean) * rstd, lo, hi) * m_c and keeping the max (NaN propagates, as in torch.max). DRAM
traffic: the 25 MB input, 103 MB written, 103 MB read, 6.5 MB out, ~3.5x less than eager, and the conv
is plain fp32 FMAs (no TF32). Deterministic: no atomics, every sum in a fixed order. Other settings
(more than 16 channels, stride, padding, dilation, groups, an affine or tracking InstanceNorm, a
multiplier not of one value per channel) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.43x over eager (1.08 -> 0.445 ms); 2.63x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 2048  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 2048;

// x: (B, Ci, D, H, W); w: (Co, Ci, K, K, K), stride 1, no padding; y: (B, Co, S) with S = OD * OH * OW.
// Block j covers positions (j % bps) * 256 + threadIdx.x of sample j / bps;
// part[(j * CMAX + c) * 2 + {0, 1}] = sum over them of y, y^2 for channel c.
// No __launch_bounds__(256): with it nvcc 13 caps this kernel at 64 registers and spills; without, 56, no spills.
extern "C" __global__ void conv3d_stats(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y,
        double* __restrict__ part, int Ci, int Co, long long D, long long H, long long W, int K,
        long long OD, long long OH, long long OW, int bps) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = ci * K^3 + tap), 0 for c >= Co
    __shared__ float red[8][CMAX][2];         // per-warp channel sums of y and y^2
    const int K3 = K * K * K, taps = Ci * K3;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long S = OD * OH * OW, b = blockIdx.x / bps, p = (long long)(blockIdx.x % bps) * blockDim.x + threadIdx.x;
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;  // past the sample's end: adds nothing
    if (p < S) {
        const long long ow = p % OW, oh = p / OW % OH, od = p / (OW * OH);
        int t = 0;
        for (int ci = 0; ci < Ci; ++ci)
            for (int kd = 0; kd < K; ++kd)
                for (int kh = 0; kh < K; ++kh) {
                    const float* xp = x + (((b * Ci + ci) * D + od + kd) * H + oh + kh) * W + ow;
                    for (int kw = 0; kw < K; ++kw, ++t) {
                        const float xv = xp[kw];
                        const float4* wt = reinterpret_cast<const float4*>(ws + t * CMAX);
                        #pragma unroll
                        for (int q = 0; q < CMAX / 4; ++q) {
                            const float4 wq = wt[q];
                            acc[4 * q] = fmaf(xv, wq.x, acc[4 * q]);
                            acc[4 * q + 1] = fmaf(xv, wq.y, acc[4 * q + 1]);
                            acc[4 * q + 2] = fmaf(xv, wq.z, acc[4 * q + 2]);
                            acc[4 * q + 3] = fmaf(xv, wq.w, acc[4 * q + 3]);
                        }
                    }
                }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < Co) {
            acc[c] += cb[c];
            y[(b * Co + c) * S + p] = acc[c];
        }
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        float s1 = acc[c], s2 = acc[c] * acc[c];
        for (int o = 16; o > 0; o >>= 1) {
            s1 += __shfl_xor_sync(0xffffffffu, s1, o);
            s2 += __shfl_xor_sync(0xffffffffu, s2, o);
        }
        if (lane == 0) { red[warp][c][0] = s1; red[warp][c][1] = s2; }
    }
    __syncthreads();
    if (threadIdx.x < 2 * Co) {  // thread 2c + k: channel c, sum k; the warps in a fixed order, in double
        const int c = threadIdx.x >> 1, k = threadIdx.x & 1;
        double a = 0.0;
        for (int i = 0; i < (int)(blockDim.x >> 5); ++i) a += red[i][c][k];
        part[((long long)blockIdx.x * CMAX + c) * 2 + k] = a;
    }
}

// st[b * Co + c] = (mean, 1 / sqrt(var + eps)) of m_c * y[b, c]; one thread per (b, c), partials in block order.
extern "C" __global__ void stats_finish(const double* __restrict__ part, const float* __restrict__ mult,
        float2* __restrict__ st, int Co, int bps, long long S, float eps, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = i / Co, c = i % Co;
    double s1 = 0.0, s2 = 0.0;
    for (int j = 0; j < bps; ++j) {
        s1 += part[((b * bps + j) * CMAX + c) * 2];
        s2 += part[((b * bps + j) * CMAX + c) * 2 + 1];
    }
    const double m = mult[c], mean = s1 / (double)S;
    const double var = fmax(s2 / (double)S - mean * mean, 0.0) * m * m;  // biased, as InstanceNorm uses
    st[i] = make_float2((float)(m * mean), (float)(1.0 / sqrt(var + (double)eps)));
}

// One thread per (b, s) of the (B, S) output: max over c of clamp((m_c y[b, c, s] - mean) * rstd, lo, hi) * m_c.
extern "C" __global__ void norm_clamp_mul_max(const float* __restrict__ y, const float* __restrict__ mult,
        const float2* __restrict__ st, float* __restrict__ out, int Co, long long S, float lo, float hi,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long b = i / S, s = i % S;
    float best = -INFINITY;
    for (int c = 0; c < Co; ++c) {
        const float m = mult[c];
        const float2 ms = st[b * Co + c];
        float v = (y[(b * Co + c) * S + s] * m - ms.x) * ms.y;  // x * multiplier, then InstanceNorm
        v = (v < lo ? lo : (v > hi ? hi : v)) * m;             // torch.clamp (NaN stays NaN), * multiplier
        best = (v > best || v != v) ? v : best;                // torch.max over channels; NaN propagates
    }
    out[i] = best;
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
        c, inorm, m = self.conv, self.instance_norm, self.multiplier
        Co, Ci, K = c.weight.shape[:3]
        B, _, D, H, W = x.shape
        OD, OH, OW = D - K + 1, H - K + 1, W - K + 1
        if (c.stride != (1, 1, 1) or c.padding != (0, 0, 0) or c.dilation != (1, 1, 1) or c.groups != 1
                or c.bias is None or c.padding_mode != "zeros" or len(set(c.kernel_size)) != 1 or Co > CMAX
                or Ci * K ** 3 * CMAX > WMAX or min(OD, OH, OW) < 1 or m.shape != (Co, 1, 1, 1)
                or inorm.affine or inorm.track_running_stats):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            x = torch.clamp(inorm(x * m), self.clamp_min, self.clamp_max) * m
            return torch.max(x, dim=1).values
        x = x.contiguous()
        S = OD * OH * OW  # positions per sample, one thread each
        bps = (S + 255) // 256  # blocks per sample: a block never straddles two samples
        y = x.new_empty(B, Co, S)  # conv output, stored once: the norm needs whole planes
        part = torch.empty(B * bps, CMAX, 2, device=x.device, dtype=torch.float64)  # per-block sums of y, y^2
        st = x.new_empty(B * Co, 2)  # (mean, rstd) of m_c * y per plane
        out = x.new_empty(B, OD, OH, OW)
        _k.conv3d_stats(B * bps, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(), y.data_ptr(),
                        part.data_ptr(), Ci, Co, D, H, W, K, OD, OH, OW, bps)
        _k.stats_finish((B * Co + 255) // 256, 256, part.data_ptr(), m.data_ptr(), st.data_ptr(), Co, bps, S,
                        float(inorm.eps), B * Co)
        n = B * S
        _k.norm_clamp_mul_max((n + 255) // 256, 256, y.data_ptr(), m.data_ptr(), st.data_ptr(), out.data_ptr(),
                              Co, S, float(self.clamp_min), float(self.clamp_max), n)
        return out

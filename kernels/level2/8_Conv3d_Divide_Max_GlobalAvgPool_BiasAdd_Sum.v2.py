"""The whole model in two kernels: a direct 3x3x3 convolution, 16 output channels per thread, with
the divide and the 2x2x2 max pool in registers and the global average, bias and channel sum as a
reduction.

Eager runs the cuDNN Conv3d (implicit GEMM with K = 3 * 27 = 81 and N = 16: a badly shaped GEMM) and
writes its (128, 16, 14, 30, 30) output (103 MB), then the divide (a read and write of 103 MB), the
max pool (a read, 13 MB written), the global average, the bias add and the channel sum: ~330 MB of
DRAM traffic and five launches after the conv. Here one thread per max-pool output (sample, pd, ph,
pw) computes the conv at the 8 positions of its window (the pool's stride is its size, so every conv
output is computed once, as in eager) with weights staged in shared memory as [tap][channel] and read
as broadcast float4s, adds the conv bias, divides and keeps each channel's max (NaN propagates, as in
torch's max pool). The blocks of one sample each sum their threads' maxima per channel (warp
shuffles, then the 8 warps in a fixed order) into a per-block partial; a second tiny kernel, one
thread per sample, adds those partials in block order (in double), divides by the pooled positions,
adds the bias and sums the channels in order. Nothing of the conv's size is stored: DRAM traffic is
the 25 MB input and ~50 KB of partials; the kernel is FMA-bound (~4 GFLOP of plain fp32, no TF32).
Deterministic: no atomics, every sum in a fixed order; the average runs in another order than
eager's, ~1e-7 relative. Other settings (more than 16 channels, conv stride, padding, dilation,
groups, a pool whose stride is not its size or with padding, dilation or ceil_mode, a sum over
another dim) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 1.97x over eager (0.791 -> 0.402 ms); 1.96x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 2048  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 2048;

// x: (B, Ci, D, H, W); w: (Co, Ci, K, K, K), stride 1, no padding; pool window S^3, stride S.
// Block j covers pooled positions (j % bps) * 256 + threadIdx.x of sample j / bps (PD * PH * PW per
// sample); part[j * CMAX + c] = sum over them of max over the window of (conv + bias) / divisor.
// No __launch_bounds__(256): with it nvcc 13 caps this kernel at 80 registers and spills; without, 96, no spills.
extern "C" __global__ void conv3d_div_pool_sum(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ part, int Ci, int Co,
        long long D, long long H, long long W, int K, int S, long long PD, long long PH, long long PW,
        float divisor, int bps) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = ci * K^3 + tap), 0 for c >= Co
    __shared__ float red[8][CMAX];            // per-warp channel sums
    const int K3 = K * K * K, taps = Ci * K3;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long b = blockIdx.x / bps, p = (long long)(blockIdx.x % bps) * blockDim.x + threadIdx.x;
    float mx[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) mx[c] = 0.f;  // past the sample's end: adds nothing
    if (p < PD * PH * PW) {
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) mx[c] = -INFINITY;
        const long long pw = p % PW, ph = p / PW % PH, pd = p / (PW * PH);
        for (int e = 0; e < S * S * S; ++e) {  // the window's conv positions
            const long long od = pd * S + e / (S * S), oh = ph * S + e / S % S, ow = pw * S + e % S;
            float acc[CMAX];
            #pragma unroll
            for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
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
            for (int c = 0; c < CMAX; ++c) {
                const float v = (acc[c] + (c < Co ? cb[c] : 0.f)) / divisor;  // conv + bias, x / divisor
                mx[c] = (v > mx[c] || v != v) ? v : mx[c];                   // max pool; NaN propagates
            }
        }
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        float a = mx[c];
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
        if (lane == 0) red[warp][c] = a;
    }
    __syncthreads();
    if (threadIdx.x < Co) {
        float a = 0.f;
        for (int i = 0; i < (int)(blockDim.x >> 5); ++i) a += red[i][threadIdx.x];  // fixed warp order
        part[(long long)blockIdx.x * CMAX + threadIdx.x] = a;
    }
}

// y[b] = sum over c of (mean over the pooled grid + bias[c]); one thread per sample, sums in fixed order.
extern "C" __global__ void mean_bias_sum(const float* __restrict__ part, const float* __restrict__ bias,
        float* __restrict__ y, int Co, int bps, long long P, long long B) {
    const long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (b >= B) return;
    float t = 0.f;
    for (int c = 0; c < Co; ++c) {
        double s = 0.0;
        for (int j = 0; j < bps; ++j) s += part[(b * bps + j) * CMAX + c];
        t += (float)(s / (double)P) + bias[c];  // global average pool, + bias, then torch.sum over dim 1
    }
    y[b] = t;
}
""")


def _triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * 3


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
        c, mp = self.conv, self.max_pool
        Co, Ci, K = c.weight.shape[:3]
        B, _, D, H, W = x.shape
        S = _triple(mp.kernel_size)[0]
        PD, PH, PW = (D - K + 1) // S, (H - K + 1) // S, (W - K + 1) // S  # pooled grid, floor mode
        if (c.stride != (1, 1, 1) or c.padding != (0, 0, 0) or c.dilation != (1, 1, 1) or c.groups != 1
                or c.bias is None or c.padding_mode != "zeros" or len(set(c.kernel_size)) != 1 or Co > CMAX
                or Ci * K ** 3 * CMAX > WMAX or _triple(mp.kernel_size) != (S,) * 3
                or _triple(mp.stride) != (S,) * 3 or _triple(mp.padding) != (0,) * 3
                or _triple(mp.dilation) != (1,) * 3 or mp.ceil_mode or mp.return_indices
                or _triple(self.global_avg_pool.output_size) != (1,) * 3 or self.sum_dim != 1
                or self.bias.shape != (Co, 1, 1, 1) or min(PD, PH, PW) < 1):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            x = self.global_avg_pool(mp(x / self.divisor))
            return torch.sum(x + self.bias, dim=self.sum_dim)
        x = x.contiguous()
        P = PD * PH * PW  # pooled positions per sample, one thread each
        bps = (P + 255) // 256  # blocks per sample: a block never straddles two samples
        part = x.new_empty(B * bps, CMAX)  # (blocks, CMAX) per-block channel sums of the pooled maxima
        y = x.new_empty(B, 1, 1, 1)  # the channel dim summed away
        _k.conv3d_div_pool_sum(B * bps, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(), part.data_ptr(),
                               Ci, Co, D, H, W, K, S, PD, PH, PW, float(self.divisor), bps)
        _k.mean_bias_sum((B + 255) // 256, 256, part.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(),
                         Co, bps, P, B)
        return y

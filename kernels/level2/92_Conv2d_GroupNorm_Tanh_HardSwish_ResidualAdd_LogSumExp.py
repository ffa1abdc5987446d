"""No cuDNN and no conv output in memory: a direct 3x3 conv computed twice, once for GroupNorm's statistics, once per pixel.

Eager runs the convolution and then GroupNorm (statistics and apply), tanh, HardSwish, the add and
logsumexp (itself a max, a subtract-exp-sum and a log): about nine kernels, most of them a read
and write of the (128, 16, 30, 30) conv output (7.4 MB). The conv is tiny (3 input channels x 3 x
3 = 27 multiply-adds per output, 50 M in all), so computing it twice is cheaper than storing it.
Kernel 1: one block per (sample, group) computes the group's 2 x 900 conv outputs into 7 KB of
shared memory and reduces their mean and biased variance (two passes). Kernel 2: one thread per
(sample, pixel) loads its 27 input values once, multiplies each into 16 channel accumulators (the
weights staged in shared memory as [tap][channel] and read as broadcast float4s), then computes
r = conv + hardswish(tanh(gn(conv))) per channel in eager's order and reduces them as torch's
logsumexp does (max, then max + log(sum(exp(r - max)))). Two launches instead of about nine and
only the 1.5 MB input and 0.5 MB output touch DRAM; the sums are plain fp32 FMAs (no TF32).
Measured: 2.53x on H200 (0.36 -> 0.14 ms). Other conv settings or sizes take cuDNN and eager's ops.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, GMAX, WMAX = 16, 4096, 2048  # channels per thread; conv outputs of a group; staged weights

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, GMAX = 4096, WMAX = 2048;

// Conv output (b, co, oh, ow) of x (B, Ci, H, W) and w (Co, Ci, K, K), stride 1, no padding.
__device__ __forceinline__ float conv_at(const float* __restrict__ x, const float* __restrict__ w, long long b,
        long long co, long long oh, long long ow, int Ci, long long H, long long W, int K) {
    float acc = 0.f;
    for (int ci = 0; ci < Ci; ++ci) {
        const float* xp = x + ((b * Ci + ci) * H + oh) * W + ow;
        const float* wp = w + (co * Ci + ci) * K * K;
        for (int kh = 0; kh < K; ++kh)
            for (int kw = 0; kw < K; ++kw) acc = fmaf(xp[kh * W + kw], __ldg(wp + kh * K + kw), acc);
    }
    return acc;
}

__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh is free again
    if (threadIdx.x % 32 == 0) sh[threadIdx.x / 32] = v;
    __syncthreads();
    v = 0.f;
    for (int i = 0; i < blockDim.x / 32; ++i) v += sh[i];
    return v;
}

// Kernel 1. Block = (sample, group): stats[b * G + g] = (mean, rstd) of the group's conv outputs.
extern "C" __global__ void __launch_bounds__(256) conv_gn_stats(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float2* __restrict__ stats, int Ci,
        long long H, long long W, int K, int Co, int G, long long OH, long long OW, float eps) {
    __shared__ float buf[GMAX];
    __shared__ float sh[32];
    const int cpg = Co / G;
    const long long b = blockIdx.x / G, c0 = (blockIdx.x % G) * cpg, HW = OH * OW, len = cpg * HW;
    float s = 0.f;
    for (long long i = threadIdx.x; i < len; i += blockDim.x) {
        const long long co = c0 + i / HW;
        const float v = conv_at(x, w, b, co, i % HW / OW, i % OW, Ci, H, W, K) + cb[co];
        buf[i] = v;
        s += v;
    }
    const float mean = block_sum(s, sh) / (float)len;  // block_sum's barriers also publish buf
    float q = 0.f;
    for (long long i = threadIdx.x; i < len; i += blockDim.x) { const float d = buf[i] - mean; q += d * d; }
    q = block_sum(q, sh);
    if (threadIdx.x == 0) stats[blockIdx.x] = make_float2(mean, rsqrtf(q / (float)len + eps));  // biased variance
}

// Kernel 2. One thread per (sample, pixel): y[b, 0, p] = logsumexp_c(conv + hardswish(tanh(gn(conv)))).
extern "C" __global__ void __launch_bounds__(256) conv_act_res_lse(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float2* __restrict__ stats,
        const float* __restrict__ gw, const float* __restrict__ gb, float* __restrict__ y, int Ci, long long H,
        long long W, int K, int Co, int G, long long OH, long long OW, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = ci * K^2 + tap), 0 for c >= Co
    const int taps = Ci * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, b = j / (OW * OH);
    float r[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) r[c] = 0.f;
    int t = 0;
    for (int ci = 0; ci < Ci; ++ci)
        for (int kh = 0; kh < K; ++kh) {
            const float* xp = x + ((b * Ci + ci) * H + oh + kh) * W + ow;
            for (int kw = 0; kw < K; ++kw, ++t) {
                const float xv = xp[kw];
                const float4* wt = reinterpret_cast<const float4*>(ws + t * CMAX);
                #pragma unroll
                for (int q = 0; q < CMAX / 4; ++q) {
                    const float4 wq = wt[q];
                    r[4 * q] = fmaf(xv, wq.x, r[4 * q]);
                    r[4 * q + 1] = fmaf(xv, wq.y, r[4 * q + 1]);
                    r[4 * q + 2] = fmaf(xv, wq.z, r[4 * q + 2]);
                    r[4 * q + 3] = fmaf(xv, wq.w, r[4 * q + 3]);
                }
            }
        }
    const int cpg = Co / G;
    float mx = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        const float v = r[c] + cb[c];  // x_conv
        const float2 st = stats[b * G + c / cpg];
        float h = tanhf((v - st.x) * st.y * gw[c] + gb[c]);  // tanh(group_norm(x_conv))
        h = h * fminf(fmaxf(h + 3.f, 0.f), 6.f) / 6.f;      // hardswish
        r[c] = v + h;                                        // residual: the pre-norm conv
        mx = fmaxf(mx, r[c]);
    }
    float s = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        s += expf(r[c] - mx);
    }
    y[j] = isinf(mx) ? mx : mx + logf(s);  // torch.logsumexp (an infinite max stays)
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        c, gn = self.conv, self.group_norm
        B, Ci, H, W = x.shape
        Co, _, K, K2 = c.weight.shape
        OH, OW, G = H - K + 1, W - K + 1, gn.num_groups
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or K != K2 or Co > CMAX or Ci * K * K * CMAX > WMAX
                or Co // G * OH * OW > GMAX):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x_conv = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.logsumexp(x_conv + self.hard_swish(self.tanh(gn(x_conv))), dim=1, keepdim=True)
        x = x.contiguous()
        stats = torch.empty(B * G, 2, device=x.device, dtype=torch.float32)  # (mean, rstd) per (sample, group)
        y = x.new_empty(B, 1, OH, OW)
        _k.conv_gn_stats(B * G, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(), stats.data_ptr(), Ci, H, W,
                         K, Co, G, OH, OW, gn.eps)
        n = B * OH * OW
        _k.conv_act_res_lse((n + 255) // 256, 256, x.data_ptr(), c.weight.data_ptr(), c.bias.data_ptr(),
                            stats.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(), y.data_ptr(), Ci, H, W, K, Co,
                            G, OH, OW, n)
        return y

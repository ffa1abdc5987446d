"""The whole model in one kernel: a direct fp32 transposed convolution evaluated window by window of the
max pool, each thread keeping the max of its window for 16 channels, then Hardtanh, a deterministic block
sum over the pooled plane and tanh of the mean; only the (B, C, 1, 1) result is written.

Eager runs the cuDNN ConvTranspose2d (32 -> 64 channels, 4x4, stride 2, padding 1: output (128, 64, 32,
32), 33.5 MB), MaxPool2d(2) (reads it, writes 8.4 MB), Hardtanh (read and write), the mean over space and
tanh. Its conv uses TF32, which passes the strict check here only by ~3x, and cuDNN's true-fp32
transposed conv alone is slower than eager's whole forward. Yet the conv is small: at stride 2 each
output takes 2 x 2 of the 4 x 4 taps, 4 x 32 = 128 multiply-adds per output channel, 1.1 G in all,
and everything after it reduces to 64 numbers per sample.

Output o takes input i where o + P = i * S + k. A block owns up to 256 pooled positions of one sample
(a tile of its pooled plane) and one chunk of 16 output channels (grid (B * tiles, chunks)); it stages
that chunk's weights in shared memory as [ci][tap][channel] (32 x 16 x 16 floats, 32 KB), read as
broadcast float4s. Each thread computes the conv at the 2 x 2 positions of its pooling window one after
another (per position: one input load, four shared loads and 16 FMAs per input channel and tap) and
keeps the running max per channel (NaN propagates). The pool stride is a multiple of the conv stride, so
at each step all threads of a warp are at positions of the same parity and share their taps: no
divergence; adjacent threads read adjacent input pixels (coalesced). Then + conv bias (max(v) + b ==
max(v + b) exactly: rounding is monotonic), Hardtanh, a warp-shuffle sum and a fixed-order sum over the
8 warps per channel. With one tile per sample (the task's 16 x 16 pooled plane) the block writes
tanh(sum / n) itself; with more, each block writes its partial sums and a second small kernel adds the
tiles in order: deterministic, no float atomics. DRAM traffic: the 4.2 MB input, 32 KB written.
Numerics: plain fp32 fmaf over (tap, ci), fp32 sums of at most 256 values per block; no TF32. Other
settings (groups, dilation, non-square kernel/stride/padding, non-default pools, weights over the
shared buffer) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 1.70x over eager (0.364 -> 0.214 ms); 1.68x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 8192  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 8192;

__device__ __forceinline__ float nanmax(float a, float b) { return (a > b || a != a) ? a : b; }

// x: (B, Ci, H, W); w: (Ci, Co, K, K); the conv (stride S, padding P) max-pooled by KP x KP windows at
// stride SP to (PH, PW). Grid (B * tiles, chunks of CMAX channels); thread q of tile t of sample b owns
// pooled position t * blockDim.x + q. One tile: y[b, c] = tanh(mean); else part[b, t, c] = the tile's sum.
extern "C" __global__ void convt_pool_clamp_sum(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ cb, float* __restrict__ part, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int S, int P, int KP, int SP, long long PH, long long PW, int tiles,
        float lo, float hi) {
    __shared__ __align__(16) float ws[WMAX];  // ws[(ci * K^2 + tap) * CMAX + c] = w[ci, c0 + c, tap]
    __shared__ float red[8][CMAX];            // per-warp channel sums
    const int K2 = K * K, c0 = blockIdx.y * CMAX, tile = blockIdx.x % tiles;
    for (int i = threadIdx.x; i < Ci * K2 * CMAX; i += blockDim.x) {
        const int c = i % CMAX, t = i / CMAX % K2, ci = i / (CMAX * K2);
        ws[i] = c0 + c < Co ? w[((long long)ci * Co + c0 + c) * K2 + t] : 0.f;
    }
    __syncthreads();
    const long long b = blockIdx.x / tiles, q = (long long)tile * blockDim.x + threadIdx.x;
    float s[CMAX];  // this thread's hardtanh(max + bias) per channel, 0 past the plane
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) s[c] = 0.f;
    if (q < PH * PW) {
        float m[CMAX];
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) m[c] = -INFINITY;
        for (int u = 0; u < KP; ++u)
            for (int v = 0; v < KP; ++v) {
                const long long zh = q / PW * SP + u + P, zw = q % PW * SP + v + P;  // conv position + P
                float acc[CMAX];
                #pragma unroll
                for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
                for (int kh = zh % S; kh < K && kh <= zh; kh += S) {  // the taps with zh - kh = ih * S
                    const long long ih = (zh - kh) / S;
                    if (ih >= H) continue;
                    for (int kw = zw % S; kw < K && kw <= zw; kw += S) {
                        const long long iw = (zw - kw) / S;
                        if (iw >= W) continue;
                        const float* xp = x + (b * Ci * H + ih) * W + iw;
                        const float4* wt = reinterpret_cast<const float4*>(ws + (kh * K + kw) * CMAX);
                        for (int ci = 0; ci < Ci; ++ci) {
                            const float xv = xp[ci * H * W];
                            #pragma unroll
                            for (int r = 0; r < CMAX / 4; ++r) {
                                const float4 wq = wt[ci * K2 * (CMAX / 4) + r];
                                acc[4 * r] = fmaf(xv, wq.x, acc[4 * r]);
                                acc[4 * r + 1] = fmaf(xv, wq.y, acc[4 * r + 1]);
                                acc[4 * r + 2] = fmaf(xv, wq.z, acc[4 * r + 2]);
                                acc[4 * r + 3] = fmaf(xv, wq.w, acc[4 * r + 3]);
                            }
                        }
                    }
                }
                #pragma unroll
                for (int c = 0; c < CMAX; ++c) m[c] = nanmax(acc[c], m[c]);
            }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) {
            const float v = m[c] + (c0 + c < Co ? cb[c0 + c] : 0.f);
            s[c] = v != v ? v : fminf(fmaxf(v, lo), hi);  // Hardtanh, NaN stays NaN
        }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        for (int o = 16; o > 0; o >>= 1) s[c] += __shfl_xor_sync(0xffffffffu, s[c], o);
        if (lane == 0) red[warp][c] = s[c];
    }
    __syncthreads();
    if (threadIdx.x < CMAX && c0 + threadIdx.x < Co) {
        float t = 0.f;
        for (int k = 0; k < (int)(blockDim.x >> 5); ++k) t += red[k][threadIdx.x];
        if (tiles == 1) y[b * Co + c0 + threadIdx.x] = tanhf(t / (float)(PH * PW));
        else part[(b * tiles + tile) * Co + c0 + threadIdx.x] = t;
    }
}

// y[b, c] = tanh(sum over tiles t in order of part[b, t, c] / n); one thread per (b, c).
extern "C" __global__ void finish_mean_tanh(const float* __restrict__ part, float* __restrict__ y, int Co,
        int tiles, long long nbc, float n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= nbc) return;
    const long long b = i / Co, c = i % Co;
    float t = 0.f;
    for (int k = 0; k < tiles; ++k) t += part[(b * tiles + k) * Co + c];
    y[i] = tanhf(t / n);
}
""")


def _same(t):  # the one value of a square setting, else None
    return t[0] if len(set(t)) == 1 else None


def _pool(p):  # (kernel, stride) of a plain square MaxPool2d (no padding, dilation or ceil mode), else None
    k = p.kernel_size if isinstance(p.kernel_size, int) else _same(p.kernel_size)
    s = p.stride if isinstance(p.stride, int) else _same(p.stride)
    ok = k is not None and s is not None and p.padding in (0, (0, 0)) and p.dilation in (1, (1, 1)) \
        and not p.ceil_mode
    return (k, s) if ok else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, maxpool_kernel_size, maxpool_stride,
                 hardtanh_min, hardtanh_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.maxpool = nn.MaxPool2d(kernel_size=maxpool_kernel_size, stride=maxpool_stride)
        self.hardtanh = nn.Hardtanh(min_val=hardtanh_min, max_val=hardtanh_max)

    def forward(self, x):
        m = self.conv_transpose
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc, pool = _same(m.stride), _same(m.padding), _same(m.kernel_size), _pool(self.maxpool)
        if (None in (S, P, Kc, pool) or m.groups != 1 or m.dilation != (1, 1) or m.bias is None
                or m.padding_mode != "zeros" or Ci * K * K * CMAX > WMAX or x.dim() != 4):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.tanh(torch.mean(self.hardtanh(self.maxpool(x)), dim=(2, 3), keepdim=True))
        x = x.contiguous()
        B, _, H, W = x.shape
        OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip((H, W), m.output_padding))  # the conv's output
        KP, SP = pool
        PH, PW = (OH - KP) // SP + 1, (OW - KP) // SP + 1  # the pooled plane, floor mode
        tiles = -(-(PH * PW) // 256)
        y = x.new_empty(B, Co, 1, 1)
        part = x.new_empty(B * tiles * Co if tiles > 1 else 1)  # per-tile channel sums
        lo, hi = float(self.hardtanh.min_val), float(self.hardtanh.max_val)
        _k.convt_pool_clamp_sum((B * tiles, -(-Co // CMAX)), 256, x.data_ptr(), m.weight.contiguous().data_ptr(),
                                m.bias.data_ptr(), part.data_ptr(), y.data_ptr(), Ci, Co, H, W, K, S, P, KP, SP,
                                PH, PW, tiles, lo, hi)
        if tiles > 1:
            _k.finish_mean_tanh((B * Co + 255) // 256, 256, part.data_ptr(), y.data_ptr(), Co, tiles, B * Co,
                                float(PH * PW))
        return y

"""A direct fp32 transposed convolution evaluated twice, never stored: once for the statistics, once to
write the result; BatchNorm and the spatial-mean subtraction folded into one per-channel scale.

Eager runs the ConvTranspose3d (16 -> 32 channels, 3x3x3, stride 2: output (16, 32, 31, 63, 63), 252 MB),
BatchNorm (statistics and apply), the spatial mean and the subtraction: ~7 passes over the 252 MB. Its
conv runs on TF32 tensor cores, 22x outside the strict tolerance; cuDNN's true-fp32 transposed conv runs
on the CUDA cores and made a strict version 0.69x. The convolution itself is small: with
stride 2 an output takes 1 or 2 taps per dimension (3.4 on average) of 16 input channels, ~54
multiply-adds per output channel, 3.4 G multiply-adds for the whole output.

Which statistics: in training mode y = (v - mu_c) * a_c + beta_c with a_c = gamma_c * rstd_c over the
batch, and subtracting y's mean over (D, H, W) leaves out = (v - m_nc) * a_c, m_nc the (sample, channel)
spatial mean of v: mu_c, beta_c and the conv bias all cancel. So the sum and the sum of squares of v
(without bias) per (sample, channel) give everything: m_nc, and summed over the batch mu_c and the
biased variance for rstd_c; running_mean gets mu_c plus the conv bias, running_var the unbiased variance.
(1) convt_stats computes the conv one cell of S^3 output positions per thread (the cell's positions take
fixed taps, so a warp never diverges), 16 output channels per block (weights staged in shared memory as
[input channel][tap][output channel] and read as broadcast float4s), and writes per block each channel's
two sums; (2) bn_finalize, a thread per channel, adds the partials in a fixed order, writes m_nc and a_c
and updates the running statistics as BatchNorm does; (3) convt_apply recomputes the conv and writes
(v - m_nc) * a_c once. Recomputing ~3.4 G multiply-adds costs less than writing and reading back 252 MB
several times; traffic is the 17 MB input read twice and the output written once.

Numerics: plain fp32 FMAs, no TF32. Each thread sums its <= 32 positions in fp32, everything beyond in
double in a fixed order, so the output is bitwise reproducible; var = E[v^2] - E[v]^2 in double.
Other settings (groups, dilation, eval mode, no affine) take torch's ops with TF32 off.
Measured on the H200: 2.24x over eager (2.1 -> 0.938 ms); 2.39x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX, SMAX, R = 16, 8192, 8, 4  # channels per block, staged weights, max stride, cells per thread (pass 1)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 8192, SMAX = 8, R = 4;
// The conv kernels run 2 blocks per SM (__launch_bounds__(256, 2)): up to 128 registers hold the 16
// accumulators and the 32 partial sums; nvcc's default cap (80) spills them.

// Stage channels [c0, c0 + CMAX) of w (Ci, Co, K^3) as ws[(ci * K^3 + tap) * CMAX + c] (0 past Co), and the
// tap table: conv output o = S * c + r (r < S) takes input c + tb[r].y - m through tap tb[r].x + m * S,
// m = 0, 1, ... (o + P = i * S + k).
__device__ void stage(const float* __restrict__ w, float* ws, int2* tb, int Ci, int Co, int c0, int K, int S, int P) {
    const int K3 = K * K * K;
    for (int i = threadIdx.x; i < Ci * K3 * CMAX; i += blockDim.x) {
        const int c = i % CMAX, t = i / CMAX % K3, ci = i / (CMAX * K3);
        ws[i] = c0 + c < Co ? w[((long long)ci * Co + c0 + c) * K3 + t] : 0.f;
    }
    if (threadIdx.x < S) tb[threadIdx.x] = make_int2((threadIdx.x + P) % S, (threadIdx.x + P) / S);
    __syncthreads();
}

// acc[c] = the transposed conv (no bias) of sample xb (Ci, D, H, W) at output S * (cd, ch, cw) + (a, e, f).
__device__ __forceinline__ void conv_at(float* acc, const float* __restrict__ xb, const float* ws, const int2* tb,
        int Ci, int K, int S, int D, int H, int W, int cd, int ch, int cw, int a, int e, int f) {
    const long long DHW = (long long)D * H * W;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    for (int kd = tb[a].x, id = cd + tb[a].y; kd < K && id >= 0; kd += S, --id) {
        if (id >= D) continue;
        for (int kh = tb[e].x, ih = ch + tb[e].y; kh < K && ih >= 0; kh += S, --ih) {
            if (ih >= H) continue;
            for (int kw = tb[f].x, iw = cw + tb[f].y; kw < K && iw >= 0; kw += S, --iw) {
                if (iw >= W) continue;
                const float* xp = xb + ((long long)id * H + ih) * W + iw;
                const float4* wt = reinterpret_cast<const float4*>(ws) + ((kd * K + kh) * K + kw) * (CMAX / 4);
                for (int ci = 0; ci < Ci; ++ci, xp += DHW, wt += K * K * K * (CMAX / 4)) {
                    const float xv = *xp;
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
        }
    }
}

// Pass 1. Block (b * NG + g) * nblk + k takes channels [g * CMAX, g * CMAX + CMAX) and cells
// j = (k * R + r) * 256 + threadIdx.x (r < R) of sample b's (CD, CH, CW) grid of S^3-position cells;
// part[block * 2 CMAX + c] = its sum of channel g * CMAX + c's conv, [.. + CMAX + c] of squares.
extern "C" __global__ void __launch_bounds__(256, 2) convt_stats(const float* __restrict__ x, const float* __restrict__ w,
        double* __restrict__ part, int Ci, int Co, int D, int H, int W, int K, int S, int P, int OD, int OH, int OW,
        int CD, int CH, int CW, int NG, int nblk) {
    __shared__ __align__(16) float ws[WMAX];
    __shared__ int2 tb[SMAX];
    __shared__ double red[8][2 * CMAX];
    const long long bg = blockIdx.x / nblk, b = bg / NG;
    const int k = blockIdx.x % nblk;
    stage(w, ws, tb, Ci, Co, bg % NG * CMAX, K, S, P);
    const float* xb = x + b * Ci * D * H * W;
    float s1[CMAX], s2[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) s1[c] = s2[c] = 0.f;
    for (int r = 0; r < R; ++r) {
        const int j = (k * R + r) * 256 + threadIdx.x;
        if (j >= CD * CH * CW) break;
        const int cw = j % CW, ch = j / CW % CH, cd = j / (CW * CH);
        for (int a = 0; a < S; ++a)
            for (int e = 0; e < S; ++e)
                for (int f = 0; f < S; ++f) {
                    if (S * cd + a >= OD || S * ch + e >= OH || S * cw + f >= OW) continue;
                    float acc[CMAX];
                    conv_at(acc, xb, ws, tb, Ci, K, S, D, H, W, cd, ch, cw, a, e, f);
                    #pragma unroll
                    for (int c = 0; c < CMAX; ++c) { s1[c] += acc[c]; s2[c] = fmaf(acc[c], acc[c], s2[c]); }
                }
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    #pragma unroll
    for (int c = 0; c < 2 * CMAX; ++c) {  // block sums in double, in a fixed order
        double v = c < CMAX ? s1[c] : s2[c - CMAX];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) red[warp][c] = v;
    }
    __syncthreads();
    if (threadIdx.x < 2 * CMAX) {
        double v = 0.0;
        for (int i = 0; i < 8; ++i) v += red[i][threadIdx.x];
        part[blockIdx.x * 2 * CMAX + threadIdx.x] = v;
    }
}

// Thread c: from the partials of channel c, mnc[b * Co + c] = the spatial mean of sample b's conv (no bias),
// scale[c] = gamma_c * rstd_c over the batch; running_mean (conv bias added back) and running_var
// (unbiased) updated with the momentum.
extern "C" __global__ void bn_finalize(const double* __restrict__ part, const float* __restrict__ bias,
        const float* __restrict__ gamma, float* rmean, float* rvar, float* __restrict__ mnc,
        float* __restrict__ scale, int B, int Co, int NG, int nblk, long long S, float eps, float mom) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= Co) return;
    double t1 = 0.0, t2 = 0.0;
    for (int b = 0; b < B; ++b) {
        const double* p = part + (((long long)b * NG + c / CMAX) * nblk) * 2 * CMAX + c % CMAX;
        double s1 = 0.0;
        for (int k = 0; k < nblk; ++k) { s1 += p[k * 2 * CMAX]; t2 += p[k * 2 * CMAX + CMAX]; }
        mnc[b * Co + c] = (float)(s1 / (double)S);
        t1 += s1;
    }
    const double cnt = (double)B * (double)S, mean = t1 / cnt, var = fmax(t2 / cnt - mean * mean, 0.0);
    scale[c] = gamma[c] * (float)(1.0 / sqrt(var + (double)eps));
    rmean[c] = (1.f - mom) * rmean[c] + mom * (float)(mean + (double)bias[c]);
    rvar[c] = (1.f - mom) * rvar[c] + mom * (float)(var * cnt / (cnt - 1.0));
}

// Pass 2. Block (b * NG + g) * nblk + k, thread j = k * 256 + threadIdx.x: cell j of sample b, channels
// [g * CMAX, g * CMAX + CMAX): y = (v - mnc[b, c]) * scale[c].
extern "C" __global__ void __launch_bounds__(256, 2) convt_apply(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ mnc, const float* __restrict__ scale,
        float* __restrict__ y, int Ci, int Co, int D, int H, int W, int K, int S, int P, int OD, int OH, int OW,
        int CD, int CH, int CW, int NG, int nblk) {
    __shared__ __align__(16) float ws[WMAX];
    __shared__ int2 tb[SMAX];
    const long long bg = blockIdx.x / nblk, b = bg / NG;
    const int c0 = bg % NG * CMAX, j = blockIdx.x % nblk * 256 + threadIdx.x;
    stage(w, ws, tb, Ci, Co, c0, K, S, P);
    if (j >= CD * CH * CW) return;
    const int cw = j % CW, ch = j / CW % CH, cd = j / (CW * CH);
    const long long plane = (long long)OD * OH * OW;
    for (int a = 0; a < S; ++a)
        for (int e = 0; e < S; ++e)
            for (int f = 0; f < S; ++f) {
                const int od = S * cd + a, oh = S * ch + e, ow = S * cw + f;
                if (od >= OD || oh >= OH || ow >= OW) continue;
                float acc[CMAX];
                conv_at(acc, x + b * Ci * D * H * W, ws, tb, Ci, K, S, D, H, W, cd, ch, cw, a, e, f);
                float* yp = y + (b * Co + c0) * plane + ((long long)od * OH + oh) * OW + ow;
                #pragma unroll
                for (int c = 0; c < CMAX; ++c)
                    if (c0 + c < Co) yp[c * plane] = (acc[c] - mnc[b * Co + c0 + c]) * scale[c0 + c];
            }
}
""")


def _same(t):  # the one value of a cubic setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, bias=bias)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        m, bn = self.conv_transpose, self.batch_norm
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc = _same(m.stride), _same(m.padding), _same(m.kernel_size)
        ok = None not in (S, P, Kc) and S <= SMAX and x.dim() == 5
        if ok:
            B, _, D, H, W = x.shape
            OD, OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip((D, H, W), m.output_padding))  # conv output
        if (not ok or m.groups != 1 or m.dilation != (1, 1, 1) or m.padding_mode != "zeros"
                or Ci * K ** 3 * CMAX > WMAX or not (bn.training and bn.track_running_stats and bn.affine)
                or B * OD * OH * OW < 2 or OD * OH * OW >= 2 ** 31 or Ci * D * H * W >= 2 ** 31):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            c = bn(m(x))
            torch.backends.cudnn.allow_tf32 = tf32
            return c - torch.mean(c, dim=(2, 3, 4), keepdim=True)
        x, wt = x.contiguous(), m.weight.contiguous()
        bias = m.bias.detach() if m.bias is not None else x.new_zeros(Co)
        NG = -(-Co // CMAX)  # groups of CMAX output channels, one per block
        CD, CH, CW = -(-OD // S), -(-OH // S), -(-OW // S)  # cells of S^3 conv positions
        nblk = -(-CD * CH * CW // (256 * R))
        part = torch.empty(B * NG * nblk * 2 * CMAX, device=x.device, dtype=torch.float64)
        st = torch.empty(B * Co + Co, device=x.device, dtype=torch.float32)  # mnc (B, Co), then scale (Co)
        mnc, scale = st.data_ptr(), st.data_ptr() + 4 * B * Co
        _k.convt_stats(B * NG * nblk, 256, x.data_ptr(), wt.data_ptr(), part.data_ptr(), Ci, Co, D, H, W, K, S, P,
                       OD, OH, OW, CD, CH, CW, NG, nblk)
        bn.num_batches_tracked.add_(1)
        mom = bn.momentum if bn.momentum is not None else 1.0 / float(bn.num_batches_tracked)  # cumulative average
        _k.bn_finalize((Co + 31) // 32, 32, part.data_ptr(), bias.data_ptr(), bn.weight.data_ptr(),
                       bn.running_mean.data_ptr(), bn.running_var.data_ptr(), mnc, scale, B, Co, NG, nblk,
                       OD * OH * OW, bn.eps, mom)
        y = x.new_empty(B, Co, OD, OH, OW)
        nblk2 = -(-CD * CH * CW // 256)
        _k.convt_apply(B * NG * nblk2, 256, x.data_ptr(), wt.data_ptr(), mnc, scale, y.data_ptr(), Ci, Co, D, H, W,
                       K, S, P, OD, OH, OW, CD, CH, CW, NG, nblk2)
        return y

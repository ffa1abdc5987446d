"""The whole model in one kernel: a direct fp32 transposed convolution in which each thread computes all
64 output channels of one position, then the channel softmax, + bias, * scale and sigmoid in registers
and one write.

Eager runs the cuDNN ConvTranspose2d (32 -> 64 channels, 4x4, stride 2, padding 1, output_padding 1:
output (128, 64, 33, 33), 35.7 MB), the softmax over channels (reads it twice or more) and the add,
multiply and sigmoid (each a read and write): ~250 MB of traffic after the conv. Its conv uses TF32,
which passes the strict check here only because the softmax's outputs (~1/64) sit under a large bias,
while cuDNN's true-fp32 transposed conv is slower than eager's. Yet the conv is small: at stride 2 each
output takes 2 x 2 of the 4 x 4 taps, 4 x 32 = 128 multiply-adds per output channel, 1.1 G in all.

Output o takes input i where o + P = i * S + k, so (oh + P) % S fixes the taps kh = (oh + P) % S + S * j:
the outputs fall in S * S classes by the parity of their position, and all outputs of a class share
their taps. Each block serves one class (the class is the fastest grid index, so the blocks of the four
classes of one tile run side by side and their interleaved stride-2 stores meet in L2); its threads take
consecutive positions of that class (adjacent threads read adjacent input pixels: coalesced). Because a
block needs only its class's 4 taps, all 64 channels' weights fit in shared memory (32 x 4 x 64 floats,
32 KB, as [ci][tap][channel], read as broadcast float4s). The softmax needs every channel of a position
at once, so one thread owns all 64: 64 accumulators in registers (~100 registers, so lower occupancy,
but 64 independent FMA chains per input value give the ILP), no shuffles or shared-memory exchange, and
the weight float4s stay broadcasts; a team of 4 threads per position would need shuffles for the max
and the sum and would read 4 different weight addresses per load. Per input channel and tap: one input
load, 16 shared loads, 64 FMAs, no divergence. Then, in eager's order: + conv bias, the max, the sum of
exp(v - max), exp(v - max) / sum + bias[c], * scale, 1 / (1 + exp(-t)); 64 values written once. DRAM
traffic: the 4.2 MB input and the 35.7 MB output. Numerics: plain fp32 fmaf over (tap, ci) then + bias
(cuDNN orders the 128 terms differently: rounding-level differences), expf, the sum over channels in
order; no TF32. Other settings (more than 64 channels, groups, dilation, non-square kernel/stride/padding,
weights over the shared buffer, a bias not shaped (C, 1, 1)) take cuDNN with TF32 off and eager's ops.
The task's 33 x 33 output is odd, so the classes differ in size; each takes the largest class's extent
and ~6% of the threads exit at once. Not yet measured on the H200.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 64, 8192  # output channels per thread (all of them); weights staged per block (one class)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 64, WMAX = 8192;

// x: (B, Ci, H, W); w: (Ci, Co, K, K); y: (B, Co, OH, OW); output o takes input i where o + P = i * S + k.
// Grid S * S * tiles. Class (rh, rw) = blockIdx.x % (S * S): the outputs with (oh + P) % S == rh and
// (ow + P) % S == rw, whose taps are kh = rh + S * jh, kw = rw + S * jw (j < T). Its outputs are
// oh = oh0 + S * a, ow = ow0 + S * e with a < QH, e < QW; thread j = (b * QH + a) * QW + e.
extern "C" __global__ void __launch_bounds__(256) convt_softmax_bias_sigmoid(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ bias,
        float* __restrict__ y, int Ci, int Co, long long H, long long W, int K, int S, int P, long long OH,
        long long OW, long long QH, long long QW, long long n, float scale) {
    __shared__ __align__(16) float ws[WMAX];  // ws[((ci * T + jh) * T + jw) * CMAX + c] = w[ci, c, kh, kw]
    const int T = (K + S - 1) / S, rh = blockIdx.x % (S * S) / S, rw = blockIdx.x % S;
    for (int i = threadIdx.x; i < Ci * T * T * CMAX; i += blockDim.x) {
        const int c = i % CMAX, jw = i / CMAX % T, jh = i / (CMAX * T) % T, ci = i / (CMAX * T * T);
        const int kh = rh + S * jh, kw = rw + S * jw;
        ws[i] = c < Co && kh < K && kw < K ? w[(((long long)ci * Co + c) * K + kh) * K + kw] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x / (S * S) * (long long)blockDim.x + threadIdx.x;
    const int oh0 = ((rh - P) % S + S) % S, ow0 = ((rw - P) % S + S) % S;
    const int dh = (oh0 + P - rh) / S, dw = (ow0 + P - rw) / S;  // ih = a + dh - jh, iw = e + dw - jw
    const long long e = j % QW, a = j / QW % QH, b = j / (QW * QH);
    const long long oh = oh0 + S * a, ow = ow0 + S * e;
    if (j >= n || oh >= OH || ow >= OW) return;  // QH, QW: the largest class's extent
    float v[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) v[c] = 0.f;
    for (int jh = 0; jh < T && rh + S * jh < K; ++jh) {
        const long long ih = a + dh - jh;
        if (ih < 0 || ih >= H) continue;
        for (int jw = 0; jw < T && rw + S * jw < K; ++jw) {
            const long long iw = e + dw - jw;
            if (iw < 0 || iw >= W) continue;
            const float* xp = x + (b * Ci * H + ih) * W + iw;
            const float4* wt = reinterpret_cast<const float4*>(ws + (jh * T + jw) * CMAX);
            for (int ci = 0; ci < Ci; ++ci) {
                const float xv = xp[ci * H * W];
                #pragma unroll
                for (int q = 0; q < CMAX / 4; ++q) {
                    const float4 wq = wt[ci * T * T * (CMAX / 4) + q];
                    v[4 * q] = fmaf(xv, wq.x, v[4 * q]);
                    v[4 * q + 1] = fmaf(xv, wq.y, v[4 * q + 1]);
                    v[4 * q + 2] = fmaf(xv, wq.z, v[4 * q + 2]);
                    v[4 * q + 3] = fmaf(xv, wq.w, v[4 * q + 3]);
                }
            }
        }
    }
    float mx = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        v[c] += cb[c];  // the conv's bias
        mx = fmaxf(mx, v[c]);  // a NaN still reaches every output through the sum
    }
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        v[c] = expf(v[c] - mx);
        sum += v[c];
    }
    float* yp = y + (b * Co * OH + oh) * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        const float t = (v[c] / sum + bias[c]) * scale;  // softmax, + bias, * scaling_factor
        yp[c * OH * OW] = 1.f / (1.f + expf(-t));        // torch.sigmoid
    }
}
""")


def _same(t):  # the one value of a square setting, else None
    return t[0] if len(set(t)) == 1 else None


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        m = self.conv_transpose
        Ci, Co, K = m.weight.shape[:3]
        S, P, Kc = _same(m.stride), _same(m.padding), _same(m.kernel_size)
        T = -(-K // S) if S else 0  # taps per dimension of one class
        if (None in (S, P, Kc) or m.groups != 1 or m.dilation != (1, 1) or m.bias is None
                or m.padding_mode != "zeros" or Co > CMAX or Ci * T * T * CMAX > WMAX or x.dim() != 4
                or self.bias.shape != (Co, 1, 1)):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * self.scaling_factor)
        x = x.contiguous()
        B, _, H, W = x.shape
        OH, OW = ((n - 1) * S - 2 * P + K + o for n, o in zip((H, W), m.output_padding))
        QH, QW = -(-OH // S), -(-OW // S)  # positions per class and dimension (the largest class)
        n = B * QH * QW
        y = x.new_empty(B, Co, OH, OW)
        _k.convt_softmax_bias_sigmoid((n + 255) // 256 * S * S, 256, x.data_ptr(), m.weight.contiguous().data_ptr(),
                                      m.bias.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(), Ci, Co,
                                      H, W, K, S, P, OH, OW, QH, QW, n, float(self.scaling_factor))
        return y

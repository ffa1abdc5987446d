"""The whole model in one kernel: a direct fp32 transposed convolution, 16 output channels per thread,
with the bias, both clamps, the scaling and the division applied in registers before one write.

Eager runs the ConvTranspose2d (3 -> 16 channels, 3x3, stride 2: output (128, 16, 64, 64), 33.6 MB)
and five elementwise kernels (+ bias, clamp, * 2, clamp, / 2), each a read and a write of those
33.6 MB: ~370 MB of traffic and six launches around a convolution of 0.05 G multiply-adds (3 input
channels; with stride 2 each output takes at most 2 x 2 of the 3 x 3 taps). cuDNN runs it with TF32,
which the strict check does not grant a solution, and its true-fp32 path is slower still.

Here one thread owns one output pixel of one sample: it adds the taps that land on it (output o takes
input i where o = 2i - 1 + k) straight from the input into 16 accumulators, with the weights staged
in shared memory as [input channel][tap][output channel] and read as broadcast float4s, then applies
+ conv bias, + bias, clamp(0, 1), * s, clamp(0, 1), / s in eager's order and writes each channel once:
1.5 MB read, 33.6 MB written, one launch. All plain fp32 FMAs, no TF32: only the order of the
conv's sums differs from cuDNN's. Other settings (groups, dilation, more than 16 output channels)
take torch's ops with TF32 off. Measured on the H200: 3.06x over eager (0.391 -> 0.128 ms); 3.56x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 8192  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 8192;

// Thread j = (b * OH + oh) * OW + ow owns y[b, :, oh, ow]. x: (B, Ci, H, W); w: (Ci, Co, K, K); the
// conv: stride S, padding P (output o takes input i where o = i * S - P + k).
extern "C" __global__ void __launch_bounds__(256) convt_bias_clamp_scale(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ bias,
        float* __restrict__ y, int Ci, int Co, long long H, long long W, int K, int S, int P, long long OH,
        long long OW, float s, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[(ci * K^2 + tap) * CMAX + c] = w[ci, c, tap], 0 for c >= Co
    const int K2 = K * K;
    for (int i = threadIdx.x; i < Ci * K2 * CMAX; i += blockDim.x) {
        const int c = i % CMAX, t = i / CMAX % K2, ci = i / (CMAX * K2);
        ws[i] = c < Co ? w[((long long)ci * Co + c) * K2 + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, b = j / (OW * OH);
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    // the taps landing here: k = z mod S, z mod S + S, ..., from input i = z / S down (z = o + P = i * S + k)
    const int zh = (int)oh + P, zw = (int)ow + P;
    for (int kh = zh % S, ih = zh / S; kh < K && ih >= 0; kh += S, --ih) {
        if (ih >= H) continue;
        for (int kw = zw % S, iw = zw / S; kw < K && iw >= 0; kw += S, --iw) {
            if (iw >= W) continue;
            const float* xp = x + (b * Ci * H + ih) * W + iw;
            for (int ci = 0; ci < Ci; ++ci) {
                const float xv = xp[ci * H * W];
                const float4* wt = reinterpret_cast<const float4*>(ws + (ci * K2 + kh * K + kw) * CMAX);
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
    const long long plane = OH * OW, pos = oh * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        float v = acc[c] + cb[c] + bias[c];
        v = v < 0.f ? 0.f : (v > 1.f ? 1.f : v);  // torch.clamp(0, 1); NaN stays NaN
        v = v * s;
        v = v < 0.f ? 0.f : (v > 1.f ? 1.f : v);
        y[(b * Co + c) * plane + pos] = v / s;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        m = self.conv_transpose
        Ci, Co, K = m.weight.shape[:3]
        (S, S2), (P, P2), (oph, opw) = m.stride, m.padding, m.output_padding
        if (S != S2 or P != P2 or m.kernel_size != (K, K) or m.groups != 1 or m.dilation != (1, 1) or m.bias is None
                or Co > CMAX or Ci * K * K * CMAX > WMAX or x.dim() != 4 or self.bias.numel() != Co):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = m(x)
            torch.backends.cudnn.allow_tf32 = tf32
            x = torch.clamp(x + self.bias, min=0.0, max=1.0)
            return torch.clamp(x * self.scaling_factor, min=0.0, max=1.0) / self.scaling_factor
        x = x.contiguous()
        B, _, H, W = x.shape
        OH, OW = (H - 1) * S - 2 * P + K + oph, (W - 1) * S - 2 * P + K + opw
        y = x.new_empty(B, Co, OH, OW)
        n = B * OH * OW
        _k.convt_bias_clamp_scale((n + 255) // 256, 256, x.data_ptr(), m.weight.contiguous().data_ptr(),
                                  m.bias.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(), Ci, Co, H, W,
                                  K, S, P, OH, OW, float(self.scaling_factor), n)
        return y

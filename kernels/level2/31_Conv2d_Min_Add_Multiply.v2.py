"""The whole model in one kernel: a direct 3x3 conv, 16 output channels per thread, with the
elementwise min against the constant, the bias add and the scale applied in registers before a
single store.

Eager runs the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB), builds a 0-dim
CPU tensor for the constant, and runs three elementwise kernels -- torch.min(x, constant) (an
elementwise minimum, not a reduction: the output keeps all 16 channels), + bias ((16, 1, 1)
broadcast) and * scaling_factor -- each a read and write of the 7.4 MB: ~44 MB of traffic and four
launches around a conv of only 50M multiply-adds, which cuDNN's implicit GEMM handles badly (N = 16
output channels, K = 27 taps). Here one thread per output pixel (sample, oh, ow) loads its 27 input
values once (adjacent threads read adjacent pixels: coalesced, mostly L1 hits) and multiplies each
into 16 channel accumulators, with the weights staged in shared memory as [tap][channel] and read
as broadcast float4s (432 floats, staged once per block). Each channel then gets + conv bias,
min(v, constant) (NaN propagates, as torch.minimum), + bias[c] and * scale in eager's order (the
same roundings as eager's three kernels; the min sits between the two bias adds, so nothing folds
into the weights) and is written once (per channel, a warp stores 32 adjacent pixels). One launch,
1.5 MB read, 7.4 MB written. Our other Conv2d files map a block to a (sample, channel) plane (69:
the 12 KB sample copied to shared memory by each of 16 channel blocks) or a thread to (sample,
channel, pixel) (87: each input value loaded once per channel, 27 loads for 27 FMAs); here 27 loads
feed 432 FMAs and the input is read once per pixel, so this mapping is the one expected faster (450
blocks of 256 on 132 SMs; the 16 independent accumulators per thread give ILP for the ~40%
occupancy). Numerics: plain fp32 fmaf over the taps in (ci, kh, kw) order, then + conv bias (cuDNN
orders the 27 terms differently: rounding-level differences); no TF32. Other configs (more than 16
channels, stride, padding, dilation, groups, non-square kernels, unbatched input, a bias not shaped
(Co, 1, 1)) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.85x over eager (0.268 -> 0.0939 ms); 2.75x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 1024  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024;

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; bias: (Co,); y: (B, Co, OH, OW).
// One thread per output pixel, all Co <= CMAX channels; taps = Ci * K^2 <= WMAX / CMAX.
extern "C" __global__ void __launch_bounds__(256) conv_min_add_mul(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ bias,
        float* __restrict__ y, float cv, float s, int Ci, int Co, long long H, long long W, int K, long long OH,
        long long OW, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = (ci * K + kh) * K + kw), 0 for c >= Co
    const int taps = Ci * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // (b, oh, ow) flattened
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, b = j / (OW * OH);
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
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
                    acc[4 * q] = fmaf(xv, wq.x, acc[4 * q]);
                    acc[4 * q + 1] = fmaf(xv, wq.y, acc[4 * q + 1]);
                    acc[4 * q + 2] = fmaf(xv, wq.z, acc[4 * q + 2]);
                    acc[4 * q + 3] = fmaf(xv, wq.w, acc[4 * q + 3]);
                }
            }
        }
    const long long plane = OH * OW, pos = oh * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        const float v = acc[c] + cb[c];                 // the conv's output
        const float m = (v < cv || v != v) ? v : cv;    // torch.min(x, constant): NaN propagates
        y[(b * Co + c) * plane + pos] = (m + bias[c]) * s;  // a warp stores 32 adjacent pixels
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, constant_value, bias_shape, scaling_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.constant_value = constant_value
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        c = self.conv
        Co, Ci, K = c.weight.shape[:3]
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or c.kernel_size != (K, K) or Co > CMAX or Ci * K * K * CMAX > WMAX
                or x.dim() != 4 or self.bias.shape != (Co, 1, 1)):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            try:
                x = c(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            return (torch.min(x, torch.tensor(self.constant_value)) + self.bias) * self.scaling_factor
        x = x.contiguous()
        B, _, H, W = x.shape
        y = x.new_empty(B, Co, H - K + 1, W - K + 1)  # (B, Co, OH, OW)
        n = B * (H - K + 1) * (W - K + 1)  # output pixels, one thread each
        if n > 0:
            _k.conv_min_add_mul((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                                c.bias.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(),
                                float(self.constant_value), float(self.scaling_factor), Ci, Co, H, W, K,
                                H - K + 1, W - K + 1, n)
        return y

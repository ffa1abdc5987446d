"""The whole model in one kernel: a direct 3x3 conv, 16 output channels per thread, with ReLU and
both biases applied in registers before each channel's single store.

Eager runs four kernels: the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB),
whose implicit GEMM is badly shaped here (N = 16 output channels, K = 27 taps), PyTorch's separate
conv-bias add, torch.relu and the broadcast `+ bias`: three full reads and writes of the 7.4 MB
activation around a conv of only 50M multiply-adds. The library file already fuses it into one
kernel, with a thread per (sample, channel, pixel) on a (pixel tile, channel, sample) grid: each
thread loads 27 inputs and 27 weights for 27 FMAs, so every input value is fetched 16 times (once
per channel, from L1) and the grid is 7200 blocks. Here one thread per output pixel (sample, oh, ow)
loads its 27 input values once (adjacent threads read adjacent pixels: coalesced, mostly L1 hits)
and multiplies each into 16 channel accumulators, with the weights staged in shared memory as
[tap][channel] and read as broadcast float4s: 27 global loads and 108 shared loads feed 432 FMAs,
against 54 loads per 27 FMAs, and the 16 independent accumulators give the ILP that ~40% occupancy
lacks (450 blocks of 256 on 132 SMs). Each channel then gets relu(v + b_conv[c]) + bias[c], and
the 16 stores are coalesced across the warp (one 128-byte row per channel). Same launch count and
bytes as the library (1.5 MB read, 7.4 MB written); the gain can only come from the kernel's own
time, the call being largely launch-bound. Numerics: plain fp32 fmaf over the taps in (ci, kh, kw)
order, then + conv bias (cuDNN orders the 27 terms differently: rounding-level differences), no
TF32; relu keeps NaN, as torch.relu does. Other configs (more than 16 channels, stride, padding,
dilation, groups, non-square kernels, a bias not shaped (C, 1, 1), unbatched input) take cuDNN with
TF32 off and eager's ops. Measured on the H200: 2.43x over eager (0.181 -> 0.0746 ms); 2.26x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 1024  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024;

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; y: (B, Co, OH, OW) = relu(conv + cb) + bias.
// One thread per output pixel; taps = Ci * K^2 <= WMAX / CMAX. At most 64 registers, so 4 blocks fit
// an SM and the 450 blocks of the task's shape run in one wave on 132 SMs.
extern "C" __global__ void __launch_bounds__(256, 4) conv_relu_bias(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ bias,
        float* __restrict__ y, int Ci, int Co, long long H, long long W, int K, long long OH, long long OW,
        long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = (ci * K + kh) * K + kw), 0 for c >= Co
    const int taps = Ci * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // (b, oh, ow) flattened
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, b = j / (OW * OH), plane = OH * OW;
    const float* xb = x + (b * Ci * H + oh) * W + ow;  // the window's top-left, channel 0
    float* yb = y + (b * Co * OH + oh) * OW + ow;      // the output pixel, channel 0
    float acc[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    int t = 0;
    for (int ci = 0; ci < Ci; ++ci)
        for (int kh = 0; kh < K; ++kh) {
            const float* xp = xb + (ci * H + kh) * W;
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
        if (c >= Co) break;
        float v = acc[c] + cb[c];               // the conv's bias
        v = v > 0.f ? v : (v == v ? 0.f : v);  // torch.relu, NaN stays NaN
        yb[c * plane] = v + bias[c];  // bias (C, 1, 1)
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

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
            return torch.relu(x) + self.bias
        x = x.contiguous()
        B, _, H, W = x.shape
        y = x.new_empty(B, Co, H - K + 1, W - K + 1)  # (B, Co, OH, OW)
        n = B * (H - K + 1) * (W - K + 1)  # output pixels, one thread each
        if n > 0:
            _k.conv_relu_bias((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                              c.bias.data_ptr(), self.bias.contiguous().data_ptr(), y.data_ptr(), Ci, Co, H, W, K,
                              H - K + 1, W - K + 1, n)
        return y

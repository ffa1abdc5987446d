"""The whole model in one kernel: a direct 3x3 conv, 16 output channels per thread, with the ReLU
and the hand-written hard-swish applied in registers before a single store.

Eager runs the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB) and five
elementwise kernels for relu(x) and x * clamp((x + 3) / 6, 0, 1) (relu, add, divide, clamp,
multiply), each reading (the multiply twice) and writing a 7.4 MB tensor: ~80 MB of traffic and six
launches around a conv of only 50M multiply-adds, which cuDNN's implicit GEMM handles badly (N = 16
output channels, K = 27 taps). Here one thread per output pixel (sample, oh, ow) loads its 27 input
values once (adjacent threads read adjacent pixels: coalesced, mostly L1 hits) and multiplies each
into 16 channel accumulators, with the weights staged in shared memory as [tap][channel] and read
as broadcast float4s (432 floats, staged once per block). Each channel then gets + bias,
v = max(v, 0) and v * clamp((v + 3) / 6, 0, 1) with eager's fp32 operations in eager's order (a
true division by 6, not a multiply by 1/6) and is written once (per channel, a warp stores 32
adjacent pixels). One launch, 1.5 MB read, 7.4 MB written. Our other Conv2d files map a block to a
(sample, channel) plane (69: the 12 KB sample copied to shared memory by each of 16 channel blocks)
or a thread to (sample, channel, pixel) (87: each input value loaded once per channel, 27 loads for
27 FMAs); here 27 loads feed 432 FMAs and the input is read once per pixel, so this mapping is the
one expected faster (450 blocks of 256 on 132 SMs; the 16 independent accumulators per thread give
ILP for the ~40% occupancy). Numerics: plain fp32 fmaf over the taps in (ci, kh, kw) order, then
+ bias (cuDNN orders the 27 terms differently: rounding-level differences); no TF32. Other configs
(more than 16 channels, stride, padding, dilation, groups, non-square kernels, unbatched input)
take cuDNN with TF32 off and eager's ops.
Measured on the H200: 3.02x over eager (0.212 -> 0.0704 ms); 2.93x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 1024  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024;

__device__ __forceinline__ float epi(float v) {
    v = v < 0.f ? 0.f : v;                        // torch.relu; NaN stays NaN
    float g = (v + 3.f) / 6.f;
    g = g < 0.f ? 0.f : (g > 1.f ? 1.f : g);      // torch.clamp(., 0, 1); NaN stays NaN
    return v * g;
}

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; y: (B, Co, OH, OW).
// One thread per output pixel, all Co <= CMAX channels; taps = Ci * K^2 <= WMAX / CMAX.
extern "C" __global__ void __launch_bounds__(256) conv_relu_hardswish(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, long long OH, long long OW, long long n) {
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
        y[(b * Co + c) * plane + pos] = epi(acc[c] + cb[c]);  // conv + bias, then the epilogue
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        c = self.conv
        Co, Ci, K = c.weight.shape[:3]
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or c.kernel_size != (K, K) or Co > CMAX or Ci * K * K * CMAX > WMAX
                or x.dim() != 4):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            try:
                x = c(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            x = torch.relu(x)
            return x * torch.clamp((x + 3) / 6, 0, 1)
        x = x.contiguous()
        B, _, H, W = x.shape
        y = x.new_empty(B, Co, H - K + 1, W - K + 1)  # (B, Co, OH, OW)
        n = B * (H - K + 1) * (W - K + 1)  # output pixels, one thread each
        if n > 0:
            _k.conv_relu_hardswish((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                                   c.bias.data_ptr(), y.data_ptr(), Ci, Co, H, W, K, H - K + 1, W - K + 1, n)
        return y

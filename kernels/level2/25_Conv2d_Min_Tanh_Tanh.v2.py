"""The whole model in one kernel: a direct 3x3 conv, 16 output channels per thread, whose min over
channels is taken in registers before tanh(tanh(.)) and a single store.

Eager runs four kernels: the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB
written), torch.min over dim 1 (reads those 7.4 MB, writes (128, 1, 30, 30), 0.46 MB) and two
tanh kernels (each a read and write of 0.46 MB). The conv is tiny -- 27 multiply-adds per output,
50M in all -- and badly shaped for cuDNN's implicit GEMM (N = 16 output channels, K = 27 taps), so
the call is bound by launches and by the round trip of the 16-channel tensor that only feeds a min.
Here one thread per output pixel (sample, oh, ow) loads its 27 input values once (adjacent threads
read adjacent pixels: coalesced, mostly L1 hits) and multiplies each into 16 channel accumulators,
with the weights staged in shared memory as [tap][channel] and read as broadcast float4s (432
floats, staged once per block). It adds each channel's bias, keeps the running min (NaN
propagates, as in torch.min) and writes tanh(tanh(min)) once: one launch, 1.5 MB read, 0.46 MB
written; the 16-channel tensor never exists. The other mapping in our Conv2d files -- a block per
(sample, channel) plane (69) or a thread per (sample, channel, pixel) (87) -- cannot take the
channel min without a second pass or a shuffle across threads, and reads each input value 16 times
where this reads it once per pixel for all 16 FMAs, so this mapping is the one expected faster
(450 blocks of 256 on 132 SMs; each thread's 16 independent accumulators give the ILP that the
~40% occupancy lacks). Numerics: plain fp32 fmaf over the taps in (ci, kh, kw) order, then + bias
(cuDNN orders the 27 terms differently: rounding-level differences), tanhf; no TF32. Other
configs (more than 16 channels, stride, padding, dilation, groups, non-square kernels, unbatched
input) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.78x over eager (0.237 -> 0.0853 ms); 2.47x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 1024  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024;

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; y: (B, 1, OH, OW) = tanh(tanh(min_c conv)).
// One thread per output pixel; taps = Ci * K^2 <= WMAX / CMAX.
extern "C" __global__ void __launch_bounds__(256) conv_min_tanh2(const float* __restrict__ x,
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
    float m = acc[0] + cb[0];
    #pragma unroll
    for (int c = 1; c < CMAX; ++c) {
        if (c >= Co) break;
        const float v = acc[c] + cb[c];
        m = (v < m || v != v) ? v : m;  // torch.min over channels: NaN propagates
    }
    y[j] = tanhf(tanhf(m));  // j is also the index into (B, 1, OH, OW)
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
            return torch.tanh(torch.tanh(torch.min(x, dim=1, keepdim=True).values))
        x = x.contiguous()
        B, _, H, W = x.shape
        y = x.new_empty(B, 1, H - K + 1, W - K + 1)  # (B, 1, OH, OW)
        n = y.numel()  # output pixels, one thread each
        if n > 0:
            _k.conv_min_tanh2((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(), c.bias.data_ptr(),
                              y.data_ptr(), Ci, Co, H, W, K, H - K + 1, W - K + 1, n)
        return y

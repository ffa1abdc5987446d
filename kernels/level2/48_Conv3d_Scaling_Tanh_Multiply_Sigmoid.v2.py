"""The whole model in one kernel: a direct 3x3x3 convolution, 16 output channels per thread, with
scale, tanh, multiply and sigmoid fused.

Eager runs the cuDNN Conv3d (3 -> 16 channels; its output equals the strict fp32 reference, so no
TF32 there), then x * scaling_factor, tanh, x * bias and sigmoid: four elementwise kernels, each a
read and write of the (128, 16, 14, 30, 30) conv output (103 MB), ~830 MB of traffic after the conv.
With only 3 input channels cuDNN's implicit GEMM has K = 81, a badly shaped problem for it. Here one
thread per output position (sample, d, h, w) loads its 81 input values once (adjacent threads read
adjacent pixels: coalesced, L1 hits) and multiplies each into 16 channel accumulators, with the
weights staged in shared memory as [tap][channel] and read as broadcast float4s. Each channel then
gets + conv bias, * scaling_factor[c], tanh, * bias[c] and sigmoid 1 / (1 + exp(-v)), in eager's
order, and is written once: DRAM sees the 25 MB input and the 103 MB output, one launch instead of
five. Plain fp32 FMAs (no TF32), the 81 taps summed in (ci, kd, kh, kw) order; the products are
single fp32 multiplies as in eager. As in the task, the `scaling_factor` argument is ignored (the
attribute is a (C, 1, 1, 1) Parameter). Other settings (stride, padding, more than 16 channels, a
non-cubic kernel) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.62x over eager (0.839 -> 0.321 ms); 2.84x on the H100.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, WMAX = 16, 2048  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 2048;

__device__ __forceinline__ float epi(float v, float s, float b) {
    v = tanhf(v * s) * b;          // tanh(x * scaling_factor) * bias
    return 1.f / (1.f + expf(-v));  // torch.sigmoid
}

// x: (B, Ci, D, H, W); w: (Co, Ci, K, K, K), stride 1, no padding; y: (B, Co, OD, OH, OW).
// One thread per output position; taps = Ci * K^3 <= WMAX / CMAX.
extern "C" __global__ void __launch_bounds__(256) conv3d_scale_tanh_sigmoid(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, const float* __restrict__ sc,
        const float* __restrict__ bias, float* __restrict__ y, int Ci, int Co, long long D, long long H,
        long long W, int K, long long OD, long long OH, long long OW, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = ci * K^3 + tap), 0 for c >= Co
    const int taps = Ci * K * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, od = j / (OW * OH) % OD, b = j / (OW * OH * OD);
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
    const long long plane = OD * OH * OW, pos = (od * OH + oh) * OW + ow;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        y[(b * Co + c) * plane + pos] = epi(acc[c] + cb[c], sc[c], bias[c]);  // conv + bias, then the epilogue
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.scaling_factor = nn.Parameter(torch.randn(bias_shape))  # the argument is ignored, as in the task
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        Co, Ci, K = c.weight.shape[:3]
        if (c.stride != (1, 1, 1) or c.padding != (0, 0, 0) or c.dilation != (1, 1, 1) or c.groups != 1
                or c.bias is None or c.padding_mode != "zeros" or len(set(c.kernel_size)) != 1 or Co > CMAX
                or Ci * K ** 3 * CMAX > WMAX or self.scaling_factor.numel() != Co or self.bias.numel() != Co):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.sigmoid(torch.tanh(x * self.scaling_factor) * self.bias)
        x = x.contiguous()
        B, _, D, H, W = x.shape
        s, b = self.scaling_factor.contiguous(), self.bias.contiguous()  # (C, 1, 1, 1) each
        y = x.new_empty(B, Co, D - K + 1, H - K + 1, W - K + 1)
        n = B * (D - K + 1) * (H - K + 1) * (W - K + 1)  # output positions, one thread each
        _k.conv3d_scale_tanh_sigmoid((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                                     c.bias.data_ptr(), s.data_ptr(), b.data_ptr(), y.data_ptr(), Ci, Co, D, H, W, K,
                                     D - K + 1, H - K + 1, W - K + 1, n)
        return y

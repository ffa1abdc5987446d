"""The whole model in one kernel: a thread per pooled output computes the direct 3x3 conv (16 output
channels at once) at the four pixels of its 2x2 window, pools in registers and writes once.

Eager runs five kernels: the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB
written), `x - 0.5` and F.hardswish (each a read and write of 7.4 MB), MaxPool2d(2) (reads 7.4 MB,
writes (128, 16, 15, 15), 1.8 MB) and F.mish (a read and write of 1.8 MB): ~44 MB of traffic and
five launches around a conv of only 50M multiply-adds, which cuDNN's implicit GEMM shapes badly
(N = 16 output channels, K = 27 taps). Here one thread per pooled output (sample, ph, pw) computes
the conv at the k x k pixels of its window: 27 input values per pixel (adjacent threads read
pixels k apart, all from L1 after the first touch) each multiplied into 16 channel accumulators,
with the weights staged in shared memory as [tap][channel] and read as broadcast float4s. Each
channel gets + bias, - 0.5 and hardswish(v) = v * min(max(v + 3, 0), 6) / 6, the running max over
the window (NaN wins, as in max_pool2d), then mish(m) = m * tanh(softplus(m)) (softplus threshold
20) and one store. One launch, 1.5 MB read and 1.8 MB written: the full-resolution conv output
never exists. The pool is the module's: stride = kernel, no padding, floor mode, so windows do not
overlap and each conv pixel is computed once (or not at all, in a trailing row the pool drops).
Numerics: plain fp32 fmaf over the taps in (ci, kh, kw) order, then + bias (cuDNN orders the 27
terms differently: rounding-level differences), expf/log1pf/tanhf; no TF32. Other configs (more
than 16 channels, stride, padding, dilation, groups, non-square kernels, a pool with its own
stride, padding, dilation or ceil mode) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 3.11x over eager (0.352 -> 0.113 ms); 2.66x on the H100.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CMAX, WMAX = 16, 1024  # output channels per thread; weights staged in shared memory (CMAX per tap)

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16, WMAX = 1024;

// acc[c] = sum over the Ci * K * K taps of x * w[c] at conv output (oh, ow), no bias; xb is the sample's
// (Ci, H, W) input and ws[t * CMAX + c] = w[c, t]: one input load feeds 16 FMAs, weights are broadcasts.
__device__ __forceinline__ void conv16(const float* __restrict__ xb, const float* ws, int Ci, int K, long long H,
        long long W, long long oh, long long ow, float* acc) {
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) acc[c] = 0.f;
    int t = 0;
    for (int ci = 0; ci < Ci; ++ci)
        for (int kh = 0; kh < K; ++kh) {
            const float* xp = xb + (ci * H + oh + kh) * W + ow;
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
}

// x: (B, Ci, H, W); w: (Co, Ci, K, K), stride 1, no padding; y: (B, Co, PH, PW) =
// mish(max over the k x k window of hardswish(conv + bias - sub)). One thread per pooled output.
extern "C" __global__ void __launch_bounds__(256) conv_hswish_maxpool_mish(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int k, long long PH, long long PW, float sub, long long n) {
    __shared__ __align__(16) float ws[WMAX];  // ws[t * CMAX + c] = w[c, t] (t = (ci * K + kh) * K + kw), 0 for c >= Co
    __shared__ float bs[CMAX];                // conv bias, 0 for c >= Co
    const int taps = Ci * K * K;
    for (int i = threadIdx.x; i < taps * CMAX; i += blockDim.x) {
        const int t = i / CMAX, c = i % CMAX;
        ws[i] = c < Co ? w[(long long)c * taps + t] : 0.f;
    }
    if (threadIdx.x < CMAX) bs[threadIdx.x] = (int)threadIdx.x < Co ? cb[threadIdx.x] : 0.f;
    __syncthreads();
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // (b, ph, pw) flattened
    if (j >= n) return;
    const long long pw = j % PW, ph = j / PW % PH, b = j / (PW * PH);
    const float* xb = x + b * Ci * H * W;
    float acc[CMAX], m[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) m[c] = -INFINITY;
    for (int u = 0; u < k; ++u)
        for (int e = 0; e < k; ++e) {
            conv16(xb, ws, Ci, K, H, W, ph * k + u, pw * k + e, acc);
            #pragma unroll
            for (int c = 0; c < CMAX; ++c) {
                const float v = acc[c] + bs[c] - sub;                           // conv, then x - subtract_value
                const float h = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;      // F.hardswish
                m[c] = (h > m[c] || h != h) ? h : m[c];                        // max_pool2d: NaN wins
            }
        }
    const long long plane = PH * PW, pos = ph * PW + pw;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        const float v = m[c];
        y[(b * Co + c) * plane + pos] = v * tanhf(v > 20.f ? v : log1pf(expf(v)));  // F.mish
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract_value, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract_value = subtract_value
        self.pool = nn.MaxPool2d(pool_kernel_size)

    def forward(self, x):
        c, p = self.conv, self.pool
        Co, Ci, K = c.weight.shape[:3]
        k = p.kernel_size
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or c.kernel_size != (K, K) or Co > CMAX or Ci * K * K * CMAX > WMAX
                or x.dim() != 4 or not isinstance(k, int) or p.stride != k or p.padding != 0 or p.dilation != 1
                or p.ceil_mode or p.return_indices or min(x.shape[2:]) - K + 1 < k):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            try:
                x = c(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            return F.mish(p(F.hardswish(x - self.subtract_value)))
        x = x.contiguous()
        B, _, H, W = x.shape
        PH, PW = (H - K + 1) // k, (W - K + 1) // k  # max_pool2d, floor mode
        y = x.new_empty(B, Co, PH, PW)
        n = B * PH * PW  # pooled outputs, one thread each
        if n > 0:
            _k.conv_hswish_maxpool_mish((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                                        c.bias.data_ptr(), y.data_ptr(), Ci, Co, H, W, K, k, PH, PW,
                                        float(self.subtract_value), n)
        return y

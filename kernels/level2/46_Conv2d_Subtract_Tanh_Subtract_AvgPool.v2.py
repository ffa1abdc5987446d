"""The whole model in one kernel: a thread per pooled output computes the direct 3x3 conv (16 output
channels at once) at the four pixels of its 2x2 window, averages in registers and writes once.

Eager runs five kernels: the cuDNN Conv2d (3 -> 16 channels, output (128, 16, 30, 30), 7.4 MB
written), `x - 0.5`, torch.tanh and `x - 0.2` (each a read and write of 7.4 MB) and AvgPool2d(2)
(reads 7.4 MB, writes (128, 16, 15, 15), 1.8 MB): ~53 MB of traffic and five launches around a
conv of only 50M multiply-adds, which cuDNN's implicit GEMM shapes badly (N = 16 output channels,
K = 27 taps). Here one thread per pooled output (sample, ph, pw) computes the conv at the k x k
pixels of its window: 27 input values per pixel (adjacent threads read pixels k apart, all from L1
after the first touch) each multiplied into 16 channel accumulators, with the weights staged in
shared memory as [tap][channel] and read as broadcast float4s. Each channel gets + bias and
tanh(v - s1) - s2, summed over the window in (row, column) order and divided by k * k, as
avg_pool2d does, then stored once. One launch, 1.5 MB read and 1.8 MB written: the full-resolution
conv output never exists. The pool is the module's: stride = kernel, no padding (so
count_include_pad does not matter), floor mode, no divisor_override; windows do not overlap and
each conv pixel is computed once (or not at all, in a trailing row the pool drops). Numerics:
plain fp32 fmaf over the taps in (ci, kh, kw) order, then + bias (cuDNN orders the 27 terms
differently: rounding-level differences), tanhf; no TF32. Other configs (more than 16 channels,
stride, padding, dilation, groups, non-square kernels, a pool with its own stride, padding, ceil
mode or divisor) take cuDNN with TF32 off and eager's ops.
Measured on the H200: 2.54x over eager (0.198 -> 0.0781 ms); 2.53x on the H100.
"""
import torch
import torch.nn as nn

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
// mean over the k x k window of tanh(conv + bias - s1) - s2. One thread per pooled output.
extern "C" __global__ void __launch_bounds__(256) conv_tanh_avgpool(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, int Ci, int Co,
        long long H, long long W, int K, int k, long long PH, long long PW, float s1, float s2, long long n) {
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
    float acc[CMAX], s[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) s[c] = 0.f;
    for (int u = 0; u < k; ++u)
        for (int e = 0; e < k; ++e) {
            conv16(xb, ws, Ci, K, H, W, ph * k + u, pw * k + e, acc);
            #pragma unroll
            for (int c = 0; c < CMAX; ++c) s[c] += tanhf(acc[c] + bs[c] - s1) - s2;  // conv, - s1, tanh, - s2
        }
    const long long plane = PH * PW, pos = ph * PW + pw;
    const float area = (float)(k * k);  // avg_pool2d's divisor: the whole window (no padding)
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= Co) break;
        y[(b * Co + c) * plane + pos] = s[c] / area;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, subtract1_value, subtract2_value, kernel_size_pool):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract1_value = subtract1_value
        self.subtract2_value = subtract2_value
        self.avgpool = nn.AvgPool2d(kernel_size_pool)

    def forward(self, x):
        c, p = self.conv, self.avgpool
        Co, Ci, K = c.weight.shape[:3]
        k = p.kernel_size
        if (c.stride != (1, 1) or c.padding != (0, 0) or c.dilation != (1, 1) or c.groups != 1 or c.bias is None
                or c.padding_mode != "zeros" or c.kernel_size != (K, K) or Co > CMAX or Ci * K * K * CMAX > WMAX
                or x.dim() != 4 or not isinstance(k, int) or p.stride != k or p.padding != 0 or p.ceil_mode
                or p.divisor_override is not None or min(x.shape[2:]) - K + 1 < k):
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
            try:
                x = c(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            return p(torch.tanh(x - self.subtract1_value) - self.subtract2_value)
        x = x.contiguous()
        B, _, H, W = x.shape
        PH, PW = (H - K + 1) // k, (W - K + 1) // k  # avg_pool2d, floor mode
        y = x.new_empty(B, Co, PH, PW)
        n = B * PH * PW  # pooled outputs, one thread each
        if n > 0:
            _k.conv_tanh_avgpool((n + 255) // 256, 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                                 c.bias.data_ptr(), y.data_ptr(), Ci, Co, H, W, K, k, PH, PW,
                                 float(self.subtract1_value), float(self.subtract2_value), n)
        return y

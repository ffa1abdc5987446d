"""The whole model in one CUDA kernel: a direct 3x3 conv with HardSwish and ReLU applied before the
single store, one block per (sample, channel) plane.

Eager runs the Conv2d through cuDNN (3 -> 16 channels, 3x3: output (128, 16, 30, 30), 7.4 MB),
F.hardswish (reads it, writes 7.4 MB) and torch.relu (reads, writes 7.4 MB again): three launches
and ~30 MB of traffic around a conv of only 50M multiply-adds. Here block (n, c) copies sample n
(3 x 32 x 32 floats, 12 KB) and filter c (27 floats) into shared memory; each thread computes
conv outputs with fp32 fmaf over the 27 taps plus the bias, applies v * min(max(v + 3, 0), 6) / 6
and max(., 0) (torch's formulas) in registers and writes the result once, coalesced. One launch,
1.5 MB read and 7.4 MB written. All fp32 without TF32, so the result matches the reference to
rounding (the 27-term sums are ordered differently from cuDNN). Shapes beyond the shared buffers,
or a conv with stride, padding, dilation or groups, take the eager path. Measured: 1.78x on H200
(0.17 -> 0.097 ms).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
#define XS_MAX 4096  // floats of one input sample in shared memory
#define WS_MAX 1024  // floats of one filter

// Block b = n * Co + c: y[n, c] = relu(hardswish(conv(x[n], w[c]) + bias[c])); stride 1, no padding.
extern "C" __global__ void conv_hardswish_relu(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ bias, float* __restrict__ y, long long Ci, long long H, long long W,
        long long Co, long long K) {
    __shared__ float xs[XS_MAX];
    __shared__ float ws[WS_MAX];
    const long long n = blockIdx.x / Co, c = blockIdx.x % Co;
    const long long OH = H - K + 1, OW = W - K + 1, KK = K * K;
    for (long long i = threadIdx.x; i < Ci * H * W; i += blockDim.x) xs[i] = x[n * Ci * H * W + i];
    for (long long i = threadIdx.x; i < Ci * KK; i += blockDim.x) ws[i] = w[c * Ci * KK + i];
    __syncthreads();
    const float b = bias[c];
    float* yp = y + blockIdx.x * OH * OW;
    const int ci_n = (int)Ci, k = (int)K, hh = (int)H, ww = (int)W;  // 32-bit: indices < XS_MAX
    for (long long p = threadIdx.x; p < OH * OW; p += blockDim.x) {
        const float* xb = xs + (int)(p / OW * W + p % OW);  // window origin (oh, ow)
        float acc = 0.f;
        for (int ci = 0; ci < ci_n; ++ci)
            for (int kh = 0; kh < k; ++kh)
                for (int kw = 0; kw < k; ++kw)
                    acc = fmaf(xb[(ci * hh + kh) * ww + kw], ws[(ci * k + kh) * k + kw], acc);
        const float v = acc + b;
        const float h = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardswish
        yp[p] = h > 0.f ? h : (h != h ? h : 0.f);                     // relu, NaN stays NaN
    }
}
""")
XS_MAX, WS_MAX = 4096, 1024  # as in the source


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        cv = self.conv
        B, Ci, H, W = x.shape if x.dim() == 4 else (0, 0, 0, 0)
        Co, K = cv.out_channels, cv.kernel_size[0]
        plain = cv.stride == (1, 1) and cv.padding == (0, 0) and cv.dilation == (1, 1) and cv.groups == 1 \
            and cv.kernel_size == (K, K) and cv.bias is not None and cv.padding_mode == "zeros"
        if not plain or x.dim() != 4 or Ci * H * W > XS_MAX or Ci * K * K > WS_MAX or H < K or W < K:
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
            try:
                c = cv(x)
            finally:
                torch.backends.cudnn.allow_tf32 = tf32
            return torch.relu(F.hardswish(c))
        x = x.contiguous()
        w = cv.weight.contiguous()
        y = torch.empty(B, Co, H - K + 1, W - K + 1, device=x.device, dtype=x.dtype)  # (B, C, OH, OW)
        _k.conv_hardswish_relu(B * Co, 256, x.data_ptr(), w.data_ptr(), cv.bias.data_ptr(), y.data_ptr(), Ci, H, W, Co, K)
        return y

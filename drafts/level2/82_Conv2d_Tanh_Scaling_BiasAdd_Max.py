"""Conv2d on cuDNN, then tanh, scale, bias add and the 2x2 max pool in one kernel.

Eager runs five kernels after the input arrives: the convolution, tanh, the multiply, the bias add
(each a full read and write of the (128, 16, 30, 30) conv output, 7.4 MB) and the max pool. The
fused kernel gives each thread one pooled output: it reads its 2x2 window of the conv output once,
applies tanh(v) * scale + bias[c] to each of the four values exactly as eager orders them, takes
the max (NaN propagates, as in max_pool2d) and writes one float. Traffic after the conv drops
from ~50 MB over four passes to ~9 MB in one, and four launches become one. The convolution runs
with TF32 off (the check is strict fp32), so the head itself can be a little slower than eager's.
The whole call is a few tens of microseconds, mostly launches: expect ~1.5-2x.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void tanh_scale_bias_maxpool(const float* __restrict__ x, const float* __restrict__ bias,
        float* __restrict__ y, float scale, long long C, long long H, long long W, long long OH, long long OW,
        int k, long long n) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // one pooled output
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, nc = j / (OW * OH);
    const float b = bias[nc % C];
    const float* p = x + (nc * H + oh * k) * W + ow * k;  // top-left of the window
    float m = -INFINITY;
    for (int a = 0; a < k; ++a)
        for (int e = 0; e < k; ++e) {
            const float v = tanhf(p[a * W + e]) * scale + b;  // torch.tanh, * scale, + bias
            m = (v > m || v != v) ? v : m;  // NaN wins, as in max_pool2d
        }
    y[j] = m;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scaling_factor, bias_shape, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scaling_factor = scaling_factor
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.max_pool = nn.MaxPool2d(pool_kernel_size)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv(x).contiguous()  # (B, C, 30, 30)
        torch.backends.cudnn.allow_tf32 = tf32
        k = self.max_pool.kernel_size  # stride = kernel, no padding: floor division
        B, C, H, W = x.shape
        bias = self.bias.expand(C, 1, 1).contiguous()  # (C, 1, 1) per-channel
        y = x.new_empty(B, C, H // k, W // k)
        n = y.numel()
        _k.tanh_scale_bias_maxpool((n + 255) // 256, 256, x.data_ptr(), bias.data_ptr(),
                                   y.data_ptr(), float(self.scaling_factor), C, H, W, H // k, W // k, k, n)
        return y

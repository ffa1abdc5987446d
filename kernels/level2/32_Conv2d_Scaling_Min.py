"""Conv2d on cuDNN, then the scale and the min over channels in one kernel.

Eager writes the (128, 16, 30, 30) conv output (7.4 MB), multiplies it by the scale (a full read and
write) and reduces it over channels with a min kernel (another read) into (128, 1, 30, 30). Here one
thread per (sample, h, w) reads its 16 channel values (coalesced along w), scales each as the
reference does (v * s, then the min, so a negative scale is handled exactly too) and writes the
min once: one launch after the conv instead of two, and 15 MB less traffic. The conv runs with TF32
off, as the check's reference does. Measured: 1.14x on H200 (0.20 -> 0.18 ms): the work is small and
launch-bound.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// Thread j = (n, p) over x (N, C, HW): y[n, 0, p] = min_c (x[n, c, p] * s); NaN propagates as in torch.min.
extern "C" __global__ void scale_min(const float* __restrict__ x, float* __restrict__ y,
                                     long long N, long long C, long long HW, float s) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= N * HW) return;
    const float* xj = x + (j / HW) * C * HW + j % HW;
    float m = xj[0] * s;
    for (long long c = 1; c < C; ++c) { const float v = xj[c * HW] * s; m = (v < m || v != v) ? v : m; }
    y[j] = m;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale_factor):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale_factor = scale_factor

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check's reference
        try:
            x = self.conv(x).contiguous()  # (B, C, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        B, C, H, W = x.shape
        y = x.new_empty(B, 1, H, W)
        _k.scale_min((B * H * W + 255) // 256, 256, x.data_ptr(), y.data_ptr(), B, C, H * W, self.scale_factor)
        return y

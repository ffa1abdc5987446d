"""Conv2d on cuDNN, then the min over channels and both tanh in one kernel.

Eager writes the (128, 16, 30, 30) conv output (7.4 MB), reduces it over channels with a min
kernel into (128, 1, 30, 30), and runs tanh twice on that (two more launches, each a read and a
write). Here one thread per (sample, h, w) walks the 16 channels (loads coalesced along w), keeps
the min in a register and writes tanh(tanh(min)) once: one launch after the conv instead of
three. The conv runs with TF32 off, as the check's reference does. Measured: 1.15x on H200
(0.20 -> 0.17 ms): the call is small and bound by launches; the conv's own time does not change.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// Thread j = (n, p) over x (N, C, HW): y[n, 0, p] = tanh(tanh(min_c x[n, c, p])).
extern "C" __global__ void min_tanh2(const float* __restrict__ x, float* __restrict__ y,
                                     long long N, long long C, long long HW) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= N * HW) return;
    const float* xj = x + (j / HW) * C * HW + j % HW;
    float m = xj[0];
    for (long long c = 1; c < C; ++c) { const float v = xj[c * HW]; m = (v < m || v != v) ? v : m; }
    y[j] = tanhf(tanhf(m));
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check's reference
        try:
            x = self.conv(x).contiguous()  # (B, C, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        B, C, H, W = x.shape
        y = x.new_empty(B, 1, H, W)
        _k.min_tanh2((B * H * W + 255) // 256, 256, x.data_ptr(), y.data_ptr(), B, C, H * W)
        return y

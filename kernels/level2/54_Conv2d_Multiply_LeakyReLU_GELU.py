"""Conv2d on cuDNN, then per-channel multiply, LeakyReLU and GELU fused into one CUDA kernel.

Eager runs the conv and three elementwise kernels (x * multiplier with its (C, 1, 1) broadcast,
LeakyReLU, exact GELU), each reading and writing the (128, 16, 30, 30) conv output: 7.4 MB a
pass, ~44 MB in three launches. One kernel reads each element once, looks up its channel's
multiplier (a 2-D grid of pixel blocks x planes gives the channel per block), applies
gelu(leaky(x * m_c)) in registers with torch's fp32 formulas and writes once: ~15 MB in one
launch. The conv runs with cuDNN's TF32 switched off for the call (the check is against true
fp32). The call is small, so dropping two launches is most of the gain. Measured: 1.16x on H200
(0.23 -> 0.20 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// x, y: (B, C, H*W); m: (C, 1, 1). grid = (ceil(HW / 256), planes), blockIdx.y walks the B * C planes.
extern "C" __global__ void mul_leaky_gelu(const float* __restrict__ x, const float* __restrict__ m,
        float* __restrict__ y, long long planes, long long C, long long HW, float slope) {
    const long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= HW) return;
    for (long long p = blockIdx.y; p < planes; p += gridDim.y) {  // p = batch * C + channel
        const long long i = p * HW + s;
        float v = x[i] * __ldg(m + (unsigned)p % (unsigned)C);
        v = v > 0.f ? v : v * slope;  // LeakyReLU
        y[i] = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // exact GELU
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, multiplier_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.multiplier = nn.Parameter(torch.randn(multiplier_shape))
        self.leaky_relu = nn.LeakyReLU()  # slope 0.01

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check wants
        try:
            x = self.conv(x).contiguous()  # (B, C, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        m = self.multiplier.contiguous()
        y = torch.empty_like(x)
        B, C, H, W = x.shape
        _k.mul_leaky_gelu(((H * W + 255) // 256, min(B * C, 65535)), 256, x.data_ptr(), m.data_ptr(), y.data_ptr(),
                          B * C, C, H * W, float(self.leaky_relu.negative_slope))
        return y

"""Conv3d on cuDNN, then scale, tanh, multiply and sigmoid fused into one CUDA kernel.

Eager runs the Conv3d and four elementwise kernels (x * scaling_factor, tanh, x * bias,
sigmoid), each reading and writing the full (128, 16, 14, 30, 30) conv output: 103 MB a pass,
~830 MB of traffic in four launches. One kernel reads each element once, looks up its channel's
scale and bias (both (C, 1, 1, 1); a 2-D grid of voxel blocks x planes gives the channel per
block, with no 64-bit division per element), computes sigmoid(tanh(x * s_c) * b_c) in registers
with torch's fp32 formulas and writes once: ~206 MB in one launch. The conv runs with cuDNN's TF32 switched off for the call (the check
is against true fp32), and eager's output equals that strict reference bit for bit, so its conv did
not use TF32 either. Measured: 1.19x on H200 (0.85 -> 0.72 ms). The saving, 0.13 ms, is about what
~620 MB less traffic is worth at H200 bandwidth, so the conv is most of eager's 0.85 ms, not a minor
part of it.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// x, y: (B, C, S); grid = (ceil(S / 256), planes), blockIdx.y walks the B * C planes.
extern "C" __global__ void scale_tanh_mul_sigmoid(const float* __restrict__ x, const float* __restrict__ sc,
        const float* __restrict__ b, float* __restrict__ y, long long planes, long long C, long long S) {
    const long long s = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (s >= S) return;
    for (long long p = blockIdx.y; p < planes; p += gridDim.y) {  // p = batch * C + channel
        const long long c = (unsigned)p % (unsigned)C, i = p * S + s;  // 32-bit: planes < 2^31
        const float v = tanhf(x[i] * __ldg(sc + c)) * __ldg(b + c);
        y[i] = 1.f / (1.f + expf(-v));  // torch.sigmoid
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
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check wants
        try:
            x = self.conv(x).contiguous()  # (B, C, D, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        s, b = self.scaling_factor.contiguous(), self.bias.contiguous()
        y = torch.empty_like(x)
        B, C = x.shape[:2]
        S = x[0, 0].numel()
        _k.scale_tanh_mul_sigmoid(((S + 255) // 256, min(B * C, 65535)), 256, x.data_ptr(), s.data_ptr(),
                                  b.data_ptr(), y.data_ptr(), B * C, C, S)
        return y

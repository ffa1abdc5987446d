"""Conv3d on cuDNN without its bias, then one kernel for the five elementwise ops after it.

Eager runs the cuDNN convolution, a separate add of the conv's own bias (PyTorch adds it after
cuDNN returns), then ReLU, LeakyReLU, GELU, sigmoid and the (C, 1, 1, 1) bias add: six passes that
each read and write the (128, 16, 14, 30, 30) activation (103 MB), ~1.2 GB of traffic. Here the
conv runs with bias=None and one kernel does all of it in registers (the LeakyReLU after the ReLU
is a no-op, kept because it is free), reading and writing the activation once (~206 MB). GELU is
the exact erf form (F.gelu's default) and sigmoid 1 / (1 + exp(-v)), as torch computes them. The
grid is (x, C, N), so the channel comes from the block index, not a division. The conv runs with
TF32 off (true fp32, as the check requires), while eager's timed run lets cuDNN use TF32; eager's
output equals that strict reference bit for bit, though, so at 3 input channels its conv did not use
TF32 and the two heads cost the same. Measured: 1.42x on H200 (0.84 -> 0.59 ms). The saving,
0.25 ms, is about what ~1 GB less traffic is worth at H200 bandwidth; the conv, unchanged, is the
rest of the call.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void chain(const float* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float* __restrict__ y, long long C, long long inner) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    float v = x[plane * inner + i] + cb[c];              // the conv's own bias
    v = v > 0.f ? v : (v == v ? 0.f : v);                // relu (NaN stays NaN)
    v = v > 0.f ? v : v * 0.01f;                         // leaky_relu, a no-op here
    v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // gelu, erf form
    v = 1.f / (1.f + expf(-v));                          // sigmoid
    y[plane * inner + i] = v + bias[c];                  // bias (C, 1, 1, 1)
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv3d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, D, H, W)
        _k.chain(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                 self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner)
        return y

"""Conv2d on cuDNN without its bias, then one kernel for conv bias + ReLU + the extra bias.

Eager runs the cuDNN convolution, a separate add of the conv's own bias (PyTorch adds it after
cuDNN returns), ReLU and the broadcast bias add: four kernels, three of which read and write the
(128, 16, 30, 30) activation (7.4 MB) once more each. Here the conv runs with bias=None and one
elementwise kernel computes relu(conv + b_conv[c]) + bias[c] in registers: one read and one write
of the activation instead of three of each. The grid is (x, C, N), so the
channel comes from the block index and no per-element 64-bit division is needed. The bias add
keeps the reference's order of operations, so it is bit-identical apart from the conv itself,
which runs with TF32 off (true fp32, as the check requires). The work is small, so launches
dominate: expect ~1.3-1.6x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void relu_bias(const float* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float* __restrict__ y, long long C, long long inner) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    float v = x[plane * inner + i] + cb[c];  // the conv's own bias
    v = v > 0.f ? v : (v == v ? 0.f : v);    // torch.relu, NaN stays NaN
    y[plane * inner + i] = v + bias[c];       // bias (C, 1, 1)
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, H, W)
        _k.relu_bias(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                     self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner)
        return y

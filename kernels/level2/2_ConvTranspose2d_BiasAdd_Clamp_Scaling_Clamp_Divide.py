"""ConvTranspose2d on cuDNN without its bias, then one kernel for the whole elementwise chain.

Eager runs the transposed convolution, a separate add of its own bias, then `+ bias`, clamp, `* s`,
clamp and `/ s`: six kernels after the GEMM-like head, each reading and writing the (128, 16, 64,
64) activation (33.5 MB), ~400 MB of traffic. Here the conv runs with bias=None and one kernel
applies conv bias, the extra bias, both clamps, the scaling and the division in registers, in the
reference's order (so it is bit-identical apart from the conv), reading and writing the activation
once (~67 MB). The grid is (x, C, N), so the channel comes from the block index. The conv runs with
TF32 off (true fp32, as the check requires), and eager's output equals that strict reference bit for
bit, so its conv did not use TF32 either: the two heads cost the same. Measured: 1.35x on H200
(0.35 -> 0.26 ms). The saving, ~330 MB of traffic (~0.07 ms at H200 bandwidth) and five launches, is
about what was gained; the conv is the larger part of the call.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float clamp01(float v) { return v != v ? v : fminf(fmaxf(v, 0.f), 1.f); }

extern "C" __global__ void chain(const float* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float* __restrict__ y, long long C, long long inner, float s) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    float v = x[plane * inner + i] + cb[c];  // the conv's own bias
    v = clamp01(v + bias[c]) * s;
    y[plane * inner + i] = clamp01(v) / s;
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape, scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        c = self.conv_transpose
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv_transpose2d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, 2H, 2W)
        _k.chain(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                 self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner, float(self.scaling_factor))
        return y

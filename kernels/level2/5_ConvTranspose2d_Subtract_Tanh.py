"""ConvTranspose2d on cuDNN without its bias, then one kernel for conv bias - bias, tanh.

Eager runs the transposed convolution, a separate add of its own bias (PyTorch adds it after cuDNN
returns), `x - bias` and tanh: three elementwise passes that each read and write the (128, 16, 33,
33) activation (8.9 MB). Here the conv runs with bias=None and one kernel computes tanh((conv +
b_conv[c]) - bias[c]) in registers, in the reference's order of operations, so it is bit-identical
apart from the conv: one read and one write instead of three, two launches fewer. The grid is (x,
C, N), so the channel comes from the block index. The conv runs with TF32 off (true fp32, as the
check requires), while eager's timed run lets cuDNN use TF32, so the head is slower than eager's
and the saving has to pay for that. Both are small here (0.5 GFLOP, ~9 MB): measured 1.02x on H200
(0.19 -> 0.18 ms), about a tie: eager's output is 8x outside the strict tolerance (its conv uses
TF32), and the fp32 head gives back most of what two launches and two passes fewer win.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void sub_tanh(const float* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float* __restrict__ y, long long C, long long inner) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    y[plane * inner + i] = tanhf((x[plane * inner + i] + cb[c]) - bias[c]);  // bias (C, 1, 1)
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape, stride=2, padding=1, output_padding=1):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv_transpose
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv_transpose2d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, H', W')
        _k.sub_tanh(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                    self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner)
        return y

"""ConvTranspose3d on cuDNN without its bias, then one kernel for ((c + bias) + c) * c + c.

With c the transposed convolution's output (16, 64, 32, 64, 64) -- 134M elements, 537 MB -- eager
runs a separate add of the conv's own bias (PyTorch adds it after cuDNN returns), the clone, `+
bias`, `+ original`, `* original` and `+ original`: six passes, most reading two 537 MB tensors,
~5.5 GB of traffic. Here the conv runs with bias=None and one kernel computes c = conv +
b_conv[ch], then ((c + bias[ch]) + c) * c + c in registers, in the reference's order (bit-identical
apart from the conv; the clone/detach only matters for gradients), reading and writing the tensor
once (~1.07 GB, ~0.25 ms at H200 bandwidth). Each thread handles a float4 (the 32*64*64 plane is a
multiple of 4), and the grid is (x, C, N), so the channel comes from the block index with no
per-element division. The conv runs with TF32 off (true fp32, as the check requires), while eager's
timed run lets cuDNN use TF32, so the head is slower than eager's and the saving has to pay for
that. The head is 58 GFLOP and the saving ~4.4 GB of traffic (~0.9 ms). Measured: 0.61x on H200
(2.99 -> 4.92 ms), slower than eager. If the fused pass runs near bandwidth (1.07 GB, ~0.25 ms), the
fp32 head takes ~4.7 ms, more than eager's whole call (eager's output is 40x outside the strict
tolerance, the mark of its TF32 conv).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float f(float c, float b) { return ((c + b) + c) * c + c; }

extern "C" __global__ void chain4(const float4* __restrict__ x, const float* __restrict__ cb,
        const float* __restrict__ bias, float4* __restrict__ y, long long C, long long inner4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // float4 index in the plane
    if (i >= inner4) return;
    const long long ch = blockIdx.y, plane = blockIdx.z * C + ch;  // grid (x, C, N): no division
    const float b0 = cb[ch], b = bias[ch];
    float4 v = x[plane * inner4 + i];
    v.x += b0; v.y += b0; v.z += b0; v.w += b0;  // the conv's own bias
    y[plane * inner4 + i] = make_float4(f(v.x, b), f(v.y, b), f(v.z, b), f(v.w, b));
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv_transpose
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv_transpose3d(x, c.weight, None, c.stride, c.padding, c.output_padding, c.groups,
                               c.dilation).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C = x.shape[:2]
        inner = x[0, 0].numel()
        y = torch.empty_like(x)  # (B, C, D', H', W')
        if inner % 4 or x.data_ptr() % 16 or y.data_ptr() % 16:  # planes not float4-aligned
            x = x + c.bias.view(1, -1, 1, 1, 1)
            return ((x + self.bias) + x) * x + x
        _k.chain4(((inner // 4 + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(),
                  self.bias.contiguous().data_ptr(), y.data_ptr(), C, inner // 4)
        return y

"""ConvTranspose2d on cuDNN without its bias, then one kernel for Mish, add, Hardtanh and scale.

Eager runs the transposed convolution, a separate add of its own bias (PyTorch adds it after cuDNN
returns), Mish, `+ add_value`, Hardtanh and `* scale`: five passes that each read and write the
(128, 64, 33, 33) activation (35.7 MB), ~360 MB of traffic. Here the conv runs with bias=None and
one kernel applies all of it in registers in the reference's order, mish(v) = v *
tanh(log1p(exp(v))) as torch's CUDA kernel writes it, reading and writing the activation once (~71
MB). The grid is (x, C, N), so the channel comes from the block index. The conv runs with TF32 off
(true fp32, as the check requires), while eager's timed run lets cuDNN use TF32, so the head is
slower than eager's and the saving has to pay for that. The head is 2.2 GFLOP and the saving ~290 MB
of traffic (~0.06 ms at H200 bandwidth). Measured: 0.73x on H200 (0.38 -> 0.51 ms), slower than
eager: the fp32 head costs more than that saving (eager's output is 1.9x outside the strict
tolerance, the mark of its TF32 conv).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void chain(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long inner, float add, float scale) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // index in the plane
    if (i >= inner) return;
    const long long c = blockIdx.y, plane = blockIdx.z * C + c;  // grid (x, C, N): no division
    float v = x[plane * inner + i] + cb[c];       // the conv's own bias
    v = v * tanhf(log1pf(expf(v))) + add;         // mish, then + add_value
    v = v != v ? v : fminf(fmaxf(v, -1.f), 1.f);  // hardtanh(-1, 1), NaN stays NaN
    y[plane * inner + i] = v * scale;
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, add_value, scale):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, output_padding)
        self.add_value = add_value
        self.scale = scale

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
        _k.chain(((inner + 255) // 256, C, N), 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(), C,
                 inner, float(self.add_value), float(self.scale))
        return y

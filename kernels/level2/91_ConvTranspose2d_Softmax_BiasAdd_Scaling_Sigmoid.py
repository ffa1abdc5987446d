"""ConvTranspose2d on cuDNN, then the channel softmax, bias add, scale and sigmoid in one kernel.

The transposed conv writes (128, 64, 33, 33), 35.7 MB. Eager then runs softmax over channels
(which reads it at least twice), the bias add, the multiply and the sigmoid, each of the last
three a read and write of 35.7 MB: ~250 MB of traffic and four launches after the head. The
fused kernel gives each thread one (sample, pixel): it loads that pixel's 64 channel values into
registers (adjacent threads read adjacent pixels, so every load is coalesced), takes the max,
the exp-sum, and writes sigmoid((exp(v - max) / sum + bias[c]) * scale) for each channel in
eager's order. One read and one write of the tensor, one launch instead of four. The head runs
with TF32 off for the strict fp32 check, so it may be slower than eager's. Measured: 0.69x on H200
(0.37 -> 0.53 ms), slower than eager by 0.17 ms, while the fused kernel moves ~71 MB (~0.015 ms at
H200 bandwidth): the likely reason is the head: the same cuDNN transposed conv, here in strict fp32
(TF32 off, as the check needs), where eager's may use TF32 (eager's output differs from the strict
reference, by 0.04 of the tolerance).
"""
import torch
import torch.nn as nn

import cudal1

CMAX = 64  # channels held in registers; more channels take the eager path

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 64;

// x, y: (B, C, HW); one thread per (b, pixel).
extern "C" __global__ void softmax_bias_scale_sigmoid(const float* __restrict__ x, const float* __restrict__ bias,
        float* __restrict__ y, float scale, int C, long long HW, long long n) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long off = j / HW * C * HW + j % HW;  // channel 0 of this pixel
    float v[CMAX];
    float mx = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        v[c] = x[off + c * HW];
        mx = fmaxf(mx, v[c]);
    }
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        v[c] = expf(v[c] - mx);
        sum += v[c];
    }
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        const float t = (v[c] / sum + bias[c]) * scale;  // softmax, + bias, * scaling_factor
        y[off + c * HW] = 1.f / (1.f + expf(-t));        // torch.sigmoid
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape,
                 scaling_factor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scaling_factor = scaling_factor

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv_transpose(x).contiguous()  # (B, C, 33, 33)
        torch.backends.cudnn.allow_tf32 = tf32
        B, C, H, W = x.shape
        if C > CMAX:
            return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * self.scaling_factor)
        bias = self.bias.expand(C, 1, 1).contiguous()  # (C, 1, 1) per-channel
        y = torch.empty_like(x)
        n = B * H * W
        _k.softmax_bias_scale_sigmoid((n + 127) // 128, 128, x.data_ptr(), bias.data_ptr(), y.data_ptr(),
                                      float(self.scaling_factor), C, H * W, n)
        return y

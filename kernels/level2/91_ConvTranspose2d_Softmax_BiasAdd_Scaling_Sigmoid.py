"""ConvTranspose2d on cuDNN, then the channel softmax, bias add, scale and sigmoid in one kernel.

The transposed conv writes (128, 64, 33, 33), 35.7 MB. Eager then runs softmax over channels (which
reads it at least twice), the bias add, the multiply and the sigmoid, each of the last three a read
and write of 35.7 MB: ~250 MB of traffic and four launches after the head. The fused kernel gives
each thread one (sample, pixel): it loads that pixel's 64 channel values into registers (adjacent
threads read adjacent pixels, so every load is coalesced), takes the max, the exp-sum, and writes
sigmoid((exp(v - max) / sum + bias[c]) * scale) for each channel in eager's order. One read and one
write of the tensor, one launch instead of four.

The precision of the head is the whole change from the strict-fp32 version of this task. Eager's
transposed conv runs with cuDNN's default TF32, and on this task that costs nothing in correctness:
eager's own output is 0.031 of the strict tolerance away from the true-fp32 reference, a ~32x
margin. The strict-fp32 version ran its conv with TF32 off and measured 0.71x on the H200 (0.39 ->
0.551 ms): its conv alone made it slower than eager. This one leaves cuDNN's flags as eager's are,
so both run the same conv and the fused epilogue's saving is the difference. Measured on the H200:
1.32x over eager (0.368 -> 0.279 ms).
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
        x = self.conv_transpose(x).contiguous()  # (B, C, 33, 33)
        B, C, H, W = x.shape
        if C > CMAX:
            return torch.sigmoid((torch.softmax(x, dim=1) + self.bias) * self.scaling_factor)
        bias = self.bias.expand(C, 1, 1).contiguous()  # (C, 1, 1) per-channel
        y = torch.empty_like(x)
        n = B * H * W
        _k.softmax_bias_scale_sigmoid((n + 127) // 128, 128, x.data_ptr(), bias.data_ptr(), y.data_ptr(),
                                      float(self.scaling_factor), C, H * W, n)
        return y

"""The whole model in one kernel: a direct 3x3 convolution with ReLU and both biases in its epilogue.

With 3 input channels and a 3x3 kernel each output is a 27-term dot product: the conv is 128 x 16
x 30 x 30 x 27 = 50M multiply-adds, a few microseconds of FMA issue on 132 SMs, and its input is
only 1.5 MB. Eager spends its time elsewhere: cuDNN's implicit GEMM (poorly shaped for K = 27),
then a separate add of the conv bias (PyTorch adds it after cuDNN returns), ReLU and the
broadcast bias add, three passes over the (128, 16, 30, 30) activation (7.4 MB) and four
launches. Here one thread per output reads its 3 x 3 x 3 input window (neighbouring threads read
neighbouring columns, so loads coalesce and the window re-reads hit L1), multiplies by the 27
weights of its channel (the same for the whole block: broadcast loads), and writes
relu(acc + b_conv[c]) + bias[c] once. The grid is (x, C_out, N), so channel and sample come from
the block index. All plain fp32 FMA, no TF32; only the summation order differs from cuDNN's. One
launch and one write instead of four and three: measured 1.57x on H200 (0.23 -> 0.15 ms); the call
is bound by launch overhead on both sides.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// x: (N, Cin, H, W), w: (Cout, Cin, K, K); y: (N, Cout, OH, OW), stride 1, no padding.
extern "C" __global__ void conv_relu_bias(const float* __restrict__ x, const float* __restrict__ w,
        const float* __restrict__ cb, const float* __restrict__ bias, float* __restrict__ y,
        long long Cin, long long H, long long W, int K, int OH, int OW) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;  // output index in the (OH, OW) plane
    if (i >= OH * OW) return;
    const long long co = blockIdx.y, n = blockIdx.z;
    const int oh = i / OW, ow = i % OW;
    const float* xn = x + n * Cin * H * W + oh * W + ow;  // the window's top-left, channel 0
    const float* wc = w + co * Cin * K * K;
    float acc = 0.f;
    for (long long ci = 0; ci < Cin; ++ci)
        for (int kh = 0; kh < K; ++kh)
            for (int kw = 0; kw < K; ++kw)
                acc = fmaf(__ldg(xn + (ci * H + kh) * W + kw), __ldg(wc + (ci * K + kh) * K + kw), acc);
    float v = acc + cb[co];               // the conv's bias
    v = v > 0.f ? v : (v == v ? 0.f : v);  // torch.relu, NaN stays NaN
    y[(n * gridDim.y + co) * OH * OW + i] = v + bias[co];  // bias (C, 1, 1)
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        c = self.conv
        plain = c.stride == (1, 1) and c.padding == (0, 0) and c.dilation == (1, 1) and c.groups == 1 \
            and c.kernel_size[0] == c.kernel_size[1]
        if not plain or x.shape[0] > 65535 or c.out_channels > 65535:  # not covered here: torch's way
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return torch.relu(x) + self.bias
        x = x.contiguous()
        N, Cin, H, W = x.shape
        K = c.kernel_size[0]
        OH, OW = H - K + 1, W - K + 1
        y = x.new_empty(N, c.out_channels, OH, OW)
        _k.conv_relu_bias(((OH * OW + 255) // 256, c.out_channels, N), 256, x.data_ptr(),
                          c.weight.contiguous().data_ptr(), c.bias.data_ptr(), self.bias.contiguous().data_ptr(),
                          y.data_ptr(), Cin, H, W, K, OH, OW)
        return y

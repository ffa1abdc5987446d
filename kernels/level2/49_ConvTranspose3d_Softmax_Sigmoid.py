"""ConvTranspose3d on cuDNN, then softmax over channels and sigmoid in one CUDA kernel.

The (16, 64, 32, 64, 64) output of the transposed conv is 1.07 GB. Eager's softmax over dim 1 reads
it (at least once, more for a strided inner reduction) and writes it, and sigmoid reads and writes
it again: >= 4.3 GB of traffic after the conv, ~1 ms at H200 bandwidth. Here a thread per (sample,
voxel) loads its 64 channel values into registers (for each channel, the 32 threads of a warp read
32 consecutive voxels: coalesced), takes the max, the sum of exp(v - max), and writes sigmoid(exp(v
- max) / sum) for each channel: one read and one write, 2.1 GB, half of eager's epilogue traffic in
one launch. The formulas are torch's (softmax as exp(v - max) / sum, sigmoid as 1 / (1 + exp(-v)),
fp32).

The precision of the head is the whole change from the strict-fp32 version of this task. Eager's
transposed conv runs with cuDNN's default TF32, and on this task that costs nothing in correctness:
eager's own output is 0.021 of the strict tolerance away from the true-fp32 reference, a ~47x
margin. The strict-fp32 version ran its conv with TF32 off and measured 0.46x on the H200 (2.62 ->
5.66 ms): its conv alone made it slower than eager. This one leaves cuDNN's flags as eager's are, so
both run the same conv and the fused epilogue's saving is the difference. Measured on the H200:
1.49x over eager (2.57 -> 1.72 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
#define CMAX 64
// x, y: (B, C, S) with S = D * H * W; a thread per (b, s). Loops unrolled so v[] stays in registers.
extern "C" __global__ void __launch_bounds__(128) softmax_sigmoid(const float* __restrict__ x,
        float* __restrict__ y, long long n, long long C, long long S) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long b = j / S, s = j % S;
    const float* xp = x + b * C * S + s;
    float* yp = y + b * C * S + s;
    float v[CMAX];
    float m = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < C) {
            v[c] = xp[c * S];
            m = fmaxf(m, v[c]);
        }
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < C) {
            v[c] = expf(v[c] - m);
            sum += v[c];
        }
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < C) yp[c * S] = 1.f / (1.f + expf(-(v[c] / sum)));
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias=True):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding, bias=bias)
        self.softmax = nn.Softmax(dim=1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()  # (B, C, D, H, W)
        B, C = x.shape[:2]
        if C > 64:  # the kernel keeps a voxel's channels in registers
            return self.sigmoid(self.softmax(x))
        y = torch.empty_like(x)
        S = x[0, 0].numel()
        n = B * S
        _k.softmax_sigmoid((n + 127) // 128, 128, x.data_ptr(), y.data_ptr(), n, C, S)
        return y

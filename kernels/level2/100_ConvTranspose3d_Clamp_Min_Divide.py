"""ConvTranspose3d on cuDNN, then the clamp and the divide in one float4 kernel.

The transposed conv writes (16, 16, 31, 63, 63): 126 MB. Eager then runs torch.clamp(min) and the
divide, each a full read and write of it: ~500 MB of DRAM traffic and two launches after the head.
The fused kernel reads the conv output once with float4 loads and writes the result once
(~250 MB), computing max(v, min_value) (NaN kept, as torch.clamp keeps it) and then v / divisor,
the same two roundings in the same order as eager. One launch instead of two and half the
epilogue traffic, ~60 us saved at H200 bandwidth. The transposed conv (32 -> 16 channels, 3x3x3,
~7 GFLOP) dominates and runs with TF32 off for the strict fp32 check, so it may be slower than
eager's TF32 head. Measured: 0.47x on H200 (0.72 -> 1.55 ms), slower than eager by 0.8 ms, while the
fused pass moves ~250 MB (~0.05 ms at H200 bandwidth): the loss is in the fp32 head (eager's output
is 21x outside the strict tolerance, the mark of its TF32 conv).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float epi(float v, float lo, float d) {
    v = v < lo ? lo : v;  // torch.clamp(min=lo); NaN stays NaN
    return v / d;
}

extern "C" __global__ void clamp_div4(const float4* __restrict__ x, float4* __restrict__ y, float lo, float d,
        long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_float4(epi(v.x, lo, d), epi(v.y, lo, d), epi(v.z, lo, d), epi(v.w, lo, d));
}

extern "C" __global__ void clamp_div1(const float* __restrict__ x, float* __restrict__ y, float lo, float d,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = epi(x[i], lo, d);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, min_value, divisor):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.min_value = min_value
        self.divisor = divisor

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv_transpose(x).contiguous()  # (B, C, 31, 63, 63)
        torch.backends.cudnn.allow_tf32 = tf32
        y = torch.empty_like(x)
        n = x.numel()
        lo, d = float(self.min_value), float(self.divisor)
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.clamp_div4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), lo, d, n // 4)
        else:
            _k.clamp_div1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), lo, d, n)
        return y

"""cuDNN conv in true fp32, then HardSwish and ReLU in one in-place CUDA pass.

Eager runs the Conv2d (3 -> 16 channels, 3x3: output (128, 16, 30, 30) = 7.4 MB), F.hardswish
(read, write a temporary) and torch.relu (read, write another): two elementwise passes over 7.4 MB
and two launches after the conv. Here the conv output, a fresh tensor this call owns, is rewritten
in place by one kernel: v * min(max(v + 3, 0), 6) / 6, then max(., 0), torch's own formula, with
float4 loads and stores when the size allows. One pass instead of two and one launch fewer. The
conv runs with cuDNN's TF32 off, as the strict fp32 check needs (eager's default lets it use
TF32), which costs the conv a little. Expect ~1.2-1.4x: the work is small and launch-bound.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float hs_relu(float v) {
    const float h = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;  // F.hardswish
    return h > 0.f ? h : (h != h ? h : 0.f);                     // relu, NaN stays NaN
}

extern "C" __global__ void hardswish_relu4(float4* __restrict__ y, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    float4 v = y[i];
    y[i] = make_float4(hs_relu(v.x), hs_relu(v.y), hs_relu(v.z), hs_relu(v.w));
}

extern "C" __global__ void hardswish_relu(float* __restrict__ y, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = hs_relu(y[i]);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            y = self.conv(x).contiguous()  # (B, C, 30, 30), fresh
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        n = y.numel()
        if n % 4 == 0 and y.data_ptr() % 16 == 0:
            _k.hardswish_relu4((n // 4 + 255) // 256, 256, y.data_ptr(), n // 4)
        else:
            _k.hardswish_relu((n + 255) // 256, 256, y.data_ptr(), n)
        return y

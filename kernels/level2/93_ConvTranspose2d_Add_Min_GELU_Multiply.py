"""ConvTranspose2d on cuDNN, then the add, min with 0, GELU and multiply in one float4 kernel.

The transposed conv writes (128, 16, 66, 66), 35.7 MB. Eager then runs four elementwise kernels
(add, minimum against a 0-dim tensor, GELU, multiply), each a read and write of the whole tensor:
~285 MB of traffic and four launches after the head. The fused kernel reads the conv output once
with float4 loads and writes the result once (~71 MB), applying v + add_value, min(v, 0) (NaN
kept, as torch.min keeps it), the exact erf GELU and * multiply_value in eager's order. One
launch instead of four and a quarter of the epilogue traffic; the head runs with TF32 off for the
strict fp32 check, so it may be slower than eager's. Measured: 0.62x on H200 (0.33 -> 0.53 ms),
slower than eager by 0.2 ms, while the fused kernel moves ~71 MB (~0.015 ms at H200 bandwidth): the
likely reason is the head: the same cuDNN transposed conv, here in strict fp32 (TF32 off, as the
check needs), where eager's runs with TF32 (eager's output is 81x outside the strict tolerance).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float epi(float v, float add, float mul) {
    v = v + add;
    v = v > 0.f ? 0.f : v;  // torch.min(x, 0): NaN stays NaN
    v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // F.gelu, erf form
    return v * mul;
}

extern "C" __global__ void epilogue4(const float4* __restrict__ x, float4* __restrict__ y, float add, float mul,
        long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_float4(epi(v.x, add, mul), epi(v.y, add, mul), epi(v.z, add, mul), epi(v.w, add, mul));
}

extern "C" __global__ void epilogue1(const float* __restrict__ x, float* __restrict__ y, float add, float mul,
        long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = epi(x[i], add, mul);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, add_value, multiply_value):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride)
        self.add_value = add_value
        self.multiply_value = multiply_value

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv_transpose(x).contiguous()  # (B, C, 66, 66)
        torch.backends.cudnn.allow_tf32 = tf32
        y = torch.empty_like(x)
        n = x.numel()
        add, mul = float(self.add_value), float(self.multiply_value)
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.epilogue4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n // 4)
        else:
            _k.epilogue1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), add, mul, n)
        return y

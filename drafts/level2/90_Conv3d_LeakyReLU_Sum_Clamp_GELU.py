"""Conv3d on cuDNN, then LeakyReLU, the per-channel add, clamp and GELU in one float4 kernel.

Eager runs the convolution and four elementwise kernels, each a full read and write of the
(128, 16, 14, 30, 30) conv output (103 MB): ~0.8 GB of DRAM traffic after the head. The fused
kernel reads the conv output once and writes the result once (~206 MB), four floats per thread:
a channel's 14 * 30 * 30 = 12600 elements are a multiple of four, so all four share one
sum_tensor value. Each element goes through leaky_relu(0.2), + sum_tensor[c], clamp(-1, 1) and
the exact erf GELU in eager's order (NaN passes through the comparisons as torch's ops let it).
Four launches become one and the epilogue's traffic drops ~4x; the head runs with TF32 off for
the strict fp32 check, so it may be slower than eager's. Expect ~1.5-2x.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float epi(float v, float add) {
    v = v > 0.f ? v : v * 0.2f;             // F.leaky_relu(x, 0.2); NaN stays NaN
    v = v + add;                             // + sum_tensor
    v = v < -1.f ? -1.f : (v > 1.f ? 1.f : v);  // torch.clamp(-1, 1)
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // F.gelu, erf form
}

// x, y: (B, C, inner) flat; inner % 4 == 0, so the four lanes of a float4 share a channel.
extern "C" __global__ void epilogue4(const float4* __restrict__ x, const float* __restrict__ add,
        float4* __restrict__ y, long long C, long long inner4, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float a = add[i / inner4 % C];
    const float4 v = x[i];
    y[i] = make_float4(epi(v.x, a), epi(v.y, a), epi(v.z, a), epi(v.w, a));
}

extern "C" __global__ void epilogue1(const float* __restrict__ x, const float* __restrict__ add,
        float* __restrict__ y, long long C, long long inner, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = epi(x[i], add[i / inner % C]);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, sum_tensor_shape):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.sum_tensor = nn.Parameter(torch.randn(sum_tensor_shape))

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv(x).contiguous()  # (B, C, 14, 30, 30)
        torch.backends.cudnn.allow_tf32 = tf32
        C = x.shape[1]
        add = self.sum_tensor.expand(C, 1, 1, 1).contiguous()  # (C, 1, 1, 1) per-channel value
        y = torch.empty_like(x)
        n = x.numel()
        inner = n // (x.shape[0] * C)
        if inner % 4 == 0:
            _k.epilogue4((n // 4 + 255) // 256, 256, x.data_ptr(), add.data_ptr(), y.data_ptr(), C, inner // 4, n // 4)
        else:
            _k.epilogue1((n + 255) // 256, 256, x.data_ptr(), add.data_ptr(), y.data_ptr(), C, inner, n)
        return y

"""ConvTranspose3d on cuDNN, then the add and y * hardswish(y) in one float4 pass.

The output is (128, 64, 32, 32, 32): 268M floats, 1 GB. Eager writes the conv output, then the
add reads it and add_input and writes the sum (3 GB of traffic), hardswish reads and writes it
(2 GB) and the multiply reads two and writes one (3 GB): about 8 GB after the conv. One kernel that
reads the conv output and add_input with 128-bit loads and writes y * hardswish(y) moves 3 GB, so
at ~4 TB/s the epilogue drops from ~2 ms to ~0.75 ms. The arithmetic is torch's:
hardswish(y) = y * min(max(y + 3, 0), 6) / 6. The conv runs with TF32 off, as the check's
reference does (eager's timed run may use TF32, which the head cannot match). The unused `bias`
parameter is kept so the parameter list matches. Measured: 0.38x on H200 (4.05 -> 10.75 ms), slower
than eager by 6.7 ms, far more than the fused pass (3 GB, ~0.7 ms at H200 bandwidth) could cost. The
likely reason is the head: the same cuDNN transposed conv, here in strict fp32 (TF32 off, as the
check needs), where eager's runs with TF32 (eager's output is 3.4x outside the strict tolerance).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float f(float a, float b) {
    const float y = a + b;
    return y * (y * fminf(fmaxf(y + 3.f, 0.f), 6.f) / 6.f);  // y * F.hardswish(y)
}

extern "C" __global__ void add_hswish4(const float4* __restrict__ x, const float4* __restrict__ a,
                                       float4* __restrict__ y, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 u = __ldg(x + i), v = __ldg(a + i);
    y[i] = make_float4(f(u.x, v.x), f(u.y, v.y), f(u.z, v.z), f(u.w, v.w));
}

extern "C" __global__ void add_hswish(const float* __restrict__ x, const float* __restrict__ a,
                                      float* __restrict__ y, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = f(x[i], a[i]);
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.bias = nn.Parameter(torch.randn(bias_shape))  # unused in forward, as in the task

    def forward(self, x, add_input):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check's reference
        try:
            x = self.conv_transpose(x).contiguous()  # (B, C, 2D, 2H, 2W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        if add_input.shape != x.shape:  # a broadcasting add: leave it to torch
            y = x + add_input
            return y * torch.nn.functional.hardswish(y)
        a = add_input.contiguous()
        y = torch.empty_like(x)
        n, xp, ap, yp = x.numel(), x.data_ptr(), a.data_ptr(), y.data_ptr()
        if n % 4 == 0 and (xp | ap | yp) % 16 == 0:
            _k.add_hswish4((n // 4 + 255) // 256, 256, xp, ap, yp, n // 4)
        else:
            _k.add_hswish((n + 255) // 256, 256, xp, ap, yp, n)
        return y

"""Linear on cuBLAS (bias fused in its epilogue), then the divide and the exact GELU in one kernel.

Eager runs three kernels: the GEMM, `x / divisor` and F.gelu, and the two elementwise ones each
read and write the (128, 1024) result (512 KB). The fused kernel reads the GEMM output once with
float4 loads, computes v / divisor and 0.5 * v * (1 + erf(v / sqrt(2))) in fp32 exactly as eager
orders them, and writes the result once: two launches instead of three, one pass instead of two.
The GEMM is 134 MFLOP (a few microseconds on the H200) and the data is small, so the call is
launch-bound and the saving is one launch and its dispatch. Measured: 1.11x on H200
(0.17 -> 0.16 ms), a small gain: one launch and one pass is all it saves.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float div_gelu(float v, float d) {
    v = v / d;
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // F.gelu, approximate='none'
}

extern "C" __global__ void div_gelu4(const float4* __restrict__ x, float4* __restrict__ y, float d, long long n4) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n4) return;
    const float4 v = x[i];
    y[i] = make_float4(div_gelu(v.x, d), div_gelu(v.y, d), div_gelu(v.z, d), div_gelu(v.w, d));
}

extern "C" __global__ void div_gelu1(const float* __restrict__ x, float* __restrict__ y, float d, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = div_gelu(x[i], d);
}
""")


class ModelNew(nn.Module):
    def __init__(self, input_size, output_size, divisor):
        super().__init__()
        self.linear = nn.Linear(input_size, output_size)
        self.divisor = divisor

    def forward(self, x):
        x = self.linear(x).contiguous()  # (B, output_size)
        y = torch.empty_like(x)
        n = x.numel()
        if n % 4 == 0:  # fresh allocations are 256-byte aligned
            _k.div_gelu4((n // 4 + 255) // 256, 256, x.data_ptr(), y.data_ptr(), float(self.divisor), n // 4)
        else:
            _k.div_gelu1((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), float(self.divisor), n)
        return y

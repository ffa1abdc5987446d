"""Linear on cuBLAS, then Swish and the scale fused into one elementwise CUDA kernel.

Eager runs the GEMM (bias fused into cuBLAS's epilogue) and then three elementwise kernels,
sigmoid, `x * sigmoid(x)` and `x * scaling_factor`, each reading and writing the (128, 512)
result. At 256 KB the tensor is nothing; the launches and their dispatch are the cost. One kernel
computes (v * sigmoid(v)) * s in registers, with sigmoid as torch writes it (1 / (1 + exp(-v)),
fp32), and writes once. The GEMM (128 x 512 x 1024) is a few microseconds, so the call is launch
bound and two of four launches go. Measured: 1.25x on H200 (0.21 -> 0.17 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
extern "C" __global__ void swish_scale(const float* __restrict__ x, float* __restrict__ y, long long n, float s) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    y[i] = (v * (1.f / (1.f + expf(-v)))) * s;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scaling_factor):
        super().__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor

    def forward(self, x):
        x = self.matmul(x).contiguous()  # (B, out_features)
        y = torch.empty_like(x)
        n = x.numel()
        _k.swish_scale((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), n, float(self.scaling_factor))
        return y

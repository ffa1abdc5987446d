"""cuDNN conv in true fp32, then GELU and the global average pool in one reduction kernel.

Eager runs the Conv2d (3 -> 16 channels, 3x3: output (128, 16, 30, 30) = 7.4 MB), F.gelu (a read
and a write of 7.4 MB) and adaptive_avg_pool2d (another read), then two squeeze views. Here one
block per (sample, channel) plane reads its 900 conv outputs once, applies the erf-form GELU
0.5 v (1 + erf(v / sqrt 2)) in registers, sums with warp shuffles and shared memory, and writes
the mean straight into the (B, C) output: one pass over 7.4 MB instead of three and no 7.4 MB
temporary. fp32 throughout; the summation order differs from torch's only in rounding (each mean
is of 900 terms). The conv runs with cuDNN's TF32 off, as the strict check needs. Expect
~1.3-1.6x: after the conv, one launch and one pass instead of two launches and three passes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
// One block per plane p = n * C + c of x (planes of S contiguous floats): y[p] = mean(gelu(x[p, :])).
extern "C" __global__ void gelu_mean(const float* __restrict__ x, float* __restrict__ y, long long S) {
    __shared__ float sh[32];
    const float* row = x + blockIdx.x * S;
    float s = 0.f;
    for (long long i = threadIdx.x; i < S; i += blockDim.x) {
        const float v = row[i];
        s += 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
        y[blockIdx.x] = t / (float)S;
    }
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
            c = self.conv(x).contiguous()  # (B, C, OH, OW)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        if c.dim() != 4:
            return F.adaptive_avg_pool2d(F.gelu(c), 1).squeeze(-1).squeeze(-1)
        B, C = c.shape[:2]
        y = torch.empty(B, C, device=c.device, dtype=c.dtype)  # (B, C)
        _k.gelu_mean(B * C, 256, c.data_ptr(), y.data_ptr(), c.shape[2] * c.shape[3])
        return y

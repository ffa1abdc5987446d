"""cuDNN conv in true fp32, then the average pool, sigmoid and the per-sample sum in one kernel.

Eager runs the Conv2d (3 -> 16 channels, 3x3: output (128, 16, 30, 30) = 7.4 MB), AvgPool2d(2)
(reads it, writes a (128, 16, 15, 15) 1.8 MB temporary), torch.sigmoid (another read and write of
1.8 MB) and the sum over dims 1-3 (a reduction): three launches and two temporaries after the
conv. Here one block per sample walks its 16 x 15 x 15 pooled positions, averages each k x k
window of the conv output (summed in torch's order, then divided by k*k), applies
1 / (1 + exp(-v)) in registers and sums with warp shuffles and shared memory into out[n]: one
read of the conv output and a 512-byte write. fp32 throughout; the sums differ from torch's only
in rounding order (3600 terms, each in (0, 1)). The conv runs with cuDNN's TF32 off, as the
strict check needs. Expect ~1.3-1.6x: one launch and one pass after the conv instead of three.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// Block n: conv output x (N, C, H, W); out[n] = sum_{c, ph, pw} sigmoid(avg of the k x k window).
extern "C" __global__ void pool_sigmoid_sum(const float* __restrict__ x, float* __restrict__ out,
        long long C, long long H, long long W, long long k, long long PH, long long PW) {
    __shared__ float sh[32];
    const float* xn = x + blockIdx.x * C * H * W;
    const long long P = C * PH * PW;
    const float inv = 1.f / (float)(k * k);
    float s = 0.f;
    for (long long p = threadIdx.x; p < P; p += blockDim.x) {
        const long long c = p / (PH * PW), ph = p / PW % PH, pw = p % PW;
        const float* w0 = xn + (c * H + ph * k) * W + pw * k;
        float a = 0.f;
        for (long long i = 0; i < k; ++i)
            for (long long j = 0; j < k; ++j) a += w0[i * W + j];
        a = a * inv;
        s += 1.f / (1.f + expf(-a));
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
        out[blockIdx.x] = t;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            c = self.conv(x).contiguous()  # (B, C, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        k = self.avg_pool.kernel_size
        if c.dim() != 4 or not isinstance(k, int) or self.avg_pool.stride not in (k, None, [k] * 2, (k, k)) \
                or self.avg_pool.padding != 0 or self.avg_pool.ceil_mode:
            return torch.sum(torch.sigmoid(self.avg_pool(c)), dim=[1, 2, 3])
        B, C, H, W = c.shape
        out = torch.empty(B, device=c.device, dtype=c.dtype)  # (B,)
        _k.pool_sigmoid_sum(B, 512, c.data_ptr(), out.data_ptr(), C, H, W, k, H // k, W // k)
        return out

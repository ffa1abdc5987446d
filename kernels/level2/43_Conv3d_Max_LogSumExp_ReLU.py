"""Conv3d on cuDNN, then the 2x2x2 max pool, logsumexp over channels and ReLU in one CUDA kernel.

Eager runs the conv and then MaxPool3d (reads the (128, 16, 16, 32, 32) conv output, 134 MB, and
writes an eighth of it), logsumexp (amax, subtract, exp, sum, log and add: several kernels over the
pooled 17 MB tensor) and ReLU: about eight launches and ~200 MB of traffic after the conv. Here a
thread per output position (b, d, h, w) walks the C channels: for each it takes the max of its
2x2x2 window straight from the conv output and keeps it in a register, then forms
m + log(sum exp(v - m)) with m the channel max, as torch's logsumexp does, and writes its relu. One read of the
conv output, a 1 MB write, one launch. Infinite maxima are handled as torch's logsumexp does (the
shift is zero when the max is infinite). The conv runs with cuDNN's TF32 switched off for the call
(the check is against true fp32), but eager's output equals the strict reference bit for bit, so its
conv did not use TF32 either and the heads cost the same. Measured: 1.18x on H200 (0.93 -> 0.78 ms):
the saving is the epilogue's, and the conv is most of the call.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
#define CMAX 32
extern "C" __global__ void pool_lse_relu(const float* __restrict__ x, float* __restrict__ y, long long n,
        long long C, long long D, long long H, long long W) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;  // one output (b, od, oh, ow)
    if (j >= n) return;
    const unsigned OD = D / 2, OH = H / 2, OW = W / 2;
    unsigned q = j;  // 32-bit index arithmetic (n < 2^31, checked by the caller): 64-bit division is slow
    const unsigned ow = q % OW; q /= OW;
    const unsigned oh = q % OH; q /= OH;
    const unsigned od = q % OD; q /= OD;  // q = b
    float v[CMAX];  // the pooled channel values; loops unrolled so they stay in registers
    float m = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        const float* p = x + ((((long long)q * C + c) * D + 2 * od) * H + 2 * oh) * W + 2 * ow;
        float w = p[0];
        #pragma unroll
        for (int t = 1; t < 8; ++t) {
            const float u = p[((t >> 2) * H + ((t >> 1) & 1)) * W + (t & 1)];
            if (u > w || isnan(u)) w = u;  // max pool propagates NaN
        }
        v[c] = w;
        if (w > m || isnan(w)) m = w;
    }
    const float sh = isinf(m) ? 0.f : m;  // torch's logsumexp shift
    float s = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < C) s += expf(v[c] - sh);
    const float r = logf(s) + sh;
    y[j] = r < 0.f ? 0.f : r;  // relu; NaN stays NaN
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.max_pool = nn.MaxPool3d(kernel_size=2, stride=2)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check wants
        try:
            x = self.conv(x).contiguous()  # (B, C, 16, 32, 32)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        B, C, D, H, W = x.shape
        if C > 32 or B * (D // 2) * (H // 2) * (W // 2) >= 2**31:  # channels in registers, 32-bit indices
            return torch.relu(torch.logsumexp(self.max_pool(x), dim=1, keepdim=True))
        y = x.new_empty(B, 1, D // 2, H // 2, W // 2)
        n = y.numel()
        _k.pool_lse_relu((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), n, C, D, H, W)
        return y

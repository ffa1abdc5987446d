"""Conv3d on cuDNN, then the min over depth and the softmax over channels in one kernel.

Eager writes the (128, 16, 14, 30, 30) conv output (103 MB), then a min-reduction kernel reads it
and writes (128, 16, 30, 30) (7.4 MB), and softmax over dim 1 reads that and writes the result:
strided reductions over a non-innermost dim, two launches and a round trip of the intermediate.
Here one thread owns one (sample, h, w) column: for each channel it takes the min over the 14
depths (loads coalesced along w, since neighbouring threads own neighbouring w), writes that min
into the output and keeps an online max and sum of exps; a second loop rewrites each channel as
exp(m - max) / sum (reading back its own values, which are still in L1/L2). The conv output is
read exactly once and the result written once, in a single launch after the conv. The conv runs
with TF32 off, as the check's reference does. Measured: 1.02x on H200 (0.64 -> 0.63 ms), about a
tie: the conv dominates, and the saving, two reduction kernels and a 7 MB intermediate, is small
next to it. Only dim=2 (depth) is fused; another dim takes the eager path.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// Thread j = (n, h, w) over x (N, C, D, H, W): y[n, c, h, w] = softmax_c(min_d x[n, c, d, h, w]).
extern "C" __global__ void min_softmax(const float* __restrict__ x, float* __restrict__ y,
                                       long long N, long long C, long long D, long long HW) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= N * HW) return;
    const long long n = j / HW, p = j % HW;
    float mx = -INFINITY, sum = 0.f;
    for (long long c = 0; c < C; ++c) {
        const float* xc = x + (n * C + c) * D * HW + p;
        float m = xc[0];
        for (long long d = 1; d < D; ++d) { const float v = xc[d * HW]; m = (v < m || v != v) ? v : m; }
        y[(n * C + c) * HW + p] = m;
        const float nmx = fmaxf(mx, m);  // online softmax: rescale the running sum to the new max
        sum = sum * expf(mx - nmx) + expf(m - nmx);
        mx = nmx;
    }
    const float inv = 1.f / sum;
    for (long long c = 0; c < C; ++c) {
        float* yc = y + (n * C + c) * HW + p;
        *yc = expf(*yc - mx) * inv;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, dim):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.dim = dim

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check's reference
        try:
            x = self.conv(x).contiguous()  # (B, C, D, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        if self.dim not in (2, -3) or x.shape[2] == 0:
            return torch.softmax(torch.min(x, dim=self.dim).values, dim=1)
        B, C, D, H, W = x.shape
        y = x.new_empty(B, C, H, W)
        _k.min_softmax((B * H * W + 255) // 256, 256, x.data_ptr(), y.data_ptr(), B, C, D, H * W)
        return y

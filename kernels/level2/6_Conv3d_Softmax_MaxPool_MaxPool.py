"""Conv3d on cuDNN without its bias, then one kernel for bias + channel softmax + both max pools.

Two MaxPool3d(2) in a row (floor mode, no padding) equal one 4x4x4 max pool with stride 4: output o
of the second covers first-pool outputs 2o, 2o+1, i.e. inputs 4o..4o+3, all inside the first's
range. Eager adds the conv's own bias (after cuDNN returns), runs a softmax over the 16 channels
and two pools: passes over the (128, 16, 14, 30, 30) activation (103 MB) that each read it and most
write it, ~400 MB of traffic and four launches. Here one block owns (n, od, oh): its threads walk
the 4 x 4 x (4 * OW) input positions under that output row (coalesced along w), each doing the
softmax over the channels in registers (max, sum of exp, exp / sum as torch writes it), and park
the probabilities in shared memory (C x 448 floats, 28 KB); then one thread per (c, ow) takes the
max of its 64 entries and writes the output. The conv output is read once and only the (128, 16, 3,
7, 7) result is written. The conv runs with TF32 off (true fp32, as the check requires), while
eager's timed run lets cuDNN use TF32; eager's output equals that strict reference bit for bit,
though, so at 3 input channels its conv did not use TF32 and the two heads cost the same. Measured:
1.17x on H200 (0.98 -> 0.83 ms); the fused pass reads ~103 MB (~0.02 ms at H200 bandwidth), so most
of the remaining time is the conv.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 32;  // channels held in registers per position

// x: (N, C, D, H, W) without the conv bias; y: (N, C, OD, OH, OW), window P = 4, stride 4.
// grid = N * OD * OH; dynamic shared memory: C * P*P*P*OW floats.
extern "C" __global__ void softmax_pool(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long D, long long H, long long W,
        long long OD, long long OH, long long OW, int P) {
    extern __shared__ float prob[];  // [C][P][P][P * OW]
    const long long b = blockIdx.x, oh = b % OH, od = (b / OH) % OD, n = b / (OH * OD);
    const long long WP = P * OW, npos = (long long)P * P * WP, DHW = D * H * W;
    for (long long p = threadIdx.x; p < npos; p += blockDim.x) {
        const long long w = p % WP, h = 4 * oh + (p / WP) % P, d = 4 * od + p / (WP * P);
        const float* xp = x + n * C * DHW + (d * H + h) * W + w;
        float v[CMAX], m = -INFINITY, s = 0.f;
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < C) { v[c] = xp[c * DHW] + cb[c]; m = fmaxf(m, v[c]); }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < C) { v[c] = expf(v[c] - m); s += v[c]; }
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) if (c < C) prob[c * npos + p] = v[c] / s;
    }
    __syncthreads();
    for (long long j = threadIdx.x; j < C * OW; j += blockDim.x) {
        const long long c = j / OW, ow = j % OW;
        const float* pc = prob + c * npos + ow * P;
        float m = -INFINITY;
        for (int a = 0; a < P * P; ++a)  // (d, h) offsets
            for (int e = 0; e < P; ++e) { const float t = pc[a * WP + e]; m = (t > m || t != t) ? t : m; }
        y[(((n * C + c) * OD + od) * OH + oh) * OW + ow] = m;
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.pool1 = nn.MaxPool3d(pool_kernel_size)
        self.pool2 = nn.MaxPool3d(pool_kernel_size)

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv3d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C, D, H, W = x.shape  # (B, 16, 14, 30, 30)
        OD, OH, OW = D // 2 // 2, H // 2 // 2, W // 2 // 2
        shared = C * 64 * OW * 4
        plain = all(p.kernel_size == 2 and p.stride == 2 and p.padding == 0 and p.dilation == 1
                    and not p.ceil_mode for p in (self.pool1, self.pool2))
        if not plain or C > 32 or shared > 48 * 1024:  # configurations this kernel does not cover
            x = torch.softmax(x + c.bias.view(1, -1, 1, 1, 1), dim=1)
            return self.pool2(self.pool1(x))
        y = x.new_empty(N, C, OD, OH, OW)
        _k.softmax_pool(N * OD * OH, 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(), C, D, H, W,
                        OD, OH, OW, 4, shared=shared)
        return y

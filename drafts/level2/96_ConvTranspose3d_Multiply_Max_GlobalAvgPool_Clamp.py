"""ConvTranspose3d on cuDNN, then the scale, the 2x2x2 max pool, the global average and the clamp in one kernel.

The transposed conv writes (128, 16, 31, 63, 63): 1.0 GB. Eager then multiplies it by the scale
(a read and write of 1.0 GB), max-pools it (reads 1.0 GB, writes 118 MB), averages each channel
(reads 118 MB) and clamps a (128, 16) result: ~3.3 GB of DRAM traffic after the head, four
launches. The fused kernel gives each (sample, channel) one block: its threads walk the pooled
(15, 31, 31) grid with adjacent threads on adjacent windows (coalesced rows), scale each of the
window's eight values as eager does before the pool, take the max (NaN propagates), and sum the
maxima; a shuffle and shared-memory reduction gives the block's sum, divided by the window count
and clamped to [0, 1]. After the head that is one read of the conv output and an 8 KB write. The
head dominates and runs with TF32 off for the strict fp32 check. Expect ~1.5-2x.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// x: (B*C, D, H, W) conv output; y: (B*C). Pool window k, stride k, no padding.
extern "C" __global__ void __launch_bounds__(256) scale_maxpool_mean_clamp(const float* __restrict__ x,
        float* __restrict__ y, float scale, long long D, long long H, long long W, int k, float lo, float hi) {
    __shared__ float part[32];
    const long long OD = D / k, OH = H / k, OW = W / k, per = OD * OH * OW;
    const float* xp = x + blockIdx.x * D * H * W;
    float s = 0.f;
    for (long long j = threadIdx.x; j < per; j += blockDim.x) {
        const long long ow = j % OW, oh = j / OW % OH, od = j / (OW * OH);
        const float* p = xp + (od * k * H + oh * k) * W + ow * k;  // window corner
        float m = -INFINITY;
        for (int a = 0; a < k; ++a)
            for (int b = 0; b < k; ++b)
                for (int e = 0; e < k; ++e) {
                    const float v = p[(a * H + b) * W + e] * scale;  // x * scale, before the pool
                    m = (v > m || v != v) ? v : m;                  // NaN wins, as in max_pool3d
                }
        s += m;
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int w = 0; w < blockDim.x / 32; ++w) t += part[w];
        t = t / (float)per;       // adaptive_avg_pool3d to (1, 1, 1)
        t = t < lo ? lo : t;      // torch.clamp(min, max); NaN stays NaN
        y[blockIdx.x] = t > hi ? hi : t;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, scale, maxpool_kernel_size):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding)
        self.scale = scale
        self.maxpool = nn.MaxPool3d(kernel_size=maxpool_kernel_size)
        self.global_avg_pool = nn.AdaptiveAvgPool3d((1, 1, 1))
        self.clamp_min = 0  # fixed, not init arguments
        self.clamp_max = 1

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv_transpose(x).contiguous()  # (B, C, 31, 63, 63)
        torch.backends.cudnn.allow_tf32 = tf32
        B, C, D, H, W = x.shape
        k = self.maxpool.kernel_size  # an int here: stride = kernel, no padding
        y = x.new_empty(B, C, 1, 1, 1)
        _k.scale_maxpool_mean_clamp(B * C, 256, x.data_ptr(), y.data_ptr(), float(self.scale), D, H, W, k,
                                    float(self.clamp_min), float(self.clamp_max))
        return y

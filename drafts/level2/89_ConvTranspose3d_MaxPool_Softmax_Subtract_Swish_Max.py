"""ConvTranspose3d on cuDNN, then max pool, channel softmax, subtract, Swish and the channel max in one kernel.

The transposed conv writes a (128, 16, 32, 64, 64) tensor: 1.07 GB. Eager then runs the 2x2x2
max pool (reads it all, writes 134 MB), softmax over channels, the subtract, sigmoid, multiply
(each a read and write of 134 MB) and the channel max: ~2.3 GB of DRAM traffic after the head.
The fused kernel gives each thread one (sample, d, h, w) of the pooled grid: for each of the 16
channels it reads its 2x2x2 window once and keeps the max in a register array, then does the
softmax over those 16 values (max, exp, sum, divide, as torch), subtracts the per-channel
parameter, applies x * sigmoid(x) and takes the max over channels (NaN propagates), writing one
float. After the head that is one read of the 1.07 GB conv output and an 8 MB write, one launch
instead of six. The head dominates either way (it runs with TF32 off for the strict fp32 check,
so it may be slower than eager's); expect ~1.5-2x overall.
"""
import torch
import torch.nn as nn

import cudal1

CMAX = 16  # channels held in registers; more channels take the eager path

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 16;

// x: (B, C, D, H, W) conv output; y: (B, OD, OH, OW). Pool window k, stride s, no padding.
extern "C" __global__ void pool_softmax_sub_swish_max(const float* __restrict__ x, const float* __restrict__ sub,
        float* __restrict__ y, int C, long long D, long long H, long long W, long long OD, long long OH,
        long long OW, int k, int s, long long n) {
    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= n) return;
    const long long ow = j % OW, oh = j / OW % OH, od = j / (OW * OH) % OD, b = j / (OW * OH * OD);
    const long long plane = D * H * W;
    const float* p0 = x + b * C * plane + (od * s * H + oh * s) * W + ow * s;  // window corner, channel 0
    float v[CMAX];
    float mx = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        const float* p = p0 + c * plane;
        float m = -INFINITY;
        for (int a = 0; a < k; ++a)
            for (int e = 0; e < k; ++e)
                for (int f = 0; f < k; ++f) {
                    const float t = p[(a * H + e) * W + f];
                    m = (t > m || t != t) ? t : m;  // NaN wins, as in max_pool3d
                }
        v[c] = m;
        mx = fmaxf(mx, m);
    }
    float sum = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        v[c] = expf(v[c] - mx);
        sum += v[c];
    }
    float out = -INFINITY;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) {
        if (c >= C) break;
        float t = v[c] / sum - sub[c];        // softmax, - subtract
        t = (1.f / (1.f + expf(-t))) * t;     // sigmoid(x) * x
        out = (t > out || t != t) ? t : out;  // torch.max: NaN wins
    }
    y[j] = out;
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 pool_stride, pool_padding):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.max_pool = nn.MaxPool3d(kernel_size=pool_kernel_size, stride=pool_stride, padding=pool_padding)
        self.subtract = nn.Parameter(torch.randn(out_channels))

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x = self.conv_transpose(x).contiguous()  # (B, C, 32, 64, 64)
        torch.backends.cudnn.allow_tf32 = tf32
        mp = self.max_pool
        k, s = mp.kernel_size, mp.stride
        B, C, D, H, W = x.shape
        if (C > CMAX or not all(isinstance(t, int) for t in (k, s, mp.padding, mp.dilation)) or mp.padding != 0
                or mp.dilation != 1 or mp.ceil_mode):
            x = torch.softmax(mp(x), dim=1) - self.subtract.view(1, -1, 1, 1, 1)
            return torch.max(torch.sigmoid(x) * x, dim=1).values
        OD, OH, OW = (D - k) // s + 1, (H - k) // s + 1, (W - k) // s + 1
        y = x.new_empty(B, OD, OH, OW)
        n = y.numel()
        _k.pool_softmax_sub_swish_max((n + 255) // 256, 256, x.data_ptr(), self.subtract.data_ptr(), y.data_ptr(),
                                      C, D, H, W, OD, OH, OW, k, s, n)
        return y

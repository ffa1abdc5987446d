"""ConvTranspose3d on cuDNN, then AvgPool3d, clamp, channel softmax and the x2 in one kernel.

Eager writes the (16, 16, 32, 64, 64) conv output (134 MB), average-pools it into (16, 16, 16, 32,
32) (17 MB), then clamps, softmaxes over the channels and multiplies by 2, each a read and a write
of the pooled tensor: four launches and about 240 MB of traffic after the conv. Here one thread owns
one pooled position of one sample (neighbouring threads own neighbouring positions, so the window
loads are coalesced): for each channel it averages the 2 x 2 x 2 window (sum, then divide by 8, as
the pool does), clamps to [0, 1], writes the value into the output and keeps an online max and sum
of exps; a second loop rewrites each channel as 2 * exp(v - max) / sum (reading back its own values
from L1/L2). The conv output is read once and the 17 MB result written once: one launch instead of
four and ~150 MB instead of ~240 MB.

The precision of the head is the whole change from the strict-fp32 version of this task. Eager's
transposed conv runs with cuDNN's default TF32, and on this task that costs nothing in correctness:
eager's own output is 0.45 of the strict tolerance away from the true-fp32 reference, a ~2x margin.
The strict-fp32 version ran its conv with TF32 off and measured 0.57x on the H200 (0.81 -> 1.42 ms):
its conv alone made it slower than eager. This one leaves cuDNN's flags as eager's are, so both run
the same conv and the fused epilogue's saving is the difference. Measured on the H200: 1.05x over
eager (0.772 -> 0.732 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
// Thread j = (n, p) over the pooled (N, C, OD, OH, OW), p = (od, oh, ow); x is (N, C, D, H, W).
extern "C" __global__ void pool_clamp_softmax(const float* __restrict__ x, float* __restrict__ y,
        long long N, long long C, long long D, long long H, long long W, long long OD, long long OH,
        long long OW, int k, float lo, float hi, float mul) {
    const long long P = OD * OH * OW, j = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (j >= N * P) return;
    const long long n = j / P, p = j % P;
    const long long ow = p % OW, oh = (p / OW) % OH, od = p / (OW * OH);
    float mx = -INFINITY, sum = 0.f;
    for (long long c = 0; c < C; ++c) {
        const float* xw = x + (((n * C + c) * D + od * k) * H + oh * k) * W + ow * k;
        float a = 0.f;
        for (int d = 0; d < k; ++d)
            for (int h = 0; h < k; ++h)
                for (int w = 0; w < k; ++w) a += xw[(d * H + h) * W + w];
        a = a / (float)(k * k * k);
        a = fminf(fmaxf(a, lo), hi);
        y[(n * C + c) * P + p] = a;
        const float nmx = fmaxf(mx, a);  // online softmax: rescale the running sum to the new max
        sum = sum * expf(mx - nmx) + expf(a - nmx);
        mx = nmx;
    }
    for (long long c = 0; c < C; ++c) {
        float* yc = y + (n * C + c) * P + p;
        *yc = expf(*yc - mx) / sum * mul;
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, pool_kernel_size,
                 clamp_min, clamp_max):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride,
                                                 padding=padding, output_padding=output_padding)
        self.avg_pool = nn.AvgPool3d(pool_kernel_size)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        x = self.conv_transpose(x).contiguous()  # (B, C, D, H, W)
        ap = self.avg_pool
        k = ap.kernel_size
        if not (isinstance(k, int) and ap.stride == k and ap.padding == 0 and not ap.ceil_mode
                and ap.divisor_override is None):
            x = torch.clamp(ap(x), self.clamp_min, self.clamp_max)
            return torch.softmax(x, dim=1) * 2
        B, C, D, H, W = x.shape
        y = x.new_empty(B, C, D // k, H // k, W // k)
        n = B * (D // k) * (H // k) * (W // k)
        _k.pool_clamp_softmax((n + 255) // 256, 256, x.data_ptr(), y.data_ptr(), B, C, D, H, W, D // k, H // k, W // k,
                              k, self.clamp_min, self.clamp_max, 2.0)
        return y

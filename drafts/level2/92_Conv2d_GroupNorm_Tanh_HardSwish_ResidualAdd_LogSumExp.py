"""Conv2d on cuDNN, then GroupNorm, tanh, HardSwish, the residual add and the channel logsumexp in one kernel.

Eager runs the convolution and then GroupNorm (statistics and apply), tanh, HardSwish, the add and
logsumexp (itself a max, a subtract-exp-sum and a log): eight or so kernels after the head, most of
them a read and write of the (128, 16, 30, 30) conv output (7.4 MB). Here one block owns one sample
(16 x 900 floats, 57 KB, which stays in L1/L2): each warp computes one group's mean and biased
variance in two shuffle-reduced passes into shared memory, then each thread takes pixels and walks
the 16 channels, computing r = conv + hardswish(tanh(gn(conv))) in eager's order into registers
and reducing them as torch's logsumexp does (max, then max + log(sum(exp(r - max)))). It writes
one float per pixel: one launch instead of about eight, and the conv output is read from DRAM
once. The head runs with TF32 off for the strict fp32 check. Expect ~2-3x.
"""
import torch
import torch.nn as nn

import cudal1

CMAX, GMAX = 64, 64  # channels held in registers, groups in shared memory; more take the eager path

_k = cudal1.load_cuda(r"""
constexpr int CMAX = 64, GMAX = 64;

// x: (B, C, HW) conv output; y: (B, 1, HW). One block per sample.
extern "C" __global__ void __launch_bounds__(256) gn_act_res_lse(const float* __restrict__ x,
        const float* __restrict__ gw, const float* __restrict__ gb, float* __restrict__ y,
        int C, int G, long long HW, float eps) {
    __shared__ float mean[GMAX], rstd[GMAX];
    const float* xb = x + blockIdx.x * (long long)C * HW;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, cpg = C / G;
    const long long len = cpg * HW;  // a group is contiguous
    for (int g = warp; g < G; g += blockDim.x / 32) {
        const float* xg = xb + g * len;
        float s = 0.f;
        for (long long i = lane; i < len; i += 32) s += xg[i];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float m = s / (float)len;
        float q = 0.f;
        for (long long i = lane; i < len; i += 32) { const float d = xg[i] - m; q += d * d; }
        for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
        if (lane == 0) { mean[g] = m; rstd[g] = rsqrtf(q / (float)len + eps); }  // biased variance
    }
    __syncthreads();
    for (long long p = threadIdx.x; p < HW; p += blockDim.x) {
        float r[CMAX];
        float mx = -INFINITY;
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) {
            if (c >= C) break;
            const float v = xb[c * HW + p];
            const int g = c / cpg;
            float t = tanhf((v - mean[g]) * rstd[g] * gw[c] + gb[c]);  // tanh(group_norm(x))
            t = t * fminf(fmaxf(t + 3.f, 0.f), 6.f) / 6.f;              // hardswish
            r[c] = v + t;                                               // residual: the pre-norm conv
            mx = fmaxf(mx, r[c]);
        }
        float s = 0.f;
        #pragma unroll
        for (int c = 0; c < CMAX; ++c) {
            if (c >= C) break;
            s += expf(r[c] - mx);
        }
        y[blockIdx.x * HW + p] = isinf(mx) ? mx : mx + logf(s);  // torch.logsumexp (an inf max stays)
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, eps=1e-5):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(groups, out_channels, eps=eps)
        self.tanh = nn.Tanh()
        self.hard_swish = nn.Hardswish()

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # strict fp32: eager lets cuDNN use TF32
        x_conv = self.conv(x).contiguous()  # (B, C, 30, 30)
        torch.backends.cudnn.allow_tf32 = tf32
        gn = self.group_norm
        B, C, H, W = x_conv.shape
        if C > CMAX or gn.num_groups > GMAX:
            x_res = x_conv + self.hard_swish(self.tanh(gn(x_conv)))
            return torch.logsumexp(x_res, dim=1, keepdim=True)
        y = x_conv.new_empty(B, 1, H, W)
        _k.gn_act_res_lse(B, 256, x_conv.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(), y.data_ptr(),
                          C, gn.num_groups, H * W, gn.eps)
        return y

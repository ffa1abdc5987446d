"""The whole model in one kernel: one block per (n, c) computes its 3x3 conv plane directly, then
InstanceNorm and the division.

With 3 input channels and a 3x3 kernel each conv output is a 27-term dot product (50M
multiply-adds in all, a few microseconds of FMA issue), and each (n, c) plane is only 30 x 30 =
900 values, so a 256-thread block holds its plane in registers (up to 4 values per thread).
Eager instead runs cuDNN's implicit GEMM, a separate conv-bias add (PyTorch adds it after cuDNN
returns), InstanceNorm (batch_norm on a reshaped view: statistics, then apply) and the division:
~5 passes over the (128, 16, 30, 30) activation (7.4 MB) and five launches. Here each thread
computes its outputs from the 3 x 3 x 3 input windows (coalesced along the row, re-reads in L1)
plus the bias, the block sums v and v^2 in double (no cancellation in E[v^2] - E[v]^2) with warp
shuffles, and writes (v - mean) * rstd / divide_by once, with the biased variance and eps = 1e-5
as InstanceNorm2d uses them. Plain fp32 FMA, no TF32. One launch and one write: 1.79x on H200
(0.22 -> 0.12 ms).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
constexpr int THREADS = 256, PER = 4;  // a plane of up to 1024 outputs lives in registers

__device__ double block_sum(double v, double* sh) {  // every thread gets the block's total
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read by an earlier call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < THREADS / 32; ++w) t += sh[w];
    return t;
}

// x: (N, Cin, H, W), w: (Cout, Cin, K, K); y: (N, Cout, OH, OW). One block per (n, co); grid (Cout, N).
extern "C" __global__ void __launch_bounds__(THREADS) conv_instnorm_div(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ cb, float* __restrict__ y, long long Cin,
        long long H, long long W, int K, int OH, int OW, float eps, float divide_by) {
    __shared__ double sh[THREADS / 32];
    const long long co = blockIdx.x, n = blockIdx.y;
    const int P = OH * OW;
    const float* xn = x + n * Cin * H * W;
    const float* wc = w + co * Cin * K * K;
    const float b = cb[co];
    float v[PER];
    double s1 = 0.0, s2 = 0.0;
    #pragma unroll
    for (int j = 0; j < PER; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i >= P) break;
        const float* xw = xn + (i / OW) * W + (i % OW);  // the window's top-left, channel 0
        float acc = 0.f;
        for (long long ci = 0; ci < Cin; ++ci)
            for (int kh = 0; kh < K; ++kh)
                for (int kw = 0; kw < K; ++kw)
                    acc = fmaf(__ldg(xw + (ci * H + kh) * W + kw), __ldg(wc + (ci * K + kh) * K + kw), acc);
        v[j] = acc + b;
        s1 += v[j]; s2 += (double)v[j] * v[j];
    }
    const double mean = block_sum(s1, sh) / P;
    const double var = fmax(block_sum(s2, sh) / P - mean * mean, 0.0);  // biased
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
    float* yp = y + (n * gridDim.x + co) * P;
    #pragma unroll
    for (int j = 0; j < PER; ++j) {
        const int i = threadIdx.x + j * THREADS;
        if (i < P) yp[i] = (v[j] - m) * rstd / divide_by;
    }
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        c = self.conv
        N, Cin, H, W = x.shape
        K = c.kernel_size[0]
        OH, OW = H - K + 1, W - K + 1
        plain = c.stride == (1, 1) and c.padding == (0, 0) and c.dilation == (1, 1) and c.groups == 1 \
            and c.kernel_size[0] == c.kernel_size[1]
        if not plain or OH * OW > 4 * 256 or OH * OW < 1 or N > 65535:  # not covered here: torch's way
            tf32 = torch.backends.cudnn.allow_tf32
            torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
            x = c(x)
            torch.backends.cudnn.allow_tf32 = tf32
            return self.instance_norm(x) / self.divide_by
        x = x.contiguous()
        y = x.new_empty(N, c.out_channels, OH, OW)
        _k.conv_instnorm_div((c.out_channels, N), 256, x.data_ptr(), c.weight.contiguous().data_ptr(),
                             c.bias.data_ptr(), y.data_ptr(), Cin, H, W, K, OH, OW,
                             float(self.instance_norm.eps), float(self.divide_by))
        return y

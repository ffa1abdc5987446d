"""Conv2d on cuDNN without its bias, then one block per (n, c) plane for bias, InstanceNorm and
the division.

Eager adds the conv's own bias after cuDNN returns (a read and write of the (128, 16, 30, 30)
activation, 7.4 MB), runs InstanceNorm (through batch_norm on a reshaped view: a statistics pass
and an apply pass) and divides (another read and write): ~5 passes and four launches after the
conv. Here one kernel gives each 900-element plane a block of 256 threads: they add the bias,
sum x and x^2 in double (so E[x^2] - E[x]^2 loses nothing to cancellation), reduce with warp
shuffles, and write (x - mean) * rstd / divide_by, the biased variance and eps = 1e-5 as
InstanceNorm2d uses them. The second read of the plane hits L1/L2, so DRAM sees one read and one
write. The conv runs with TF32 off (true fp32). Small and launch-bound: expect ~1.5-2x.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
__device__ double block_sum(double v, double* sh) {  // every thread gets the block's total
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read by an earlier call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    double t = 0.0;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
    return t;
}

// One block per (n, c) plane of HW elements; x has no conv bias yet.
extern "C" __global__ void instnorm_div(const float* __restrict__ x, const float* __restrict__ cb,
        float* __restrict__ y, long long C, long long HW, float eps, float divide_by) {
    __shared__ double sh[32];
    const long long nc = blockIdx.x;
    const float* xp = x + nc * HW;
    const float b = cb[nc % C];
    double s1 = 0.0, s2 = 0.0;
    for (long long i = threadIdx.x; i < HW; i += blockDim.x) {
        const double v = xp[i] + b;
        s1 += v; s2 += v * v;
    }
    const double mean = block_sum(s1, sh) / HW;
    const double var = fmax(block_sum(s2, sh) / HW - mean * mean, 0.0);  // biased
    const float m = (float)mean, rstd = (float)(1.0 / sqrt(var + eps));
    for (long long i = threadIdx.x; i < HW; i += blockDim.x)
        y[nc * HW + i] = ((xp[i] + b) - m) * rstd / divide_by;
}""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, divide_by):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.instance_norm = nn.InstanceNorm2d(out_channels)
        self.divide_by = divide_by

    def forward(self, x):
        c = self.conv
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check requires
        x = F.conv2d(x, c.weight, None, c.stride, c.padding, c.dilation, c.groups).contiguous()
        torch.backends.cudnn.allow_tf32 = tf32
        N, C, H, W = x.shape  # (B, 16, 30, 30)
        y = torch.empty_like(x)
        _k.instnorm_div(N * C, 256, x.data_ptr(), c.bias.data_ptr(), y.data_ptr(), C, H * W,
                        float(self.instance_norm.eps), float(self.divide_by))
        return y

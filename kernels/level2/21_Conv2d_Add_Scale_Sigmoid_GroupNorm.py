"""Conv2d on cuDNN, then bias, scale, sigmoid and GroupNorm in one kernel: a block per group.

Eager runs the convolution and then five more kernels (add, multiply, sigmoid, and GroupNorm's
statistics and apply passes), each reading and writing the (128, 16, 30, 30) result (7.4 MB).
Here one block owns one (sample, group): the group's 2 channels x 900 positions are contiguous,
so the block reads them once, applies (x + bias[c]) * scale[c] and the sigmoid, keeps the 1800
values in shared memory, reduces the mean and then the centred variance (two passes over shared
memory, as accurate as eager's Welford), and writes gamma * (v - mean) * rstd + beta. One read and
one write of the conv output instead of about six, and six launches fewer. The convolution runs
with TF32 off: the check is against true fp32, and eager's output equals that reference bit for bit,
so its conv did not use TF32 either. Measured: 1.46x on H200 (0.34 -> 0.23 ms): the work is small
and bound by launches and memory passes. Groups larger than 12K floats (48 KB of shared memory) take
the eager path.
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ float block_sum(float v, float* red) {  // blockDim.x a multiple of 32; every thread gets the sum
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // red may still be read by the previous call
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) v += red[w];
    return v;
}

// Block b = n * G + g normalises the L = cpg * HW contiguous values of group g of sample n.
extern "C" __global__ void sigmoid_groupnorm(const float* __restrict__ x, const float* __restrict__ bias,
        const float* __restrict__ scale, const float* __restrict__ gamma, const float* __restrict__ beta,
        float* __restrict__ y, long long G, long long cpg, long long HW, float eps) {
    extern __shared__ float v[];  // (L,) the group after the sigmoid
    __shared__ float red[32];
    const long long L = cpg * HW, row = blockIdx.x, c0 = (row % G) * cpg;
    const float* xr = x + row * L;
    float* yr = y + row * L;
    float s = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) {
        const long long c = c0 + i / HW;
        const float t = (xr[i] + bias[c]) * scale[c];
        v[i] = 1.f / (1.f + expf(-t));  // torch.sigmoid
        s += v[i];
    }
    const float mean = block_sum(s, red) / (float)L;
    float q = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) { const float d = v[i] - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, red) / (float)L + eps);
    for (long long i = threadIdx.x; i < L; i += blockDim.x) {
        const long long c = c0 + i / HW;
        yr[i] = (v[i] - mean) * rstd * gamma[c] + beta[c];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, num_groups, bias_shape, scale_shape):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))
        self.scale = nn.Parameter(torch.randn(scale_shape))
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the check's reference
        try:
            x = self.conv(x).contiguous()  # (B, C, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        gn = self.group_norm
        B, C, H, W = x.shape
        G = gn.num_groups
        L = (C // G) * H * W
        if self.bias.numel() != C or self.scale.numel() != C or L * 4 > 48 * 1024:
            return gn(torch.sigmoid((x + self.bias) * self.scale))
        y = torch.empty_like(x)
        _k.sigmoid_groupnorm(B * G, 256, x.data_ptr(), self.bias.contiguous().data_ptr(),
                             self.scale.contiguous().data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                             y.data_ptr(), G, C // G, H * W, gn.eps, shared=L * 4)
        return y

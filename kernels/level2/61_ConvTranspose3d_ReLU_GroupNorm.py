"""cuDNN transposed conv in true fp32, then ReLU and GroupNorm in one CUDA kernel: a block per group.

Eager runs the ConvTranspose3d (64 -> 128 channels, output (16, 128, 10, 18, 18) = 26.5 MB), ReLU
(a read and a write of 26.5 MB) and GroupNorm (a statistics kernel that reads it and a normalize
kernel that reads it again and writes the result). Here one block of 1024 threads owns one
(sample, group) slice -- 16 channels x 3240 positions = 51840 contiguous floats, 207 KB -- and
makes three sweeps over it with ReLU applied on the fly: the mean, then the variance as the mean
of squared deviations (two-pass, as accurate as torch's Welford), then the write of
(relu(v) - mean) * rstd * gamma[c] + beta[c]. The second and third sweeps hit the 50 MB L2, so
DRAM sees about one read and one write of the tensor instead of four reads and two writes, and no
ReLU temporary is allocated. The conv runs with cuDNN's TF32 off, as the strict check needs
(eager lets it use TF32), and it dominates the time. Measured: 0.35x on H200 (0.38 -> 1.11 ms),
slower than eager by 0.7 ms, while the fused kernel moves ~53 MB from DRAM (~0.01 ms at H200
bandwidth): the loss is in the fp32 head (eager's output is 25x outside the strict tolerance, the
mark of its TF32 conv).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();  // sh may still be read from the previous call
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
    return t;
}

// Block b = n * G + g owns x[n, g*cpg : (g+1)*cpg, :] (cpg * S contiguous floats).
extern "C" __global__ void relu_groupnorm(const float* __restrict__ x, const float* __restrict__ gamma,
        const float* __restrict__ beta, float* __restrict__ y, long long C, long long G, long long S,
        float eps) {
    __shared__ float sh[32];
    const long long cpg = C / G, L = cpg * S;
    const long long g = blockIdx.x % G;
    const float* xs = x + blockIdx.x * L;
    float* ys = y + blockIdx.x * L;
    float s = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) s += fmaxf(xs[i], 0.f);
    const float mean = block_sum(s, sh) / (float)L;
    float q = 0.f;
    for (long long i = threadIdx.x; i < L; i += blockDim.x) { const float d = fmaxf(xs[i], 0.f) - mean; q += d * d; }
    const float rstd = rsqrtf(block_sum(q, sh) / (float)L + eps);
    for (long long i = threadIdx.x; i < L; i += blockDim.x) {
        const long long c = g * cpg + i / S;
        ys[i] = (fmaxf(xs[i], 0.f) - mean) * rstd * gamma[c] + beta[c];
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, groups, bias=False):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, bias=bias)
        self.relu = nn.ReLU()
        self.group_norm = nn.GroupNorm(num_groups=groups, num_channels=out_channels)

    def forward(self, x):
        tf32 = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = False  # true fp32, as the strict check needs
        try:
            c = self.conv_transpose(x).contiguous()  # (B, C, D, H, W)
        finally:
            torch.backends.cudnn.allow_tf32 = tf32
        gn = self.group_norm
        B, C = c.shape[:2]
        y = torch.empty_like(c)
        # NaN note: fmaxf(NaN, 0) = 0 where torch.relu keeps NaN; inputs are finite here.
        _k.relu_groupnorm(B * gn.num_groups, 1024, c.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                          y.data_ptr(), C, gn.num_groups, c[0, 0].numel(), gn.eps)
        return y

"""Linear on cuBLAS, then GroupNorm, Swish, the per-feature multiply and Swish in one kernel.

Eager runs the GEMM and then about seven kernels: GroupNorm (statistics, apply), sigmoid and
multiply for the first Swish, the weight multiply, sigmoid and multiply for the second, each a
read and write of the (128, 1024) result (512 KB). Here one warp owns one (row, group) pair, 64
contiguous floats (2 per lane, held in L1): it computes the group's mean and biased variance in
two passes with shuffle reductions, then writes swish(swish(gn(x)) * w) once, with the ops in
eager's order and fp32 expf. 2048 warps cover the batch, one launch instead of seven, one pass
over the data instead of seven. The GEMM itself is ~134 MFLOP, a few microseconds; the call is
bound by launches and dispatch. Measured: 1.75x on H200 (0.33 -> 0.19 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float swish(float v) { return v * (1.f / (1.f + expf(-v))); }  // x * sigmoid(x)

// One warp per (row, group) of x (M, N); a group is cpg = N / G contiguous features.
extern "C" __global__ void gn_swish_mul_swish(const float* __restrict__ x, const float* __restrict__ gw,
        const float* __restrict__ gb, const float* __restrict__ mw, float* __restrict__ y,
        long long rows, long long N, long long cpg, float eps) {
    const long long team = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;  // row * G + group
    const int lane = threadIdx.x % 32;
    if (team >= rows) return;  // whole warps leave together: blockDim is a multiple of 32
    const float* xg = x + team * cpg;
    float s = 0.f;
    for (long long i = lane; i < cpg; i += 32) s += xg[i];
    const float mean = warp_sum(s) / (float)cpg;
    float q = 0.f;
    for (long long i = lane; i < cpg; i += 32) { const float d = xg[i] - mean; q += d * d; }
    const float rstd = rsqrtf(warp_sum(q) / (float)cpg + eps);  // biased variance, as GroupNorm
    const long long f0 = team * cpg;  // flat index of the group's first element
    for (long long i = lane; i < cpg; i += 32) {
        const long long c = (f0 + i) % N;  // the feature
        float v = (xg[i] - mean) * rstd * gw[c] + gb[c];  // group_norm
        v = swish(v) * mw[c];
        y[f0 + i] = swish(v);
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, num_groups, multiply_weight_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiply_weight = nn.Parameter(torch.randn(multiply_weight_shape))

    def forward(self, x):
        gn = self.group_norm
        x = self.gemm(x).contiguous()  # (M, N)
        M, N = x.shape
        G = gn.num_groups
        y = torch.empty_like(x)
        rows = M * G  # one warp each
        _k.gn_swish_mul_swish((rows * 32 + 255) // 256, 256, x.data_ptr(), gn.weight.data_ptr(),
                              gn.bias.data_ptr(), self.multiply_weight.data_ptr(), y.data_ptr(), rows, N,
                              N // G, gn.eps)
        return y

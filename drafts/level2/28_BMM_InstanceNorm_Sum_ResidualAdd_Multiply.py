"""Linear on cuBLAS, then the per-row instance norm and (x + y) * y in one kernel: a warp per row.

The instance norm sees each (B, 1, 1, 128) row as one channel, so it normalises each row of the
GEMM output over its 128 values (biased variance, no affine). Eager launches the GEMM, then the
instance norm (reshapes, a statistics kernel and an apply kernel, through batch_norm on a
(1, 128, 1, 128) view), then an add and a multiply: five or six launches on 64 KB tensors, so the
call is almost all launch latency. Here one warp per row holds the row in registers (4 values a
lane for 128 features), reduces the mean and then the centred variance with shuffles, and writes
((v - mean) * rstd + y) * y: one launch after the GEMM. Expect ~2-3x; the GEMM (1 MFMA) is tiny.
Rows longer than 1024 features take the eager path.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

_k = cudal1.load_cuda(r"""
#define PER 32  // values per lane kept in registers: rows up to 1024
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Warp w of the grid owns row w of h (M, N); out = ((h - mean) * rstd + y) * y, N <= 32 * PER.
extern "C" __global__ void rownorm_add_mul(const float* __restrict__ h, const float* __restrict__ y,
                                           float* __restrict__ out, long long M, long long N, float eps) {
    const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (row >= M) return;  // whole warps leave together
    const float* hr = h + row * N;
    float v[PER], s = 0.f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long i = lane + 32 * k;
        v[k] = i < N ? hr[i] : 0.f;
        s += v[k];
    }
    const float mean = warp_sum(s) / (float)N;
    float q = 0.f;
    #pragma unroll
    for (int k = 0; k < PER; ++k) if (lane + 32 * k < N) { const float d = v[k] - mean; q += d * d; }
    const float rstd = rsqrtf(warp_sum(q) / (float)N + eps);
    #pragma unroll
    for (int k = 0; k < PER; ++k) {
        const long long i = lane + 32 * k;
        if (i < N) {
            const float b = y[row * N + i];
            out[row * N + i] = ((v[k] - mean) * rstd + b) * b;
        }
    }
}
""")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, eps=1e-5, momentum=0.1):
        super().__init__()
        self.bmm = nn.Linear(in_features, out_features)
        self.instance_norm = nn.InstanceNorm2d(out_features, eps=eps, momentum=momentum)

    def forward(self, x, y):
        h = F.linear(x, self.bmm.weight, self.bmm.bias).contiguous()  # (B, F)
        M, N = h.shape
        if N > 1024 or N == 0 or y.shape != h.shape:
            h = F.instance_norm(h[:, None, None, :], eps=self.instance_norm.eps)[:, 0, 0, :]
            return (h + y) * y
        y = y.contiguous()
        out = torch.empty_like(h)
        _k.rownorm_add_mul((M * 32 + 255) // 256, 256, h.data_ptr(), y.data_ptr(), out.data_ptr(),
                           M, N, self.instance_norm.eps)
        return out

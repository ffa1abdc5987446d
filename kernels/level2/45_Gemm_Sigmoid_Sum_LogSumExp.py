"""Linear (10 -> 20), sigmoid, row sum and logsumexp over the batch in one single-block CUDA kernel.

Eager launches the cuBLAS GEMM, sigmoid, the row sum and logsumexp over dim 0 (amax, subtract,
exp, sum, log, add: several small kernels) for a (128, 10) input and a 0-dim output; the data are
a few KB, so the call is launches and dispatch. Here one block of 256 threads does it all: a
thread per row computes its 20 dot products (bias added), sigmoid as torch writes it and the row
sum r_b; the block takes the max of the r_b (warp shuffles, shared memory), then each thread
recomputes its rows (cheaper than a round trip through memory), sums exp(r_b - max), and thread 0
writes max + log(sum), torch's logsumexp formula. linear2 is created (same parameters, same order) but
never used, as in the task. One launch instead of six or more; plain fp32 arithmetic in another
order than cuBLAS's (error ~1e-6 relative, far inside the tolerance). Measured: 3.95x on H200
(0.29 -> 0.073 ms).
"""
import torch
import torch.nn as nn

import cudal1

_k = cudal1.load_cuda(r"""
#define T 256
__device__ float block_reduce(float v, float* sh, bool is_max) {  // result valid in every thread
    for (int o = 16; o > 0; o >>= 1) {
        const float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? ((u > v || isnan(u)) ? u : v) : v + u;
    }
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    v = sh[0];
    for (int i = 1; i < T / 32; ++i) v = is_max ? ((sh[i] > v || isnan(sh[i])) ? sh[i] : v) : v + sh[i];
    __syncthreads();
    return v;
}

__device__ float row_value(const float* __restrict__ xr, const float* __restrict__ w,
                          const float* __restrict__ bias, long long K, long long N) {
    float s = 0.f;
    for (long long j = 0; j < N; ++j) {
        float v = 0.f;
        for (long long k = 0; k < K; ++k) v = fmaf(xr[k], __ldg(w + j * K + k), v);
        v += __ldg(bias + j);
        s += 1.f / (1.f + expf(-v));  // torch.sigmoid
    }
    return s;
}

// y[] = logsumexp_b(sum_j sigmoid(x[b] . w[j] + bias[j])). grid = 1, block = T; rows loop by T.
extern "C" __global__ void __launch_bounds__(T) linear_sigmoid_sum_lse(const float* __restrict__ x,
        const float* __restrict__ w, const float* __restrict__ bias, float* __restrict__ y,
        long long B, long long K, long long N) {
    __shared__ float sh[T / 32];
    float m = -INFINITY;
    for (long long r = threadIdx.x; r < B; r += T) {
        const float s = row_value(x + r * K, w, bias, K, N);
        m = (s > m || isnan(s)) ? s : m;
    }
    m = block_reduce(m, sh, true);
    const float shift = isinf(m) ? 0.f : m;  // torch's logsumexp shift
    float e = 0.f;
    for (long long r = threadIdx.x; r < B; r += T)  // recomputing a row (200 FMAs) beats a round trip
        e += expf(row_value(x + r * K, w, bias, K, N) - shift);
    e = block_reduce(e, sh, false);
    if (threadIdx.x == 0) y[0] = logf(e) + shift;
}
""")


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super().__init__()
        self.linear1 = nn.Linear(input_size, hidden_size)
        self.linear2 = nn.Linear(hidden_size, output_size)  # unused in forward, as in the task

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear1.weight.contiguous(), self.linear1.bias.contiguous()  # w: (N, K)
        B, K = x.shape
        y = torch.empty((), device=x.device, dtype=x.dtype)  # 0-dim, as logsumexp over dim 0 gives
        _k.linear_sigmoid_sum_lse(1, 256, x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr(), B, K, w.shape[0])
        return y

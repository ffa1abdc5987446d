"""KL divergence (batchmean) in one kernel: logs, xlogy, the products and the sum in one launch.

Eager `F.kl_div(torch.log(predictions), targets, reduction="batchmean")` is a chain of kernels:
log(predictions) into a 2 MB temporary, then kl_div's xlogy(targets, targets), the product
targets * input, their difference (each a 2 MB temporary), the sum, and the division by the batch
size -- about six launches and ~20 MB of traffic for 4 MB of input. Here each element's term
xlogy(t, t) - t * log(p) is computed in registers (logf, accurate to an ulp; xlogy gives 0 where
t == 0, as torch's does) and summed straight away: 128 blocks of 256 threads (one wave on 132
SMs) each issue four 128-bit loads per input per thread before using any, reduce with warp
shuffles and one shared-memory step, and write one partial per block; the last block to finish
(an atomic ticket that wraps back to 0 by itself) adds the partials in index order and divides by
the batch size, so the result is deterministic with no second launch or memset. The call is
launch- and latency-bound, so expect ~3-5x from five fewer launches and no temporaries. Sizes
that are not a multiple of 4, or misaligned pointers, take a scalar path in the same kernel. The
per-block partials live in module-global device memory, so two calls must not run at the same
time on different streams.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

constexpr int THREADS = 256;
constexpr int UNROLL = 4;        // float4 loads per input in flight per thread
constexpr int MAX_BLOCKS = 1024;

__device__ float g_partial[MAX_BLOCKS];  // one partial sum per block
__device__ unsigned int g_ticket;        // blocks done; atomicInc wraps it back to 0

// Sum over the block; the result is valid in thread 0.
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float red[THREADS / 32];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? red[lane] : 0.f;
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    }
    return v;
}

// torch's kl_div term for log_target=False: xlogy(t, t) - t * log(p)
__device__ __forceinline__ float kl(float p, float t) {
    const float tlogt = isnan(t) ? t : (t == 0.f ? 0.f : t * logf(t));  // xlogy(t, t)
    return tlogt - t * logf(p);
}

__global__ void __launch_bounds__(THREADS) kl_kernel(const float* __restrict__ p,
                                                     const float* __restrict__ t, int64_t n,
                                                     int64_t n4, float rows, float* __restrict__ out) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
    const float4* t4 = reinterpret_cast<const float4*>(t);
    float s = 0.f;
    const int64_t step = (int64_t)gridDim.x * THREADS * UNROLL;
    for (int64_t base = (int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x; base < n4; base += step) {
        float4 a[UNROLL], b[UNROLL];
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u) {  // all loads first: one round trip for the lot
            const int64_t i = base + (int64_t)u * THREADS;
            a[u] = i < n4 ? __ldg(p4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
            b[u] = i < n4 ? __ldg(t4 + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
        #pragma unroll
        for (int u = 0; u < UNROLL; ++u)  // padding lanes add nothing
            if (base + (int64_t)u * THREADS < n4)
                s += (kl(a[u].x, b[u].x) + kl(a[u].y, b[u].y)) + (kl(a[u].z, b[u].z) + kl(a[u].w, b[u].w));
    }
    // scalar tail (all of it when the vector path is off)
    for (int64_t i = 4 * n4 + (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * THREADS)
        s += kl(__ldg(p + i), __ldg(t + i));

    s = block_sum(s);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        g_partial[blockIdx.x] = s;
        __threadfence();  // the partial is visible device-wide before the ticket is taken
        last = atomicInc(&g_ticket, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    float v = 0.f;
    for (int i = threadIdx.x; i < (int)gridDim.x; i += THREADS) v += __ldcg(g_partial + i);  // L2, not L1
    v = block_sum(v);
    if (threadIdx.x == 0) *out = v / rows;  // batchmean
}

void kl_div(uintptr_t p, uintptr_t t, int64_t n, int64_t rows, uintptr_t out, uintptr_t stream) {
    const bool vec = p % 16 == 0 && t % 16 == 0;
    const int64_t n4 = vec ? n / 4 : 0;
    int64_t blocks = ((vec ? n4 : n) + THREADS * UNROLL - 1) / (THREADS * UNROLL);
    blocks = blocks < 1 ? 1 : (blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
    kl_kernel<<<(unsigned)blocks, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(p), reinterpret_cast<const float*>(t), n, n4, (float)rows,
        reinterpret_cast<float*>(out));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("kl_div: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("kl_div", &kl_div, "out[()] = sum(xlogy(t, t) - t log p) / rows over n fp32 elements");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        if predictions.shape != targets.shape or predictions.numel() == 0 or predictions.dim() == 0:
            return F.kl_div(torch.log(predictions), targets, reduction="batchmean")  # torch's rules
        p, t = predictions.contiguous(), targets.contiguous()
        out = torch.empty((), device=p.device)
        _ext.kl_div(p.data_ptr(), t.data_ptr(), p.numel(), p.shape[0], out.data_ptr(),
                    torch._C._cuda_getCurrentRawStream(p.device.index))
        return out

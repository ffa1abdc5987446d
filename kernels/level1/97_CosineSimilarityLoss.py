"""Cosine-similarity loss in one kernel: per-row dot and norms, then the mean, in a single launch.

Eager runs F.cosine_similarity as a chain of kernels (two norms, two divisions, a product, a row
sum) and then `1 - cos` and `mean` as two more, each launch reading or writing a (128, 4096) or
(128,) tensor and each paying the dispatcher. Here one block per row streams both rows once with
128-bit loads (4 float4 per thread per input, all in flight together) and accumulates three sums
at once -- p.t, p.p and t.t -- reduced with warp shuffles and a 3 x 8 shared-memory step. The
block's thread 0 then forms 1 - p.t / (max(|p|, eps) * max(|t|, eps)) (the same value torch
computes by normalising first), stores it, and takes a ticket from an atomic counter; the block
that draws the last ticket sums the 128 row values in a fixed order (deterministic) and writes
the mean, then resets the counter for the next call. So the 4 MB of input is read exactly once
and the whole loss is one launch; eager needs ~7 launches over the same data. Expect ~3-5x at this
size, where launches and dispatch dominate. The counter and the per-row scratch live in a small
workspace the module keeps between calls (scratch only: the output is a fresh 0-dim tensor).
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>

constexpr int THREADS = 256;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One block per row of p, t: (B, D). counter: the ticket counter (0 between launches);
// ws: B floats of per-row loss.
__global__ void __launch_bounds__(THREADS) cosine_loss_kernel(
        const float* __restrict__ p, const float* __restrict__ t, float* ws, unsigned* counter,
        float* __restrict__ out, int B, int64_t D, float eps, bool vec) {
    __shared__ float red[3][THREADS / 32];
    __shared__ bool is_last;
    const int row = blockIdx.x, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const float* pr = p + (int64_t)row * D;
    const float* tr = t + (int64_t)row * D;
    float dot = 0.f, pp = 0.f, tt = 0.f;
    if (vec) {
        const float4* p4 = reinterpret_cast<const float4*>(pr);
        const float4* t4 = reinterpret_cast<const float4*>(tr);
        #pragma unroll 4
        for (int64_t i = threadIdx.x; i < D / 4; i += THREADS) {
            float4 a = __ldg(p4 + i), b = __ldg(t4 + i);
            dot += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
            pp += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
            tt += b.x * b.x + b.y * b.y + b.z * b.z + b.w * b.w;
        }
    } else {
        for (int64_t i = threadIdx.x; i < D; i += THREADS) {
            float a = __ldg(pr + i), b = __ldg(tr + i);
            dot += a * b; pp += a * a; tt += b * b;
        }
    }
    dot = warp_sum(dot); pp = warp_sum(pp); tt = warp_sum(tt);
    if (lane == 0) { red[0][warp] = dot; red[1][warp] = pp; red[2][warp] = tt; }
    __syncthreads();
    if (threadIdx.x == 0) {
        dot = pp = tt = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) { dot += red[0][w]; pp += red[1][w]; tt += red[2][w]; }
        const float np = fmaxf(sqrtf(pp), eps), nt = fmaxf(sqrtf(tt), eps);
        ws[row] = 1.f - dot / (np * nt);
        __threadfence();  // publish ws[row] before taking a ticket
        is_last = atomicAdd(counter, 1u) == (unsigned)(B - 1);
    }
    __syncthreads();
    if (!is_last) return;
    // The last block: every row's value is visible now; sum them in a fixed order.
    __threadfence();
    float s = 0.f;
    for (int i = threadIdx.x; i < B; i += THREADS) s += __ldcg(ws + i);
    s = warp_sum(s);
    if (lane == 0) red[0][warp] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        s = 0.f;
        for (int w = 0; w < THREADS / 32; ++w) s += red[0][w];
        *out = s / (float)B;
        *counter = 0u;  // ready for the next launch on this workspace
    }
}

void cosine_loss(uintptr_t p, uintptr_t t, uintptr_t ws, uintptr_t out, int64_t B, int64_t D,
                 double eps, uintptr_t stream) {
    if (B <= 0 || B > 0x7fffffff) throw std::runtime_error("cosine_loss: bad batch size");
    const bool vec = D % 4 == 0 && p % 16 == 0 && t % 16 == 0;
    // workspace layout: [counter (unsigned), B floats]; the counter's place does not depend on B
    unsigned* counter = reinterpret_cast<unsigned*>(ws);
    cosine_loss_kernel<<<(unsigned)B, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(p), reinterpret_cast<const float*>(t),
        reinterpret_cast<float*>(counter + 1), counter, reinterpret_cast<float*>(out), (int)B, D,
        (float)eps, vec);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("cosine_loss: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("cosine_loss", &cosine_loss, "mean over rows of 1 - cos(p[b], t[b]) (fp32)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._ws = None  # (>= B + 1,) int32 on the device: the ticket counter, then B floats

    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        if p.dim() != 2 or p.shape != t.shape:
            cos = torch.nn.functional.cosine_similarity(predictions, targets, dim=1)
            return torch.mean(1 - cos)
        B, D = p.shape
        ws = self._ws
        if ws is None or ws.numel() < B + 1 or ws.device != p.device:
            ws = self._ws = torch.zeros(B + 1, dtype=torch.int32, device=p.device)  # counter = 0
        out = torch.empty((), device=p.device)
        _ext.cosine_loss(p.data_ptr(), t.data_ptr(), ws.data_ptr(), out.data_ptr(), B, D, 1e-8,
                         torch._C._cuda_getCurrentRawStream(p.get_device()))
        return out

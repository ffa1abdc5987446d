"""Cosine-similarity loss in one kernel (per-row dot and norms, then the mean, in a single launch)
as device code only: a cubin launched through cudal1's prebuilt launcher.

Eager runs F.cosine_similarity as a chain of kernels (two norms, two divisions, a product, a row
sum) and then `1 - cos` and `mean` as two more, each launch reading or writing a (128, 4096) or
(128,) tensor and each paying the dispatcher. The kernel of 97_CosineSimilarityLoss.py, kept here:
one block per row streams both rows once with 128-bit loads and accumulates p.t, p.p and t.t at
once, reduced with warp shuffles and a 3 x 8 shared-memory step; thread 0 forms 1 - p.t / (max(|p|,
eps) * max(|t|, eps)), stores it and takes a ticket from an atomic counter, and the block that draws
the last ticket sums the 128 row values in a fixed order (deterministic), writes the mean and resets
the counter. So the 4 MB of input is read once and the whole loss is one launch. What changes is the
way to the launch: the source holds only device code, nvcc builds a cubin from it (no host
compiler, no pybind11), and cudal1.load_cuda hands the kernel back as a callable whose argument
types come from its C signature, called through one vectorcall entry and cuLaunchKernel on a driver
handle looked up once instead of a pybind11 call that casts eight arguments and the runtime's <<<>>>
launch. The launcher passes no bool, so the kernel's `vec` flag is an int (0 or 1, tested as before).
The host logic moves to Python unchanged: the float4 path when D % 4 == 0 and both inputs are
16-byte aligned, a bad batch size raises, inputs that are not two equal 2-D shapes fall back to
F.cosine_similarity, and the counter and per-row scratch live in a workspace the module keeps
between calls (scratch only: the output is a fresh 0-dim tensor). The launch goes to torch's
current stream.
Not yet measured on the GPU.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <cstdint>

constexpr int THREADS = 256;

__device__ __forceinline__ float warp_sum(float v) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// One block per row of p, t: (B, D). counter: the ticket counter (0 between launches);
// ws: B floats of per-row loss.
extern "C" __global__ void __launch_bounds__(THREADS) cosine_loss_kernel(
        const float* __restrict__ p, const float* __restrict__ t, float* ws, unsigned* counter,
        float* __restrict__ out, int B, int64_t D, float eps, int vec) {
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
"""

_k = cudal1.load_cuda(CUDA_SRC)
THREADS = 256  # as in the source


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
        if B <= 0 or B > 0x7fffffff:
            raise RuntimeError("cosine_loss: bad batch size")
        ws = self._ws
        if ws is None or ws.numel() < B + 1 or ws.device != p.device:
            ws = self._ws = torch.zeros(B + 1, dtype=torch.int32, device=p.device)  # counter = 0
        out = torch.empty((), device=p.device)
        pp, tp, counter = p.data_ptr(), t.data_ptr(), ws.data_ptr()
        vec = D % 4 == 0 and pp % 16 == 0 and tp % 16 == 0
        # workspace layout: [counter (4 bytes), B floats]; the counter's place does not depend on B
        _k.cosine_loss_kernel(B, THREADS, pp, tp, counter + 4, counter, out.data_ptr(), B, D, 1e-8, int(vec))
        return out

"""Product over a middle dimension in PyTorch's own multiplication order, 16x more loads in flight.

The input is (16, 256, 256) fp32 = 4 MB reduced over the middle dimension to 16 x 256 outputs: the
traffic floor is ~1 us at ~4 TB/s, so the call is bound by latency and host overhead. The product of
256 randn values is ~1e-71, below fp32's range: almost every output is 0, but a few per call land
among the denormals (~1e-44), where every multiplication rounds to a multiple of 1.4e-45 and the
result depends on the order of the multiplications. The strict check (1e-4 relative) leaves no room
there, so a faster kernel must multiply in exactly the order eager does. For this layout PyTorch's
CUDA reduction gives each output S threads (S = 4 here, from its block-shape heuristic, which the
host code reproduces from the sizes and the input's alignment); each thread keeps 4 accumulators fed
with rows r = c (mod 4S), merges them as ((a0*a1)*a2)*a3, and the S threads merge by a halving tree.
This kernel evaluates that same expression tree, so results are bit-identical, denormals included --
but it assigns one residue class of rows (16 rows of 256) to each thread instead of 64 rows to each
of S threads: 32 outputs x 16 classes per 512-thread block, 128 blocks, and all 16 loads of a thread
issued back to back, so the whole 4 MB is requested in about one DRAM round trip instead of the ~16
dependent rounds of eager's 4096 threads x 4 loads. One thread per output then replays the merge
order from shared memory. No TF32, no reassociation, no flush-to-zero (nvcc's default keeps
denormals). Layouts where torch would split rows across blocks, the last-dimension case and huge
tensors fall back to torch.prod. Measured on the H200: 0.56x vs eager -- with 4 MB moved the call is
launch-bound (a few % of peak HBM bandwidth), and in the judge this path costs ~15 us more per call
than eager's (35.3 against 19.8 us; part of it is our call path: a pybind11 call alone costs ~5 us
per call in the judge, whichever CUDA runtime is linked).
"""
import math

import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cmath>
#include <algorithm>

#define IDENT 1.f
#define OP(a, b) ((a) * (b))
#define PROJECT(a) (a)
#define FACTOR 1.f

// The input is viewed as (B, R, N) and reduced over R; output o = b * N + j. For this layout
// (reduced dim not innermost) PyTorch's CUDA reduction gives each output S threads (S from its
// launch heuristic, computed on the host below); thread ty keeps 4 accumulators, accumulator a
// taking rows r = ty + a*S (mod 4S) in ascending order, merges them as ((a0 o a1) o a2) o a3,
// and the S threads merge by a halving tree (ty takes ty + S/2, then ty + S/4, ...). We evaluate
// exactly that arithmetic, with one "chain" (residue class c = ty + a*S of rows) per thread
// here, so every chain's loads are in flight together.
constexpr int LANES = 32;  // outputs per block, one per lane: coalesced along N

template <int CPT>  // chains per thread (4S / blockDim.y)
__global__ void __launch_bounds__(512) ordered_reduce(const float* __restrict__ x,
        float* __restrict__ y, int64_t n_out, int R, int N, int S, float factor) {
    extern __shared__ float sh[];  // [4S][LANES] chain results
    constexpr int U = 16 / CPT;    // rows per chain loaded before they are combined
    const int lane = threadIdx.x, t = threadIdx.y, T = blockDim.y, C = 4 * S;
    const int64_t o = (int64_t)blockIdx.x * LANES + lane;
    const bool live = o < n_out;
    const float* base = x + (live ? (o / N) * (int64_t)R * N + o % N : 0);
    float acc[CPT];
    #pragma unroll
    for (int m = 0; m < CPT; ++m) acc[m] = IDENT;
    if (live) {
        int r0 = t;  // chain t + T*m holds rows r0 + T*m, r0 + C + T*m, ...
        for (; r0 - t + U * C <= R; r0 += U * C) {  // U whole rounds, no bounds checks
            float v[U][CPT];
            #pragma unroll
            for (int u = 0; u < U; ++u)
                #pragma unroll
                for (int m = 0; m < CPT; ++m) v[u][m] = __ldg(base + (int64_t)(r0 + u * C + T * m) * N);
            #pragma unroll
            for (int u = 0; u < U; ++u)
                #pragma unroll
                for (int m = 0; m < CPT; ++m) acc[m] = OP(acc[m], v[u][m]);
        }
        for (; r0 < R; r0 += C)
            #pragma unroll
            for (int m = 0; m < CPT; ++m) {
                const int r = r0 + T * m;
                if (r < R) acc[m] = OP(acc[m], __ldg(base + (int64_t)r * N));
            }
    }
    #pragma unroll
    for (int m = 0; m < CPT; ++m) sh[(t + T * m) * LANES + lane] = acc[m];
    __syncthreads();
    if (t == 0 && live) {  // one thread per output replays torch's merge order
        for (int ty = 0; ty < S; ++ty) {
            float p = OP(sh[ty * LANES + lane], sh[(ty + S) * LANES + lane]);
            p = OP(p, sh[(ty + 2 * S) * LANES + lane]);
            sh[ty * LANES + lane] = OP(p, sh[(ty + 3 * S) * LANES + lane]);
        }
        for (int off = S / 2; off > 0; off >>= 1)
            for (int ty = 0; ty < off; ++ty)
                sh[ty * LANES + lane] = OP(sh[ty * LANES + lane], sh[(ty + off) * LANES + lane]);
        y[o] = PROJECT(sh[lane]);
    }
}

static int last_pow2(int64_t n) {  // largest power of two <= n (1 for n < 1)
    int p = 1;
    while (2 * (int64_t)p <= n) p *= 2;
    return p;
}

// S, the threads per output of torch's reduction for (B, R, N) fp32 at address x; 0 when torch
// would also split the rows across blocks (not reproduced here: the caller falls back).
static int torch_threads_per_output(uintptr_t x, int64_t B, int64_t R, int64_t N) {
    int vec = 4;  // torch vectorises along outputs when the address, N and strides allow
    auto fit = [&](int64_t v) { while (v % vec) vec /= 2; };
    fit((int64_t)(x / 4));
    fit(N);
    if (B > 1) fit(R * N);
    const int64_t dim0 = B * N / vec, dim1 = R;
    const int max_threads = 512 / vec;
    const int d0 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
    const int d1 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
    int width = std::min(d0, 32);
    const int height = std::min(d1, max_threads / width);
    // (torch then widens the block to max_threads / height; that changes which thread owns
    // which output, not the order of the arithmetic)
    if (R < std::min(height * 16, 256)) return 1;  // one thread walks all R rows
    if ((R + height - 1) / height >= 256) return 0;  // torch may split across blocks
    return height;
}

bool reduce(uintptr_t x, uintptr_t y, int64_t B, int64_t R, int64_t N, uintptr_t stream) {
    if (B * R * N >= ((int64_t)1 << 31) || R < 1 || N < 2) return false;  // torch's other paths
    const int S = torch_threads_per_output(x, B, R, N);
    if (S == 0 || S > 32) return false;
    const int C = 4 * S, T = std::min(C, 16), cpt = C / T;
    const int64_t n_out = B * N;
    const float factor = FACTOR;
    const dim3 block(LANES, T), grid((unsigned)((n_out + LANES - 1) / LANES));
    const size_t smem = (size_t)C * LANES * sizeof(float);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    if (cpt == 1)      ordered_reduce<1><<<grid, block, smem, st>>>(xp, yp, n_out, (int)R, (int)N, S, factor);
    else if (cpt == 2) ordered_reduce<2><<<grid, block, smem, st>>>(xp, yp, n_out, (int)R, (int)N, S, factor);
    else if (cpt == 4) ordered_reduce<4><<<grid, block, smem, st>>>(xp, yp, n_out, (int)R, (int)N, S, factor);
    else               ordered_reduce<8><<<grid, block, smem, st>>>(xp, yp, n_out, (int)R, (int)N, S, factor);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("reduce: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("reduce", &reduce, "reduce a contiguous (B, R, N) fp32 tensor over R; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.prod(x, dim=self.dim)
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = x.shape
        y = torch.empty(shape[:d] + shape[d + 1:], dtype=torch.float32, device=x.device)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        if _ext.reduce(x.data_ptr(), y.data_ptr(), math.prod(shape[:d]), shape[d],
                       math.prod(shape[d + 1:]), stream):
            return y
        return torch.prod(x, dim=self.dim)

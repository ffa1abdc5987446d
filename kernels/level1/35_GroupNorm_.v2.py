"""GroupNorm as two fully parallel kernels: chunk statistics, then normalise.

x is (16, 64, 256, 256) fp32 (268 MB) in 128 groups of 8 channels x 64K values (2 MB,
contiguous). This variant is the plain two-kernel split, written to run at full bandwidth with no
atomics, flags or zeroed workspace -- and, unlike eager's moments kernel with one block per group
(128 blocks for 132 SMs, each streaming 2 MB), it spreads the statistics over 4096 blocks. Kernel
1 gives every 64 KB chunk its own 512-thread block: 128-bit loads, all in flight together, sums of
(x - K) and (x - K)^2 with K the group's first element (a shift that keeps the one-pass variance
free of cancellation), one fp32 pair per chunk. Kernel 2 runs the same grid: each block first
adds its group's 32 pairs in fp64, in the same fixed order in every block (so all agree bit for
bit), derives mean and 1/sqrt(var + eps), then writes (x - mean) * (invstd * w[c]) + b[c] for its
channel c. Kernel 2 walks the chunks in reverse, so its first reads hit the part of x that kernel
1 read last and L2 still holds. Traffic is close to eager's (two reads, one write: ~750 MB, ~175
us at ~4.3 TB/s), so expect ~1.0-1.2x. Shapes it does not handle fall back to nn.GroupNorm.
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
#include <cmath>

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;
constexpr int CHUNK = 16384;                      // floats per block (64 KB)
constexpr int ITEMS = CHUNK / 4 / THREADS;        // float4 per thread

__device__ __forceinline__ float2 block_sum2(float2 v, float2* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float2 r = red[0];
    #pragma unroll
    for (int w = 1; w < WARPS; ++w) { r.x += red[w].x; r.y += red[w].y; }
    __syncthreads();
    return r;
}

__device__ __forceinline__ double block_sum(double v, double* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    double r = red[0];
    #pragma unroll
    for (int w = 1; w < WARPS; ++w) r += red[w];
    __syncthreads();
    return r;
}

// A segment (the unit of statistics) is `planes` consecutive HW planes: a GroupNorm group
// (C / G channels of one sample) or an InstanceNorm plane (planes = 1). Chunk b of the grid is
// item u = b % P of segment s = b / P, with P = planes * cpp chunks per segment.
struct Chunk { int s, u, plane; int64_t start; int len4; };
__device__ __forceinline__ Chunk chunk_of(int b, int planes, int HW, int cpp) {
    const int P = planes * cpp;
    Chunk k;
    k.s = b / P;
    k.u = b % P;
    const int q = k.u % cpp;
    k.plane = k.s * planes + k.u / cpp;
    k.start = (int64_t)k.plane * HW + (int64_t)q * CHUNK;
    k.len4 = min(CHUNK, HW - q * CHUNK) / 4;
    return k;
}

__global__ void __launch_bounds__(THREADS) chunk_stats(const float* __restrict__ x, float2* __restrict__ part,
                                                       int planes, int HW, int cpp) {
    __shared__ float2 red[WARPS];
    const Chunk k = chunk_of(blockIdx.x, planes, HW, cpp);
    const float K = __ldg(x + (int64_t)k.s * planes * HW);  // shift: the segment's first element
    const float4* xs = reinterpret_cast<const float4*>(x + k.start);
    float4 v[ITEMS];
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int idx = threadIdx.x + i * THREADS;
        v[i] = idx < k.len4 ? __ldg(xs + idx) : make_float4(K, K, K, K);
    }
    float s = 0.f, ss = 0.f;
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const float d0 = v[i].x - K, d1 = v[i].y - K, d2 = v[i].z - K, d3 = v[i].w - K;
        s += (d0 + d1) + (d2 + d3);
        ss += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
    }
    const float2 r = block_sum2(make_float2(s, ss), red);
    if (threadIdx.x == 0) part[blockIdx.x] = r;
}

// w, b may be null (no affine): scale 1, shift 0. Channel of a plane = plane % C.
__global__ void __launch_bounds__(THREADS) normalize(const float* __restrict__ x, float* __restrict__ y,
        const float2* __restrict__ part, const float* __restrict__ w, const float* __restrict__ b,
        int planes, int C, int HW, int cpp, float eps) {
    __shared__ double red[WARPS];
    const int blk = gridDim.x - 1 - blockIdx.x;  // backwards: kernel 1's last chunks are in L2
    const Chunk k = chunk_of(blk, planes, HW, cpp);
    const int P = planes * cpp;
    double ds = 0.0, dss = 0.0;
    for (int i = threadIdx.x; i < P; i += THREADS) {
        const float2 p = part[(int64_t)k.s * P + i];
        ds += p.x;
        dss += p.y;
    }
    ds = block_sum(ds, red);  // same order in every block of the segment: identical statistics
    dss = block_sum(dss, red);
    const double M = (double)planes * HW;
    const double dm = ds / M;
    const double var = fmax(dss / M - dm * dm, 0.0);  // biased, as the reference normalises
    const float mean = (float)((double)__ldg(x + (int64_t)k.s * planes * HW) + dm);
    const int c = k.plane % C;
    const float invstd = (float)(1.0 / sqrt(var + (double)eps));
    const float scale = w ? invstd * __ldg(w + c) : invstd, shift = b ? __ldg(b + c) : 0.f;
    const float4* xs = reinterpret_cast<const float4*>(x + k.start);
    float4* ys = reinterpret_cast<float4*>(y + k.start);
    float4 v[ITEMS];
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int idx = threadIdx.x + i * THREADS;
        if (idx < k.len4) v[i] = __ldcs(xs + idx);  // last use of x: evict first
    }
    #pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int idx = threadIdx.x + i * THREADS;
        if (idx < k.len4)
            __stcs(ys + idx, make_float4((v[i].x - mean) * scale + shift, (v[i].y - mean) * scale + shift,
                                         (v[i].z - mean) * scale + shift, (v[i].w - mean) * scale + shift));
    }
}

int64_t num_chunks(int64_t total_planes, int64_t HW) { return total_planes * ((HW + CHUNK - 1) / CHUNK); }

// x: (total_planes, HW), segments of `planes` planes; returns false for shapes it does not handle.
bool segment_norm(uintptr_t x, uintptr_t y, uintptr_t w, uintptr_t b, uintptr_t part, int64_t total_planes,
                  int64_t planes, int64_t C, int64_t HW, double eps, uintptr_t stream) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK, blocks = total_planes * cpp;
    if (HW % 4 != 0 || x % 16 != 0 || y % 16 != 0 || planes < 1 || total_planes % planes != 0 ||
        blocks >= ((int64_t)1 << 31) || total_planes * HW >= ((int64_t)1 << 40)) return false;
    if (blocks == 0) return true;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float2* pp = reinterpret_cast<float2*>(part);
    chunk_stats<<<(unsigned)blocks, THREADS, 0, st>>>(xp, pp, (int)planes, (int)HW, (int)cpp);
    normalize<<<(unsigned)blocks, THREADS, 0, st>>>(xp, reinterpret_cast<float*>(y), pp,
        reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(b), (int)planes, (int)C, (int)HW,
        (int)cpp, (float)eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("segment_norm: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("num_chunks", &num_chunks, "64 KB chunks (= float2 partials) for (planes, HW)");
    m.def("segment_norm", &segment_norm, "normalise segments of consecutive planes (fp32); false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, num_features: int, num_groups: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups=num_groups, num_channels=num_features)  # same parameters

    def forward(self, x):
        gn = self.gn
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 4 or not gn.affine:
            return gn(x)
        x = x.contiguous()
        N, C, H, W = x.shape
        y = torch.empty_like(x)
        part = torch.empty(2 * _ext.num_chunks(N * C, H * W), dtype=torch.float32, device=x.device)  # all written
        if _ext.segment_norm(x.data_ptr(), y.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                             part.data_ptr(), N * C, C // gn.num_groups, C, H * W, gn.eps,
                             torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return gn(x)

"""Training-mode BatchNorm as two fully parallel kernels: chunk statistics, then normalise.

x is (16, 64, 256, 256) fp32 (268 MB); each channel spans 16 planes of 64K values. This variant
is the plain two-kernel split, written to run at full bandwidth with no atomics, flags or zeroed
workspace. Kernel 1 gives every 64 KB chunk (one quarter of an (n, c) plane) its own 512-thread
block: 128-bit loads, all in flight together, sums of (x - K) and (x - K)^2 with K the channel's
first element (a shift that keeps the one-pass variance free of cancellation), one fp32 pair per
chunk. Kernel 2 runs the same grid: each block first adds its channel's 64 pairs in fp64, in the
same fixed order in every block (so all agree bit for bit), derives mean and 1/sqrt(var + eps),
then normalises its chunk, (x - mean) * invstd * w + b; the block of chunk 0 also updates
running_mean / running_var (momentum 0.1, unbiased variance) and num_batches_tracked exactly as
nn.BatchNorm2d does. Kernel 2 walks the chunks in reverse, so its first reads hit the part of x
that kernel 1 read last and L2 still holds. Traffic is close to eager's three passes (~750 MB,
~175 us at ~4.3 TB/s), so expect only ~1.0-1.2x: what this saves is eager's extra kernels and
host work, not DRAM traffic. Eval mode, affine=False or momentum=None use nn.BatchNorm2d itself.
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

// Chunk b of the grid: channel c = b / P, item u = b % P = (plane n, part q) of that channel.
struct Chunk { int c, u; int64_t start; int len4; };
__device__ __forceinline__ Chunk chunk_of(int b, int C, int HW, int cpp) {
    const int P = (int)(gridDim.x / C);
    Chunk k;
    k.c = b / P;
    k.u = b % P;
    const int n = k.u / cpp, q = k.u % cpp;
    k.start = ((int64_t)n * C + k.c) * HW + (int64_t)q * CHUNK;
    k.len4 = min(CHUNK, HW - q * CHUNK) / 4;
    return k;
}

__global__ void __launch_bounds__(THREADS) chunk_stats(const float* __restrict__ x, float2* __restrict__ part,
                                                       int C, int HW, int cpp) {
    __shared__ float2 red[WARPS];
    const Chunk k = chunk_of(blockIdx.x, C, HW, cpp);
    const float K = __ldg(x + (int64_t)k.c * HW);  // shift: the channel's first element
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

__global__ void __launch_bounds__(THREADS) normalize(const float* __restrict__ x, float* __restrict__ y,
        const float2* __restrict__ part, const float* __restrict__ w, const float* __restrict__ b,
        float* running_mean, float* running_var, long long* nbt, int N, int C, int HW, int cpp,
        float momentum, float eps) {
    __shared__ double red[WARPS];
    const int blk = gridDim.x - 1 - blockIdx.x;  // backwards: kernel 1's last chunks are in L2
    const Chunk k = chunk_of(blk, C, HW, cpp);
    const int P = (int)(gridDim.x / C);
    double ds = 0.0, dss = 0.0;
    for (int i = threadIdx.x; i < P; i += THREADS) {
        const float2 p = part[(int64_t)k.c * P + i];
        ds += p.x;
        dss += p.y;
    }
    ds = block_sum(ds, red);
    dss = block_sum(dss, red);
    const double M = (double)N * HW;
    const double dm = ds / M;
    const double var = fmax(dss / M - dm * dm, 0.0);  // biased: normalises the output
    const float K = __ldg(x + (int64_t)k.c * HW);
    const double mean = (double)K + dm;
    if (k.u == 0 && threadIdx.x == 0) {  // one block per channel updates the running statistics
        running_mean[k.c] = (float)((1.0 - momentum) * running_mean[k.c] + momentum * mean);
        running_var[k.c] = (float)((1.0 - momentum) * running_var[k.c] + momentum * var * M / (M - 1.0));
        if (k.c == 0) *nbt += 1;
    }
    const float fm = (float)mean;
    const float scale = (float)(1.0 / sqrt(var + (double)eps)) * __ldg(w + k.c), shift = __ldg(b + k.c);
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
            __stcs(ys + idx, make_float4((v[i].x - fm) * scale + shift, (v[i].y - fm) * scale + shift,
                                         (v[i].z - fm) * scale + shift, (v[i].w - fm) * scale + shift));
    }
}

int64_t num_chunks(int64_t N, int64_t C, int64_t HW) { return N * C * ((HW + CHUNK - 1) / CHUNK); }

// Returns false for shapes it does not handle (the caller falls back to nn.BatchNorm2d).
bool batch_norm(uintptr_t x, uintptr_t y, uintptr_t w, uintptr_t b, uintptr_t rmean, uintptr_t rvar,
                uintptr_t nbt, uintptr_t part, int64_t N, int64_t C, int64_t HW, double momentum,
                double eps, uintptr_t stream) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK, blocks = N * C * cpp;
    if (HW % 4 != 0 || x % 16 != 0 || y % 16 != 0 || N * HW < 2 || C < 1 || blocks >= ((int64_t)1 << 31) ||
        N * C * HW >= ((int64_t)1 << 40)) return false;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float2* pp = reinterpret_cast<float2*>(part);
    chunk_stats<<<(unsigned)blocks, THREADS, 0, st>>>(xp, pp, (int)C, (int)HW, (int)cpp);
    normalize<<<(unsigned)blocks, THREADS, 0, st>>>(xp, reinterpret_cast<float*>(y), pp,
        reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(b), reinterpret_cast<float*>(rmean),
        reinterpret_cast<float*>(rvar), reinterpret_cast<long long*>(nbt), (int)N, (int)C, (int)HW, (int)cpp,
        (float)momentum, (float)eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("batch_norm: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("num_chunks", &num_chunks, "64 KB chunks (= float2 partials) for an (N, C, HW) input");
    m.def("batch_norm", &batch_norm, "training-mode BatchNorm2d forward + running-stat update; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(num_features=num_features)  # same parameters and buffers as the task

    def forward(self, x):
        bn = self.bn
        if (not x.is_cuda or x.dtype != torch.float32 or x.dim() != 4 or not bn.training
                or not bn.affine or not bn.track_running_stats or bn.momentum is None):
            return bn(x)
        x = x.contiguous()
        N, C, H, W = x.shape
        y = torch.empty_like(x)
        part = torch.empty(2 * _ext.num_chunks(N, C, H * W), dtype=torch.float32, device=x.device)  # all written
        if _ext.batch_norm(x.data_ptr(), y.data_ptr(), bn.weight.data_ptr(), bn.bias.data_ptr(),
                           bn.running_mean.data_ptr(), bn.running_var.data_ptr(),
                           bn.num_batches_tracked.data_ptr(), part.data_ptr(), N, C, H * W,
                           bn.momentum, bn.eps, torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return bn(x)

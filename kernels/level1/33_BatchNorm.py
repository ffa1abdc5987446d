"""Training-mode BatchNorm in one launch whose second read of x mostly hits L2.

x is (16, 64, 256, 256) fp32, 268 MB; each channel's statistics span 16 planes of 64K values
(4 MB). Batch statistics must be known before any output, so the textbook schedule is three
passes over DRAM -- read for the statistics, read again and write for the output -- ~804 MB, or
~190 us at the H200's ~4.3 TB/s, which is where eager sits. The H200's 50 MB L2 can hold a few
channels, so this kernel interleaves the two phases channel by channel and lets the second read
of a channel come from L2: one persistent launch (every SM full, blocks pull 64 KB work items
from an atomic ticket counter) where the queue runs "statistics of channel c + LAG, then
normalisation of channel c". A statistics item sums (x - K) and (x - K)^2 over its chunk (K is
the channel's first element, a shift that keeps the one-pass variance free of cancellation) with
128-bit loads, reduces the block in fp32 and stores the pair; the block that completes a channel
(an arrival counter) adds the 64 pairs in fp64 in a fixed order, publishes mean and 1/sqrt(var +
eps) with a release flag, and updates running_mean / running_var (momentum 0.1, unbiased
variance) and num_batches_tracked exactly as nn.BatchNorm2d does. A normalisation item waits for
its channel's flag (by then normally long set: LAG is sized so ~1.2 waves of items separate the
two), re-reads its chunk while it is still in L2 and writes (x - mean) * invstd * w + b. Loads of
the second read and all stores are marked evict-first so they do not push out chunks still
waiting for their second read. Deadlock-free: a block only waits for items handed out before its
own, which are held by running blocks that never wait. DRAM traffic approaches one read and one
write (536 MB, ~125 us): expect ~1.3-1.6x. Eval mode, affine=False, momentum=None or odd shapes
use nn.BatchNorm2d itself.
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
#include <algorithm>

constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;
constexpr int CHUNK = 16384;                      // floats per work item (64 KB)
constexpr int ITEMS = CHUNK / 4 / THREADS;        // float4 per thread per item

// Workspace, int32 words, zeroed by the caller: [0] ticket, [1, 1+C) arrivals per channel,
// [1+C, 1+2C) ready flags, then (8-byte aligned) float2 stats[C] = (mean, invstd) and
// float2 part[C][P] = per-item (sum(x-K), sum((x-K)^2)).
__host__ __device__ inline int64_t header_words(int64_t C) { return (2 + 2 * C) & ~(int64_t)1; }

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

// Queue slot k (each slot = the P items of one channel) -> (statistics?, channel). The order is
// S0 .. S(lag-1), then S(lag) N0 S(lag+1) N1 ..., then the last lag N slots.
__device__ __forceinline__ void decode_slot(int k, int C, int lag, bool& stats, int& c) {
    if (k < lag) { stats = true; c = k; }
    else if (k < 2 * C - lag) { const int j = k - lag; stats = (j % 2 == 0); c = stats ? lag + j / 2 : j / 2; }
    else { stats = false; c = C - lag + (k - (2 * C - lag)); }
}

__global__ void __launch_bounds__(THREADS, 2) batch_norm_train(
        const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
        const float* __restrict__ b, float* running_mean, float* running_var, long long* nbt,
        int* ws, int N, int C, int HW, int cpp, int lag, float momentum, float eps) {
    __shared__ float2 red2[WARPS];
    __shared__ double redd[WARPS];
    __shared__ int s_ticket;
    __shared__ int s_last;
    int* ticket = ws;
    int* arrivals = ws + 1;
    volatile int* ready = ws + 1 + C;
    float2* stats = reinterpret_cast<float2*>(ws + header_words(C));
    float2* part = stats + C;
    const int P = N * cpp;            // items per channel: N planes x cpp chunks
    const int total = 2 * C * P;
    for (;;) {
        if (threadIdx.x == 0) s_ticket = atomicAdd(ticket, 1);
        __syncthreads();
        const int t = s_ticket;
        __syncthreads();  // everyone has read s_ticket before it is overwritten
        if (t >= total) break;
        bool is_stats;
        int c;
        decode_slot(t / P, C, lag, is_stats, c);
        const int u = t % P, n = u / cpp, q = u % cpp;
        const int64_t start = ((int64_t)n * C + c) * HW + (int64_t)q * CHUNK;
        const int len4 = min(CHUNK, HW - q * CHUNK) / 4;
        const float4* xs = reinterpret_cast<const float4*>(x + start);
        if (is_stats) {
            const float K = __ldg(x + (int64_t)c * HW);  // shift: the channel's first element
            float4 v[ITEMS];
            #pragma unroll
            for (int i = 0; i < ITEMS; ++i) {  // all 8 loads in flight; default policy: stay in L2
                const int idx = threadIdx.x + i * THREADS;
                v[i] = idx < len4 ? __ldg(xs + idx) : make_float4(K, K, K, K);
            }
            float s = 0.f, ss = 0.f;
            #pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const float d0 = v[i].x - K, d1 = v[i].y - K, d2 = v[i].z - K, d3 = v[i].w - K;
                s += (d0 + d1) + (d2 + d3);
                ss += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
            }
            const float2 r = block_sum2(make_float2(s, ss), red2);
            if (threadIdx.x == 0) {
                part[(int64_t)c * P + u] = r;
                __threadfence();  // the pair is visible before the arrival is counted
                s_last = atomicAdd(arrivals + c, 1) == P - 1;
            }
            __syncthreads();
            if (s_last) {  // this block completed channel c: finish its statistics
                __threadfence();
                double ds = 0.0, dss = 0.0;
                for (int i = threadIdx.x; i < P; i += THREADS) {
                    const float2 p = __ldcg(part + (int64_t)c * P + i);  // L2: written by other SMs
                    ds += p.x;
                    dss += p.y;
                }
                ds = block_sum(ds, redd);
                dss = block_sum(dss, redd);
                if (threadIdx.x == 0) {
                    const double M = (double)N * HW;
                    const double dm = ds / M;
                    const double var = fmax(dss / M - dm * dm, 0.0);  // biased: normalises the output
                    const double mean = (double)K + dm;
                    stats[c] = make_float2((float)mean, (float)(1.0 / sqrt(var + (double)eps)));
                    running_mean[c] = (float)((1.0 - momentum) * running_mean[c] + momentum * mean);
                    running_var[c] = (float)((1.0 - momentum) * running_var[c] + momentum * var * M / (M - 1.0));
                    if (c == 0) *nbt += 1;
                    __threadfence();  // stats visible before the flag
                    ready[c] = 1;
                }
            }
        } else {
            if (threadIdx.x == 0) {
                while (ready[c] == 0) __nanosleep(200);
                __threadfence();
            }
            __syncthreads();
            const float2 st = __ldcg(stats + c);
            const float scale = st.y * __ldg(w + c), shift = __ldg(b + c);
            float4* ys = reinterpret_cast<float4*>(y + start);
            float4 v[ITEMS];
            #pragma unroll
            for (int i = 0; i < ITEMS; ++i) {  // second read: the chunk should still be in L2
                const int idx = threadIdx.x + i * THREADS;
                if (idx < len4) v[i] = __ldcs(xs + idx);
            }
            #pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int idx = threadIdx.x + i * THREADS;
                if (idx < len4)
                    __stcs(ys + idx, make_float4((v[i].x - st.x) * scale + shift, (v[i].y - st.x) * scale + shift,
                                                 (v[i].z - st.x) * scale + shift, (v[i].w - st.x) * scale + shift));
            }
        }
    }
}

static int grid_blocks() {  // persistent grid: as many blocks as fit on the device at once
    static int blocks = 0;
    if (blocks == 0) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, batch_norm_train, THREADS, 0);
        blocks = std::max(1, sms * std::max(per_sm, 1));
    }
    return blocks;
}

int64_t workspace_words(int64_t N, int64_t C, int64_t HW) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK;
    return header_words(C) + 2 * C + 2 * C * N * cpp;
}

// Returns false for shapes it does not handle (the caller falls back to nn.BatchNorm2d).
bool batch_norm(uintptr_t x, uintptr_t y, uintptr_t w, uintptr_t b, uintptr_t rmean, uintptr_t rvar,
                uintptr_t nbt, uintptr_t ws, int64_t N, int64_t C, int64_t HW, double momentum,
                double eps, uintptr_t stream) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK;
    if (HW % 4 != 0 || x % 16 != 0 || y % 16 != 0 || N * HW < 2 || C < 1 ||
        2 * C * N * cpp >= ((int64_t)1 << 31) || N * C * HW >= ((int64_t)1 << 40)) return false;
    const int blocks = grid_blocks();
    const int64_t P = N * cpp;
    // LAG: channels between a channel's statistics and its normalisation, ~1.2 waves of items,
    // so the flag is normally set before anyone asks; small enough that the chunks stay in L2.
    const int lag = (int)std::min<int64_t>(C, std::max<int64_t>(1, (int64_t)(1.2 * blocks / (2 * P)) + 1));
    batch_norm_train<<<blocks, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), reinterpret_cast<const float*>(w),
        reinterpret_cast<const float*>(b), reinterpret_cast<float*>(rmean), reinterpret_cast<float*>(rvar),
        reinterpret_cast<long long*>(nbt), reinterpret_cast<int*>(ws), (int)N, (int)C, (int)HW, (int)cpp,
        lag, (float)momentum, (float)eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("batch_norm: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("workspace_words", &workspace_words, "int32 words of zeroed workspace batch_norm needs");
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
        ws = torch.zeros(_ext.workspace_words(N, C, H * W), dtype=torch.int32, device=x.device)
        if _ext.batch_norm(x.data_ptr(), y.data_ptr(), bn.weight.data_ptr(), bn.bias.data_ptr(),
                           bn.running_mean.data_ptr(), bn.running_var.data_ptr(),
                           bn.num_batches_tracked.data_ptr(), ws.data_ptr(), N, C, H * W,
                           bn.momentum, bn.eps, torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return bn(x)

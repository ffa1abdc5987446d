"""GroupNorm in one launch whose second read of x mostly hits L2.

x is (16, 64, 256, 256) fp32, 268 MB, in 16 x 8 = 128 groups of 8 channels x 64K values (2 MB,
contiguous). A group's mean and variance are needed before any of its outputs, so the textbook
schedule -- eager's too: a moments kernel, then the affine kernel -- reads x from DRAM twice and
writes once, ~804 MB or ~190 us at the H200's ~4.3 TB/s. The H200's 50 MB L2 holds a dozen
groups, so this kernel interleaves the two phases group by group and lets the second read come
from L2: one persistent launch (every SM full, blocks pull 64 KB work items from an atomic
ticket counter) whose queue runs "statistics of group s + LAG, then normalisation of group s". A
statistics item sums (x - K) and (x - K)^2 over its chunk (K is the group's first element, a
shift that keeps the one-pass variance free of cancellation) with 128-bit loads, reduces the
block in fp32 and stores the pair; the block that completes a group (an arrival counter) adds
its 32 pairs in fp64 in a fixed order and publishes mean and 1/sqrt(var + eps) with a release
flag. A normalisation item waits for its group's flag (normally long set: LAG is sized so ~1.2
waves of items separate the two), re-reads its chunk while it is still in L2 and writes (x -
mean) * (invstd * w[c]) + b[c] for its channel c. The second read and all stores are marked
evict-first so they do not push out chunks still waiting for their second read. Deadlock-free:
a block only waits for items handed out before its own, which are held by running blocks that
never wait. DRAM traffic approaches one read and one write (536 MB, ~125 us): expect ~1.3-1.6x.
Shapes it does not handle fall back to nn.GroupNorm.
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

// Workspace, int32 words, zeroed by the caller, for S = N * G groups: [0] ticket, [1, 1+S)
// arrivals per group, [1+S, 1+2S) ready flags, then (8-byte aligned) float2 stats[S] =
// (mean, invstd) and float2 part[S][P] = per-item (sum(x-K), sum((x-K)^2)).
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

// Queue slot k (each slot = the P items of one group) -> (statistics?, group). The order is
// S0 .. S(lag-1), then S(lag) N0 S(lag+1) N1 ..., then the last lag N slots.
__device__ __forceinline__ void decode_slot(int k, int S, int lag, bool& stats, int& g) {
    if (k < lag) { stats = true; g = k; }
    else if (k < 2 * S - lag) { const int j = k - lag; stats = (j % 2 == 0); g = stats ? lag + j / 2 : j / 2; }
    else { stats = false; g = S - lag + (k - (2 * S - lag)); }
}

__global__ void __launch_bounds__(THREADS, 2) group_norm(
        const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
        const float* __restrict__ b, int* ws, int N, int C, int G, int HW, int cpp, int lag, float eps) {
    __shared__ float2 red2[WARPS];
    __shared__ double redd[WARPS];
    __shared__ int s_ticket;
    __shared__ int s_last;
    const int S = N * G, Cg = C / G;
    int* ticket = ws;
    int* arrivals = ws + 1;
    volatile int* ready = ws + 1 + S;
    float2* stats = reinterpret_cast<float2*>(ws + header_words(S));
    float2* part = stats + S;
    const int P = Cg * cpp;           // items per group: Cg planes x cpp chunks
    const int total = 2 * S * P;
    for (;;) {
        if (threadIdx.x == 0) s_ticket = atomicAdd(ticket, 1);
        __syncthreads();
        const int t = s_ticket;
        __syncthreads();  // everyone has read s_ticket before it is overwritten
        if (t >= total) break;
        bool is_stats;
        int g;  // group index n * G + (group within the sample)
        decode_slot(t / P, S, lag, is_stats, g);
        const int u = t % P, q = u % cpp;
        const int c = (g % G) * Cg + u / cpp;  // this item's channel
        const int64_t gstart = (int64_t)g * Cg * HW;
        const int64_t start = gstart + (int64_t)(u / cpp) * HW + (int64_t)q * CHUNK;
        const int len4 = min(CHUNK, HW - q * CHUNK) / 4;
        const float4* xs = reinterpret_cast<const float4*>(x + start);
        if (is_stats) {
            const float K = __ldg(x + gstart);  // shift: the group's first element
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
                part[(int64_t)g * P + u] = r;
                __threadfence();  // the pair is visible before the arrival is counted
                s_last = atomicAdd(arrivals + g, 1) == P - 1;
            }
            __syncthreads();
            if (s_last) {  // this block completed group g: finish its statistics
                __threadfence();
                double ds = 0.0, dss = 0.0;
                for (int i = threadIdx.x; i < P; i += THREADS) {
                    const float2 p = __ldcg(part + (int64_t)g * P + i);  // L2: written by other SMs
                    ds += p.x;
                    dss += p.y;
                }
                ds = block_sum(ds, redd);
                dss = block_sum(dss, redd);
                if (threadIdx.x == 0) {
                    const double M = (double)Cg * HW;
                    const double dm = ds / M;
                    const double var = fmax(dss / M - dm * dm, 0.0);  // biased, as GroupNorm uses
                    stats[g] = make_float2((float)((double)K + dm), (float)(1.0 / sqrt(var + (double)eps)));
                    __threadfence();  // stats visible before the flag
                    ready[g] = 1;
                }
            }
        } else {
            if (threadIdx.x == 0) {
                while (ready[g] == 0) __nanosleep(200);
                __threadfence();
            }
            __syncthreads();
            const float2 st = __ldcg(stats + g);
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
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, group_norm, THREADS, 0);
        blocks = std::max(1, sms * std::max(per_sm, 1));
    }
    return blocks;
}

int64_t workspace_words(int64_t N, int64_t C, int64_t G, int64_t HW) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK, S = N * G;
    return header_words(S) + 2 * S + 2 * S * (C / G) * cpp;
}

// Returns false for shapes it does not handle (the caller falls back to nn.GroupNorm).
bool group_norm_forward(uintptr_t x, uintptr_t y, uintptr_t w, uintptr_t b, uintptr_t ws, int64_t N,
                        int64_t C, int64_t G, int64_t HW, double eps, uintptr_t stream) {
    const int64_t cpp = (HW + CHUNK - 1) / CHUNK, S = N * G;
    if (HW % 4 != 0 || x % 16 != 0 || y % 16 != 0 || G < 1 || C % G != 0 || S < 1 ||
        2 * S * (C / G) * cpp >= ((int64_t)1 << 31) || N * C * HW >= ((int64_t)1 << 40)) return false;
    const int blocks = grid_blocks();
    const int64_t P = (C / G) * cpp;
    // LAG: groups between a group's statistics and its normalisation, ~1.2 waves of items, so
    // the flag is normally set before anyone asks; small enough that the chunks stay in L2.
    const int lag = (int)std::min<int64_t>(S, std::max<int64_t>(1, (int64_t)(1.2 * blocks / (2 * P)) + 1));
    group_norm<<<blocks, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), reinterpret_cast<const float*>(w),
        reinterpret_cast<const float*>(b), reinterpret_cast<int*>(ws), (int)N, (int)C, (int)G, (int)HW,
        (int)cpp, lag, (float)eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("group_norm: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("workspace_words", &workspace_words, "int32 words of zeroed workspace group_norm_forward needs");
    m.def("group_norm_forward", &group_norm_forward, "GroupNorm forward (fp32, contiguous); false if unsupported");
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
        G = gn.num_groups
        y = torch.empty_like(x)
        ws = torch.zeros(_ext.workspace_words(N, C, G, H * W), dtype=torch.int32, device=x.device)
        if _ext.group_norm_forward(x.data_ptr(), y.data_ptr(), gn.weight.data_ptr(), gn.bias.data_ptr(),
                                   ws.data_ptr(), N, C, G, H * W, gn.eps,
                                   torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return gn(x)

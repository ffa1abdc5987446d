"""InstanceNorm, each 256 KB plane held in the registers of an 8-block cluster: one read, one write.

x is (16, 64, 256, 256) fp32, 268 MB, normalised per (n, c) plane of 64K values. Eager runs it as
a batch norm over a (1, N*C, H, W) view: a statistics pass and a normalisation pass, reading x
from DRAM twice and writing once (~804 MB, ~190 us at the H200's ~4.3 TB/s) plus the view and
launch overhead. A plane is 256 KB -- too big for one block's registers, but not for a thread
block cluster (sm_90): 8 blocks of 512 threads on 8 SMs hold a plane as 4 float4 per thread. Each
block loads its 32 KB slice once (all four 128-bit loads of a thread in flight, marked streaming:
x is never read again), sums it (warp shuffles, then shared memory) and publishes the partial;
after a cluster barrier every block adds the 8 partials in rank order through distributed shared
memory (all blocks agree bit for bit) to get the mean. The variance is then a true second pass
over the registers, sum((x - mean)^2) -- exact two-pass numerics at no memory cost -- exchanged
the same way, and the block writes (x - mean) / sqrt(var + eps) with streaming 128-bit stores.
DRAM traffic is the floor, one read and one write (536 MB, ~125 us); 1024 clusters keep ~12 MB in
flight. Expect ~1.4-1.8x. Affine or running-stat variants and planes over 256K values use
nn.InstanceNorm2d itself.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cmath>

namespace cg = cooperative_groups;
constexpr int CLUSTER = 8;    // blocks per plane
constexpr int THREADS = 512;
constexpr int WARPS = THREADS / 32;

__device__ __forceinline__ float block_sum(float v, float* red) {
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
    __syncthreads();
    float r = red[0];
    #pragma unroll
    for (int w = 1; w < WARPS; ++w) r += red[w];
    __syncthreads();
    return r;
}

// Adds slot `which` of `part` over the cluster's blocks in rank order (thread 0), -> every thread.
__device__ __forceinline__ float cluster_total(cg::cluster_group& cluster, float* part, int which,
                                               float* bcast) {
    cluster.sync();  // every block's partial is written and visible
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int r = 0; r < CLUSTER; ++r) t += cluster.map_shared_rank(part, r)[which];
        *bcast = t;
    }
    __syncthreads();
    return *bcast;
}

// One plane (hw4 float4) per cluster; block `rank` owns float4s [rank*seg4, (rank+1)*seg4).
template <int ITEMS>
__global__ void __launch_bounds__(THREADS) instance_norm(const float* __restrict__ x,
        float* __restrict__ y, int hw4, int seg4, float eps) {
    __shared__ float red[WARPS];
    __shared__ float part[2];  // [0]: partial sum, [1]: partial sum of squared deviations
    __shared__ float bcast;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int64_t plane = blockIdx.x / CLUSTER;
    const float4* xp = reinterpret_cast<const float4*>(x) + plane * hw4;
    float4* yp = reinterpret_cast<float4*>(y) + plane * hw4;
    const int lo = rank * seg4, hi = min(lo + seg4, hw4);
    const float count = 4.f * hw4;
    float4 v[ITEMS];
    float s = 0.f;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = lo + threadIdx.x + k * THREADS;
        v[k] = i < hi ? __ldcs(xp + i) : make_float4(0.f, 0.f, 0.f, 0.f);
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    s = block_sum(s, red);
    if (threadIdx.x == 0) part[0] = s;
    const float mean = cluster_total(cluster, part, 0, &bcast) / count;
    float q = 0.f;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (lo + threadIdx.x + k * THREADS < hi) {  // padding must not count: it is not x - mean
            const float a = v[k].x - mean, b = v[k].y - mean, c = v[k].z - mean, d = v[k].w - mean;
            q += (a * a + b * b) + (c * c + d * d);
        }
    }
    q = block_sum(q, red);
    if (threadIdx.x == 0) part[1] = q;
    const float invstd = 1.f / sqrtf(cluster_total(cluster, part, 1, &bcast) / count + eps);
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = lo + threadIdx.x + k * THREADS;
        if (i < hi)
            __stcs(yp + i, make_float4((v[k].x - mean) * invstd, (v[k].y - mean) * invstd,
                                       (v[k].z - mean) * invstd, (v[k].w - mean) * invstd));
    }
    cluster.sync();  // no block leaves while another may still read its `part`
}

// Returns false for shapes it does not handle (the caller falls back to nn.InstanceNorm2d).
bool instance_norm_forward(uintptr_t x, uintptr_t y, int64_t planes, int64_t hw, double eps, uintptr_t stream) {
    if (hw % 4 != 0 || x % 16 != 0 || y % 16 != 0 || hw > 16LL * THREADS * CLUSTER * 4) return false;
    if (planes == 0 || hw == 0) return true;
    const int hw4 = (int)(hw / 4), seg4 = (hw4 + CLUSTER - 1) / CLUSTER;
    const int items = (seg4 + THREADS - 1) / THREADS;  // float4 per thread: 1..16
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)(planes * CLUSTER));
    cfg.blockDim = dim3(THREADS);
    cfg.stream = reinterpret_cast<cudaStream_t>(stream);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const float e = (float)eps;
    cudaError_t err;
    if (items <= 1)      err = cudaLaunchKernelEx(&cfg, instance_norm<1>, xp, yp, hw4, seg4, e);
    else if (items <= 2) err = cudaLaunchKernelEx(&cfg, instance_norm<2>, xp, yp, hw4, seg4, e);
    else if (items <= 4) err = cudaLaunchKernelEx(&cfg, instance_norm<4>, xp, yp, hw4, seg4, e);
    else if (items <= 8) err = cudaLaunchKernelEx(&cfg, instance_norm<8>, xp, yp, hw4, seg4, e);
    else                 err = cudaLaunchKernelEx(&cfg, instance_norm<16>, xp, yp, hw4, seg4, e);
    if (err == cudaSuccess) err = cudaGetLastError();
    if (err != cudaSuccess) throw std::runtime_error(std::string("instance_norm: ") + cudaGetErrorString(err));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("instance_norm_forward", &instance_norm_forward,
          "per-plane normalisation of an (N*C, HW) fp32 tensor; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, num_features: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(num_features=num_features)  # no parameters, no buffers

    def forward(self, x):
        m = self.inorm
        if not x.is_cuda or x.dtype != torch.float32 or x.dim() != 4 or m.affine or m.track_running_stats:
            return m(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        N, C, H, W = x.shape
        if _ext.instance_norm_forward(x.data_ptr(), y.data_ptr(), N * C, H * W, m.eps,
                                      torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return m(x)

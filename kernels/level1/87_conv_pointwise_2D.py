"""Pointwise (1x1) convolution with 3 input channels as a store-streaming kernel, exact fp32.

A 1x1 conv from 3 to 64 channels on (16, 3, 256, 256) is a GEMM with K = 3: 201M multiply-adds
(~3 us of FMA issue) but a 268 MB output, so it is bound by writing that output: ~65 us at the
H200's ~4.1 TB/s, the floor for any implementation. Eager nn.Conv2d hands it to cuDNN, which by
default uses TF32 for convolutions (about 1e-3 relative error, outside the strict tolerance) and
runs a GEMM-shaped kernel that is not tuned for K = 3. Here each thread owns 4 consecutive pixels
of one image: it loads the 3 input channels as three 128-bit loads (12.6 MB read once in all),
then for each of the 64 output channels forms 4 outputs with 3 exact fp32 FMAs each and writes
them as one 128-bit store; a warp's store is 512 contiguous bytes, so the write stream is fully
coalesced and nothing but the output is written. The 64 x 3 weights sit in shared memory and every
lane reads the same one at a time (a broadcast). The kernel should run close to write bandwidth;
expect ~1.1-1.3x over cuDNN (the floor is the same 268 MB for both) plus the shorter host path.
Spatial sizes that are not a multiple of 4, or misaligned pointers, use scalar accesses; other
channel counts run the module's own Conv2d.
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
constexpr int MAX_COUT = 1024;

__device__ __forceinline__ float fma_v(float w, float x, float a) { return fmaf(w, x, a); }
__device__ __forceinline__ float4 fma_v(float w, float4 x, float4 a) {
    return make_float4(fmaf(w, x.x, a.x), fmaf(w, x.y, a.y), fmaf(w, x.z, a.z), fmaf(w, x.w, a.w));
}
__device__ __forceinline__ float add_v(float a, float b) { return a + b; }
__device__ __forceinline__ float4 add_v(float4 a, float b) { return make_float4(a.x + b, a.y + b, a.z + b, a.w + b); }
template <class V> __device__ __forceinline__ V zero_v();
template <> __device__ __forceinline__ float zero_v<float>() { return 0.f; }
template <> __device__ __forceinline__ float4 zero_v<float4>() { return make_float4(0.f, 0.f, 0.f, 0.f); }

// y[n, o, p] = b[o] + sum_c w[o, c] x[n, c, p]; V = float4 (4 pixels per thread) or float.
// hw: pixels per plane in units of V; total = N * hw.
template <int CIN, class V>
__global__ void __launch_bounds__(THREADS) pointwise(const V* __restrict__ x, const float* __restrict__ w,
                                                     const float* __restrict__ bias, V* __restrict__ y,
                                                     int cout, int64_t hw, int64_t total) {
    __shared__ float ws[MAX_COUT * CIN];
    __shared__ float bs[MAX_COUT];
    for (int i = threadIdx.x; i < cout * CIN; i += THREADS) ws[i] = __ldg(w + i);
    for (int i = threadIdx.x; i < cout; i += THREADS) bs[i] = bias ? __ldg(bias + i) : 0.f;
    __syncthreads();
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= total) return;
    const int64_t n = idx / hw, p = idx - n * hw;
    const V* xn = x + n * CIN * hw + p;
    V v[CIN];
    #pragma unroll
    for (int c = 0; c < CIN; ++c) v[c] = __ldg(xn + c * hw);
    V* yn = y + n * cout * hw + p;
    #pragma unroll 4
    for (int o = 0; o < cout; ++o) {
        V acc = zero_v<V>();
        #pragma unroll
        for (int c = 0; c < CIN; ++c) acc = fma_v(ws[o * CIN + c], v[c], acc);
        yn[o * hw] = add_v(acc, bs[o]);
    }
}

void conv1x1(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t cin,
             int64_t cout, int64_t HW, uintptr_t stream) {
    if (cin != 3) throw std::runtime_error("conv1x1: only 3 input channels are compiled here");
    if (cout > MAX_COUT) throw std::runtime_error("conv1x1: more than 1024 output channels");
    if (N * HW == 0 || cout == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* wp = reinterpret_cast<const float*>(w);
    const float* bp = reinterpret_cast<const float*>(bias);
    if (HW % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t hw = HW / 4, total = N * hw;
        pointwise<3, float4><<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0, st>>>(
            reinterpret_cast<const float4*>(x), wp, bp, reinterpret_cast<float4*>(y), (int)cout, hw, total);
    } else {
        const int64_t total = N * HW;
        pointwise<3, float><<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0, st>>>(
            reinterpret_cast<const float*>(x), wp, bp, reinterpret_cast<float*>(y), (int)cout, HW, total);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("conv1x1: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv1x1", &conv1x1, "1x1 conv2d of an NCHW fp32 tensor with 3 input channels");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, bias: bool = False):
        super().__init__()
        self.conv1d = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0,
                                bias=bias)
        self.fast = in_channels == 3 and out_channels <= 1024

    def forward(self, x):
        if not self.fast or x.dim() != 4 or x.dtype != torch.float32:
            return self.conv1d(x)
        x = x.contiguous()
        N, C, H, W = x.shape
        y = torch.empty(N, self.conv1d.out_channels, H, W, device=x.device)
        b = self.conv1d.bias
        _ext.conv1x1(x.data_ptr(), self.conv1d.weight.data_ptr(), 0 if b is None else b.data_ptr(),
                     y.data_ptr(), N, C, self.conv1d.out_channels, H * W,
                     torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

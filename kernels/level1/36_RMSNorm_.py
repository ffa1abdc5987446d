"""RMS normalisation across channels in one read and one write: each thread holds its 64 values.

The RMS is taken per (n, h, w) over the C = 64 channels of a (16, 64, 256, 256) fp32 input
(268 MB). Eager evaluates the expression as five kernels: x ** 2 writes a 268 MB temporary, the
channel mean reads it back, + eps and sqrt run on the small (N, 1, H, W) result, and the
broadcast divide reads x again and writes the output -- about 1.1 GB of DRAM traffic, ~260 us at
the H200's ~4.3 TB/s, plus five launches. The floor is one read and one write of x, 536 MB or
~125 us. This kernel reaches for it: one thread per (n, h, w) position loads that position's 64
channel values (a warp reads 32 consecutive positions of one channel plane, a coalesced 128-byte
segment, and all 64 loads of a thread are independent, so they are in flight together), keeps
them in registers, sums their squares, and writes x / sqrt(mean + eps) with an IEEE division, as
the reference does. 4096 blocks of 256 threads, one pass over memory: expect ~2-2.5x. Channel
counts above 64 fall back to the torch expression.
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

constexpr int THREADS = 256;

// x, y: (N, C, HW) contiguous; one thread per (n, p), CMAX >= C values kept in registers.
template <int CMAX>
__global__ void __launch_bounds__(THREADS) rms_channels(const float* __restrict__ x,
        float* __restrict__ y, int64_t N, int C, int64_t HW, float eps) {
    const int64_t i = blockIdx.x * (int64_t)THREADS + threadIdx.x;
    if (i >= N * HW) return;
    const int64_t n = i / HW, p = i % HW;
    const float* xp = x + n * C * HW + p;
    float* yp = y + n * C * HW + p;
    float v[CMAX];
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) v[c] = c < C ? __ldcs(xp + c * HW) : 0.f;  // read once: stream
    float s = 0.f;
    #pragma unroll
    for (int c = 0; c < CMAX; ++c) s += v[c] * v[c];
    const float rms = sqrtf(s / (float)C + eps);
    #pragma unroll
    for (int c = 0; c < CMAX; ++c)
        if (c < C) __stcs(yp + c * HW, v[c] / rms);
}

// Returns false for channel counts it does not handle (the caller falls back).
bool rms_norm(uintptr_t x, uintptr_t y, int64_t N, int64_t C, int64_t HW, float eps, uintptr_t stream) {
    if (C < 1 || C > 64) return false;
    if (N * HW == 0) return true;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    const unsigned blocks = (unsigned)((N * HW + THREADS - 1) / THREADS);
    if (C <= 16)      rms_channels<16><<<blocks, THREADS, 0, st>>>(xp, yp, N, (int)C, HW, eps);
    else if (C <= 32) rms_channels<32><<<blocks, THREADS, 0, st>>>(xp, yp, N, (int)C, HW, eps);
    else              rms_channels<64><<<blocks, THREADS, 0, st>>>(xp, yp, N, (int)C, HW, eps);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("rms_norm: ") + cudaGetErrorString(e));
    return true;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("rms_norm", &rms_norm, "x / sqrt(mean over dim 1 of x^2 + eps), (N, C, ...) fp32; false if unsupported");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super().__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x):
        if x.is_cuda and x.dtype == torch.float32 and x.dim() >= 2:
            x = x.contiguous()
            y = torch.empty_like(x)
            N, C = x.shape[0], x.shape[1]
            stream = torch._C._cuda_getCurrentRawStream(x.get_device())
            if _ext.rms_norm(x.data_ptr(), y.data_ptr(), N, C, x.numel() // max(N * C, 1), self.eps, stream):
                return y
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms

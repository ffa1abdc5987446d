"""1-D conv (3 -> 64 channels, kernel 3) as a direct kernel: one output per thread, exact fp32.

(16, 3, 512) -> (16, 64, 510) is 522k outputs of 9 multiply-adds each (4.7 MFMA, nothing for the
GPU) with 98 KB read and 2.1 MB written (~0.5 us at ~4.3 TB/s). What eager pays is nn.Conv1d's
host path -- parameter checks, the cuDNN descriptor and plan set-up, then a GEMM-shaped kernel
(in TF32 by default for convolutions, ~1e-3 relative error, outside the strict tolerance) -- which
is far longer than the GPU work. Here a thin Python call (torch.empty, raw pointers, the raw
stream handle) launches one kernel: thread idx computes y[n, o, t] with t fastest, so a warp's
32 input loads per tap are consecutive floats (coalesced, and the 3 taps overlap in L1), its
weight loads are the same address for the whole warp (a broadcast), and its store is 128
contiguous bytes. The 9 taps are summed in exact fp32 FMA. 2040 blocks of 256 threads fill the
GPU in one wave. Expect ~2-4x, almost all from the shorter host path. The kernel is generic in
stride, padding, dilation and groups; only non-zero padding modes fall back to the module.
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

// y[n, o, t] = b[o] + sum_{i < cin/groups, k < K} w[o, i, k] x[n, g*cin_g + i, t*stride - pad + k*dil]
__global__ void __launch_bounds__(THREADS) conv1d_kernel(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, int cin, int L, int cout, int Lout, int K, int stride, int pad,
        int dil, int groups, int64_t total) {
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= total) return;
    const int t = (int)(idx % Lout);
    const int64_t q = idx / Lout;
    const int o = (int)(q % cout);
    const int64_t n = q / cout;
    const int cin_g = cin / groups, g = o / (cout / groups);
    const float* xn = x + (n * cin + (int64_t)g * cin_g) * L;
    const float* wo = w + (int64_t)o * cin_g * K;
    const int j0 = t * stride - pad;
    float acc = 0.f;
    for (int i = 0; i < cin_g; ++i) {
        #pragma unroll 4
        for (int k = 0; k < K; ++k) {
            const int j = j0 + k * dil;
            if (j >= 0 && j < L) acc = fmaf(__ldg(wo + i * K + k), __ldg(xn + (int64_t)i * L + j), acc);
        }
    }
    y[idx] = bias ? acc + __ldg(bias + o) : acc;
}

void conv1d(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t cin, int64_t L,
            int64_t cout, int64_t Lout, int64_t K, int64_t stride, int64_t pad, int64_t dil,
            int64_t groups, uintptr_t stream) {
    const int64_t total = N * cout * Lout;
    if (total <= 0) return;
    conv1d_kernel<<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0,
                    reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w),
        reinterpret_cast<const float*>(bias), reinterpret_cast<float*>(y), (int)cin, (int)L,
        (int)cout, (int)Lout, (int)K, (int)stride, (int)pad, (int)dil, (int)groups, total);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("conv1d: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv1d", &conv1d, "direct conv1d of an (N, C, L) fp32 tensor (zero padding)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, dilation: int = 1, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d = nn.Conv1d(in_channels, out_channels, kernel_size, stride=stride,
                                padding=padding, dilation=dilation, groups=groups, bias=bias)
        c = self.conv1d
        self.fast = isinstance(c.padding, tuple) and c.padding_mode == "zeros"
        if self.fast:  # plain ints, so forward does no attribute digging
            self.cfg = (in_channels, out_channels, c.kernel_size[0], c.stride[0], c.padding[0],
                        c.dilation[0], groups)

    def forward(self, x):
        if not self.fast or x.dim() != 3 or x.shape[1] != self.cfg[0] or x.dtype != torch.float32:
            return self.conv1d(x)
        x = x.contiguous()
        cin, cout, K, s, p, d, g = self.cfg
        N, L = x.shape[0], x.shape[2]
        Lout = (L + 2 * p - d * (K - 1) - 1) // s + 1
        y = torch.empty(N, cout, Lout, device=x.device)
        b = self.conv1d.bias
        _ext.conv1d(x.data_ptr(), self.conv1d.weight.data_ptr(), 0 if b is None else b.data_ptr(),
                    y.data_ptr(), N, cin, L, cout, Lout, K, s, p, d, g,
                    torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

"""Transposed 1-D conv (64 -> 3 channels) as a gather kernel: one output per thread, exact fp32.

ConvTranspose1d (16, 64, 128) -> (16, 3, 130) with kernel 3: y[n, o, t] = sum over i < 64 and
k < 3 of x[n, i, t - k] * w[i, o, k]. That is 6240 outputs of up to 192 multiply-adds (1.2 MFMA),
524 KB read and 25 KB written: a few microseconds of latency-bound GPU work. Eager runs cuDNN's
transposed conv (a backward-data kernel, in TF32 by default for convolutions: ~1e-3 relative
error, outside the strict tolerance) behind nn.ConvTranspose1d's long host path. Here a thin
Python call launches one kernel: thread idx gathers y[n, o, t] (t fastest), and for each valid
tap loops over the 64 input channels, unrolled by 8 so eight independent load pairs are in
flight; a warp's x loads for one (i, k) are 32 consecutive floats (coalesced), its weight loads
are one address for the whole warp (a broadcast), and the sum is exact fp32 FMA. Expect ~2-3x,
mostly from the shorter host path; with only 6240 outputs the kernel itself is bound by load
latency, not bandwidth. The kernel is generic in stride, padding, output padding, dilation and
groups.
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

// y[n, o, t] = b[o] + sum over taps k with t = j*stride - pad + k*dil, 0 <= j < L, and input
// channels i of o's group: x[n, i, j] * w[i, o % cout_g, k].  w is (cin, cout / groups, K).
__global__ void __launch_bounds__(THREADS) conv_t1d_kernel(
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
        float* __restrict__ y, int cin, int L, int cout, int Lout, int K, int stride, int pad,
        int dil, int groups, int64_t total) {
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= total) return;
    const int t = (int)(idx % Lout);
    const int64_t q = idx / Lout;
    const int o = (int)(q % cout);
    const int64_t n = q / cout;
    const int cin_g = cin / groups, cout_g = cout / groups;
    const int g = o / cout_g, ol = o - g * cout_g;
    const float* xn = x + (n * cin + (int64_t)g * cin_g) * L;
    const float* wo = w + ((int64_t)g * cin_g * cout_g + ol) * K;  // + i * cout_g * K + k
    float acc = 0.f;
    for (int k = 0; k < K; ++k) {
        const int num = t + pad - k * dil;
        if (num < 0 || num % stride != 0) continue;
        const int j = num / stride;
        if (j >= L) continue;
        #pragma unroll 8
        for (int i = 0; i < cin_g; ++i)
            acc = fmaf(__ldg(xn + (int64_t)i * L + j), __ldg(wo + ((int64_t)i * cout_g) * K + k), acc);
    }
    y[idx] = bias ? acc + __ldg(bias + o) : acc;
}

void conv_t1d(uintptr_t x, uintptr_t w, uintptr_t bias, uintptr_t y, int64_t N, int64_t cin, int64_t L,
              int64_t cout, int64_t Lout, int64_t K, int64_t stride, int64_t pad, int64_t dil,
              int64_t groups, uintptr_t stream) {
    const int64_t total = N * cout * Lout;
    if (total <= 0) return;
    conv_t1d_kernel<<<(unsigned)((total + THREADS - 1) / THREADS), THREADS, 0,
                      reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(x), reinterpret_cast<const float*>(w),
        reinterpret_cast<const float*>(bias), reinterpret_cast<float*>(y), (int)cin, (int)L,
        (int)cout, (int)Lout, (int)K, (int)stride, (int)pad, (int)dil, (int)groups, total);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("conv_t1d: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("conv_t1d", &conv_t1d, "direct transposed conv1d of an (N, C, L) fp32 tensor");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, groups: int = 1, bias: bool = False):
        super().__init__()
        self.conv1d_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size,
                                                   stride=stride, padding=padding,
                                                   output_padding=output_padding, groups=groups,
                                                   bias=bias)
        c = self.conv1d_transpose  # plain ints, so forward does no attribute digging
        self.cfg = (in_channels, out_channels, c.kernel_size[0], c.stride[0], c.padding[0],
                    c.output_padding[0], c.dilation[0], c.groups)

    def forward(self, x):
        if x.dim() != 3 or x.shape[1] != self.cfg[0] or x.dtype != torch.float32:
            return self.conv1d_transpose(x)
        x = x.contiguous()
        cin, cout, K, s, p, op, d, g = self.cfg
        N, L = x.shape[0], x.shape[2]
        Lout = (L - 1) * s - 2 * p + d * (K - 1) + op + 1
        y = torch.empty(N, cout, Lout, device=x.device)
        b = self.conv1d_transpose.bias
        _ext.conv_t1d(x.data_ptr(), self.conv1d_transpose.weight.data_ptr(),
                      0 if b is None else b.data_ptr(), y.data_ptr(), N, cin, L, cout, Lout, K, s,
                      p, d, g, torch._C._cuda_getCurrentRawStream(x.device.index))
        return y

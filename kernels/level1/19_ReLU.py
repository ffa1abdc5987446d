"""ReLU as one lean float4 kernel behind a thin Python call.

The tensor is small (16 x 16384 fp32 = 1 MB), so the GPU work is a few microseconds and the time per
call is dominated by host overhead: torch.relu goes through argument parsing, the dispatcher and
TensorIterator set-up before its launch. This version allocates the output with torch.empty_like,
fetches the raw current-stream handle directly (no Stream object) and makes one pybind11 call that
launches a kernel where each thread handles one float4 (16 bytes in, 16 out), so the whole tensor is
65536 vector loads spread over 256 blocks -- one wave on the H200's 132 SMs. The kernel itself is
bound by DRAM latency, as eager's is, so any gain had to come from less host work per call.
`x <= 0 ? 0 : x` keeps torch's NaN propagation. A scalar path handles sizes that are not a multiple
of 4 or misaligned pointers. Measured on the H200: 0.83x vs eager -- with 2 MB moved the call is
launch-bound (a few % of peak HBM bandwidth), and in the judge this path costs ~6 us more per call
than eager's (33.9 against 28.2 us); a bare-loop probe shows a gap too (42.6 against 28.8 us of host
time), and part of it is our call path: a pybind11 call alone costs ~5 us per call in the judge,
whichever CUDA runtime is linked.
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

__device__ __forceinline__ float relu1(float v) { return v <= 0.f ? 0.f : v; }  // NaN stays NaN

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}

__global__ void relu_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = relu1(__ldg(x + i));
}

void relu(uintptr_t x, uintptr_t y, int64_t n, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        int64_t n4 = n / 4;
        relu_vec4<<<(unsigned)((n4 + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
    } else {
        relu_scalar<<<(unsigned)((n + threads - 1) / threads), threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("relu: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("relu", &relu, "y = max(x, 0) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.relu(x.data_ptr(), y.data_ptr(), x.numel(),
                  torch._C._cuda_getCurrentRawStream(x.get_device()))
        return y

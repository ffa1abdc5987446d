"""LeakyReLU as one float4 kernel behind a thin Python call.

The input is 16 x 16384 fp32 (1 MB in, 1 MB out): at ~4 TB/s the traffic is ~0.5 us, so eager's call
is dominated by host work (argument parsing, the dispatcher, TensorIterator set-up) plus one DRAM
round trip. This version allocates the output with torch.empty_like, takes the raw current-stream
handle without building a Stream object, and makes one pybind11 call that launches a kernel in which
every thread loads one float4 with a 128-bit load and stores one float4: 65536 vector accesses over
256 blocks, a single wave on the H200's 132 SMs. The kernel does the same single pass as eager (the
op is bound by one DRAM round trip at this size), so any gain had to be host time. The slope is
passed as a float argument, so a non-default negative_slope needs no rebuild; the result is
bit-identical to torch (same compare-and-multiply in fp32). Measured on the H200: 0.65x vs eager --
with 2 MB moved the call is launch-bound (a few % of peak HBM bandwidth), and in the judge this path
costs ~8 us more per call than eager's (23.3 against 15.1 us; part of it is our call path: a
pybind11 call alone costs ~5 us per call in the judge, whichever CUDA runtime is linked).
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
#include <algorithm>
#include <cmath>

// torch's rule: x > 0 ? x : x * slope (a NaN input fails the test and stays NaN)
__device__ __forceinline__ float f(float v, float slope) { return v > 0.f ? v : v * slope; }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void leaky_relu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4, float slope) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x, slope), f(v.y, slope), f(v.z, slope), f(v.w, slope));
    }
}

__global__ void leaky_relu_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n, float slope) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i), slope);
}

void leaky_relu(uintptr_t x, uintptr_t y, int64_t n, float slope, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const int threads = 256;
    const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
    if (n % 4 == 0 && x % 16 == 0 && y % 16 == 0) {
        const int64_t n4 = n / 4;
        const int64_t blocks = std::min((n4 + threads - 1) / threads, max_blocks);
        leaky_relu_vec4<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4, slope);
    } else {
        const int64_t blocks = std::min((n + threads - 1) / threads, max_blocks);
        leaky_relu_scalar<<<(unsigned)blocks, threads, 0, st>>>(
            reinterpret_cast<const float*>(x), reinterpret_cast<float*>(y), n, slope);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("leaky_relu: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("leaky_relu", &leaky_relu, "y = leaky_relu(x, slope) elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.leaky_relu(x, self.negative_slope)
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch._C._cuda_getCurrentRawStream(x.get_device())
        _ext.leaky_relu(x.data_ptr(), y.data_ptr(), x.numel(), self.negative_slope, stream)
        return y

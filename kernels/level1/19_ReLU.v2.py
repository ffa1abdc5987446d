"""ReLU on the CPU: one OpenMP-parallel, auto-vectorised C++ loop.

The CPU counterpart of the CUDA version. ReLU is a pure stream (1 MB in, 1 MB out for the
16 x 16384 input), so the best any implementation can do is read and write each element once
with full-width SIMD on every core. The loop `y = x <= 0 ? 0 : x` compiles (-O3 -march=native)
into vector compare + blend instructions, and `omp parallel for simd` splits it statically over
the cores, with no per-call set-up beyond one parallel region. torch.relu already does the same
amount of memory traffic, so expect ~1.0-1.2x: the saving is the dispatcher and TensorIterator
overhead, not bandwidth. On a CUDA tensor this falls back to torch.relu (the pointers would be
device addresses).
"""
import torch
import torch.nn as nn

import cudal1

CPP_SRC = r"""
#include <pybind11/pybind11.h>
#include <cstdint>

void relu(uintptr_t x_ptr, uintptr_t y_ptr, int64_t n) {
    const float* __restrict__ x = reinterpret_cast<const float*>(x_ptr);
    float* __restrict__ y = reinterpret_cast<float*>(y_ptr);
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) {
        float v = x[i];
        y[i] = v <= 0.f ? 0.f : v;  // NaN stays NaN, as in torch.relu
    }
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("relu", &relu, "y = max(x, 0) elementwise (fp32, contiguous, host memory)");
}
"""

_ext = cudal1.load_kernel(CPP_SRC, "cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        if x.is_cuda or x.dtype != torch.float32:
            return torch.relu(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.relu(x.data_ptr(), y.data_ptr(), x.numel())
        return y

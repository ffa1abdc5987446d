"""Sum over a middle dimension on the CPU: add row segments into register accumulators.

View the input as (outer, R, inner) and reduce R. Summing one output column at a time would
stride through memory `inner` floats per step; instead each piece of 64 output columns,
y[o, c0:c0+64], is built by adding the R input row segments x[o, r, c0:c0+64] one after another.
The 64-float accumulator has a fixed size, so the compiler keeps it in eight AVX registers for
the whole row loop, and the inner step is one load and one vector add per 8 floats with no
accumulator traffic to memory (checked in the generated assembly); the segments are read in
order at a fixed stride, which the hardware prefetcher follows. OpenMP spreads the (outer x
column-block) pieces over the cores, so each core streams its share of the 4 MB input exactly
once. torch.sum reaches similar bandwidth but pays for its generic reduction set-up; expect
~1.0-1.5x. On CUDA tensors this falls back to torch.sum.
"""
import math

import torch
import torch.nn as nn

import cudal1

CPP_SRC = r"""
#include <pybind11/pybind11.h>
#include <cstdint>

constexpr int BLOCK = 64;  // output columns per piece: 8 AVX registers of accumulators

void sum_dim(uintptr_t x_ptr, uintptr_t y_ptr, int64_t outer, int64_t R, int64_t inner) {
    const float* x = reinterpret_cast<const float*>(x_ptr);
    float* y = reinterpret_cast<float*>(y_ptr);
    const int64_t nblk = (inner + BLOCK - 1) / BLOCK;
    #pragma omp parallel for schedule(static)
    for (int64_t piece = 0; piece < outer * nblk; ++piece) {
        const int64_t o = piece / nblk, c0 = (piece % nblk) * BLOCK;
        const float* base = x + o * R * inner + c0;
        float* out = y + o * inner + c0;
        if (c0 + BLOCK <= inner) {
            // Fixed trip count: the compiler keeps acc in registers across the whole row loop.
            float acc[BLOCK] = {};
            for (int64_t r = 0; r < R; ++r) {
                const float* __restrict__ row = base + r * inner;
                #pragma omp simd
                for (int c = 0; c < BLOCK; ++c) acc[c] += row[c];
            }
            for (int c = 0; c < BLOCK; ++c) out[c] = acc[c];
        } else {  // the last, partial block of columns
            const int64_t w = inner - c0;
            for (int64_t c = 0; c < w; ++c) {
                float s = 0.f;
                for (int64_t r = 0; r < R; ++r) s += base[r * inner + c];
                out[c] = s;
            }
        }
    }
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("sum_dim", &sum_dim, "y[o, i] = sum_r x[o, r, i] (fp32, host memory)");
}
"""

_ext = cudal1.load_kernel(CPP_SRC, "cpp")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        if x.is_cuda or x.dtype != torch.float32:
            return torch.sum(x, dim=self.dim, keepdim=True)
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = x.shape
        out = x.new_empty(shape[:d] + (1,) + shape[d + 1:])  # keepdim=True
        _ext.sum_dim(x.data_ptr(), out.data_ptr(), math.prod(shape[:d]), shape[d],
                     math.prod(shape[d + 1:]))
        return out

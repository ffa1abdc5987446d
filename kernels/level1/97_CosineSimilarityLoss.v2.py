"""Cosine-similarity loss on the CPU: one fused pass per row instead of a chain of tensor ops.

Eager F.cosine_similarity + `1 - cos` + `mean` materialises temporaries the size of the input
(the normalised rows and their product, 2 MB each for (128, 4096)) and walks the data several
times. This version reads each pair of rows once and keeps three running sums -- p.t, p.p and
t.t -- in AVX registers (`omp simd reduction` lets the compiler keep 8-wide partial sums), then
forms 1 - p.t / (max(|p|, eps) * max(|t|, eps)) per row; rows are split over the cores by
OpenMP and the per-row losses are summed into the mean in double. One read of the 4 MB input, no
temporaries: expect ~2-4x over eager on the CPU. On CUDA tensors (or inputs that are not two
matching 2-D fp32 tensors) it falls back to the eager formula.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CPP_SRC = r"""
#include <pybind11/pybind11.h>
#include <cmath>
#include <cstdint>

void cosine_loss(uintptr_t p_ptr, uintptr_t t_ptr, uintptr_t out_ptr, int64_t B, int64_t D,
                 double eps) {
    const float* p = reinterpret_cast<const float*>(p_ptr);
    const float* t = reinterpret_cast<const float*>(t_ptr);
    double total = 0.0;
    #pragma omp parallel for schedule(static) reduction(+:total)
    for (int64_t b = 0; b < B; ++b) {
        const float* __restrict__ pr = p + b * D;
        const float* __restrict__ tr = t + b * D;
        float dot = 0.f, pp = 0.f, tt = 0.f;
        #pragma omp simd reduction(+:dot, pp, tt)
        for (int64_t i = 0; i < D; ++i) {
            dot += pr[i] * tr[i];
            pp += pr[i] * pr[i];
            tt += tr[i] * tr[i];
        }
        const float np = std::fmax(std::sqrt(pp), (float)eps), nt = std::fmax(std::sqrt(tt), (float)eps);
        total += 1.0 - (double)(dot / (np * nt));
    }
    *reinterpret_cast<float*>(out_ptr) = (float)(total / (double)B);
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("cosine_loss", &cosine_loss, "mean over rows of 1 - cos(p[b], t[b]) (fp32, host memory)");
}
"""

_ext = cudal1.load_kernel(CPP_SRC, "cpp")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions, targets):
        p, t = predictions, targets
        if p.is_cuda or p.dim() != 2 or p.shape != t.shape or p.dtype != torch.float32 \
                or t.dtype != torch.float32 or p.shape[0] == 0:
            return torch.mean(1 - F.cosine_similarity(p, t, dim=1))
        p, t = p.contiguous(), t.contiguous()
        out = torch.empty((), dtype=torch.float32)
        _ext.cosine_loss(p.data_ptr(), t.data_ptr(), out.data_ptr(), p.shape[0], p.shape[1], 1e-8)
        return out

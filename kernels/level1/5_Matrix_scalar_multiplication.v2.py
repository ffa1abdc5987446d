"""A * s as a streaming float4 kernel with plain cached loads and stores (no evict-first hints).

A (16384 x 4096) fp32 is 256 MB read and 256 MB written, so the task sits on the HBM floor: ~120 us
at ~4.3 TB/s, and every output element needs its own input element. The first variant used the
streaming hints ld.global.cs / st.global.cs and measured 0.82x vs eager (173 us against 143 us;
65% of peak bandwidth against eager's 70%). This variant tests the obvious suspect: evict-first
stores go to HBM without being merged in L2, while plain stores leave write-back to L2, which can
combine a warp's 512-byte stores into full lines before they drain. So: ordinary loads (__ldg)
and stores, eight float4 per thread all loaded before any store (128 bytes in flight per thread),
and every load and store instruction of a warp covering 512 contiguous bytes. The scalar is
rounded to fp32 once and multiplied in fp32, as torch does for a float32 tensor: bit-identical.
A misaligned or odd-sized tail takes a scalar path.
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

constexpr int THREADS = 256, ITEMS = 8;  // float4 per thread, all loaded before any store

// y = s * a for n4 float4. Each block covers THREADS * ITEMS consecutive float4, strided by
// THREADS so every load and store instruction of a warp touches 512 contiguous bytes.
__global__ void __launch_bounds__(THREADS) scale_vec4(const float4* __restrict__ a,
                                                      float4* __restrict__ y, float s,
                                                      int64_t n4) {
    const int64_t base = (int64_t)blockIdx.x * THREADS * ITEMS + threadIdx.x;
    float4 v[ITEMS];
    #pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (base + j * THREADS < n4) v[j] = __ldg(a + base + j * THREADS);
    #pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (base + j * THREADS < n4)
            y[base + j * THREADS] = make_float4(v[j].x * s, v[j].y * s, v[j].z * s, v[j].w * s);
}

__global__ void scale_scalar(const float* __restrict__ a, float* __restrict__ y, float s,
                             int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * s;
}

// y = s * a elementwise; s is rounded to fp32 first, as torch does for a float32 tensor.
void scale(uintptr_t a, uintptr_t y, double s, int64_t n, uintptr_t stream) {
    if (n == 0) return;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float sf = (float)s;
    const int64_t n4 = (a % 16 == 0 && y % 16 == 0) ? n / 4 : 0;
    if (n4 > 0) {
        const int64_t per_block = (int64_t)THREADS * ITEMS;
        scale_vec4<<<(unsigned)((n4 + per_block - 1) / per_block), THREADS, 0, st>>>(
            reinterpret_cast<const float4*>(a), reinterpret_cast<float4*>(y), sf, n4);
    }
    const int64_t rest = n - 4 * n4;  // the tail (or everything, if misaligned)
    if (rest > 0)
        scale_scalar<<<(unsigned)((rest + THREADS - 1) / THREADS), THREADS, 0, st>>>(
            reinterpret_cast<const float*>(a) + 4 * n4, reinterpret_cast<float*>(y) + 4 * n4, sf,
            rest);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("scale: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("scale", &scale, "y = float(s) * a elementwise (fp32, contiguous)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, s):
        if not isinstance(s, (int, float)) or A.dtype != torch.float32:
            return A * s
        A = A.contiguous()
        out = torch.empty_like(A)
        _ext.scale(A.data_ptr(), out.data_ptr(), float(s), A.numel(),
                   torch._C._cuda_getCurrentRawStream(A.get_device()))
        return out

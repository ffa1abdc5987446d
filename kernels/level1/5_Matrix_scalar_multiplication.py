"""A * s as one streaming float4 kernel behind a thin call: at the bandwidth floor, like eager.

A (16384 x 4096) fp32 is 256 MB read and 256 MB written: ~120 us at ~4.3 TB/s, and there is no way
to move fewer bytes, since every output element depends on its own input element. Eager's vectorised
elementwise kernel already runs near that floor, so the only gains left are small: no TensorIterator
set-up or dispatcher on the host (a few us), and the memory pipeline kept full. Each thread issues
its four 128-bit loads before any store (64 bytes in flight per thread, 2048 threads per SM), a
warp's every load and store covers 512 contiguous bytes, and both directions use streaming cache
hints (ld.global.cs / st.global.cs, evict-first): nothing here is reused, so the stream should not
evict other lines from L2. The scalar is rounded to fp32 once and multiplied in fp32, exactly as
torch does for a float32 tensor, so the result is bit-identical. A misaligned or odd-sized tail
takes a scalar path. Measured on the H200: 0.82x vs eager (173.3 us against 142.5 us) -- the task is
HBM-bound: eager's kernel already moves the 537 MB at 70% of peak bandwidth and this one at 65%; why
this kernel streams slower than eager's is unexplained.
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

constexpr int THREADS = 256, ITEMS = 4;  // float4 per thread, all loaded before any store

// y = s * a for n4 float4. Each block covers THREADS * ITEMS consecutive float4, strided by
// THREADS so every load and store instruction of a warp touches 512 contiguous bytes.
__global__ void __launch_bounds__(THREADS) scale_vec4(const float4* __restrict__ a,
                                                      float4* __restrict__ y, float s,
                                                      int64_t n4) {
    const int64_t base = (int64_t)blockIdx.x * THREADS * ITEMS + threadIdx.x;
    float4 v[ITEMS];
    #pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (base + j * THREADS < n4) v[j] = __ldcs(a + base + j * THREADS);
    #pragma unroll
    for (int j = 0; j < ITEMS; ++j)
        if (base + j * THREADS < n4)
            __stcs(y + base + j * THREADS,
                   make_float4(v[j].x * s, v[j].y * s, v[j].z * s, v[j].w * s));
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

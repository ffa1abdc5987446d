"""Matrix-vector product as a split-K streaming kernel: 2048 blocks read A once at full bandwidth.

(256 x 131072) @ (131072 x 1) is pure streaming: A is 128 MB and is read once, the vector (512 KB)
stays in L2, and the math (67 MFLOP) is nothing. The floor is ~30 us at ~4.3 TB/s. A kernel that
gives each of the 256 rows to one block has only 256 blocks to spread over 132 SMs, few loads in
flight per SM, and re-reads the whole vector from L2 in every block. Here each block takes a 4-row
x 4096-column tile of A: grid (32 K-chunks, 64 row groups) = 2048 blocks of 256 threads, 6 resident
per SM (40 registers a thread), so every SM keeps thousands of 128-bit loads in flight. A thread
loads one float4 of the vector and the matching float4 of each of its 4 rows (A with streaming,
evict-first loads, since it is read once), so every vector load serves 4 rows and the L2 traffic
for the vector is 32 MB rather than 128 MB. Partial dot products are reduced with warp shuffles,
then across the block's 8 warps in shared memory, and one atomicAdd per row and chunk (32 per
output, into a zeroed output) combines the chunks. The sum stays fp32 with short chains (16 FMAs
per thread, then tree reductions), as accurate as the reference. Expect ~1.1-1.5x over eager's
GEMV, depending on how far from the bandwidth floor that gets.
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

// y (M) += A (M, K) @ x (K) over one (ROWS x CHUNK) tile of A per block; y starts at zero and
// the K-chunks meet through atomicAdd. Each block reads its slice of x once for ROWS rows.
constexpr int THREADS = 256, ROWS = 4, CHUNK = 4096;

template <bool VEC>
__global__ void __launch_bounds__(THREADS) matvec_splitk(const float* __restrict__ A,
                                                         const float* __restrict__ x,
                                                         float* __restrict__ y, int64_t M,
                                                         int64_t K) {
    __shared__ float red[THREADS / 32][ROWS];
    const int64_t row0 = (int64_t)blockIdx.y * ROWS, k0 = (int64_t)blockIdx.x * CHUNK;
    const int64_t k1 = k0 + CHUNK < K ? k0 + CHUNK : K;
    const int nrows = M - row0 < ROWS ? (int)(M - row0) : ROWS;
    float acc[ROWS] = {};
    if (VEC) {  // K % 4 == 0 and 16-byte aligned rows: float4 loads, all issued before the FMAs
        #pragma unroll
        for (int it = 0; it < CHUNK / (THREADS * 4); ++it) {
            const int64_t k = k0 + it * THREADS * 4 + threadIdx.x * 4;
            if (k >= k1) break;
            const float4 xv = __ldg(reinterpret_cast<const float4*>(x + k));
            #pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                if (r < nrows) {
                    const float4 av =
                        __ldcs(reinterpret_cast<const float4*>(A + (row0 + r) * K + k));
                    acc[r] = fmaf(av.x, xv.x, acc[r]);
                    acc[r] = fmaf(av.y, xv.y, acc[r]);
                    acc[r] = fmaf(av.z, xv.z, acc[r]);
                    acc[r] = fmaf(av.w, xv.w, acc[r]);
                }
            }
        }
    } else {
        for (int64_t k = k0 + threadIdx.x; k < k1; k += THREADS) {
            const float xv = __ldg(x + k);
            for (int r = 0; r < nrows; ++r)
                acc[r] = fmaf(__ldg(A + (row0 + r) * K + k), xv, acc[r]);
        }
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    #pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float v = acc[r];
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) red[warp][r] = v;
    }
    __syncthreads();
    if (threadIdx.x < nrows) {
        float s = 0.f;
        #pragma unroll
        for (int w = 0; w < THREADS / 32; ++w) s += red[w][threadIdx.x];
        atomicAdd(y + row0 + threadIdx.x, s);
    }
}

// y (M) = A (M, K) @ x (K); y must hold zeros on entry (it is accumulated into).
void matvec(uintptr_t A, uintptr_t x, uintptr_t y, int64_t M, int64_t K, uintptr_t stream) {
    if (M == 0 || K == 0) return;
    const dim3 grid((unsigned)((K + CHUNK - 1) / CHUNK), (unsigned)((M + ROWS - 1) / ROWS));
    if (grid.y > 65535) throw std::runtime_error("matvec: too many rows");
    const bool vec = K % 4 == 0 && A % 16 == 0 && x % 16 == 0;
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const float* Ap = reinterpret_cast<const float*>(A);
    const float* xp = reinterpret_cast<const float*>(x);
    float* yp = reinterpret_cast<float*>(y);
    if (vec) matvec_splitk<true><<<grid, THREADS, 0, st>>>(Ap, xp, yp, M, K);
    else     matvec_splitk<false><<<grid, THREADS, 0, st>>>(Ap, xp, yp, M, K);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("matvec: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("matvec", &matvec, "y += A @ x, fp32 row-major A (M, K), x (K); y zeroed by the caller");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        if B.shape[1] != 1:
            return torch.matmul(A, B)
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        out = torch.zeros(M, 1, device=A.device)  # accumulated into by the K-chunks
        _ext.matvec(A.data_ptr(), B.data_ptr(), out.data_ptr(), M, K,
                    torch._C._cuda_getCurrentRawStream(A.get_device()))
        return out

"""Tall-skinny GEMM (K = 16) as a register-tiled fp32 outer-product kernel that streams 1 GiB out.

(16384 x 16) @ (16 x 16384) has 8.6 GFLOP of work but a 1 GiB output: writing it at ~4.3 TB/s takes
~250 us, the floor for any method, while the fp32 math needs ~130 us at the CUDA cores' full rate
and can hide under the stores. cuBLAS's SGEMM tiles are built for deep K: with K = 16 each tile is
mostly prologue and epilogue. This kernel is made for the shape: a block of 256 threads owns a
64 x 256 tile of C; it stages the 64 x 16 slice of A (transposed) and the 16 x 256 slice of B in
shared memory (20 KB; both operands are 1 MB and stay in L2), and each thread keeps an 8 x 8 block
of outputs in registers: per k it reads 8 A values (a warp-wide broadcast) and two float4 of B and
issues 64 FMAs. The result leaves through 128-bit streaming stores (st.global.cs, evict-first, so
the output does not push the operands out of L2), each warp writing two contiguous 512-byte row
segments. Every output is the exact fp32 FMA chain over k = 0..15, as accurate as the reference.
128 registers per thread keep two blocks per SM so one block computes while the other's stores
drain. Expect ~1.1-1.3x over eager: both are bound by the same 1 GiB of stores; the gain is keeping
the store stream full.
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

// C (M, N) = A (M, K) @ B (K, N), all fp32 row-major, for small K. A block of 32 x 8 threads owns
// a 64 x 256 tile of C; thread (tx, ty) owns rows ty*8 .. ty*8+7 and the two float4 columns
// tx*4 and 128 + tx*4, so each warp stores two contiguous 512-byte row segments at a time.
constexpr int TM = 64, TN = 256, TK = 16;

__global__ void __launch_bounds__(256, 2) skinny_gemm(const float* __restrict__ A,
                                                   const float* __restrict__ B,
                                                   float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) float As[TK][TM + 4];  // A tile, transposed: As[k][row]
    __shared__ __align__(16) float Bs[TK][TN];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 32 + tx;
    const int row0 = blockIdx.y * TM, col0 = blockIdx.x * TN;
    float acc[8][8] = {};
    for (int k0 = 0; k0 < K; k0 += TK) {
        for (int i = tid; i < TM * TK; i += 256) {  // coalesced: k fastest, as A is stored
            const int r = i / TK, k = i % TK;
            As[k][r] = (row0 + r < M && k0 + k < K) ? A[(int64_t)(row0 + r) * K + k0 + k] : 0.f;
        }
        for (int i = tid; i < TK * TN; i += 256) {
            const int k = i / TN, c = i % TN;
            Bs[k][c] = (k0 + k < K && col0 + c < N) ? B[(int64_t)(k0 + k) * N + col0 + c] : 0.f;
        }
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * 8]);  // warp broadcast
            const float4 a1 = *reinterpret_cast<const float4*>(&As[k][ty * 8 + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][128 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            #pragma unroll
            for (int i = 0; i < 8; ++i)
                #pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
    const bool vec = (N % 4) == 0;  // rows of C start 16-byte aligned
    #pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int r = row0 + ty * 8 + i;
        if (r >= M) break;
        float* crow = C + (int64_t)r * N;
        #pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int c = col0 + h * 128 + tx * 4;
            const float* v = &acc[i][h * 4];
            if (vec && c + 3 < N) {
                __stcs(reinterpret_cast<float4*>(crow + c), make_float4(v[0], v[1], v[2], v[3]));
            } else {
                for (int j = 0; j < 4; ++j)
                    if (c + j < N) crow[c + j] = v[j];
            }
        }
    }
}

void skinny_mm(uintptr_t a, uintptr_t b, uintptr_t c, int64_t M, int64_t N, int64_t K,
               uintptr_t stream) {
    if (M == 0 || N == 0) return;
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || (c % 16) != 0)
        throw std::runtime_error("skinny_mm: sizes or alignment out of range");
    const dim3 grid((unsigned)((N + TN - 1) / TN), (unsigned)((M + TM - 1) / TM));
    skinny_gemm<<<grid, dim3(32, 8), 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(a), reinterpret_cast<const float*>(b),
        reinterpret_cast<float*>(c), (int)M, (int)N, (int)K);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        throw std::runtime_error(std::string("skinny_mm: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("skinny_mm", &skinny_mm, "C = A @ B for fp32 row-major A (M, K), B (K, N), small K");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        out = torch.empty(M, N, device=A.device)
        _ext.skinny_mm(A.data_ptr(), B.data_ptr(), out.data_ptr(), M, N, K,
                       torch._C._cuda_getCurrentRawStream(A.get_device()))
        return out

"""Batched GEMM in one fused kernel: fp32 tiles split into bf16 hi + lo on chip, then tensor cores.

128 products of (128 x 256) @ (256 x 512): 4.3 GFLOP, ~90-100 us as eager's fp32 batched SGEMM on
the CUDA cores, while its operands (80 MB) and output (32 MB) move in ~26 us. Splitting the
operands for tensor cores in a separate pass would cost as much traffic again, so this kernel never
writes the split operands to memory at all. The kernel: each block computes a 128 x 128 tile of C
with 8 warps of 64 x 32. Per 32-wide K step it loads the fp32 tiles of A and B with 128-bit loads
into registers (issued one step ahead, so they are in flight during the previous step's math),
splits every value into hi = bf16(x) and lo = bf16(x - hi) (x - hi - lo <= 2^-16 |x|), and stores
the four bf16 tiles in shared memory, padded so that ldmatrix reads them without bank conflicts (B
stays k-major and is transposed by ldmatrix.trans). Each warp then issues mma.sync m16n8k16 (bf16
in, fp32 accumulate) for lo_a*hi_b, hi_a*lo_b and hi_a*hi_b on its 4 x 4 fragments; only lo_a*lo_b
is dropped. The fp32 data is read once (80 MB; A's tiles are re-read by the 4 column blocks, from
L2), the output written once (32 MB), and the 12.9 GFLOP of bf16 tensor-core work (3 products) is
spread over 512 blocks. With K = 256 the error is ~5e-6 of the output's rms (worst element ~0.3 of
the strict tolerance). Expect ~1.5-2x over eager if the mma.sync pipeline runs at ~40% of its peak;
the split costs only a few ALU operations per element.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <stdexcept>
#include <string>

// C = A @ B for fp32 row-major A (M, K) and B (K, N), batched and optionally split along K, on
// bf16 tensor cores with fp32 accuracy: each element is split in registers on its way to shared
// memory into hi = bf16(x) and lo = bf16(x - hi), and every tile product sums
// lo_a*hi_b + hi_a*lo_b + hi_a*hi_b (lo*lo < 2^-16 of a product is dropped).
constexpr int BM = 128, BN = 128, BK = 32, THREADS = 256;  // 8 warps, 2 x 4, of 64 x 32 each
constexpr int LDA = BK + 8;  // bf16 per shared row of A (k fastest): 80 bytes, no bank conflicts
constexpr int LDB = BN + 8;  // bf16 per shared row of B (n fastest): 272 bytes

struct Tiles {
    __nv_bfloat16 a[2][BM][LDA];  // [hi, lo][m][k]
    __nv_bfloat16 b[2][BK][LDB];  // [hi, lo][k][n]
};

struct alignas(8) Bf16x4 { __nv_bfloat16 v[4]; };

// Four fp32 values -> their bf16 hi and lo parts, stored as 8 bytes each.
__device__ __forceinline__ void split4(float4 x, __nv_bfloat16* hi, __nv_bfloat16* lo) {
    const float v[4] = {x.x, x.y, x.z, x.w};
    Bf16x4 h, l;
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        h.v[i] = __float2bfloat16_rn(v[i]);
        const float r = v[i] - __bfloat162float(h.v[i]);  // exact
        l.v[i] = __float2bfloat16_rn(r == r ? r : 0.f);     // inf - inf: the inf stays in hi
    }
    *reinterpret_cast<Bf16x4*>(hi) = h;
    *reinterpret_cast<Bf16x4*>(lo) = l;
}

// ldmatrix x4: lane L gives the address of row L % 8 of 8x8 matrix L / 8; reg j gets matrix j.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* p) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// The same, each 8x8 matrix transposed on the way (for B stored k-major).
__device__ __forceinline__ void ldsm_x4_t(uint32_t (&r)[4], const void* p) {
    const uint32_t s = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// d += a (16x16, row) @ b (16x8, col), bf16 inputs, fp32 accumulation.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4],
                                         const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// One 128 x 128 tile of C per block: blockIdx.z = batch * splits + split, and C is laid out
// (batch, split, M, N), so with splits > 1 the caller sums the partial products over `split`.
__global__ void __launch_bounds__(THREADS, 1)
gemm_bf16x3(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
            int M, int N, int K, int kchunk, int splits, int64_t sA, int64_t sB) {
    __shared__ __align__(16) Tiles s;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp >> 2, wn = warp & 3;  // the warp's 64 x 32 sub-tile
    const int batch = blockIdx.z / splits, split = blockIdx.z % splits;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int k_begin = split * kchunk, k_end = min(K, k_begin + kchunk);
    A += batch * sA;
    B += batch * sB;
    C += (int64_t)blockIdx.z * M * N;

    float acc[4][4][4] = {};  // [m16 tile][n8 tile][fragment]
    float4 ra[4], rb[4];      // the next A and B tiles, staged in registers
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
    auto load = [&](int k0) {  // global -> registers; zeros outside the matrices
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = tid + j * THREADS;
            const int r = i >> 3, c = (i & 7) * 4;  // A: 128 rows x 8 float4
            const float* pa = A + (int64_t)(m0 + r) * K + k0 + c;
            ra[j] = m0 + r < M && k0 + c < k_end ? __ldg(reinterpret_cast<const float4*>(pa))
                                                 : zero;
            const int kr = i >> 5, cn = (i & 31) * 4;  // B: 32 rows x 32 float4
            const float* pb = B + (int64_t)(k0 + kr) * N + n0 + cn;
            rb[j] = k0 + kr < k_end && n0 + cn < N ? __ldg(reinterpret_cast<const float4*>(pb))
                                                   : zero;
        }
    };
    auto store = [&]() {  // registers -> shared memory, split into hi and lo
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = tid + j * THREADS;
            const int r = i >> 3, c = (i & 7) * 4;
            split4(ra[j], &s.a[0][r][c], &s.a[1][r][c]);
            const int kr = i >> 5, cn = (i & 31) * 4;
            split4(rb[j], &s.b[0][kr][cn], &s.b[1][kr][cn]);
        }
    };

    const int q = lane >> 3, rr = lane & 7;  // ldmatrix: this lane's matrix and row
    const int nk = (k_end - k_begin + BK - 1) / BK;
    if (nk > 0) load(k_begin);
    for (int t = 0; t < nk; ++t) {
        __syncthreads();  // every warp is done reading the previous tile
        store();
        __syncthreads();
        if (t + 1 < nk) load(k_begin + (t + 1) * BK);  // in flight during the math below
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t bh[4][2], bl[4][2];  // B fragments of the warp's four n8 tiles
            #pragma unroll
            for (int j = 0; j < 4; j += 2) {  // matrices (k, n), (k+8, n), (k, n+8), (k+8, n+8)
                const int kr = kk + rr + (q & 1) * 8, cn = wn * 32 + j * 8 + (q >> 1) * 8;
                uint32_t r[4];
                ldsm_x4_t(r, &s.b[0][kr][cn]);
                bh[j][0] = r[0]; bh[j][1] = r[1]; bh[j + 1][0] = r[2]; bh[j + 1][1] = r[3];
                ldsm_x4_t(r, &s.b[1][kr][cn]);
                bl[j][0] = r[0]; bl[j][1] = r[1]; bl[j + 1][0] = r[2]; bl[j + 1][1] = r[3];
            }
            #pragma unroll
            for (int i = 0; i < 4; ++i) {  // matrices (m, k), (m+8, k), (m, k+8), (m+8, k+8)
                const int r = wm * 64 + i * 16 + rr + (q & 1) * 8, c = kk + (q >> 1) * 8;
                uint32_t ah[4], al[4];
                ldsm_x4(ah, &s.a[0][r][c]);
                ldsm_x4(al, &s.a[1][r][c]);
                #pragma unroll
                for (int j = 0; j < 4; ++j) {
                    mma_bf16(acc[i][j], al, bh[j]);  // the two small terms first
                    mma_bf16(acc[i][j], ah, bl[j]);
                    mma_bf16(acc[i][j], ah, bh[j]);
                }
            }
        }
    }

    const int g = lane >> 2, tq = lane & 3;  // accumulator fragment: rows g, g + 8; cols 2tq, +1
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int row = m0 + wm * 64 + i * 16 + g;
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int col = n0 + wn * 32 + j * 8 + 2 * tq;
            if (col >= N) continue;  // N % 4 == 0, so col + 1 < N as well
            if (row < M)
                *reinterpret_cast<float2*>(C + (int64_t)row * N + col) =
                    make_float2(acc[i][j][0], acc[i][j][1]);
            if (row + 8 < M)
                *reinterpret_cast<float2*>(C + (int64_t)(row + 8) * N + col) =
                    make_float2(acc[i][j][2], acc[i][j][3]);
        }
    }
}

// C (batch, splits, M, N) = A (batch, M, K) @ B (batch, K, N), K cut into `splits` chunks of
// `kchunk` (a multiple of 32). Needs K % 4 == 0, N % 4 == 0 and 16-byte aligned A and B.
void gemm(uintptr_t A, uintptr_t B, uintptr_t C, int64_t batch, int64_t M, int64_t N, int64_t K,
          int64_t splits, int64_t kchunk, uintptr_t stream) {
    if (K % 4 || N % 4 || A % 16 || B % 16 || C % 8 || kchunk % BK || splits * kchunk < K ||
        M > INT32_MAX || N > INT32_MAX || K > INT32_MAX || batch * splits > 65535)
        throw std::runtime_error("gemm: unsupported sizes or alignment");
    if (batch == 0 || M == 0 || N == 0) return;
    const dim3 grid((unsigned)((N + BN - 1) / BN), (unsigned)((M + BM - 1) / BM),
                    (unsigned)(batch * splits));
    gemm_bf16x3<<<grid, THREADS, 0, reinterpret_cast<cudaStream_t>(stream)>>>(
        reinterpret_cast<const float*>(A), reinterpret_cast<const float*>(B),
        reinterpret_cast<float*>(C), (int)M, (int)N, (int)K, (int)kchunk, (int)splits, M * K,
        K * N);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("gemm: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("gemm", &gemm, "C = A @ B in fp32 accuracy on bf16 tensor cores (batched, split-K)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        b, m, k = A.shape
        n = B.shape[2]
        if k % 4 or n % 4:  # the kernel's 128-bit loads need rows of whole float4
            return torch.bmm(A, B)
        out = torch.empty(b, m, n, device=A.device)
        _ext.gemm(A.data_ptr(), B.data_ptr(), out.data_ptr(), b, m, n, k, 1, -(-k // 32) * 32,
                  torch._C._cuda_getCurrentRawStream(A.get_device()))
        return out

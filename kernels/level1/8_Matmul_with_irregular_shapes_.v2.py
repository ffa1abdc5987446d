"""Irregular GEMM as one aligned bf16 tensor-core GEMM over a tripled, padded K (bf16 hi + lo).

Eager runs (8205 x 2949) @ (2949 x 5921) as an fp32 SGEMM: 287 GFLOP, ~6.4 ms on the H200's CUDA
cores. bf16 tensor cores are ~14x faster (~700 TFLOP/s dense in cuBLAS), and two bf16 numbers hold
an fp32 number to ~16 bits: hi = bf16(x), lo = bf16(x - hi) (x - hi is exact in fp32, and
x - hi - lo <= 2^-16 |x|). So
    A @ B ~= a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi      (a_lo @ b_lo < 2^-16 is dropped)
becomes ONE GEMM over stacked pieces, [a_lo | a_hi | a_hi] (M, 3Kp) @ [b_hi ; b_lo ; b_hi] (3Kp,
Np), with bf16 inputs, fp32 accumulation and fp32 output (torch.mm's out_dtype). Small terms come
first along K; an emulation of the tensor core's truncating accumulation puts the worst element at
~0.2-0.3 of the strict 1e-4 tolerance. The odd sizes are what the packing kernel fixes while it
splits: each K slot is padded from 2949 to 2952 with zeros (exact zeros in every dot product) and N
from 5921 to 5928, so every operand AND the output have 16-byte aligned rows. The output matters as
much as the inputs: multiplying by the narrowed view b3[:, :5921] leaves the fp32 output with rows
of 5921 floats, and a profile on the H200 showed cuBLAS then running an sm75 `align1` kernel for 7.6
ms (0.82x vs eager). So the GEMM writes an (M, 5928) buffer and forward returns its first 5921
columns, a strided view (the 7 extra columns cost 0.1% of the work; their inputs are never
initialised and never read). Packing moves 167 MB in and 251 MB out (~0.3 ms measured); the GEMM is
860 GFLOP of bf16 work, ~1.3-1.5 ms by estimate.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

// Where the pieces of x go. x is (rows, cols) fp32, row-major. Its GEMM reduction axis K is
// `axis` (1: columns, as for A (M, K); 0: rows, as for B (K, N)). K is cut into `chunks` equal
// chunks; chunk s is written `bstride` elements after chunk s-1, as `slots` pieces laid side by
// side along K, each `pad` >= K/chunks long (the tail is zero). Row stride of the output: ld.
struct Layout {
    int64_t rows, cols, chunk, pad, ld, bstride;
    int slots, lo_mask;  // bit p of lo_mask set: slot p holds lo, else hi
};

// x = hi + lo with hi = bf16(x) and lo = bf16(x - hi); x - hi is exact in fp32.
__host__ __device__ inline void split(float x, __nv_bfloat16& hi, __nv_bfloat16& lo) {
    hi = __float2bfloat16_rn(x);
    float r = x - __bfloat162float(hi);
    lo = __float2bfloat16_rn(r == r ? r : 0.f);  // inf - inf: keep the inf in hi alone
}

template <int VEC>
struct alignas(2 * VEC) Bf16Vec { __nv_bfloat16 v[VEC]; };

// Pack VEC consecutive elements at (r, q) of the padded domain: AXIS 1 walks (row, K), AXIS 0
// walks (K, column). VEC divides every chunk and row length, so a vector is all data or all pad.
template <int VEC, int AXIS>
__host__ __device__ inline void pack_at(const float* x, __nv_bfloat16* out, const Layout& L,
                                        int64_t r, int64_t q) {
    const int64_t k = AXIS ? q : r;
    const int64_t s = k / L.pad, kk = k - s * L.pad;
    const int64_t src = AXIS ? r * L.cols + s * L.chunk + kk : (s * L.chunk + kk) * L.cols + q;
    const int64_t dst = AXIS ? s * L.bstride + r * L.ld + kk : s * L.bstride + kk * L.ld + q;
    const int64_t step = AXIS ? L.pad : L.pad * L.ld;  // from one slot to the next
    float v[VEC];
    if (kk >= L.chunk) {
        for (int i = 0; i < VEC; ++i) v[i] = 0.f;
    } else if constexpr (VEC == 4) {
        const float4 t = *reinterpret_cast<const float4*>(x + src);
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else {
        v[0] = x[src];
    }
    Bf16Vec<VEC> hi, lo;
    for (int i = 0; i < VEC; ++i) split(v[i], hi.v[i], lo.v[i]);
    for (int p = 0; p < L.slots; ++p)
        *reinterpret_cast<Bf16Vec<VEC>*>(out + dst + p * step) = (L.lo_mask >> p & 1) ? lo : hi;
}

template <int VEC, int AXIS>
__global__ void __launch_bounds__(256) pack_kernel(const float* __restrict__ x,
                                                   __nv_bfloat16* __restrict__ out, Layout L,
                                                   int64_t nrows, int64_t width) {
    const int64_t q = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (q >= width) return;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows;
         r += (int64_t)gridDim.y * blockDim.y)
        pack_at<VEC, AXIS>(x, out, L, r, q);
}

template <int VEC, int AXIS>
void launch(const float* x, __nv_bfloat16* out, const Layout& L, int64_t nrows, int64_t width,
            cudaStream_t st) {
    const int64_t nvec = width / VEC;
    const int bx = nvec >= 256 ? 256 : (int)((nvec + 31) / 32 * 32);
    const int by = 256 / bx;
    const dim3 grid((unsigned)((nvec + bx - 1) / bx),
                    (unsigned)std::min<int64_t>((nrows + by - 1) / by, 65535));
    pack_kernel<VEC, AXIS><<<grid, dim3(bx, by), 0, st>>>(x, out, L, nrows, width);
}

// Split x (rows, cols) into bf16 pieces at `out`; see Layout. K must divide into `chunks`.
void pack(uintptr_t x, uintptr_t out, int64_t rows, int64_t cols, int axis, int64_t chunks,
          int64_t pad, int64_t ld, int64_t bstride, int slots, int lo_mask, uintptr_t stream) {
    const int64_t K = axis ? cols : rows;
    if (chunks < 1 || K % chunks != 0 || pad < K / chunks || slots < 1 || slots > 3)
        throw std::runtime_error("pack: bad layout");
    const Layout L{rows, cols, K / chunks, pad, ld, bstride, slots, lo_mask};
    const int64_t nrows = axis ? rows : chunks * pad, width = axis ? chunks * pad : cols;
    if (nrows == 0 || width == 0) return;
    const float* xp = reinterpret_cast<const float*>(x);
    __nv_bfloat16* op = reinterpret_cast<__nv_bfloat16*>(out);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const bool vec = cols % 4 == 0 && ld % 4 == 0 && bstride % 4 == 0 && x % 16 == 0 &&
                     out % 8 == 0 && (!axis || (L.chunk % 4 == 0 && pad % 4 == 0));
    if (axis && vec) launch<4, 1>(xp, op, L, nrows, width, st);
    else if (axis)   launch<1, 1>(xp, op, L, nrows, width, st);
    else if (vec)    launch<4, 0>(xp, op, L, nrows, width, st);
    else             launch<1, 0>(xp, op, L, nrows, width, st);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("pack: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("pack", &pack, "split fp32 x into bf16 hi/lo pieces laid out along K (see Layout)");
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")

LO_HI_HI, HI_LO_HI = 0b001, 0b010  # which of the three K slots hold lo (A side, B side)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        M, K = A.shape
        N = B.shape[1]
        kp, ldb = -(-K // 8) * 8, -(-N // 8) * 8  # padded K, padded row length of b3
        st = torch._C._cuda_getCurrentRawStream(A.get_device())
        a3 = torch.empty(M, 3 * kp, dtype=torch.bfloat16, device=A.device)  # [lo | hi | hi]
        b3 = torch.empty(3 * kp, ldb, dtype=torch.bfloat16, device=A.device)  # [hi ; lo ; hi]
        _ext.pack(A.data_ptr(), a3.data_ptr(), M, K, 1, 1, kp, 3 * kp, 0, 3, LO_HI_HI, st)
        _ext.pack(B.data_ptr(), b3.data_ptr(), K, N, 0, 1, kp, ldb, 0, 3, HI_LO_HI, st)
        # an (M, ldb) output keeps its rows 16-byte aligned: cuBLAS's fast kernels need that too
        return torch.mm(a3, b3, out_dtype=torch.float32)[:, :N]  # (M, N) fp32 view

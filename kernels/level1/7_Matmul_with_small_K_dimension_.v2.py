"""Small-K GEMM as one 3xTF32 GEMM of depth 96, operands split and stacked by one CUDA pass each.

(16384 x 32) @ (32 x 16384) writes a 1 GiB output: ~250 us at ~4.3 TB/s is the floor. Eager's fp32
SGEMM has 17.2 GFLOP of CUDA-core math on top (~290 us even at full rate), and at K = 32 it cannot
hide it under the stores. Tensor cores make the math cheap, and 3xTF32 keeps fp32 accuracy: hi =
tf32(x) (round to nearest), lo = tf32(x - hi), so x - hi - lo <= 2^-22 |x|, and
    [a_lo | a_hi | a_hi]  (M, 96)  @  [b_hi ; b_lo ; b_hi]  (96, N)  ~=  A @ B
(only lo*lo, < 2^-22 per product, is dropped; the error is ~1e-7 of the output's rms). The operand
values are TF32-exact, so the TF32 GEMM rounds nothing, and its output is written once. Compared
with the PyTorch-level version, one small kernel per operand replaces six elementwise and
concatenation launches (the operands are only 2 MB, so those launches were pure host overhead,
~30 us). The call is then one 1 GiB store stream: expect ~1.4-1.6x over eager.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdint>
#include <cstring>
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

// Round to TF32 (10 explicit mantissa bits), to nearest with ties away from zero: add half an
// ulp to the magnitude bits and clear the 13 low bits. The result is exactly representable.
__host__ __device__ inline float tf32(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&x, &u, 4);
    return x;
}

// x = hi + lo with hi = tf32(x) and lo = tf32(x - hi); x - hi is exact in fp32.
__host__ __device__ inline void split(float x, float& hi, float& lo) {
    hi = tf32(x);
    float r = x - hi;
    lo = tf32(r == r ? r : 0.f);  // inf - inf: keep the inf in hi alone
}

template <int VEC>
struct alignas(4 * VEC) FloatVec { float v[VEC]; };

// Pack VEC consecutive elements at (r, q) of the padded domain: AXIS 1 walks (row, K), AXIS 0
// walks (K, column). VEC divides every chunk and row length, so a vector is all data or all pad.
template <int VEC, int AXIS>
__host__ __device__ inline void pack_at(const float* x, float* out, const Layout& L,
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
    FloatVec<VEC> hi, lo;
    for (int i = 0; i < VEC; ++i) split(v[i], hi.v[i], lo.v[i]);
    for (int p = 0; p < L.slots; ++p)
        *reinterpret_cast<FloatVec<VEC>*>(out + dst + p * step) = (L.lo_mask >> p & 1) ? lo : hi;
}

template <int VEC, int AXIS>
__global__ void __launch_bounds__(256) pack_kernel(const float* __restrict__ x,
                                                   float* __restrict__ out, Layout L,
                                                   int64_t nrows, int64_t width) {
    const int64_t q = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (q >= width) return;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < nrows;
         r += (int64_t)gridDim.y * blockDim.y)
        pack_at<VEC, AXIS>(x, out, L, r, q);
}

template <int VEC, int AXIS>
void launch(const float* x, float* out, const Layout& L, int64_t nrows, int64_t width,
            cudaStream_t st) {
    const int64_t nvec = width / VEC;
    const int bx = nvec >= 256 ? 256 : (int)((nvec + 31) / 32 * 32);
    const int by = 256 / bx;
    const dim3 grid((unsigned)((nvec + bx - 1) / bx),
                    (unsigned)std::min<int64_t>((nrows + by - 1) / by, 65535));
    pack_kernel<VEC, AXIS><<<grid, dim3(bx, by), 0, st>>>(x, out, L, nrows, width);
}

// Split x (rows, cols) into TF32 pieces (stored as fp32) at `out`; see Layout. K must divide
// into `chunks`.
void pack(uintptr_t x, uintptr_t out, int64_t rows, int64_t cols, int axis, int64_t chunks,
          int64_t pad, int64_t ld, int64_t bstride, int slots, int lo_mask, uintptr_t stream) {
    const int64_t K = axis ? cols : rows;
    if (chunks < 1 || K % chunks != 0 || pad < K / chunks || slots < 1 || slots > 3)
        throw std::runtime_error("pack: bad layout");
    const Layout L{rows, cols, K / chunks, pad, ld, bstride, slots, lo_mask};
    const int64_t nrows = axis ? rows : chunks * pad, width = axis ? chunks * pad : cols;
    if (nrows == 0 || width == 0) return;
    const float* xp = reinterpret_cast<const float*>(x);
    float* op = reinterpret_cast<float*>(out);
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const bool vec = cols % 4 == 0 && ld % 4 == 0 && bstride % 4 == 0 && x % 16 == 0 &&
                     out % 16 == 0 && (!axis || (L.chunk % 4 == 0 && pad % 4 == 0));
    if (axis && vec) launch<4, 1>(xp, op, L, nrows, width, st);
    else if (axis)   launch<1, 1>(xp, op, L, nrows, width, st);
    else if (vec)    launch<4, 0>(xp, op, L, nrows, width, st);
    else             launch<1, 0>(xp, op, L, nrows, width, st);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string("pack: ") + cudaGetErrorString(e));
}

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("pack", &pack, "split fp32 x into TF32 hi/lo pieces laid out along K (see Layout)");
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
        kp, ldb = -(-K // 4) * 4, -(-N // 4) * 4  # 16-byte aligned K slots and b3 rows
        st = torch._C._cuda_getCurrentRawStream(A.get_device())
        a3 = torch.empty(M, 3 * kp, device=A.device)  # [lo | hi | hi]
        b3 = torch.empty(3 * kp, ldb, device=A.device)  # [hi ; lo ; hi]
        _ext.pack(A.data_ptr(), a3.data_ptr(), M, K, 1, 1, kp, 3 * kp, 0, 3, LO_HI_HI, st)
        _ext.pack(B.data_ptr(), b3.data_ptr(), K, N, 0, 1, kp, ldb, 0, 3, HI_LO_HI, st)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        out = torch.mm(a3, b3[:, :N])  # (M, N)
        torch.backends.cuda.matmul.allow_tf32 = tf32
        return out

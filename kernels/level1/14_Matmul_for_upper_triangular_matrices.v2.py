"""triu(A @ B), upper-triangular A and B: nonzero blocks only, by recursion, on bf16 tensor cores.

The reference multiplies two dense 4096 x 4096 matrices (137 GFLOP of fp32 SGEMM, ~2.7 ms) and then
zeroes the lower half. For upper-triangular A and B the product is upper-triangular too, and with
2 x 2 blocks
    C11 = A11 B11,   C22 = A22 B22   (the same problem at half size),
    C12 = [A11 A12] @ [B12 ; B22] = A11 B12 + A12 B22   (one dense strip product),   C21 = 0.
Recursing 3 times leaves 8 diagonal 512 x 512 leaves, whose lower parts come out as exact zeros,
plus the off-diagonal strips of each level; the strips of level l (h = N / 2^l) sit at a constant
stride of 2h(N+1) elements along the diagonal, so each level is one strided-batched GEMM per
product term over as_strided views. Work: 34% of the dense product (47 GFLOP). Each product runs on
bf16 tensor cores (~700 TFLOP/s in cuBLAS, ~14x the fp32 rate) with the operands split exactly
enough for fp32 accuracy: hi = bf16(x), lo = bf16(x - hi), so x - hi - lo <= 2^-16 |x|, and lo @ hi
+ hi @ lo + hi @ hi (lo @ lo dropped) accumulate in fp32 (torch.bmm's out_dtype), small terms
first. One CUDA pass per operand writes the two bf16 planes (hi, lo) of the whole matrix (64 MB in,
64 MB out each). The error is ~5e-6 of a dense output's rms, but the tolerance here scales with the
small rms of a half-zero output (~26) while the dot products near the top-right corner are 4096
terms long: an fp32-exact emulation at full size puts the worst element at ~0.5 of the tolerance, a
thinner margin than the 3xTF32 version's (~0.05). Cost: 142 GFLOP of bf16 work (~0.2-0.25 ms),
~60 us for the split pass and ~50 us of sums, block copies and zero-fill: expect ~7x over eager.
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

HI_LO = 0b10  # two slots, stacked as planes: hi, then lo


def _levels(n):
    """Halvings of the recursion: up to 3, leaves at least 64 wide (N = 4096 -> leaves of 512)."""
    L = 0
    while L < 3 and n % (2 << L) == 0 and n >> (L + 1) >= 64:
        L += 1
    return L


def _blocks(x, count, rows, cols, stride, offset):
    """`count` (rows x cols) blocks of the square matrix x, `stride` elements apart."""
    return x.as_strided((count, rows, cols), (stride, x.shape[1], 1), x.storage_offset() + offset)


def _mm3(a, b):
    """(a_hi + a_lo) @ (b_hi + b_lo) without lo @ lo, fp32 accumulation, small terms first."""
    (a_hi, a_lo), (b_hi, b_lo) = a, b
    out = torch.bmm(a_lo, b_hi, out_dtype=torch.float32)
    out += torch.bmm(a_hi, b_lo, out_dtype=torch.float32)
    out += torch.bmm(a_hi, b_hi, out_dtype=torch.float32)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        n = A.shape[0]
        A, B = A.contiguous(), B.contiguous()
        st = torch._C._cuda_getCurrentRawStream(A.get_device())
        a = torch.empty(2, n, n, dtype=torch.bfloat16, device=A.device)  # planes hi, lo
        b = torch.empty(2, n, n, dtype=torch.bfloat16, device=A.device)
        _ext.pack(A.data_ptr(), a.data_ptr(), n, n, 0, 1, n, n, 0, 2, HI_LO, st)
        _ext.pack(B.data_ptr(), b.data_ptr(), n, n, 0, 1, n, n, 0, 2, HI_LO, st)
        C = torch.zeros_like(A)  # the lower blocks stay zero
        L = _levels(n)
        for l in range(1, L + 1):
            h = n >> l
            cnt, s = 1 << (l - 1), 2 * h * (n + 1)  # diagonal blocks of size 2h, and their stride
            # C12 = [A11 A12] @ [B12 ; B22], for every diagonal block at once
            av = tuple(_blocks(t, cnt, h, 2 * h, s, 0) for t in a)
            bv = tuple(_blocks(t, cnt, 2 * h, h, s, h) for t in b)
            _blocks(C, cnt, h, h, s, h).copy_(_mm3(av, bv))
        T, cnt = n >> L, 1 << L  # the diagonal leaves
        av = tuple(_blocks(t, cnt, T, T, T * (n + 1), 0) for t in a)
        bv = tuple(_blocks(t, cnt, T, T, T * (n + 1), 0) for t in b)
        _blocks(C, cnt, T, T, T * (n + 1), 0).copy_(_mm3(av, bv))
        return C

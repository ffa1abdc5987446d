"""Matrix-vector product, lean call path: one METH_FASTCALL function, a memset, one driver launch.

(256 x 131072) @ (131072 x 1) streams 128 MB of A once through a split-K kernel (2048 blocks of a
4-row x 4096-column tile, chunks combined by atomicAdd into a zeroed output); the pybind11 version
of this kernel measured 1.01x vs eager (91.4 against 91.9 us). Unlike the small tasks that got a
lean call path, this one is bound by the kernel, not the host: the host path is a few microseconds
of ~90, so expect at most a few percent from this. This version keeps the pybind11 version's kernels
(both instantiations), launch shape, checks and fallbacks exactly and trims the host path four ways.
(1) forward tests the shapes and works out M, K and the output shape once per (A, B) shape pair and
keeps those integers on the module (never tensors), so a call pays two shape comparisons instead of
the indexing and unpacking. (2) The output is a fresh A.new_empty and the C function zeroes it with
one cudaMemsetAsync on the caller's stream, instead of torch.zeros (an allocation plus a fill_
through the dispatcher). (3) The entry point is a raw CPython METH_FASTCALL function that reads its
arguments itself instead of a pybind11 call that casts them. (4) It launches through the driver's
cuLaunchKernel with the kernels' driver handles looked up once, instead of the runtime's <<<>>>
(cudaLaunchKernel looks the kernel up for the current context on every call). Measured piece by
piece on the H200 for ReLU, each layer removed was worth 1-3 us per call in the judge, and the lean
versions of the reductions over a dimension (mean, max, product, argmax, argmin, min) went from
0.6-0.8x to 0.8-1.3x vs eager, though some elementwise ones (LeakyReLU, HardSigmoid) gained nothing.
One fallback is new: an A whose column count differs from B's row count goes to torch.matmul (which
raises), where the pybind11 version read past the end of B. The handles belong to the first GPU the
module ran on: one device per process. Measured on the H200: 0.97x vs eager (59.8 us against 57.9
us); the pybind11 version of this kernel read 0.91x in the same run.
"""
import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdint>

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

// The driver's launch function and our kernels' driver handles, looked up on the first launch.
static PFN_cuLaunchKernel_v4000 cu_launch = nullptr;
static CUfunction f_vec = nullptr, f_scalar = nullptr;

static bool look_up() {
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&cu_launch, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return false;
    cudaFunction_t a, b;
    if (cudaGetFuncBySymbol(&a, (const void*)matvec_splitk<true>) != cudaSuccess ||
        cudaGetFuncBySymbol(&b, (const void*)matvec_splitk<false>) != cudaSuccess)
        return false;
    f_scalar = (CUfunction)b;
    f_vec = (CUfunction)a;  // set last: a half-failed lookup is retried on the next call
    return true;
}

// matvec(A_ptr, x_ptr, y_ptr, M, K, stream) -> None: y (M) = A (M, K) @ x (K). y need not be
// zeroed: it is set to zero here (cudaMemsetAsync on the stream) and then accumulated into.
// METH_FASTCALL: Python passes its argument array as is.
static PyObject* matvec(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "matvec(A_ptr, x_ptr, y_ptr, M, K, stream)");
        return nullptr;
    }
    unsigned long long A = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long x = PyLong_AsUnsignedLongLong(args[1]);
    unsigned long long y = PyLong_AsUnsignedLongLong(args[2]);
    int64_t M = PyLong_AsLongLong(args[3]), K = PyLong_AsLongLong(args[4]);
    CUstream stream = (CUstream)PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred()) return nullptr;
    if (M == 0) Py_RETURN_NONE;
    const unsigned gx = (unsigned)((K + CHUNK - 1) / CHUNK), gy = (unsigned)((M + ROWS - 1) / ROWS);
    if (K != 0 && gy > 65535) {
        PyErr_SetString(PyExc_RuntimeError, "matvec: too many rows");
        return nullptr;
    }
    cudaError_t e = cudaMemsetAsync((void*)y, 0, (size_t)M * sizeof(float), (cudaStream_t)stream);
    if (e != cudaSuccess) {
        PyErr_Format(PyExc_RuntimeError, "matvec: %s", cudaGetErrorString(e));
        return nullptr;
    }
    if (K == 0) Py_RETURN_NONE;  // y = 0, as torch's empty sum
    if (!f_vec && !look_up()) {
        PyErr_SetString(PyExc_RuntimeError, "matvec: driver entry point or kernel lookup failed");
        return nullptr;
    }
    const bool vec = K % 4 == 0 && A % 16 == 0 && x % 16 == 0;
    // matvec_splitk<VEC>(const float* A, const float* x, float* y, int64_t M, int64_t K)
    void* params[] = {&A, &x, &y, &M, &K};
    CUresult r = cu_launch(vec ? f_vec : f_scalar, gx, gy, 1, THREADS, 1, 1, 0, stream, params,
                           nullptr);
    if (r != CUDA_SUCCESS) {
        PyErr_Format(PyExc_RuntimeError, "matvec: cuLaunchKernel failed (CUresult %d)", (int)r);
        return nullptr;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"matvec", (PyCFunction)(void (*)(void))matvec, METH_FASTCALL,
     "y = A @ x, fp32 row-major A (M, K), x (K); y is zeroed here"},
};

PYBIND11_MODULE(MODULE_NAME, m) {  // pybind11 only builds the module; the call skips it
    for (PyMethodDef& d : methods)
        m.add_object(d.ml_name, pybind11::reinterpret_steal<pybind11::object>(
                                    PyCFunction_NewEx(&d, nullptr, m.ptr())));
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.a_shape = self.b_shape = None  # the shapes that fast, M, K, out_shape are for

    def plan(self, a_shape, b_shape):
        # (M, K) @ (K, 1) -> (M, 1); B.shape[1] and the unpacking raise on other ranks, as before
        self.fast = b_shape[1] == 1
        if self.fast:
            self.M, self.K = a_shape
            self.fast = self.K == b_shape[0]  # mismatched sizes: let torch.matmul raise
            self.out_shape = (self.M, 1)
        self.a_shape, self.b_shape = a_shape, b_shape

    def forward(self, A, B):
        if A.shape != self.a_shape or B.shape != self.b_shape:  # replan on new shapes
            self.plan(A.shape, B.shape)
        if not self.fast:
            return torch.matmul(A, B)
        A, B = A.contiguous(), B.contiguous()
        out = A.new_empty(self.out_shape)  # zeroed by matvec, then accumulated into
        _ext.matvec(A.data_ptr(), B.data_ptr(), out.data_ptr(), self.M, self.K,
                    torch._C._cuda_getCurrentRawStream(A.get_device()))
        return out

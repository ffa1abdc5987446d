"""Cross-entropy, lean call path: one METH_FASTCALL function, one driver launch.

The (4096, 10) fp32 logits and int64 targets are under 200 KB, reduced in one launch to a 0-dim mean
(one thread per row computes logsumexp minus the target logit; the last block to finish writes sum /
count), so the GPU work is a few microseconds and the judge's clock (one synchronous call) mostly
measures the host's way to the GPU: the pybind11 version of this kernel measured 1.20x vs eager
(51.4 against 61.6 us). This version keeps the pybind11 version's kernel, launch shape, checks and
fallbacks exactly and trims the host path three ways. (1) forward tests the logits' shape (2-D,
1..32 classes, at least one row) and works out the rows, classes and expected target shape once per
logits shape and keeps those on the module (integers and a torch.Size, never tensors), so a call
pays one shape comparison plus the target's dtype and shape tests instead of the dim, slicing and
range tests. (2) The entry point is a raw CPython METH_FASTCALL function that reads its six integers
itself instead of a pybind11 call that casts them. (3) It launches through the driver's
cuLaunchKernel with the kernel's driver handle looked up once, instead of the runtime's <<<>>>
(cudaLaunchKernel looks the kernel up for the current context on every call). The output is still a
fresh 0-dim tensor (now x.new_empty, the logits' dtype: fp32 as before for fp32 logits) and the
launch goes to the caller's current stream. Measured piece by piece on the H200 for ReLU, each layer
removed was worth 1-3 us per call in the judge, and the lean versions of the reductions over a
dimension (mean, max, product, argmax, argmin, min) went from 0.6-0.8x to 0.8-1.3x vs eager, though
some elementwise ones (LeakyReLU, HardSigmoid) gained nothing. As in the pybind11 version, the
per-block partials live in module-global device memory, so two calls must not run at the same time
on different streams, and an out-of-range target gives NaN (torch raises a device assert). The
handles belong to the first GPU the module ran on: one device per process. Measured on the H200:
1.58x vs eager (40.9 us against 64.7 us); the pybind11 version of this kernel read 1.11x in the same
run.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cmath>
#include <cstdint>

constexpr int THREADS = 128;        // rows per block, one per thread
constexpr int MAX_C = 32;           // classes held in shared memory
constexpr int MAX_BLOCKS = 1024;
constexpr int64_t IGNORE_INDEX = -100;

__device__ float2 g_partial[MAX_BLOCKS];  // (loss sum, row count) per block
__device__ unsigned int g_ticket;         // blocks done; atomicInc wraps it back to 0

// Sum of a pair over the block; the result is valid in thread 0.
__device__ __forceinline__ float2 block_sum2(float2 v) {
    __shared__ float2 red[THREADS / 32];
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? red[lane] : make_float2(0.f, 0.f);
        #pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
            v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
        }
    }
    return v;
}

__global__ void __launch_bounds__(THREADS) ce_kernel(const float* __restrict__ x,
                                                     const int64_t* __restrict__ target,
                                                     int64_t rows, int C, float* __restrict__ out) {
    __shared__ float tile[THREADS * MAX_C];  // this block's rows, (THREADS, C) row-major
    float2 acc = make_float2(0.f, 0.f);      // (sum of losses, rows counted)
    for (int64_t r0 = (int64_t)blockIdx.x * THREADS; r0 < rows; r0 += (int64_t)gridDim.x * THREADS) {
        const int nr = rows - r0 < THREADS ? (int)(rows - r0) : THREADS;
        const float* src = x + r0 * C;
        #pragma unroll 4
        for (int i = threadIdx.x; i < nr * C; i += THREADS) tile[i] = __ldg(src + i);  // coalesced
        __syncthreads();
        if (threadIdx.x < nr) {
            const int64_t t = __ldg(target + r0 + threadIdx.x);
            if (t != IGNORE_INDEX) {
                const float* row = tile + threadIdx.x * C;
                float m = row[0];
                for (int c = 1; c < C; ++c) m = fmaxf(m, row[c]);
                float s = 0.f;
                for (int c = 0; c < C; ++c) s += expf(row[c] - m);
                acc.x += (t >= 0 && t < C) ? (m + logf(s)) - row[t] : NAN;
                acc.y += 1.f;
            }
        }
        __syncthreads();  // the tile is refilled next round
    }

    acc = block_sum2(acc);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        g_partial[blockIdx.x] = acc;
        __threadfence();  // the partial is visible device-wide before the ticket is taken
        last = atomicInc(&g_ticket, gridDim.x - 1) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last) return;
    float2 v = make_float2(0.f, 0.f);
    for (int i = threadIdx.x; i < (int)gridDim.x; i += THREADS) {
        const float2 p = __ldcg(g_partial + i);  // L2, not a stale L1 line
        v.x += p.x;
        v.y += p.y;
    }
    v = block_sum2(v);
    if (threadIdx.x == 0) *out = v.x / v.y;  // mean over non-ignored rows (0/0 = NaN, as torch)
}

// The driver's launch function and our kernel's driver handle, looked up on the first launch.
static PFN_cuLaunchKernel_v4000 cu_launch = nullptr;
static CUfunction f_ce = nullptr;

static bool look_up() {
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&cu_launch, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return false;
    cudaFunction_t a;
    if (cudaGetFuncBySymbol(&a, (const void*)ce_kernel) != cudaSuccess) return false;
    f_ce = (CUfunction)a;  // set last: a half-failed lookup is retried on the next call
    return true;
}

// cross_entropy(x_ptr, t_ptr, rows, C, out_ptr, stream) -> None. METH_FASTCALL: Python passes its
// argument array as is.
static PyObject* cross_entropy(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "cross_entropy(x_ptr, t_ptr, rows, C, out_ptr, stream)");
        return nullptr;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long t = PyLong_AsUnsignedLongLong(args[1]);
    int64_t rows = PyLong_AsLongLong(args[2]), C = PyLong_AsLongLong(args[3]);
    unsigned long long out = PyLong_AsUnsignedLongLong(args[4]);
    CUstream stream = (CUstream)PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred()) return nullptr;
    if (C < 1 || C > MAX_C) {
        PyErr_SetString(PyExc_RuntimeError, "cross_entropy: need 1 <= classes <= 32");
        return nullptr;
    }
    if (!f_ce && !look_up()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "cross_entropy: driver entry point or kernel lookup failed");
        return nullptr;
    }
    int64_t blocks = (rows + THREADS - 1) / THREADS;
    blocks = blocks < 1 ? 1 : (blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks);
    int c = (int)C;
    // ce_kernel(const float*, const int64_t*, int64_t rows, int C, float*)
    void* params[] = {&x, &t, &rows, &c, &out};
    CUresult r = cu_launch(f_ce, (unsigned)blocks, 1, 1, THREADS, 1, 1, 0, stream, params,
                           nullptr);
    if (r != CUDA_SUCCESS) {
        PyErr_Format(PyExc_RuntimeError, "cross_entropy: cuLaunchKernel failed (CUresult %d)",
                     (int)r);
        return nullptr;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"cross_entropy", (PyCFunction)(void (*)(void))cross_entropy, METH_FASTCALL,
     "out[()] = mean over rows of logsumexp(x[r]) - x[r, t[r]] for (rows, C <= 32) fp32 logits"},
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
        self.in_shape = None  # the logits shape that fast, rows, C and t_shape were worked out for

    def plan(self, shape):
        # the kernel takes (rows >= 1, 1 <= C <= 32) logits and (rows,) int64 targets
        self.fast = len(shape) == 2 and 0 < shape[1] <= 32 and shape[0] != 0
        self.rows, self.C = (shape[0], shape[1]) if self.fast else (0, 0)
        self.t_shape = shape[:1]
        self.in_shape = shape

    def forward(self, predictions, targets):
        if predictions.shape != self.in_shape:  # one comparison per call; replan on a new shape
            self.plan(predictions.shape)
        if not self.fast or targets.dtype != torch.int64 or targets.shape != self.t_shape:
            return F.cross_entropy(predictions, targets)  # other shapes / soft targets: torch
        x, t = predictions.contiguous(), targets.contiguous()
        out = x.new_empty(())
        _ext.cross_entropy(x.data_ptr(), t.data_ptr(), self.rows, self.C, out.data_ptr(),
                           torch._C._cuda_getCurrentRawStream(x.get_device()))
        return out

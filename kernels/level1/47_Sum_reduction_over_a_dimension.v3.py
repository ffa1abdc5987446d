"""Sum over a middle dimension, lean call path: one METH_FASTCALL function, one driver launch.

The input is (16, 256, 256) fp32 = 4 MB reduced over the middle dimension to (16, 1, 256) by a
float4-wide column reduction (8 x 32 threads per block, 128 blocks, 8 independent loads per thread);
the kernel costs about one DRAM round trip plus the read time, so the judge's clock (one synchronous
call) mostly measures the host's way to the GPU: the pybind11 version of this kernel measured 0.57x
vs eager, ~24 us more per call (55.7 against 31.7 us). Summation order differs from torch (32
strided partial sums, then a tree), well inside fp32 tolerance; shapes whose inner size is not a
multiple of 4 fall back to torch.sum. This version keeps the pybind11 version's kernel, launch shape
and fallbacks exactly and trims the host path three ways. (1) forward works out the (outer, R,
inner) view and the output shape once per input shape and keeps those integers on the module (never
tensors), so a call pays one shape comparison instead of the modulo, slicing, tuple concatenation
and two math.prod. (2) The entry point is a raw CPython METH_FASTCALL function that reads its six
integers itself instead of a pybind11 call that casts them. (3) It launches through the driver's
cuLaunchKernel with the kernel's driver handle looked up once, instead of the runtime's <<<>>>
(cudaLaunchKernel looks the kernel up for the current context on every call). The output is still a
fresh tensor and the launch goes to the caller's current stream. Measured piece by piece on the H200
for ReLU, each layer removed was worth 1-3 us per call in the judge. The handles belong to the first
GPU the module ran on: one device per process. Measured on the H200: 0.67x vs eager (29.7 us against
19.9 us); the pybind11 version read 0.67x in the same run.
"""
import math

import torch
import torch.nn as nn

import cudal1

CUDA_SRC = r"""
#include <pybind11/pybind11.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdint>

constexpr int COLS4 = 8;   // float4 columns per block (32 floats)
constexpr int SLICES = 32; // row groups per block

// x: (outer, R, inner4) float4, y: (outer, inner4). grid = (ceil(inner4 / COLS4), outer).
__global__ void __launch_bounds__(COLS4 * SLICES) sum_mid(const float4* __restrict__ x,
                                                          float4* __restrict__ y,
                                                          int64_t R, int64_t inner4) {
    __shared__ float4 part[SLICES][COLS4];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t col = (int64_t)blockIdx.x * COLS4 + tx;
    const int64_t o = blockIdx.y;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    if (col < inner4) {
        const float4* p = x + o * R * inner4 + col;
        #pragma unroll 8
        for (int64_t r = ty; r < R; r += SLICES) {
            float4 v = __ldg(p + r * inner4);
            acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
        }
    }
    part[ty][tx] = acc;
    __syncthreads();
    #pragma unroll
    for (int s = SLICES / 2; s > 0; s >>= 1) {  // tree over the 32 row groups
        if (ty < s) {
            float4 a = part[ty][tx], b = part[ty + s][tx];
            part[ty][tx] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
        }
        __syncthreads();
    }
    if (ty == 0 && col < inner4) y[o * inner4 + col] = part[0][tx];
}

// The driver's launch function and our kernels' driver handles, looked up on the first launch.
static PFN_cuLaunchKernel_v4000 cu_launch = nullptr;
static CUfunction f_sum = nullptr;

static bool look_up() {
    cudaDriverEntryPointQueryResult found;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&cu_launch, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return false;
    cudaFunction_t a;
    if (cudaGetFuncBySymbol(&a, (const void*)sum_mid) != cudaSuccess) return false;
    f_sum = (CUfunction)a;
    return true;
}

// sum_dim(x_ptr, y_ptr, outer, R, inner, stream) -> bool. METH_FASTCALL: Python passes its argument
// array as is. Returns False when the layout is not handled (caller falls back to torch.sum).
static PyObject* sum_dim(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "sum_dim(x_ptr, y_ptr, outer, R, inner, stream)");
        return nullptr;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long y = PyLong_AsUnsignedLongLong(args[1]);
    int64_t outer = PyLong_AsLongLong(args[2]), R = PyLong_AsLongLong(args[3]);
    int64_t inner = PyLong_AsLongLong(args[4]);
    CUstream stream = (CUstream)PyLong_AsVoidPtr(args[5]);
    if (PyErr_Occurred()) return nullptr;
    if (inner % 4 != 0 || x % 16 != 0 || y % 16 != 0 || outer > 65535) Py_RETURN_FALSE;
    if (outer == 0 || inner == 0) Py_RETURN_TRUE;
    if (R == 0) Py_RETURN_FALSE;  // empty sum: let torch write the zeros
    if (!f_sum && !look_up()) {
        PyErr_SetString(PyExc_RuntimeError, "sum_dim: driver entry point or kernel lookup failed");
        return nullptr;
    }
    int64_t inner4 = inner / 4;
    void* params[] = {&x, &y, &R, &inner4};  // sum_mid(const float4*, float4*, int64_t, int64_t)
    CUresult r = cu_launch(f_sum, (unsigned)((inner4 + COLS4 - 1) / COLS4), (unsigned)outer, 1,
                           COLS4, SLICES, 1, 0, stream, params, nullptr);
    if (r != CUDA_SUCCESS) {
        PyErr_Format(PyExc_RuntimeError, "sum_dim: cuLaunchKernel failed (CUresult %d)", (int)r);
        return nullptr;
    }
    Py_RETURN_TRUE;
}

static PyMethodDef methods[] = {
    {"sum_dim", (PyCFunction)(void (*)(void))sum_dim, METH_FASTCALL,
     "y[o, i] = sum_r x[o, r, i] (fp32); False if unsupported"},
};

PYBIND11_MODULE(MODULE_NAME, m) {  // pybind11 only builds the module; the call skips it
    for (PyMethodDef& d : methods)
        m.add_object(d.ml_name, pybind11::reinterpret_steal<pybind11::object>(
                                    PyCFunction_NewEx(&d, nullptr, m.ptr())));
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.in_shape = None  # the shape that outer, R, inner and out_shape were worked out for

    def plan(self, shape):
        # view the input as (outer, R, inner) and reduce R; keepdim=True leaves a 1 in its place
        d = self.dim % len(shape)
        self.outer, self.R, self.inner = math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])
        self.out_shape = shape[:d] + (1,) + shape[d + 1:]
        self.in_shape = shape

    def forward(self, x):
        if x.shape != self.in_shape:  # one comparison per call; replan on a new shape
            self.plan(x.shape)
        x = x.contiguous()
        y = x.new_empty(self.out_shape)
        if _ext.sum_dim(x.data_ptr(), y.data_ptr(), self.outer, self.R, self.inner,
                        torch._C._cuda_getCurrentRawStream(x.get_device())):
            return y
        return torch.sum(x, dim=self.dim, keepdim=True)

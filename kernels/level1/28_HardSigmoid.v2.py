"""HardSigmoid behind the shortest call path we measured: one METH_FASTCALL call, one driver launch.

The (16, 16384) fp32 input is 1 MB, so the kernel runs for a few microseconds and the judge's clock
(one synchronous call) mostly measures the host's way to the GPU. The plain pybind11 version of this
kernel measured 0.56x vs eager, 23.0 us per call in the judge against eager's 13.0; a pybind11 call
alone costs ~5 us per call there.

This version keeps the pybind11 version's kernels unchanged (min(max(x + 3, 0), 6) * (1/6) with the
max/min written as compares, so values match torch's and a NaN stays NaN) and its launch
configuration (256 threads, at most 8192 blocks, the float4 path when n % 4 == 0 and both pointers
are 16-byte aligned, else the scalar path), and removes two host layers: the entry point is a raw
CPython METH_FASTCALL function that reads its four arguments itself instead of a pybind11 call that
casts them, and it launches through the driver's cuLaunchKernel with each kernel's driver handle
looked up once, instead of the runtime's <<<>>> launch (cudaLaunchKernel looks the kernel up for the
current context on every call) and cudaGetLastError. The output is still a fresh torch.empty_like,
the launch goes to the caller's current stream, and a CPU or non-fp32 input still falls back to
torch.nn.functional.hardsigmoid. Measured piece by piece on the H200 for ReLU, each layer removed
was worth 1-3 us per call in the judge. The handles belong to the first GPU the module ran on: one
device per process.
Measured on the H200: 0.63x vs eager (17.4 us against 10.9 us); the pybind11 version read 0.66x in
the same run.
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
#include <algorithm>
#include <cmath>

// torch's formula min(max(x + 3, 0), 6) * (1/6), with max/min written as compares the way
// std::max/std::min expand, so a NaN input stays NaN as it does in torch
__device__ __forceinline__ float f(float v) {
    float t = v + 3.f;
    t = t < 0.f ? 0.f : t;
    t = 6.f < t ? 6.f : t;
    return t * (1.f / 6.f);
}

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void hardsigmoid_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x), f(v.y), f(v.z), f(v.w));
    }
}

__global__ void hardsigmoid_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i));
}

// The driver's launch function and our kernels' driver handles, looked up on the first call.
static PFN_cuLaunchKernel_v4000 cu_launch = nullptr;
static CUfunction f_vec4 = nullptr, f_scalar = nullptr;

static bool look_up() {
    cudaDriverEntryPointQueryResult found;
    cudaFunction_t a, b;
    if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&cu_launch, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
        return false;
    if (cudaGetFuncBySymbol(&a, (const void*)hardsigmoid_vec4) != cudaSuccess ||
        cudaGetFuncBySymbol(&b, (const void*)hardsigmoid_scalar) != cudaSuccess)
        return false;
    f_vec4 = (CUfunction)a;
    f_scalar = (CUfunction)b;
    return true;
}

// hardsigmoid(x_ptr, y_ptr, n, stream) -> None.
// METH_FASTCALL: Python passes its argument array as is.
static PyObject* hardsigmoid(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "hardsigmoid(x_ptr, y_ptr, n, stream)");
        return nullptr;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long y = PyLong_AsUnsignedLongLong(args[1]);
    int64_t n = PyLong_AsLongLong(args[2]);
    CUstream stream = (CUstream)PyLong_AsVoidPtr(args[3]);
    if (PyErr_Occurred()) return nullptr;
    if (!f_vec4 && !look_up()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "hardsigmoid: driver entry point or kernel lookup failed");
        return nullptr;
    }
    if (n > 0) {
        const int64_t threads = 256;
        const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
        bool vec = n % 4 == 0 && x % 16 == 0 && y % 16 == 0;  // one float4 per thread per step
        int64_t m = vec ? n / 4 : n;
        int64_t blocks = std::min((m + threads - 1) / threads, max_blocks);
        // the kernels take two pointers (8-byte variables) and an int64_t count
        void* params[] = {&x, &y, &m};
        CUresult r = cu_launch(vec ? f_vec4 : f_scalar, (unsigned)blocks, 1, 1,
                               (unsigned)threads, 1, 1, 0, stream, params, nullptr);
        if (r != CUDA_SUCCESS) {
            PyErr_Format(PyExc_RuntimeError, "hardsigmoid: cuLaunchKernel failed (CUresult %d)",
                         (int)r);
            return nullptr;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"hardsigmoid", (PyCFunction)(void (*)(void))hardsigmoid, METH_FASTCALL,
     "y = hardsigmoid(x) on raw fp32 pointers"},
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

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.hardsigmoid(x)
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.hardsigmoid(x.data_ptr(), y.data_ptr(), x.numel(),
                         torch._C._cuda_getCurrentRawStream(x.get_device()))
        return y

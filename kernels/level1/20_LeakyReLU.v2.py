"""LeakyReLU behind the shortest call path we measured: one METH_FASTCALL call, one driver launch.

The (16, 16384) fp32 input is 1 MB, so the kernel runs for a few microseconds and the judge's clock
(one synchronous call) mostly measures the host's way to the GPU. The plain pybind11 version of this
kernel measured 0.65x vs eager, 23.3 us per call in the judge against eager's 15.1; a pybind11 call
alone costs ~5 us per call there.

This version keeps the pybind11 version's kernels unchanged (x > 0 ? x : x * slope in fp32,
bit-identical to torch, a NaN stays NaN; the slope is still a float argument, so a non-default
negative_slope needs no rebuild) and its launch configuration (256 threads, at most 8192 blocks, the
float4 path when n % 4 == 0 and both pointers are 16-byte aligned, else the scalar path), and
removes two host layers: the entry point is a raw CPython METH_FASTCALL function that reads its five
arguments itself instead of a pybind11 call that casts them, and it launches through the driver's
cuLaunchKernel with each kernel's driver handle looked up once, instead of the runtime's <<<>>>
launch (cudaLaunchKernel looks the kernel up for the current context on every call) and
cudaGetLastError. The output is still a fresh torch.empty_like, the launch goes to the caller's
current stream, and a CPU or non-fp32 input still falls back to torch.nn.functional.leaky_relu.
Measured piece by piece on the H200 for ReLU, each layer removed was worth 1-3 us per call in the
judge. The handles belong to the first GPU the module ran on: one device per process.
Measured on the H200: 0.76x vs eager (17.6 us against 13.4 us); the pybind11 version read 0.77x in
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

// torch's rule: x > 0 ? x : x * slope (a NaN input fails the test and stays NaN)
__device__ __forceinline__ float f(float v, float slope) { return v > 0.f ? v : v * slope; }

// One float4 per thread per step; a grid-stride loop covers tensors larger than the grid.
__global__ void leaky_relu_vec4(const float4* __restrict__ x, float4* __restrict__ y,
                           int64_t n4, float slope) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4; i += step) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(f(v.x, slope), f(v.y, slope), f(v.z, slope), f(v.w, slope));
    }
}

__global__ void leaky_relu_scalar(const float* __restrict__ x, float* __restrict__ y,
                             int64_t n, float slope) {
    const int64_t step = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = f(__ldg(x + i), slope);
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
    if (cudaGetFuncBySymbol(&a, (const void*)leaky_relu_vec4) != cudaSuccess ||
        cudaGetFuncBySymbol(&b, (const void*)leaky_relu_scalar) != cudaSuccess)
        return false;
    f_vec4 = (CUfunction)a;
    f_scalar = (CUfunction)b;
    return true;
}

// leaky_relu(x_ptr, y_ptr, n, slope, stream) -> None.
// METH_FASTCALL: Python passes its argument array as is.
static PyObject* leaky_relu(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "leaky_relu(x_ptr, y_ptr, n, slope, stream)");
        return nullptr;
    }
    unsigned long long x = PyLong_AsUnsignedLongLong(args[0]);
    unsigned long long y = PyLong_AsUnsignedLongLong(args[1]);
    int64_t n = PyLong_AsLongLong(args[2]);
    float slope = (float)PyFloat_AsDouble(args[3]);
    CUstream stream = (CUstream)PyLong_AsVoidPtr(args[4]);
    if (PyErr_Occurred()) return nullptr;
    if (!f_vec4 && !look_up()) {
        PyErr_SetString(PyExc_RuntimeError,
                        "leaky_relu: driver entry point or kernel lookup failed");
        return nullptr;
    }
    if (n > 0) {
        const int64_t threads = 256;
        const int64_t max_blocks = 8192;  // beyond this the grid-stride loop takes over
        bool vec = n % 4 == 0 && x % 16 == 0 && y % 16 == 0;  // one float4 per thread per step
        int64_t m = vec ? n / 4 : n;
        int64_t blocks = std::min((m + threads - 1) / threads, max_blocks);
        // the kernels take two pointers (8-byte variables), an int64_t count and a float slope
        void* params[] = {&x, &y, &m, &slope};
        CUresult r = cu_launch(vec ? f_vec4 : f_scalar, (unsigned)blocks, 1, 1,
                               (unsigned)threads, 1, 1, 0, stream, params, nullptr);
        if (r != CUDA_SUCCESS) {
            PyErr_Format(PyExc_RuntimeError, "leaky_relu: cuLaunchKernel failed (CUresult %d)",
                         (int)r);
            return nullptr;
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"leaky_relu", (PyCFunction)(void (*)(void))leaky_relu, METH_FASTCALL,
     "y = leaky_relu(x, slope) on raw fp32 pointers"},
};

PYBIND11_MODULE(MODULE_NAME, m) {  // pybind11 only builds the module; the call skips it
    for (PyMethodDef& d : methods)
        m.add_object(d.ml_name, pybind11::reinterpret_steal<pybind11::object>(
                                    PyCFunction_NewEx(&d, nullptr, m.ptr())));
}
"""

_ext = cudal1.load_kernel(CUDA_SRC, "cuda")


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        if not x.is_cuda or x.dtype != torch.float32:
            return torch.nn.functional.leaky_relu(x, self.negative_slope)
        x = x.contiguous()
        y = torch.empty_like(x)
        _ext.leaky_relu(x.data_ptr(), y.data_ptr(), x.numel(), self.negative_slope,
                        torch._C._cuda_getCurrentRawStream(x.get_device()))
        return y

"""Which call path gets a tiny kernel onto the GPU with the least host time? (level1/19_ReLU)

Launch-bound tasks (2-4 MB moved) lose to eager by 5-20 us per call in the judge. This probe
splits the cost of our call path into pieces and tries cheaper paths, on ReLU's (16, 16384) input:

  host     per-call host time of each piece in a hot loop, no synchronize (launches are async)
  judged   the judge's loop: L2 flush, synchronize, clock, call, synchronize, clock, with a fresh
           input each round and the variants in random order; medians minus the floor (x.add_(1))
  judge    the real judge (evaluate.judge_many), three workers per solution, for ReLU, Softmax and
           Sum: the library's file, eager as its own solution (A/A), and `fast` / `drv` entry
           points that also allocate the next call's output while this call's kernel runs
           ("+spare"). An earlier run of this file at 93941d8 judged s0, fast and drv without the
           spare (results/h200-call-path-93941d8.md): drv came closest to eager.

Paths: `lib` is kernels/level1/19_ReLU.py (pybind11 function, stream fetched per call); `s0` the
same function on the legacy default stream (no stream query); `fast` a raw CPython METH_FASTCALL
function in the same module (no pybind11 argument casting); `drv` that function launching through
cuLaunchKernel with the kernel handle looked up once; `prealloc` writes into one buffer made
before the loop (a diagnostic, not a legal solution: it shows what allocating the output costs).

In the judge the spare made every path slower (+5-10 us), though it was the fastest in the bare
loop; the library's lean variants (e.g. kernels/level1/19_ReLU.v3.py) use drv without it.

    python bench/call_path.py > results/h200-call-path.md      (~2.5 min plus builds)
"""
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import torch  # noqa: E402

import cudal1  # noqa: E402
import evaluate  # noqa: E402

SRC = r'''
#include <pybind11/pybind11.h>
#include <Python.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <stdexcept>

__device__ __forceinline__ float relu1(float v) { return v <= 0.f ? 0.f : v; }

__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 v = __ldg(x + i);
        y[i] = make_float4(relu1(v.x), relu1(v.y), relu1(v.z), relu1(v.w));
    }
}
__global__ void empty_kernel() {}

static void launch_rt(uintptr_t x, uintptr_t y, long long n, cudaStream_t st) {
    long long n4 = n / 4;
    relu_vec4<<<(unsigned)((n4 + 255) / 256), 256, 0, st>>>(
        reinterpret_cast<const float4*>(x), reinterpret_cast<float4*>(y), n4);
}

void noop(uintptr_t) {}
void relu(uintptr_t x, uintptr_t y, long long n, uintptr_t stream) {
    launch_rt(x, y, n, reinterpret_cast<cudaStream_t>(stream));
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}
void empty(uintptr_t stream) { empty_kernel<<<1, 32, 0, reinterpret_cast<cudaStream_t>(stream)>>>(); }

// relu_fast(x_ptr, y_ptr, n[, stream]): the CPython calling convention itself, no pybind11 casting
static PyObject* relu_fast(PyObject*, PyObject* const* a, Py_ssize_t nargs) {
    if (nargs < 3) { PyErr_SetString(PyExc_TypeError, "relu_fast(x, y, n[, stream])"); return nullptr; }
    uintptr_t x = (uintptr_t)PyLong_AsVoidPtr(a[0]), y = (uintptr_t)PyLong_AsVoidPtr(a[1]);
    long long n = PyLong_AsLongLong(a[2]);
    cudaStream_t st = nargs > 3 ? (cudaStream_t)PyLong_AsVoidPtr(a[3]) : nullptr;
    if (PyErr_Occurred()) return nullptr;
    launch_rt(x, y, n, st);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) { PyErr_SetString(PyExc_RuntimeError, cudaGetErrorString(e)); return nullptr; }
    Py_RETURN_NONE;
}

// the same through the driver: cuLaunchKernel with the function handle looked up once
static PFN_cuLaunchKernel_v4000 p_launch = nullptr;
static CUfunction f_relu = nullptr;
static PyObject* relu_drv(PyObject*, PyObject* const* a, Py_ssize_t nargs) {
    if (nargs < 3) { PyErr_SetString(PyExc_TypeError, "relu_drv(x, y, n[, stream])"); return nullptr; }
    void* x = PyLong_AsVoidPtr(a[0]);
    void* y = PyLong_AsVoidPtr(a[1]);
    long long n4 = PyLong_AsLongLong(a[2]) / 4;
    CUstream st = nargs > 3 ? (CUstream)PyLong_AsVoidPtr(a[3]) : nullptr;
    if (PyErr_Occurred()) return nullptr;
    if (!p_launch) {
        cudaDriverEntryPointQueryResult q;
        cudaFunction_t fn;
        if (cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&p_launch, 12000, cudaEnableDefault, &q) != cudaSuccess
            || cudaGetFuncBySymbol(&fn, (const void*)relu_vec4) != cudaSuccess) {
            PyErr_SetString(PyExc_RuntimeError, "driver entry point lookup failed"); return nullptr;
        }
        f_relu = (CUfunction)fn;
    }
    void* args[] = {&x, &y, &n4};
    CUresult r = p_launch(f_relu, (unsigned)((n4 + 255) / 256), 1, 1, 256, 1, 1, 0, st, args, nullptr);
    if (r != CUDA_SUCCESS) { PyErr_SetString(PyExc_RuntimeError, "cuLaunchKernel failed"); return nullptr; }
    Py_RETURN_NONE;
}

static PyMethodDef fast_defs[] = {
    {"relu_fast", (PyCFunction)(void (*)(void))relu_fast, METH_FASTCALL, "relu on raw pointers"},
    {"relu_drv", (PyCFunction)(void (*)(void))relu_drv, METH_FASTCALL, "relu via cuLaunchKernel"},
};

PYBIND11_MODULE(MODULE_NAME, m) {
    m.def("noop", &noop);
    m.def("relu", &relu);
    m.def("empty", &empty);
    for (auto& d : fast_defs)
        m.add_object(d.ml_name, pybind11::reinterpret_steal<pybind11::object>(PyCFunction_NewEx(&d, nullptr, m.ptr())));
}
'''

# Solution files for the real judge: the library's kernels behind cheaper call paths. FAST_SRC is
# appended to a library kernel's CUDA source: a driver launch helper for METH_FASTCALL entries.
FAST_SRC = r"""
#include <Python.h>
#include <cuda.h>
#include <cudaTypedefs.h>
static PFN_cuLaunchKernel_v4000 g_launch = nullptr;
static CUfunction drv_fn(const void* kernel) {
    if (!g_launch) {
        cudaDriverEntryPointQueryResult q;
        cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void**)&g_launch, 12000, cudaEnableDefault, &q);
    }
    cudaFunction_t f = nullptr;
    cudaGetFuncBySymbol(&f, kernel);
    return (CUfunction)f;
}
static PyObject* launched(CUresult r) {
    if (r != CUDA_SUCCESS) { PyErr_SetString(PyExc_RuntimeError, "cuLaunchKernel failed"); return nullptr; }
    Py_RETURN_NONE;
}
// softmax_fast(x, y, rows, dim) / sum_fast(x, y, outer, R, inner): library launchers, stream 0
static PyObject* fast_entry(PyObject*, PyObject* const* a, Py_ssize_t n) {
    long long v[5] = {0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < n && i < 5; ++i) v[i] = PyLong_AsLongLong(a[i]);
    if (PyErr_Occurred()) return nullptr;
    bool ok = ENTRY;
    if (!ok) { PyErr_SetString(PyExc_ValueError, "layout not handled"); return nullptr; }
    Py_RETURN_NONE;
}
static PyObject* drv_entry(PyObject*, PyObject* const* a, Py_ssize_t n) {
    long long v[5] = {0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < n && i < 5; ++i) v[i] = PyLong_AsLongLong(a[i]);
    if (PyErr_Occurred()) return nullptr;
    DRV
}
static PyMethodDef fast_defs[] = {
    {"fast", (PyCFunction)(void (*)(void))fast_entry, METH_FASTCALL, ""},
    {"drv", (PyCFunction)(void (*)(void))drv_entry, METH_FASTCALL, ""},
};
"""
REGISTER = ("    for (auto& d : fast_defs) m.add_object(d.ml_name, pybind11::reinterpret_steal<pybind11::object>"
            "(PyCFunction_NewEx(&d, nullptr, m.ptr())));\n}\n")
DRV = {
    "23_Softmax": ("softmax(v[0], v[1], v[2], v[3], 0)", r"""
    static CUfunction f = drv_fn((const void*)softmax_rows<4>);
    void* x = (void*)v[0]; void* y = (void*)v[1]; int dim4 = (int)(v[3] / 4);
    void* args[] = {&x, &y, &dim4};
    return launched(g_launch(f, (unsigned)v[2], 1, 1, THREADS, 1, 1, 0, nullptr, args, nullptr));"""),
    "47_Sum_reduction_over_a_dimension": ("sum_dim(v[0], v[1], v[2], v[3], v[4], 0)", r"""
    static CUfunction f = drv_fn((const void*)sum_mid);
    void* x = (void*)v[0]; void* y = (void*)v[1]; int64_t R = v[3], inner4 = v[4] / 4;
    void* args[] = {&x, &y, &R, &inner4};
    return launched(g_launch(f, (unsigned)((inner4 + COLS4 - 1) / COLS4), (unsigned)v[2], 1, COLS4, SLICES, 1, 0,
                             nullptr, args, nullptr));"""),
}
FORWARD = {  # (init, forward body); {fn} is fast or drv; `spare` is the next call's output
    "23_Softmax": ("", """
        y = self.spare
        if y is None or y.shape != x.shape:
            y = torch.empty_like(x)
        _ext.{fn}(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1])
        self.spare = torch.empty_like(x)  # the next call's output, made while this kernel runs
        return y"""),
    "47_Sum_reduction_over_a_dimension": ("", """
        y = self.spare
        if y is None or y.shape[0] != x.shape[0] or y.shape[2] != x.shape[2]:
            y = x.new_empty(x.shape[0], 1, x.shape[2])
        _ext.{fn}(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], x.shape[2])
        self.spare = x.new_empty(x.shape[0], 1, x.shape[2])
        return y"""),
    "19_ReLU": ("", """
        y = self.spare
        if y is None or y.shape != x.shape:
            y = torch.empty_like(x)
        _ext.relu_{fn}(x.data_ptr(), y.data_ptr(), x.numel())
        self.spare = torch.empty_like(x)
        return y"""),
}
MODEL = '''
import torch
import torch.nn as nn
import cudal1
_ext = cudal1.load_kernel({src!r}, "cuda")

class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.spare = None

    def forward(self, x):{body}
'''
EAGER = {"19_ReLU": "torch.relu(x)", "23_Softmax": "torch.softmax(x, dim=1)",
         "47_Sum_reduction_over_a_dimension": "torch.sum(x, dim=1, keepdim=True)"}


def candidates():
    """(label, task path, solution source) for the real judge."""
    out = []
    for name in EAGER:
        task = os.path.join(ROOT, f"kernelbench/level1/{name}.py")
        lib = open(os.path.join(ROOT, f"kernels/level1/{name}.py")).read()
        out.append((f"{name[:10]} lib", task, lib))
        out.append((f"{name[:10]} eager A/A", task, MODEL.format(src=SRC, body="\n        return " + EAGER[name])))
        if name == "19_ReLU":
            src = SRC
        else:
            cuda = lib.split('CUDA_SRC = r"""')[1].split('"""')[0]
            entry, drv = DRV[name]
            cuda += FAST_SRC.replace("ENTRY", entry).replace("DRV", drv)
            head, tail = cuda.split("PYBIND11_MODULE(MODULE_NAME, m) {")
            body_end = tail.index("\n}\n")
            module = "PYBIND11_MODULE(MODULE_NAME, m) {" + tail[:body_end] + "\n" + REGISTER
            src = head + tail[body_end + 3:] + module
        for fn in ("fast", "drv"):
            out.append((f"{name[:10]} {fn}+spare", task, MODEL.format(src=src, body=FORWARD[name][1].format(fn=fn))))
    return out


def host_us(fn, n=4000, batch=200):
    """Median host microseconds per call over batches of calls (a synchronize between batches)."""
    out = []
    for _ in range(n // batch):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        out.append((time.perf_counter() - t0) / batch)
    torch.cuda.synchronize()
    return statistics.median(out) * 1e6


def main():
    ext = cudal1.load_kernel(SRC, "cuda")
    lib = evaluate.load_module(os.path.join(ROOT, "kernels/level1/19_ReLU.py"), "lib_relu").ModelNew()
    dev = torch.device("cuda")
    xs = [torch.randn(16, 16384, device=dev) for _ in range(32)]
    x, Y, z = xs[0], torch.empty_like(xs[0]), torch.zeros(1, device=dev)
    raw = torch._C._cuda_getCurrentRawStream

    def s0(x):
        y = torch.empty_like(x)
        ext.relu(x.data_ptr(), y.data_ptr(), x.numel(), 0)
        return y

    def fast(x):
        y = torch.empty_like(x)
        ext.relu_fast(x.data_ptr(), y.data_ptr(), x.numel())
        return y

    def drv(x):
        y = torch.empty_like(x)
        ext.relu_drv(x.data_ptr(), y.data_ptr(), x.numel())
        return y

    def prealloc(x):
        ext.relu_fast(x.data_ptr(), Y.data_ptr(), x.numel())
        return Y

    calls = {"eager torch.relu": torch.relu, "lib": lib, "s0": s0, "fast": fast, "drv": drv,
             "prealloc (not legal)": prealloc, "our empty kernel": lambda x: ext.empty(0),
             "torch z.add_(1)": lambda x: z.add_(1), "pybind no-op + torch.relu": lambda x: (ext.noop(0), torch.relu(x))}
    for f in calls.values():  # warm up; and check every path computes relu
        for _ in range(20):
            y = f(x)
        torch.cuda.synchronize()
    for name in ("lib", "s0", "fast", "drv"):
        assert torch.equal(calls[name](xs[1]), torch.relu(xs[1])), name

    print("# Call paths for a launch-bound kernel (level1/19_ReLU, 16 x 16384 fp32)\n")
    print(f"- command: `python bench/call_path.py`\n- commit {evaluate.commit()}, GPU {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, python {sys.version.split()[0]}\n")
    print("## Host time per piece, hot loop, no synchronize per call\n\n| piece | host us |\n|---|---|")
    pieces = {
        "python call of an empty function": lambda: (lambda: None)(),
        "pybind11 no-op(int)": lambda: ext.noop(0),
        "x.data_ptr()": lambda: x.data_ptr(),
        "torch._C._cuda_getCurrentRawStream(x.get_device())": lambda: raw(x.get_device()),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "pybind11 launch of an empty kernel": lambda: ext.empty(0),
        "torch z.add_(1) (one ATen launch)": lambda: z.add_(1),
        "torch.relu(x)": lambda: torch.relu(x),
        "lib forward": lambda: lib(x),
        "s0 forward": lambda: s0(x),
        "fast forward": lambda: fast(x),
        "drv forward": lambda: drv(x),
        "prealloc forward": lambda: prealloc(x),
    }
    for name, f in pieces.items():
        print(f"| {name} | {host_us(f):.2f} |")

    flush = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.uint8, device=dev)
    rng = random.Random(0)
    for junk in (False, True):
        times = {k: [] for k in calls}
        floor = []
        cpu_junk = bytearray(64 << 20)
        for r in range(1500):
            xin = xs[r % len(xs)]
            for name in rng.sample(list(calls), len(calls)) + ["floor"]:
                if junk:  # the judge's own work between calls: clones, compares, a CPU memory sweep
                    _ = [t.clone() for t in xs[:4]]
                    cpu_junk[::4096] = bytes(len(cpu_junk[::4096]))
                flush.zero_()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                if name == "floor":
                    z.add_(1)
                else:
                    calls[name](xin)
                torch.cuda.synchronize()
                (floor if name == "floor" else times[name]).append(time.perf_counter() - t0)
        fl = statistics.median(floor)
        print(f"\n## The judge's loop{' with work between calls' if junk else ''} (1500 rounds; floor "
              f"{fl * 1e6:.1f} us subtracted)\n\n| path | us | IQR us |\n|---|---|---|")
        for name, ts in times.items():
            q = statistics.quantiles(ts, n=4)
            print(f"| {name} | {(statistics.median(ts) - fl) * 1e6:.1f} | {(q[2] - q[0]) * 1e6:.1f} |")

    cands = candidates()
    pairs = [(task, src) for _, task, src in cands for _ in range(3)]
    names = [f"{label} #{rep + 1}" for label, _, _ in cands for rep in range(3)]
    recs = evaluate.judge_many(pairs, time_budget=2.0)
    print("\n## The real judge (evaluate.judge_many, --time-budget 2; each path judged three times)\n")
    print("| path | status | ref us | sol us | sol - ref us | speedup |\n|---|---|---|---|---|---|")
    for name, r in zip(names, recs):
        ref, sol = (r.get("ref_ms") or 0) * 1e3, (r.get("sol_ms") or 0) * 1e3
        print(f"| {name} | {r['status']} {r.get('message', '')[:80]} | {ref:.1f} | {sol:.1f} | {sol - ref:+.1f} | "
              f"{r.get('speedup') or 0:.2f}x |")

if __name__ == "__main__":
    main()

// launcher.cu: the native half of cudal1.load_cuda, built once per machine through load_kernel.
//
// A solution on the fast path compiles device code only (a cubin, ~0.5 s) instead of a pybind11
// module (~11 s of host compilation). This module is the host code they all share: it loads a cubin
// with the driver (cuModuleLoadData) and launches its kernels with cuLaunchKernel. Each kernel is a
// Kernel object whose call is the lean path the library measured cheapest per call: a vectorcall
// entry (Python passes its argument array as is), arguments packed by a type code per parameter
// that cudal1 parsed from the kernel's C signature, and the driver handles looked up on the first
// call and kept. Handles belong to a CUDA context: a call under another context (another GPU)
// looks them up again there.
#include <pybind11/pybind11.h>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <climits>
#include <cstddef>
#include <string>
#include <vector>

// ---- the driver's entry points, found through the runtime on the first call (no -lcuda needed)
static PFN_cuCtxGetCurrent_v4000 cu_ctx_current;
static PFN_cuCtxGetDevice_v2000 cu_ctx_device;
static PFN_cuModuleLoadData_v2000 cu_module_load;
static PFN_cuModuleGetFunction_v2000 cu_module_function;
static PFN_cuFuncSetAttribute_v9000 cu_func_attribute;
static PFN_cuGetErrorName_v6000 cu_error_name;
static PFN_cuLaunchKernel_v4000 cu_launch;  // set last: non-null means all are set

static bool find_driver() {
    struct { const char* name; void** fn; } want[] = {
        {"cuCtxGetCurrent", (void**)&cu_ctx_current}, {"cuCtxGetDevice", (void**)&cu_ctx_device},
        {"cuModuleLoadData", (void**)&cu_module_load}, {"cuModuleGetFunction", (void**)&cu_module_function},
        {"cuFuncSetAttribute", (void**)&cu_func_attribute}, {"cuGetErrorName", (void**)&cu_error_name},
        {"cuLaunchKernel", (void**)&cu_launch}};
    for (auto& w : want) {
        cudaDriverEntryPointQueryResult found;
        if (cudaGetDriverEntryPointByVersion(w.name, w.fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
            found != cudaDriverEntryPointSuccess) {
            cu_launch = nullptr;
            PyErr_Format(PyExc_RuntimeError, "launcher: no CUDA driver entry point %s (no NVIDIA driver here?)", w.name);
            return false;
        }
    }
    return true;
}

static PyObject* driver_error(PyObject* kernel, const char* what, CUresult r) {
    const char* name = nullptr;
    if (cu_error_name) cu_error_name(r, &name);
    PyErr_Format(PyExc_RuntimeError, "%U: %s failed: %s", kernel, what, name ? name : "unknown CUresult");
    return nullptr;
}

// Loaded modules, one per (cubin, context), kept for the life of the process like a loaded .so.
// Each entry owns a reference to its cubin's bytes, so no later cubin can reuse the address.
struct Loaded { PyObject* image; CUcontext ctx; CUmodule module; };
static std::vector<Loaded> loaded;

// ---- Kernel: one extern "C" __global__ function of one cubin

enum { MAX_PARAMS = 64 };

struct Kernel {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject* image;      // bytes: the cubin, shared by the kernels of one source
    PyObject* name;       // str: the kernel's name
    PyObject* params;     // tuple of str: each parameter as declared, for messages
    PyObject* stream_fn;  // torch._C._cuda_getCurrentRawStream, or None (a CPU-only torch)
    char codes[MAX_PARAMS + 1];  // p pointer, i int32, I uint32, q int64, Q uint64, f float, d double
    int n;                // number of parameters
    // the handles for the context of the last call
    CUcontext ctx;
    CUfunction fn;
    PyObject* device;     // int: the context's device, the argument for stream_fn
    unsigned shared_max;  // dynamic shared memory the function is allowed so far
};

// Look the function up for ctx (first call, or a call under another context).
static bool bind(Kernel* k, CUcontext ctx) {
    CUmodule module = nullptr;
    for (auto& l : loaded)
        if (l.image == k->image && l.ctx == ctx) module = l.module;
    CUresult r;
    if (!module) {
        if ((r = cu_module_load(&module, PyBytes_AS_STRING(k->image))) != CUDA_SUCCESS)
            return driver_error(k->name, "cuModuleLoadData", r), false;
        Py_INCREF(k->image);
        loaded.push_back({k->image, ctx, module});
    }
    CUfunction fn;
    if ((r = cu_module_function(&fn, module, PyUnicode_AsUTF8(k->name))) != CUDA_SUCCESS)
        return driver_error(k->name, "cuModuleGetFunction", r), false;
    CUdevice_v1 dev;
    if ((r = cu_ctx_device(&dev)) != CUDA_SUCCESS)
        return driver_error(k->name, "cuCtxGetDevice", r), false;
    PyObject* device = PyLong_FromLong(dev);
    if (!device) return false;
    Py_XSETREF(k->device, device);
    k->ctx = ctx;
    k->fn = fn;
    k->shared_max = 48 * 1024;  // what every launch may take unasked
    return true;
}

static bool as_u32(PyObject* o, unsigned* out) {
    unsigned long v = PyLong_AsUnsignedLong(o);
    if (v == (unsigned long)-1 && PyErr_Occurred()) return false;
    if (v > UINT_MAX) return PyErr_SetString(PyExc_OverflowError, "does not fit in 32 bits"), false;
    *out = (unsigned)v;
    return true;
}

// grid or block: an int, or a tuple of 1-3 ints (x, y, z)
static bool as_dim3(Kernel* k, PyObject* o, const char* what, unsigned d[3]) {
    d[0] = d[1] = d[2] = 1;
    if (PyLong_Check(o)) {
        if (as_u32(o, d)) return true;
    } else if (PyTuple_Check(o) && PyTuple_GET_SIZE(o) >= 1 && PyTuple_GET_SIZE(o) <= 3) {
        Py_ssize_t i = 0;
        while (i < PyTuple_GET_SIZE(o) && as_u32(PyTuple_GET_ITEM(o, i), d + i)) i++;
        if (i == PyTuple_GET_SIZE(o)) return true;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%U: %s must be an int or a tuple of 1-3 ints (each < 2**32), not %R", k->name, what, o);
    return false;
}

// k(grid, block, *args, shared=0, stream=None) -> None; stream None means torch's current stream
static PyObject* kernel_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    Kernel* k = (Kernel*)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 2 + k->n)
        return PyErr_Format(PyExc_TypeError, "%U(grid, block, %d kernel arguments, shared=0, stream=None): got %zd "
                            "positional arguments, not %d", k->name, k->n, nargs, 2 + k->n);
    unsigned grid[3], block[3], shared = 0;
    if (!as_dim3(k, args[0], "grid", grid) || !as_dim3(k, args[1], "block", block)) return nullptr;
    PyObject* stream_arg = Py_None;
    for (Py_ssize_t i = 0; kwnames && i < PyTuple_GET_SIZE(kwnames); i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        if (PyUnicode_CompareWithASCIIString(key, "stream") == 0) {
            stream_arg = value;
        } else if (PyUnicode_CompareWithASCIIString(key, "shared") != 0) {
            return PyErr_Format(PyExc_TypeError, "%U: unexpected keyword argument %R", k->name, key);
        } else if (!as_u32(value, &shared)) {
            PyErr_Clear();
            return PyErr_Format(PyExc_TypeError, "%U: shared must be an int of bytes, not %R", k->name, value);
        }
    }
    // Pack each argument into an 8-byte slot as its C type; the launch reads one pointer per slot.
    union { unsigned long long u64; long long i64; unsigned u32; int i32; float f32; double f64; } slot[MAX_PARAMS];
    void* ptrs[MAX_PARAMS];
    for (int j = 0; j < k->n; j++) {
        PyObject* a = args[2 + j];
        switch (k->codes[j]) {
            case 'p': case 'Q': slot[j].u64 = PyLong_AsUnsignedLongLong(a); break;
            case 'q': slot[j].i64 = PyLong_AsLongLong(a); break;
            case 'i': {
                long v = PyLong_AsLong(a);
                if (v < INT_MIN || v > INT_MAX) PyErr_SetString(PyExc_OverflowError, "out of range");
                slot[j].i32 = (int)v;
                break;
            }
            case 'I': as_u32(a, &slot[j].u32); break;
            case 'f': slot[j].f32 = (float)PyFloat_AsDouble(a); break;
            case 'd': slot[j].f64 = PyFloat_AsDouble(a); break;
        }
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return PyErr_Format(PyExc_TypeError, "%U: argument '%U' cannot take %R", k->name,
                                PyTuple_GET_ITEM(k->params, j), a);
        }
        ptrs[j] = &slot[j];
    }
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) Py_RETURN_NONE;  // no blocks: nothing to run (n == 0)
    if (!cu_launch && !find_driver()) return nullptr;
    CUcontext ctx = nullptr;
    CUresult r = cu_ctx_current(&ctx);
    if (r != CUDA_SUCCESS) return driver_error(k->name, "cuCtxGetCurrent", r);
    if (!ctx)
        return PyErr_Format(PyExc_RuntimeError, "%U: no current CUDA context (initialise CUDA in torch first, "
                            "e.g. by making a CUDA tensor)", k->name);
    if (ctx != k->ctx && !bind(k, ctx)) return nullptr;
    if (shared > k->shared_max) {  // above 48 KiB a kernel must be allowed more, once
        if ((r = cu_func_attribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared)) != CUDA_SUCCESS)
            return driver_error(k->name, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", r);
        k->shared_max = shared;
    }
    CUstream stream;
    if (stream_arg == Py_None) {  // torch's current stream on this context's device
        if (k->stream_fn == Py_None)
            return PyErr_Format(PyExc_RuntimeError, "%U: this torch has no CUDA: pass stream=", k->name);
        PyObject* s = PyObject_CallOneArg(k->stream_fn, k->device);
        if (!s) return nullptr;
        stream = (CUstream)PyLong_AsVoidPtr(s);
        Py_DECREF(s);
    } else {
        stream = (CUstream)PyLong_AsVoidPtr(stream_arg);
    }
    if (PyErr_Occurred()) return nullptr;
    r = cu_launch(k->fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared, stream, ptrs, nullptr);
    if (r != CUDA_SUCCESS) return driver_error(k->name, "cuLaunchKernel", r);
    Py_RETURN_NONE;
}

static void kernel_dealloc(PyObject* self) {
    Kernel* k = (Kernel*)self;
    Py_XDECREF(k->image);
    Py_XDECREF(k->name);
    Py_XDECREF(k->params);
    Py_XDECREF(k->stream_fn);
    Py_XDECREF(k->device);
    Py_TYPE(self)->tp_free(self);
}

static PyObject* kernel_repr(PyObject* self) {
    Kernel* k = (Kernel*)self;
    PyObject* sep = PyUnicode_FromString(", ");
    PyObject* params = sep ? PyUnicode_Join(sep, k->params) : nullptr;
    PyObject* s = params ? PyUnicode_FromFormat("<cuda kernel %U(%U)>", k->name, params) : nullptr;
    Py_XDECREF(sep);
    Py_XDECREF(params);
    return s;
}

static PyTypeObject KernelType = {PyVarObject_HEAD_INIT(nullptr, 0)};

// kernel(image, name, codes, params, stream_fn) -> Kernel; cudal1.load_cuda makes one per kernel
static PyObject* make_kernel(pybind11::bytes image, pybind11::str name, std::string codes, pybind11::tuple params,
                             pybind11::object stream_fn) {
    if (codes.size() > MAX_PARAMS || codes.size() != params.size() ||
        codes.find_first_not_of("piIqQfd") != std::string::npos)
        throw pybind11::value_error("kernel: one code of 'piIqQfd' per parameter, at most 64");
    Kernel* k = PyObject_New(Kernel, &KernelType);
    if (!k) throw pybind11::error_already_set();
    k->vectorcall = kernel_call;
    k->image = image.release().ptr();
    k->name = name.release().ptr();
    k->params = params.release().ptr();
    k->stream_fn = stream_fn.release().ptr();
    k->n = (int)codes.size();
    codes.copy(k->codes, codes.size());
    k->codes[k->n] = 0;
    k->ctx = nullptr;
    k->fn = nullptr;
    k->device = nullptr;
    k->shared_max = 0;
    return (PyObject*)k;
}

PYBIND11_MODULE(MODULE_NAME, m) {
    KernelType.tp_name = "launcher.Kernel";
    KernelType.tp_basicsize = sizeof(Kernel);
    KernelType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
    KernelType.tp_vectorcall_offset = offsetof(Kernel, vectorcall);
    KernelType.tp_call = PyVectorcall_Call;
    KernelType.tp_dealloc = kernel_dealloc;
    KernelType.tp_repr = kernel_repr;
    KernelType.tp_doc = "k(grid, block, *args, shared=0, stream=None): launch one cubin kernel";
    if (PyType_Ready(&KernelType) < 0) throw pybind11::error_already_set();
    m.def("kernel", [](pybind11::bytes image, pybind11::str name, std::string codes, pybind11::tuple params,
                       pybind11::object stream_fn) {
        return pybind11::reinterpret_steal<pybind11::object>(make_kernel(image, name, codes, params, stream_fn));
    });
}

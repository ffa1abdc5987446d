"""
load_cuda on the CPU: a solution's device code compiled for the host with g++ and run one block at a
time, each thread of the block an OS thread, so a kernel written without a GPU can be checked against
its task's reference on this machine before the H200 judges it (drafts/).

    k = cuda_cpu.load_cuda(source)               # same call as cudal1.load_cuda
    k.relu(grid, block, x.data_ptr(), y.data_ptr(), n)   # x, y CPU tensors
    python tests/cuda_cpu.py drafts/level2/78_*.py   # solution files against their tasks (check())
    CUDA_CPU_FLAGS=-fsanitize=address LD_PRELOAD=$(g++ -print-file-name=libasan.so) \
        ASAN_OPTIONS=detect_leaks=0 python tests/cuda_cpu.py FILE   # out-of-bounds accesses reported

What it models: threadIdx / blockIdx / blockDim / gridDim, __syncthreads (a barrier over the block's
threads; a thread that returned no longer counts, as on the GPU), static and dynamic __shared__
memory (one copy, filled with 0xFF bytes -- NaN as floats -- before each block, as the GPU promises
nothing there), warp shuffles, votes and __syncwarp (a barrier over the warp's threads; a shuffle
whose mask names a lane that has returned is an error, as it is undefined on the GPU), atomics,
float4, the common intrinsics and the launch limits (grid y/z <= 65535, <= 1024 threads a block,
__launch_bounds__). Blocks run one after another, last first at one launch and first first at the
next, so a block that relies on another block's write in the same launch reads differently at two
calls. What it does not model: blocks running at once (a kernel that waits for another block never
returns), memory-model races inside a block, timing, FMA contraction, and the exact rounding of
fast-math intrinsics (__expf is expf here). It checks what a kernel computes, not how fast.
"""
import ctypes
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for d in (ROOT, os.path.join(ROOT, "tests")):  # run as a script from anywhere
    if d not in sys.path:
        sys.path.insert(0, d)
import cudal1  # noqa: E402

PRELUDE = r"""
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
static thread_local uint3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static unsigned char* emu_dyn_smem;
static std::barrier<>* emu_block_bar;
static std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bar;
static std::vector<unsigned long long> emu_warp_buf;

#define __global__
#define __device__
#define __host__
#define __noinline__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static __attribute__((section("emu_shared")))
extern "C" __attribute__((weak)) unsigned char __start_emu_shared[], __stop_emu_shared[];  // from the linker
static std::vector<char> emu_exited;  // per thread of the running block: returned from the kernel
static std::atomic<int> emu_faulted{0};
static char emu_fault_msg[256];
static void emu_fail(const char* msg) {
    int no = 0;
    if (emu_faulted.compare_exchange_strong(no, 1)) std::snprintf(emu_fault_msg, sizeof emu_fault_msg, "%s", msg);
}

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) double2 { double x, y; };
inline double2 make_double2(double x, double y) { return {x, y}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
using std::isnan; using std::isinf; using std::isfinite; using std::signbit;
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

static inline unsigned emu_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
static inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
static void emu_check_mask(unsigned mask, unsigned w);
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    emu_warp_bar[emu_tid() / 32]->arrive_and_wait();
    emu_check_mask(mask, emu_tid() / 32);
}
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// every lane of the warp writes its value, then reads lane `src`'s
static void emu_check_mask(unsigned mask, unsigned w) {  // every lane the mask names is still running
    for (unsigned i = 0; i < 32; ++i)
        if ((mask >> i & 1u) && w * 32 + i < emu_exited.size() && emu_exited[w * 32 + i])
            emu_fail("a warp shuffle, vote or __syncwarp names a lane that has returned (undefined on the GPU)");
}
template <class T> static T emu_exchange(T v, int src_of_lane, unsigned mask) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    unsigned t = emu_tid(), w = t / 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_warp_buf[t] = bits;
    emu_warp_bar[w]->arrive_and_wait();
    emu_check_mask(mask | 1u << src_of_lane % 32, w);
    unsigned long long got = emu_warp_buf[w * 32 + src_of_lane];
    emu_warp_bar[w]->arrive_and_wait();
    T out;
    std::memcpy(&out, &got, sizeof(T));
    return out;
}
static inline int emu_lane() { return emu_tid() % 32; }
template <class T> T __shfl_sync(unsigned m, T v, int src, int width = 32) {
    int l = emu_lane();
    return emu_exchange(v, l - l % width + ((src % width) + width) % width, m);
}
template <class T> T __shfl_xor_sync(unsigned m, T v, int mask, int width = 32) {
    int l = emu_lane(), s = l ^ mask;
    return emu_exchange(v, s / width == l / width ? s : l, m);
}
template <class T> T __shfl_down_sync(unsigned m, T v, unsigned d, int width = 32) {
    int l = emu_lane(), s = l + (int)d;
    return emu_exchange(v, s / width == l / width ? s : l, m);
}
template <class T> T __shfl_up_sync(unsigned m, T v, unsigned d, int width = 32) {
    int l = emu_lane(), s = l - (int)d;
    return emu_exchange(v, s >= l - l % width ? s : l, m);
}
static inline unsigned __ballot_sync(unsigned m, int p) {
    unsigned w = emu_tid() / 32, out = 0;
    emu_warp_buf[emu_tid()] = p != 0;
    emu_warp_bar[w]->arrive_and_wait();
    emu_check_mask(m, w);
    for (int i = 0; i < 32; ++i) out |= (unsigned)emu_warp_buf[w * 32 + i] << i;
    emu_warp_bar[w]->arrive_and_wait();
    return out;
}
static inline int __any_sync(unsigned m, int p) { return __ballot_sync(m, p) != 0; }
static inline int __all_sync(unsigned m, int p) { return __ballot_sync(m, p) == 0xffffffffu; }

template <class T> T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }
template <class T> T atomicSub(T* p, T v) { return std::atomic_ref<T>(*p).fetch_sub(v); }
template <class T> T atomicExch(T* p, T v) { return std::atomic_ref<T>(*p).exchange(v); }
template <class T> T atomicCAS(T* p, T cmp, T v) { std::atomic_ref<T>(*p).compare_exchange_strong(cmp, v); return cmp; }
template <class T> T atomicMax(T* p, T v) {
    std::atomic_ref<T> a(*p); T old = a.load();
    while (old < v && !a.compare_exchange_weak(old, v)) {}
    return old;
}
template <class T> T atomicMin(T* p, T v) {
    std::atomic_ref<T> a(*p); T old = a.load();
    while (old > v && !a.compare_exchange_weak(old, v)) {}
    return old;
}

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline T __ldlu(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }
template <class T> inline void __stcg(T* p, T v) { *p = v; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
static inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
#define __expf(x) expf(x)
#define __logf(x) logf(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanhf(x) tanhf(x)
#define __powf(a, b) powf(a, b)
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.f / a; }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
template <class A, class B> inline auto min(A a, B b) { return b < a ? b : a; }
template <class A, class B> inline auto max(A a, B b) { return a < b ? b : a; }
"""

LAUNCH = r"""
template <class... A, std::size_t... I>
static void emu_call(void (*f)(A...), void** args, std::index_sequence<I...>) {
    f(*reinterpret_cast<std::remove_cv_t<A>*>(args[I])...);
}

template <class... A>
static void emu_grid(void (*f)(A...), const unsigned* g, const unsigned* b, std::size_t shared, void** args) {
    gridDim = {g[0], g[1], g[2]};
    blockDim = {b[0], b[1], b[2]};
    const unsigned n = b[0] * b[1] * b[2];
    std::vector<unsigned char> dyn(shared + 16);
    emu_dyn_smem = dyn.data();
    emu_warp_buf.assign(n + 32, 0);
    emu_faulted = 0;
    static unsigned launches = 0;
    const bool down = launches++ % 2 == 0;  // blocks last first, then first first at the next launch:
    const unsigned nb = g[0] * g[1] * g[2];  // a block that relies on another's write differs between them
    for (unsigned i = 0; i < nb; ++i) {
        const unsigned j = down ? nb - 1 - i : i, bx = j % g[0], by = j / g[0] % g[1], bz = j / (g[0] * g[1]);
        std::memset(dyn.data(), 0xFF, dyn.size());  // shared memory holds no zeros the GPU never promised
        if (__start_emu_shared) std::memset(__start_emu_shared, 0xFF, __stop_emu_shared - __start_emu_shared);
        emu_exited.assign(n, 0);
        std::barrier<> block(n);
        emu_block_bar = &block;
        emu_warp_bar.clear();
        for (unsigned w = 0; w * 32 < n; ++w)
            emu_warp_bar.emplace_back(new std::barrier<>(std::min(32u, n - w * 32)));
        std::vector<std::thread> team;
        for (unsigned t = 0; t < n; ++t)
            team.emplace_back([=] {
                threadIdx = {t % b[0], t / b[0] % b[1], t / (b[0] * b[1])};
                blockIdx = {bx, by, bz};
                emu_call(f, args, std::index_sequence_for<A...>{});
                emu_exited[t] = 1;
                emu_block_bar->arrive_and_drop();  // a finished thread no longer holds the others back
                emu_warp_bar[t / 32]->arrive_and_drop();
            });
        for (auto& th : team) th.join();
        if (emu_faulted) return;
    }
}

extern "C" const char* emu_fault() { return emu_faulted ? emu_fault_msg : nullptr; }
"""

BUILD_DIR = os.path.join(tempfile.gettempdir(), "cudal1-cuda-cpu")
launches = 0  # kernels launched through this module so far: a test can tell the kernel path from a fallback
CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int32, "I": ctypes.c_uint32, "q": ctypes.c_int64,
          "Q": ctypes.c_uint64, "f": ctypes.c_float, "d": ctypes.c_double}


def host_source(source):
    """The device source made host C++: each `extern __shared__ T name[];` becomes a pointer to this
    launch's dynamic shared memory, and each kernel gets an extern "C" emu_<name>(grid, block,
    shared, args) that runs it."""
    src = re.sub(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w\s]+?)\s*(\w+)\s*\[\s*\]\s*;",
                 lambda m: f"{m[1]}* const& {m[2]} = reinterpret_cast<{m[1]}* const&>(emu_dyn_smem);", source)
    calls = "".join(f'extern "C" void emu_{name}(const unsigned* emu_g, const unsigned* emu_b, std::size_t emu_s, '
                    f"void** emu_a) {{ emu_grid({name}, emu_g, emu_b, emu_s, emu_a); }}\n"
                    for name in cudal1.cuda_kernels(source))
    return PRELUDE + "#line 1 \"kernel.cu\"\n" + src + "\n" + LAUNCH + calls


def _dims(d):
    d = (d,) if isinstance(d, int) else tuple(d)
    return (ctypes.c_uint * 3)(*(list(d) + [1, 1, 1])[:3])


def load_cuda(source):
    """cudal1.load_cuda's object for `source`, its kernels run on the CPU (module docstring)."""
    kernels = cudal1.cuda_kernels(source)
    text = host_source(source)
    flags = os.environ.get("CUDA_CPU_FLAGS", "").split()  # e.g. -fsanitize=address (python under LD_PRELOAD=libasan)
    h = hashlib.sha256((text + " ".join(flags)).encode()).hexdigest()[:16]
    os.makedirs(BUILD_DIR, exist_ok=True)
    so = os.path.join(BUILD_DIR, f"{h}.so")
    if not os.path.exists(so):
        cpp = os.path.join(BUILD_DIR, f"{h}.{os.getpid()}.cpp")  # one writer per file: processes may race here
        with open(cpp, "w") as f:
            f.write(text)
        p = subprocess.run(["g++", "-std=c++20", "-O1", "-fno-strict-aliasing", "-shared", "-fPIC", "-pthread", "-w",
                            *flags, cpp, "-o", so + ".tmp"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise cudal1.BuildError(f"g++ (cuda_cpu) failed:\n{p.stderr[-4000:]}")
        os.replace(so + ".tmp", so)
    lib = ctypes.CDLL(so)
    lib.emu_fault.restype = ctypes.c_char_p
    bounds = {name: int(n) for n, name in re.findall(r'__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*(?:void\s+)?(\w+)\s*\(',
                                                     cudal1.normalise_cuda(source))}

    def launcher(name, codes):
        fn = getattr(lib, f"emu_{name}")

        def launch(grid, block, *args, shared=0, stream=None):
            if len(args) != len(codes):
                raise TypeError(f"{name}: {len(codes)} arguments expected, {len(args)} given")
            g, b = _dims(grid), _dims(block)
            if not all(g) or not all(b):
                return
            threads = b[0] * b[1] * b[2]
            if g[0] >= 2 ** 31 or g[1] > 65535 or g[2] > 65535 or b[0] > 1024 or b[1] > 1024 or b[2] > 64 \
                    or threads > min(1024, bounds.get(name, 1024)):
                raise ValueError(f"{name}: grid {tuple(g)} block {tuple(b)} is not a launch the GPU takes "
                                 f"(__launch_bounds__ {bounds.get(name)})")
            vals = [CTYPES[c](a) for c, a in zip(codes, args)]
            ptrs = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
            global launches
            launches += 1
            fn(g, b, ctypes.c_size_t(shared), ptrs)
            if lib.emu_fault():
                raise RuntimeError(f"{name}: {lib.emu_fault().decode()}")
        return launch

    return types.SimpleNamespace(**{name: launcher(name, "".join(c for _, c in ps)) for name, ps in kernels.items()})


def check(path, sizes=None):
    """The solution at `path` (kernels/ or drafts/) against its task at test sizes (then `sizes`, a
    {constant: value} of the task's), on two input sets: its output under the strict rule, with every
    tensor torch allocates filled with NaN (an element no kernel wrote shows), its kernels launched (not
    a fallback), its inputs untouched, and its state (BatchNorm's running statistics) as eager's after."""
    import torch
    import evaluate
    from test_tasks import small_task
    name = os.path.basename(path)
    task = small_task(cudal1.task_of(path, os.path.join(ROOT, "kernelbench")))
    for const, value in (sizes or {}).items():
        assert hasattr(task, const), f"{name} has no constant {const}"
        setattr(task, const, value)
    real = cudal1.load_cuda
    cudal1.load_cuda = load_cuda
    try:
        sol = evaluate.load_module(path, "sol_" + name.replace(".", "_"), scope=task)
    finally:
        cudal1.load_cuda = real
    torch.manual_seed(0)
    ref = task.Model(*task.get_init_inputs())
    new = sol.ModelNew(*task.get_init_inputs())
    new.load_state_dict(ref.state_dict())
    native = "load_cuda" in open(path).read()  # a file with kernels must launch them, not fall back
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        for _ in range(2):
            xs = task.get_inputs()
            mine = [x.clone() for x in xs]
            before = launches
            with torch.no_grad():
                want = ref(*[x.clone() for x in xs])
                got = new(*mine)
            assert launches > before or not native, "took the fallback"
            assert all(torch.equal(a, b) for a, b in zip(mine, xs)), "wrote into its input"
            assert got.shape == want.shape and got.dtype == want.dtype
            ok, err, ratio = evaluate._compare(got, want, evaluate.STRICT)  # the judge's own rule
            assert ok, f"max error {err:.3g}, {ratio:.3g} of the strict tolerance"
    finally:
        torch.use_deterministic_algorithms(False)
        torch.utils.deterministic.fill_uninitialized_memory = fill
    theirs = new.state_dict()
    for key, v in ref.state_dict().items():
        assert torch.allclose(theirs[key].double(), v.double(), rtol=1e-4, atol=1e-6), f"state {key} differs from eager's"


if __name__ == "__main__":
    failed = 0
    for path in sys.argv[1:]:
        try:
            check(path)
            print(f"ok    {path}")
        except (AssertionError, RuntimeError, ValueError, cudal1.BuildError) as e:
            failed += 1
            print(f"FAIL  {path}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    sys.exit(1 if failed else 0)

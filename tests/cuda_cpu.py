"""
load_cuda on the CPU: a solution's device code compiled for the host with g++ and run one block at a
time, each thread of the block an OS thread, so a kernel written without a GPU can be checked against
its task's reference on this machine before the H200 judges it (drafts/).

    k = cuda_cpu.load_cuda(source)               # same call as cudal1.load_cuda
    k.relu(grid, block, x.data_ptr(), y.data_ptr(), n)   # x, y CPU tensors

What it models: threadIdx / blockIdx / blockDim / gridDim, __syncthreads (a barrier over the block's
threads; a thread that returned no longer counts, as on the GPU), static and dynamic __shared__
memory (one copy, blocks run one after another), warp shuffles, votes and __syncwarp (a barrier over
the warp's 32 threads: every lane of the warp must reach them, as in the kernels here), atomics,
float4 and the common intrinsics. What it does not: concurrency between blocks (a kernel that waits
for another block never returns), memory-model races, timing, and the exact rounding of fast-math
intrinsics (__expf is expf here). It checks what a kernel computes, not how fast.
"""
import ctypes
import hashlib
import os
import re
import subprocess
import tempfile
import types

import cudal1

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
#define __shared__ static

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
static inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_bar[emu_tid() / 32]->arrive_and_wait(); }
static inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
static inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }

// every lane of the warp writes its value, then reads lane `src`'s
template <class T> static T emu_exchange(T v, int src_of_lane) {
    static_assert(sizeof(T) <= 8, "shuffle of more than 8 bytes");
    unsigned t = emu_tid(), w = t / 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_warp_buf[t] = bits;
    emu_warp_bar[w]->arrive_and_wait();
    unsigned long long got = emu_warp_buf[w * 32 + src_of_lane];
    emu_warp_bar[w]->arrive_and_wait();
    T out;
    std::memcpy(&out, &got, sizeof(T));
    return out;
}
static inline int emu_lane() { return emu_tid() % 32; }
template <class T> T __shfl_sync(unsigned, T v, int src, int width = 32) {
    int l = emu_lane();
    return emu_exchange(v, l - l % width + ((src % width) + width) % width);
}
template <class T> T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
    int l = emu_lane(), s = l ^ mask;
    return emu_exchange(v, s / width == l / width ? s : l);
}
template <class T> T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
    int l = emu_lane(), s = l + (int)d;
    return emu_exchange(v, s / width == l / width ? s : l);
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
    int l = emu_lane(), s = l - (int)d;
    return emu_exchange(v, s >= l - l % width ? s : l);
}
static inline unsigned __ballot_sync(unsigned, int p) {
    unsigned w = emu_tid() / 32, out = 0;
    emu_warp_buf[emu_tid()] = p != 0;
    emu_warp_bar[w]->arrive_and_wait();
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
    for (unsigned bz = 0; bz < g[2]; ++bz)
    for (unsigned by = 0; by < g[1]; ++by)
    for (unsigned bx = 0; bx < g[0]; ++bx) {
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
                emu_block_bar->arrive_and_drop();  // a finished thread no longer holds the others back
                emu_warp_bar[t / 32]->arrive_and_drop();
            });
        for (auto& th : team) th.join();
    }
}
"""

BUILD_DIR = os.path.join(tempfile.gettempdir(), "cudal1-cuda-cpu")
CTYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int32, "I": ctypes.c_uint32, "q": ctypes.c_int64,
          "Q": ctypes.c_uint64, "f": ctypes.c_float, "d": ctypes.c_double}


def host_source(source):
    """The device source made host C++: each `extern __shared__ T name[];` becomes a pointer to this
    launch's dynamic shared memory, and each kernel gets an extern "C" emu_<name>(grid, block,
    shared, args) that runs it."""
    src = re.sub(r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?([\w\s]+?)\s*(\w+)\s*\[\s*\]\s*;",
                 lambda m: f"{m[1]}* {m[2]} = reinterpret_cast<{m[1]}*>(emu_dyn_smem);", source)
    calls = "".join(f'extern "C" void emu_{name}(const unsigned* g, const unsigned* b, std::size_t s, void** a) '
                    f"{{ emu_grid({name}, g, b, s, a); }}\n" for name in cudal1.cuda_kernels(source))
    return PRELUDE + "#line 1 \"kernel.cu\"\n" + src + "\n" + LAUNCH + calls


def _dims(d):
    d = (d,) if isinstance(d, int) else tuple(d)
    return (ctypes.c_uint * 3)(*(list(d) + [1, 1, 1])[:3])


def load_cuda(source):
    """cudal1.load_cuda's object for `source`, its kernels run on the CPU (module docstring)."""
    kernels = cudal1.cuda_kernels(source)
    text = host_source(source)
    h = hashlib.sha256(text.encode()).hexdigest()[:16]
    os.makedirs(BUILD_DIR, exist_ok=True)
    so = os.path.join(BUILD_DIR, f"{h}.so")
    if not os.path.exists(so):
        cpp = os.path.join(BUILD_DIR, f"{h}.cpp")
        with open(cpp, "w") as f:
            f.write(text)
        p = subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w", cpp, "-o", so + ".tmp"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise cudal1.BuildError(f"g++ (cuda_cpu) failed:\n{p.stderr[-4000:]}")
        os.replace(so + ".tmp", so)
    lib = ctypes.CDLL(so)

    def launcher(name, codes):
        fn = getattr(lib, f"emu_{name}")

        def launch(grid, block, *args, shared=0, stream=None):
            if len(args) != len(codes):
                raise TypeError(f"{name}: {len(codes)} arguments expected, {len(args)} given")
            g, b = _dims(grid), _dims(block)
            if not all(g) or not all(b):
                return
            vals = [CTYPES[c](a) for c, a in zip(codes, args)]
            ptrs = (ctypes.c_void_p * max(1, len(vals)))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in vals])
            fn(g, b, ctypes.c_size_t(shared), ptrs)
        return launch

    return types.SimpleNamespace(**{name: launcher(name, "".join(c for _, c in ps)) for name, ps in kernels.items()})

"""The fast build path, cudal1.load_cuda: device code only (a cubin) launched by one prebuilt
launcher (launcher.cu). On the CPU: signature parsing, the cache key, the Makefile's cubin rule,
nvcc's errors, and the launcher's argument packing up to the launch (nvcc tests skip without nvcc).
On a GPU (marked): a cubin-launched ReLU checked against torch, every argument type read back,
and the library's ReLU on this path judged by evaluate.judge_many."""
import importlib.util
import os
import shutil
import subprocess
import sys

import pytest
import torch

import cudal1

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
nvcc = pytest.mark.skipif(shutil.which(os.environ.get("NVCC", "nvcc")) is None, reason="no nvcc")
RELU_V4 = os.path.join(ROOT, "kernels", "level1", "19_ReLU.v4.py")

EVERY_TYPE = r"""
// extern "C" __global__ void commented_out(bool b) {}
__global__ void not_exported(float* x) {}  // C++ linkage: not for load_cuda

extern "C" __global__ void __launch_bounds__(256) all_types(
        const float* __restrict__ a, double *b, const void* const c, float d[], int e, int32_t f, signed g,
        unsigned h, unsigned int i, uint32_t j, long long k, long long int l, int64_t m, long n,
        unsigned long long o, uint64_t p, size_t q, unsigned long r, float s, double t) {}

extern "C" __global__ void no_params(void) {}
"""


def test_signature_of_every_supported_type():
    kernels = cudal1.cuda_kernels(EVERY_TYPE)
    assert set(kernels) == {"all_types", "no_params"}
    assert "".join(code for _, code in kernels["all_types"]) == "pppp" + "iii" + "III" + "qqqq" + "QQQQ" + "fd"
    assert kernels["all_types"][0] == ("const float* __restrict__ a", "p")
    assert kernels["no_params"] == []


@pytest.mark.parametrize("param", ["bool flag", "half h", "float4 v", "char c", "const int& n"])
def test_unsupported_type_names_its_parameter(param):
    with pytest.raises(cudal1.BuildError, match=f"kernel k: parameter '{param}' has a type"):
        cudal1.cuda_kernels(f'extern "C" __global__ void k(float* x, {param}) {{}}')
    with pytest.raises(cudal1.BuildError, match='no extern "C" __global__'):
        cudal1.cuda_kernels("__global__ void k(float* x) {}")


KERNEL = r"""#include <cuda_fp16.h>
#define SCALE 2.0f
// scale a vector
extern "C" __global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;  /* one element per thread */
    if (i < n) y[i] = SCALE * x[i];
}
"""


def test_cache_key_ignores_whitespace_and_comments_only():
    key = cudal1.normalise_cuda
    same = [KERNEL.replace("    ", "\t").replace(";", " ;\n"),
            KERNEL.replace("// scale a vector", "/* multi\nline */").replace("/* one element per thread */", ""),
            KERNEL.replace("(const float* x, float* y, int n)", "( const float* x,\n  float* y,  int n )") + "\n\n",
            "\n" + KERNEL.replace("\n", "\r\n")]
    assert all(key(s) == key(KERNEL) for s in same)
    changed = [KERNEL.replace("2.0f", "3.0f"), KERNEL.replace("i < n", "i <= n"),
               KERNEL.replace("2.0f\n// scale a vector\n", "2.0f "),  # the directive swallows the kernel
               KERNEL.replace("y[i] = ", 'printf("a  b"); y[i] = '), KERNEL.replace("y[i] = ", 'printf("a b"); y[i] = ')]
    assert len({key(s) for s in changed + [KERNEL]}) == len(changed) + 1
    assert key("a - -b;") != key("a--b;") and key("#define F(x) x") != key("#define F (x) x")


@nvcc
def test_makefile_cubin_rule_builds_for_sm90():
    stem = f"test-cubin-{os.getpid()}"
    cu, cubin = (os.path.join(ROOT, "build", "kernels", stem + ext) for ext in (".cu", ".cubin"))
    os.makedirs(os.path.dirname(cu), exist_ok=True)
    with open(cu, "w") as f:
        f.write(KERNEL)
    try:
        p = subprocess.run(["make", "-s", "-C", ROOT, f"build/kernels/{stem}.cubin", "ARCH=sm_90",
                            f"PYTHON={sys.executable}"], capture_output=True, text=True)
        assert p.returncode == 0, p.stdout + p.stderr
        with open(cubin, "rb") as f:
            head = f.read(20)
        assert head[:4] == b"\x7fELF" and int.from_bytes(head[18:20], "little") == 190  # EM_CUDA
    finally:
        for path in (cu, cubin):
            if os.path.exists(path):
                os.remove(path)


@nvcc
def test_build_error_carries_nvcc_message():
    src = KERNEL.replace("SCALE * x[i]", f"SCALE * undefined_{os.getpid()}[i]")  # never cached: fails each time
    with pytest.raises(cudal1.BuildError) as e:
        cudal1.load_cuda(src)
    assert f'identifier "undefined_{os.getpid()}" is undefined' in str(e.value)


@nvcc
def test_launcher_builds_and_packs_arguments_by_signature():
    """The launcher compiles (host side, nvcc + pybind11, once per machine) and checks every argument
    against the kernel's signature before it touches the driver, so this runs without a GPU."""
    k = cudal1.load_cuda(KERNEL)
    assert cudal1.load_cuda(KERNEL.replace("    ", "  ") + "// again\n") is k  # the same key: no new build
    assert repr(k.scale) == "<cuda kernel scale(const float* x, float* y, int n)>"
    bad = {(1, 256, 1, 2): "3 kernel arguments", (1, 256, -8, 16, 4): "'const float\\* x' cannot take -8",
           (1, 256, 8, 16, 2 ** 31): "'int n' cannot take 2147483648", (1, 256, 8.0, 16, 4): "cannot take 8.0",
           ((1, 2, 3, 4), 256, 8, 16, 4): "grid must be", (1, -1, 8, 16, 4): "block must be"}
    for args, message in bad.items():
        with pytest.raises(TypeError, match=message):
            k.scale(*args)
    with pytest.raises(TypeError, match="unexpected keyword argument 'streams'"):
        k.scale(1, 256, 8, 16, 4, streams=0)
    assert k.scale((0, 4), 256, 8, 16, 0) is None  # no blocks: no launch, not even a driver look-up
    if not torch.cuda.is_available():  # no driver, or no context: a clear error, never a crash
        with pytest.raises(RuntimeError):
            k.scale(1, 256, 8, 16, 4, shared=0, stream=0)


# ---- on the GPU

def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ARGS = r"""
extern "C" __global__ void echo(int a, unsigned b, long long c, unsigned long long d, float e, double f,
                                double* out) {
    out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = f;
}

extern "C" __global__ void block_sum(const float* x, float* out, int n) {  // dynamic shared memory
    extern __shared__ float buf[];
    for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = x[i];
    __syncthreads();
    if (threadIdx.x == 0) { float s = 0.f; for (int i = 0; i < n; i++) s += buf[i]; out[0] = s; }
}
"""


@pytest.mark.gpu
def test_gpu_cubin_relu_matches_torch():
    model = _load(RELU_V4, "relu_v4").ModelNew()
    for shape in [(16, 16384), (1001,), (0,), (3, 5, 7)]:  # float4 path, scalar path, empty
        x = torch.randn(shape, device="cuda")
        assert torch.equal(model(x), torch.relu(x))
    x = torch.randn(4097, device="cuda")[1:]  # misaligned by 4 bytes: the scalar path
    assert torch.equal(model(x), torch.relu(x))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # stream=None launches on torch's current stream, here s
        x = torch.randn(1 << 20, device="cuda")
        y = model(x)
    s.synchronize()
    assert torch.equal(y, torch.relu(x))
    k = cudal1.load_cuda(ARGS)
    out = torch.zeros(6, dtype=torch.float64, device="cuda")
    vals = [-(2 ** 31), 2 ** 32 - 1, -(2 ** 53), 2 ** 53, 0.5, 1e300]
    k.echo(1, 1, *vals, out.data_ptr())
    assert out.tolist() == vals
    x = torch.rand(20000, device="cuda")  # 80 KB of shared memory: above the 48 KiB default
    y = torch.zeros(1, device="cuda")
    k.block_sum(1, 256, x.data_ptr(), y.data_ptr(), x.numel(), shared=x.numel() * 4,
                stream=torch.cuda.current_stream().cuda_stream)
    assert torch.allclose(y, x.sum().view(1), rtol=1e-4)


@pytest.mark.gpu
def test_gpu_judge_passes_cubin_relu():
    import evaluate
    task = os.path.join(ROOT, "kernelbench", "level1", "19_ReLU.py")
    [rec] = evaluate.judge_many([(task, RELU_V4)], device="cuda", trials=4, warmup=3, iters=200, min_iters=20,
                                time_budget=1.0, timeout=300, jobs=1)
    print(rec["status"], rec.get("speedup"), rec["message"][:200])
    assert rec["status"] == "ok", rec["message"]

"""How long does one small CUDA kernel take to build: our raw-pointer pybind11 path
(cudal1.load_kernel: nvcc on one .cu, no torch headers) vs torch's load_inline?

    python bench/build_time.py            # on a GPU machine; prints one line per path (~1.5 min)

Each build gets a fresh source (a timestamp comment) so neither cache helps.
"""
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import cudal1  # noqa: E402

stamp = f"// build {time.time_ns()}\n"
KERNEL = r'''
__global__ void relu(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
'''
OURS = stamp + "#include <pybind11/pybind11.h>\n#include <cstdint>\n" + KERNEL + r'''
void run(uintptr_t x, uintptr_t y, long n, uintptr_t stream) {
    relu<<<(n + 255) / 256, 256, 0, (cudaStream_t)stream>>>((const float*)x, (float*)y, n);
}
PYBIND11_MODULE(MODULE_NAME, m) { m.def("run", &run); }
'''
THEIRS = stamp + "#include <torch/extension.h>\n" + KERNEL + r'''
torch::Tensor run(torch::Tensor x) {
    auto y = torch::empty_like(x);
    relu<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());
    return y;
}
'''

x = torch.randn(1 << 20, device="cuda")
t0 = time.time()
lib = cudal1.load_kernel(OURS, "cuda")
t_ours = time.time() - t0
y = torch.empty_like(x)
lib.run(x.data_ptr(), y.data_ptr(), x.numel(), torch.cuda.current_stream().cuda_stream)
assert torch.equal(y, x.relu())

from torch.utils.cpp_extension import load_inline  # noqa: E402
t0 = time.time()
mod = load_inline(f"relu_{time.time_ns()}", cpp_sources="torch::Tensor run(torch::Tensor x);",
                  cuda_sources=THEIRS, functions=["run"], build_directory=tempfile.mkdtemp(),
                  extra_cuda_cflags=["-O3", "-arch=sm_90"])
t_theirs = time.time() - t0
assert torch.equal(mod.run(x), x.relu())
print(f"build_time load_kernel {t_ours:.1f} s, load_inline {t_theirs:.1f} s (same kernel, fresh caches)")

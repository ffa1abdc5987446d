"""The library's load_cuda solutions (the RL bank's tasks on the fast path) against their tasks'
references on the GPU: the task's own inputs and the shapes that take each other path of the host
logic (scalar kernels, fallbacks to torch, misaligned or empty inputs). On the CPU: each file builds
its cubin from device code only (skipped without nvcc)."""
import importlib.util
import os
import shutil

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = {  # solution -> task
    "19_ReLU.v4.py": "19_ReLU.py",
    "23_Softmax.v4.py": "23_Softmax.py",
    "47_Sum_reduction_over_a_dimension.v4.py": "47_Sum_reduction_over_a_dimension.py",
    "97_CosineSimilarityLoss.v3.py": "97_CosineSimilarityLoss.py",
    "12_Matmul_with_diagonal_matrices_.v3.py": "12_Matmul_with_diagonal_matrices_.py",
    "26_GELU_.v3.py": "26_GELU_.py",
    "40_LayerNorm.v2.py": "40_LayerNorm.py",
    "88_MinGPTNewGelu.v4.py": "88_MinGPTNewGelu.py",
}


def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path).replace(".", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def odd(*shape):
    """A contiguous tensor whose data starts 4 bytes past a 16-byte boundary: the unaligned path."""
    n = 1
    for s in shape:
        n *= s
    return torch.randn(n + 1, device="cuda")[1:].view(shape)


# task file -> (init args, inputs beyond the task's own: each a function returning the input list)
EXTRA = {
    "19_ReLU.py": ([], [lambda: [torch.randn(1001, device="cuda")], lambda: [odd(64, 64)],
                        lambda: [torch.randn(0, device="cuda")]]),
    "23_Softmax.py": ([], [lambda: [torch.randn(3, 1000, device="cuda")], lambda: [torch.randn(5, 4100, device="cuda")],
                           lambda: [torch.randn(2, 16380, device="cuda")], lambda: [torch.randn(2, 32768, device="cuda")],
                           lambda: [torch.randn(2, 32772, device="cuda")], lambda: [torch.randn(4, 1001, device="cuda")],
                           lambda: [torch.randn(2, 3, 8, device="cuda")], lambda: [odd(4, 64)],
                           lambda: [torch.randn(0, 16, device="cuda")]]),
    "47_Sum_reduction_over_a_dimension.py": ([1], [lambda: [torch.randn(4, 7, 12, device="cuda")],
                                                   lambda: [torch.randn(4, 7, 10, device="cuda")],
                                                   lambda: [torch.randn(3, 0, 8, device="cuda")],
                                                   lambda: [torch.randn(0, 5, 8, device="cuda")],
                                                   lambda: [odd(2, 9, 16)], lambda: [torch.randn(2, 1000, 8, device="cuda")]]),
    "97_CosineSimilarityLoss.py": ([], [lambda: [torch.randn(7, 1001, device="cuda"), torch.randn(7, 1001, device="cuda")],
                                        lambda: [odd(5, 64), torch.randn(5, 64, device="cuda")],
                                        lambda: [torch.randn(300, 64, device="cuda"), torch.randn(300, 64, device="cuda")],
                                        lambda: [torch.randn(2, 3, 8, device="cuda"), torch.randn(2, 3, 8, device="cuda")]]),
    "12_Matmul_with_diagonal_matrices_.py": ([], [lambda: [torch.randn(5, device="cuda"), torch.randn(5, 7, device="cuda")],
                                                  lambda: [torch.randn(8, device="cuda"), torch.randn(8, 16, device="cuda")],
                                                  lambda: [torch.randn(6, device="cuda"), odd(6, 32)]]),
    "26_GELU_.py": ([], [lambda: [torch.randn(1001, device="cuda")], lambda: [odd(64, 64)],
                         lambda: [torch.randn(64, device="cuda", dtype=torch.float64)], lambda: [torch.randn(64)],
                         lambda: [torch.randn(1 << 23, device="cuda")], lambda: [torch.randn(0, device="cuda")]]),
    "40_LayerNorm.py": None,  # its shape is fixed by the constructor: see test_gpu_layer_norm_paths
    "88_MinGPTNewGelu.py": ([], [lambda: [torch.randn(1001, device="cuda")], lambda: [odd(64, 64)],
                                 lambda: [torch.randn(0, device="cuda")]]),
}


def check(sol, ref, xs):
    with torch.no_grad():
        want = ref(*[x.clone() for x in xs])
        got = sol(*xs)
    torch.cuda.synchronize()
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == want.device
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4 * max(1.0, want.abs().max().item() if want.numel() else 1.0))


@pytest.mark.skipif(shutil.which(os.environ.get("NVCC", "nvcc")) is None, reason="no nvcc")
@pytest.mark.parametrize("sol", sorted(FILES))
def test_builds_device_code_only(sol):
    """Each file imports on the CPU (its cubin builds for sm_90) and holds only extern "C" kernels
    with no host code: nothing of pybind11, the runtime's launches or the driver's."""
    m = load(os.path.join(ROOT, "kernels", "level1", sol))
    assert "PYBIND11" not in m.CUDA_SRC and "<<<" not in m.CUDA_SRC and "cuLaunch" not in m.CUDA_SRC
    assert vars(m._k) and all(repr(k).startswith("<cuda kernel ") for k in vars(m._k).values())


@pytest.mark.gpu
@pytest.mark.parametrize("sol", sorted(FILES))
def test_gpu_matches_reference(sol):
    torch.backends.cuda.matmul.allow_tf32 = False
    task = load(os.path.join(ROOT, "kernelbench", "level1", FILES[sol]))
    m = load(os.path.join(ROOT, "kernels", "level1", sol))
    init = task.get_init_inputs()
    torch.manual_seed(0)
    ref = task.Model(*init).cuda()
    new = m.ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict())
    cases = [lambda: [x.cuda() for x in task.get_inputs()]] + (EXTRA[FILES[sol]] or ([], []))[1]
    for make in cases:
        for _ in range(2):  # twice: state kept between calls (a plan, a ticket counter) must stay right
            xs = make()
            check(new, ref if xs[0].is_cuda else ref.cpu(), xs)
            ref.cuda()


@pytest.mark.gpu
def test_gpu_layer_norm_paths():
    task = load(os.path.join(ROOT, "kernelbench", "level1", "40_LayerNorm.py"))
    m = load(os.path.join(ROOT, "kernels", "level1", "40_LayerNorm.v2.py"))
    for shape, lead in [((4, 8, 8), (3,)), ((5, 3), (2, 6)), ((70000,), (2,))]:  # kernels; fallback (15 % 4); 3 chunks
        torch.manual_seed(1)
        ref = task.Model(shape).cuda()
        with torch.no_grad():
            ref.ln.weight.normal_()
            ref.ln.bias.normal_()
        new = m.ModelNew(shape).cuda()
        new.load_state_dict(ref.state_dict())
        x = torch.randn(*lead, *shape, device="cuda") * 3 + 5  # a mean far from zero: the shifted sums
        check(new, ref, [x])

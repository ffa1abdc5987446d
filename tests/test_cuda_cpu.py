"""load_cuda kernels run on the CPU (tests/cuda_cpu.py): the emulator against plain torch on kernels
that use what it models, on what the GPU leaves undefined, and against library files the H200 judged
correct (among them the promoted drafts that sum across blocks, also at sizes where a sample spans
blocks); then every draft in drafts/ (solutions written without a GPU) against its task's reference at
tests/task_sizes' sizes under the judge's strict rule (cuda_cpu.check), its cubin built with nvcc, and
its text read as a solution awaiting the measurement bench/promote_drafts.py writes in when it wins."""
import ast
import glob
import importlib.util
import os
import shutil

import pytest
import torch

import cuda_cpu
import cudal1
import evaluate
import test_library
from test_tasks import small_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("promote_drafts", os.path.join(ROOT, "bench", "promote_drafts.py"))
promote_drafts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(promote_drafts)
DRAFTS = sorted(glob.glob(os.path.join(ROOT, "drafts", "level*", "*.py")))
# library files judged correct on the H200 that use barriers, shuffles and shared memory: the emulator must pass them
KNOWN_GOOD = ["kernels/level2/90_Conv3d_LeakyReLU_Sum_Clamp_GELU.py", "kernels/level2/61_ConvTranspose3d_ReLU_GroupNorm.py",
              "kernels/level2/78_ConvTranspose3d_Max_Max_Sum.py"]
# files that sum across blocks (norm statistics, means): also checked at sizes where a sample spans several
# blocks, which tests/task_sizes' one-block sizes leave untried; a draft's entry follows it into kernels/
SPAN = {f"kernels/level2/{name}": {"depth": 8, "height": 16, "width": 16} for name in (
    "27_Conv3d_HardSwish_ReLU_Softmax_Mean.v2.py", "79_Conv3d_Multiply_InstanceNorm_Clamp_Multiply_Max.v2.py",
    "8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum.v2.py")}
SPAN.update({f"kernels/level2/{name}": {"depth": 4, "height": 16, "width": 16} for name in (
    "72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool.v2.py", "60_ConvTranspose3d_Swish_GroupNorm_HardSwish.v2.py",
    "15_ConvTranspose3d_BatchNorm_Subtract.v2.py")})
SPAN["kernels/level2/19_ConvTranspose2d_GELU_GroupNorm.v3.py"] = {"height": 16, "width": 16}

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

REDUCE = r"""
__device__ float block_sum(float v, float* sh) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    float t = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += sh[w];
    __syncthreads();
    return t;
}
// row sums of x (rows, n) two ways: a block per row, and one atomicAdd per element into total
extern "C" __global__ void row_sums(const float* __restrict__ x, float* rows, float* total, long long n) {
    __shared__ float sh[32];
    extern __shared__ float stage[];  // blockDim.x floats: each thread's partial, read back reversed
    float s = 0.f;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) {
        s += x[blockIdx.x * n + i];
        atomicAdd(total, x[blockIdx.x * n + i]);
    }
    stage[threadIdx.x] = s;
    __syncthreads();
    const float t = block_sum(stage[blockDim.x - 1 - threadIdx.x], sh);
    if (threadIdx.x == 0) rows[blockIdx.x] = t;
}
// y[i] = x of the lane 3 to the left in its warp (its own value for lanes 0-2); early exit past n
extern "C" __global__ void shift_up(const float* x, float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float v = i < n ? x[i] : 0.f;
    const float u = __shfl_up_sync(0xffffffffu, v, 3);
    if (i >= n) return;
    __syncthreads();  // the threads that returned no longer count
    y[i] = u;
}
"""


def test_emulated_kernels_match_torch():
    k = cuda_cpu.load_cuda(REDUCE)
    x = torch.randn(5, 1000)
    rows, total = torch.zeros(5), torch.zeros(1)
    k.row_sums(5, 128, x.data_ptr(), rows.data_ptr(), total.data_ptr(), 1000, shared=128 * 4)
    assert torch.allclose(rows, x.sum(1), atol=1e-3)
    assert torch.allclose(total, x.sum().view(1), atol=1e-2)
    x, y = torch.randn(70), torch.zeros(70)
    k.shift_up(1, 96, x.data_ptr(), y.data_ptr(), 70)
    want = torch.cat([x[i - 3:i - 3 + 1] if i % 32 >= 3 else x[i:i + 1] for i in range(70)])
    assert torch.equal(y, want)


UNDEFINED = r"""
extern "C" __global__ void stale(float* y) {  // reads shared memory it never wrote
    __shared__ float sh[4];
    y[blockIdx.x] = sh[0];
}
extern "C" __global__ void __launch_bounds__(64) next_block(float* y) {  // reads a later block's write
    if (threadIdx.x == 0) y[blockIdx.x] = blockIdx.x + 1 < gridDim.x ? y[blockIdx.x + 1] + 1.f : 1.f;
}
extern "C" __global__ void early_exit(float* y, int n) {  // a full-mask shuffle after some lanes returned
    if ((int)threadIdx.x >= n) return;
    y[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.f, 16);
}
"""


def test_what_the_gpu_leaves_undefined_fails_on_the_cpu():
    k = cuda_cpu.load_cuda(UNDEFINED)
    y = torch.zeros(3)
    k.stale(3, 32, y.data_ptr())
    assert y.isnan().all(), "shared memory starts as NaN in every block, not as the last block left it"
    runs = []
    for _ in range(2):
        y = torch.zeros(3)
        k.next_block(3, 32, y.data_ptr())
        runs.append(y.tolist())
    assert runs[0] != runs[1], "blocks run in opposite orders at two launches, so a cross-block race shows"
    y = torch.zeros(32)  # held: a tensor made in the call's arguments is freed before the kernel runs
    with pytest.raises(RuntimeError, match="returned"):
        k.early_exit(1, 32, y.data_ptr(), 8)
    with pytest.raises(ValueError, match="launch"):
        k.next_block(3, 128, y.data_ptr())  # more threads than its __launch_bounds__
    with pytest.raises(ValueError, match="launch"):
        k.stale((1, 70000), 32, y.data_ptr())


def test_a_bad_kernel_is_a_build_error():
    with pytest.raises(cudal1.BuildError, match="g\\+\\+"):
        cuda_cpu.load_cuda('extern "C" __global__ void f(float* y) { y[0] = undeclared; }')


def check(path):
    """cuda_cpu.check at the test sizes, and at SPAN's larger ones where the file has an entry."""
    cuda_cpu.check(path)
    key = os.path.relpath(path, ROOT)
    if key in SPAN:
        cuda_cpu.check(path, SPAN[key])


@pytest.mark.parametrize("key", KNOWN_GOOD + sorted(k for k in SPAN if k.startswith("kernels/")))
def test_emulator_passes_kernels_the_h200_passed(key):
    check(os.path.join(ROOT, key))


@pytest.mark.parametrize("path", DRAFTS, ids=[os.path.relpath(p, ROOT) for p in DRAFTS])
def test_draft_matches_its_task_on_the_cpu(path):
    check(path)


def test_span_names_real_files():
    assert all(os.path.exists(os.path.join(ROOT, key)) for key in SPAN)


@pytest.mark.skipif(shutil.which(os.environ.get("NVCC", "nvcc")) is None, reason="no nvcc")
@pytest.mark.parametrize("path", DRAFTS, ids=[os.path.relpath(p, ROOT) for p in DRAFTS])
def test_draft_builds_with_nvcc(path):
    """g++ accepts what nvcc may not (and the other way round): each draft's cubin builds for sm_90."""
    task = small_task(cudal1.task_of(path, os.path.join(ROOT, "kernelbench")))
    evaluate.load_module(path, "nvcc_" + os.path.basename(path).replace(".", "_"), scope=task)


@pytest.mark.parametrize("path", DRAFTS, ids=[os.path.relpath(p, ROOT) for p in DRAFTS])
def test_draft_reads_as_a_solution_awaiting_its_measurement(path):
    """As test_library asks of kernels/ (an analysis first, the task's constructor, no lab notes), and the
    closing sentence bench/promote_drafts.py replaces by the H200's number when the draft wins."""
    test_library.test_a_solution_reads_as_a_solution_of_its_task(path)
    assert promote_drafts.PENDING.search(ast.get_docstring(ast.parse(open(path).read())))


def test_promote_moves_only_a_correct_draft_that_beat_the_library(tmp_path):
    rec = lambda task, sol, s, ok=True: {"task": f"level2/{task}.py", "solution": sol, "correct": ok, "speedup": s,
                                         "ref_ms": 1.0, "sol_ms": 1.0 / s if s else None, "status": "ok" if ok else "wrong"}
    rows = promote_drafts.decide([rec("1_A", "kernels/level2/1_A.py", 1.2), rec("1_A", "drafts/level2/1_A.py", 2.5),
                                  rec("2_B", "kernels/level2/2_B.py", 1.5), rec("2_B", "drafts/level2/2_B.py", 1.4),
                                  rec("3_C", "kernels/level2/3_C.py", 1.1), rec("3_C", "drafts/level2/3_C.py", None, False),
                                  rec("4_D", "kernels/level2/4_D.py", 1.3)])
    assert [(t, v.split(":")[0]) for t, _, _, v in rows] == [("level2/1_A.py", "moves"), ("level2/2_B.py", "stays"),
                                                             ("level2/3_C.py", "stays")]
    text = promote_drafts.promoted_source('"""An analysis. Not yet measured on\nthe H200.\n"""\n', rows[0][1])
    assert "Measured on the H200: 2.50x over eager (1 -> 0.4 ms)." in text and "Not yet" not in text
    on_h100 = dict(rows[0][1], env={"gpu": "NVIDIA H100 80GB HBM3"})
    assert "Measured on the H100: 2.50x" in promote_drafts.promoted_source('"""Not yet measured on the H200."""', on_h100)
    (tmp_path / "1_A.v2.py").write_text("")
    assert promote_drafts.free_name(str(tmp_path), "1_A.py") == promote_drafts.free_name(str(tmp_path), "1_A.v3.py") \
        == "1_A.v3.py"
    two = promote_drafts.decide([rec("6_F", "kernels/level2/6_F.py", 1.2), rec("6_F", "drafts/level2/6_F.py", 2.0),
                                 rec("6_F", "drafts/level2/6_F.v2.py", 3.0), rec("6_F", "drafts/level2/6_F.v3.py", None, False)])
    assert two[0][1]["solution"] == "drafts/level2/6_F.v2.py" and two[0][3] == "moves", "the fastest correct draft competes"
    near = promote_drafts.decide([rec("5_E", "kernels/level2/5_E.py", 1.00), rec("5_E", "drafts/level2/5_E.py", 1.03)])
    assert near[0][3].startswith("stays"), "a win inside a run's timing noise moves nothing"

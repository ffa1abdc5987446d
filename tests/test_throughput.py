"""bench/judge_throughput.py's candidate sets, built on the CPU without judging: at least 64 CUDA
candidates over at least 8 tasks plus the PyTorch share, every source distinct (across arms and
runs), the same (task, kind, n) in the same order in every arm, each arm on its own build route, the
load_inline wrappers' types, the report from made-up rows, and a sample of the marked CUDA sources
compiled by nvcc for sm_90 (skipped without nvcc)."""
import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys

import pytest

import cudal1
import evaluate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("judge_throughput", os.path.join(ROOT, "bench", "judge_throughput.py"))
jt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(jt)  # definitions only: main() runs under __main__
nvcc = pytest.mark.skipif(shutil.which(os.environ.get("NVCC", "nvcc")) is None, reason="no nvcc")


@pytest.fixture(scope="module")
def sets():
    return {arm: jt.candidates(arm, 8, 0.25, "0123abcd") for arm in jt.ARMS}


def cuda_string(source):
    return source.split(jt.OPEN, 1)[1].split('"""', 1)[0]


def test_same_candidates_in_every_arm(sets):
    ks = [c["key"] for c in sets["a"]]
    assert all([c["key"] for c in cands] == ks for cands in sets.values())
    assert len(set(ks)) == len(ks)
    cuda = [k for k in ks if k[1] == "cuda"]
    assert len(cuda) >= 64 and len({k[0] for k in cuda}) >= 8
    assert 0.24 <= 1 - len(cuda) / len(ks) <= 0.26  # the PyTorch share RL is assumed to produce
    assert all(os.path.exists(c["task"]) for c in sets["a"])


def test_every_source_is_new_code(sets):
    other_run = jt.candidates("b", 8, 0.25, "4567cdef")
    sources = [c["source"] for cands in sets.values() for c in cands] + [c["source"] for c in other_run]
    assert len(set(sources)) == len(sources)
    assert len({cudal1.same_code(s) for s in sources}) == len(sources)  # not even RL's "same code"
    # load_cuda's cache key ignores comments and layout: the marker is a directive, so it stays
    fast = [cudal1.normalise_cuda(cuda_string(c["source"])) for c in sets["b"] + other_run if c["key"][1] == "cuda"]
    assert len(set(fast)) == len(fast)


def test_each_arm_takes_its_route(sets):
    for arm, cands in sets.items():
        for c in cands:
            s = c["source"]
            if c["key"][1] == "pytorch":
                assert "class ModelNew(Model):" in s and cudal1.solution_kind(s) == "pytorch"
                continue
            assert f"#define CANDIDATE_{arm.upper()}_" in cuda_string(s)
            if "load_kernel" in jt.ARMS[arm][0]:  # the route the arm's row names (v once got load_inline's files)
                assert "cudal1.load_kernel(CUDA_SRC" in s and "PYBIND11_MODULE" in s and "load_cuda" not in s
            elif "load_cuda" in jt.ARMS[arm][0]:  # b and its levers: b's files, judged with other settings
                assert "cudal1.load_cuda(CUDA_SRC)" in s and "PYBIND11_MODULE" not in s
            else:
                assert "load_inline(" in s and "cudal1" not in s.split('"""', 2)[2]  # the docstring may name it
                kernels = cudal1.cuda_kernels(cuda_string(s))
                assert all(f"_ext.launch_{k})" in s and f"{k}<<<dim3(" in s for k in kernels)
            compile(s, c["task"], "exec")


def test_an_arm_whose_row_names_no_route_fails(monkeypatch):
    monkeypatch.setitem(jt.ARMS, "z", ("pybind11 and nothing else", {}))
    with pytest.raises(ValueError, match="names none of"):
        jt.route("z")


def test_inline_wrapper_passes_each_parameter_as_declared():
    assert jt.pointer_type("const float4* __restrict__ x") == "const float4*"
    assert jt.pointer_type("float *__restrict y") == "float *"
    assert jt.pointer_type("double2* ws") == "double2*"
    assert jt.pointer_type("float d[]") == "float*"
    assert jt.pointer_type("const void* const c") == "const void* const"
    fast = (f'"""doc"""\nimport cudal1\n\n{jt.OPEN}\nextern "C" __global__ void k(const float* __restrict__ x, '
            'unsigned n, double e, long long m) {}\n"""\n_k = cudal1.load_cuda(CUDA_SRC)\n')
    s = jt.inline_solution(fast, "m0")
    assert "void launch_k(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, int64_t bz, int64_t shared, " \
           "int64_t stream, int64_t a0, unsigned int a1, double a2, int64_t a3);" in s
    assert "k<<<dim3(gx, gy, gz), dim3(bx, by, bz), shared, (cudaStream_t)stream>>>(" \
           "(const float*)(uintptr_t)a0, a1, a2, a3);" in s
    with pytest.raises(ValueError):
        jt.inline_solution(fast.replace("import cudal1\n", ""), "m0")


def test_report_states_the_ratios_against_the_goals():
    ks = jt.keys(1, 0.25)
    env = dict(gpu="NVIDIA H200", commit="abc1234", driver="1", torch="2", cuda="13")
    row = dict(route="r", judge="j", candidates=len(ks), wall_s=60.0, to_record_s=10.0, record_wall_s=5.0,
               gpu_busy=0.5, statuses={"cuda ok": 8, "pytorch ok": 3}, env=env, command="python x", records=[])
    arms = {"a": {**row, "per_gpu_min": 10.0}, "b": {**row, "per_gpu_min": 40.0}, "c": {**row, "per_gpu_min": 5.0}}
    md = jt.report(dict(per_task=1, torch_share=0.25, keys=ks, arms=arms))
    assert "(b)/(c) = 8.0x" in md and "at least 10x: not met" in md
    assert "(b)/(a) = 4.0x" in md and "at least 3x: met" in md
    assert md.count("commit abc1234") == 3


@nvcc
def test_marked_sources_compile(sets):
    """Three marked CUDA candidates, drawn from arms a and b, built as their route builds them: b's
    through the Makefile's cubin rule, a's device code through nvcc -cubin with pybind11's headers
    (the host half of a pybind11 build takes ~11 s; the marker sits before either). Arm c's torch
    headers take a minute to compile: the GPU run builds those."""
    pool = [(arm, c) for arm in "ab" for c in sets[arm] if c["key"][1] == "cuda"]
    sample = random.Random(13).sample(pool, 3)
    inc = subprocess.run([sys.executable, "-m", "pybind11", "--includes"], capture_output=True, text=True).stdout.split()
    for i, (arm, c) in enumerate(sample):
        stem = f"test-throughput-{os.getpid()}-{i}"
        cu, cubin = (os.path.join(ROOT, "build", "kernels", stem + ext) for ext in (".cu", ".cubin"))
        os.makedirs(os.path.dirname(cu), exist_ok=True)
        with open(cu, "w") as f:
            f.write(cuda_string(c["source"]))
        try:
            if arm == "b":
                cmd = ["make", "-s", "-C", ROOT, f"build/kernels/{stem}.cubin", "ARCH=sm_90", f"PYTHON={sys.executable}"]
            else:
                cmd = [os.environ.get("NVCC", "nvcc"), "-cubin", "-O3", "-arch=sm_90", "-std=c++17", *inc,
                       f"-DMODULE_NAME=k{i}", cu, "-o", cubin]
            p = subprocess.run(cmd, capture_output=True, text=True)
            assert p.returncode == 0 and os.path.exists(cubin), f"{arm} {c['key']}: {p.stdout}{p.stderr}"
        finally:
            for path in (cu, cubin):
                if os.path.exists(path):
                    os.remove(path)


def test_arms_differ_by_one_lever():
    # b and c: the screen as first measured (waves); d adds builds beside measuring, e a shorter timing
    b = jt.ARMS["b"][1]
    assert b["screen"] and b["overlap"] is False and jt.ARMS["c"][1] == b
    assert jt.ARMS["d"][1] == {**b, "overlap": True} and jt.ARMS["e"][1] == {**b, "overlap": True, "time_budget": 0.1}
    assert jt.ARMS["v"][1] == {**jt.ARMS["w"][1], "time_budget": 0.1, "min_iters": 5}
    assert evaluate.SCREEN == {**b, "overlap": True}  # RL's screen kept the lever that paid


def test_judge_phases_split_a_run_on_the_cpu(tmp_path):
    # bench/judge_phases.py on a PyTorch-level ReLU: every phase of the call tree is timed, inner ones
    # within the outer ones, and the table names them all
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import judge_phases
    sol = tmp_path / "19_ReLU.py"
    sol.write_text("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n")
    for spent in judge_phases.profile(os.path.join(ROOT, "kernelbench/level1/19_ReLU.py"), str(sol), "cpu", 1):
        assert spent.keys() == {n for _, n in judge_phases.PHASES} and spent["run"] > 0
        assert spent["run"] >= spent["checked_trial"] + spent["timed_rounds"] and spent["verify"] >= spent["_compare"]
    assert evaluate.Worker.run.__name__ == "run" and evaluate._compare.__name__ == "_compare"  # put back
    out = tmp_path / "phases.md"
    assert judge_phases.main([os.path.join(ROOT, "kernelbench/level1/19_ReLU.py"), str(sol), "--device", "cpu",
                              "--repeats", "1", "--out", str(out)]) == 0
    assert "| · · · · _compare |" in out.read_text()


def test_held_out_ceiling_judges_every_move_and_the_policy_in_one_call(tmp_path):
    # bench/held_out_ceiling.py on 3 CPU-sized held-out tasks: each teacher move judged, the best per task
    # and its geomean; the third task's no-op dropped and its fold_reduction composed (teacher.composed);
    # the policy's answer (here the first task's first move, and a broken one for the second) judged in the
    # same call and shown with its move's mark
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import json
    import held_out_ceiling
    from kernelbench import generate, teacher
    work = tmp_path / "work"
    t1, t2, t3 = cudal1.held_out_tasks(str(work), 3, "cpu")["generated"]
    assert [m for m, _ in teacher.composed(cudal1.read(t3), generate.read_meta(t3))] == [
        "drop_noop+fuse_epilogue", "drop_noop+fold_reduction"]  # the sample this test reads
    move, sol = [(m, s) for m, s in teacher.solutions(cudal1.read(t1), generate.read_meta(t1))
                 if cudal1.runs_on(s, "cpu")][0]  # one the CPU runs
    answers = tmp_path / "held_out_answers.jsonl"
    answers.write_text("".join(json.dumps(dict(step=0, task=f"out/x/held_out/levelG/{os.path.basename(t)}", attempt=1,
                                               source=src)) + "\n" for t, src in ((t1, sol), (t2, "class ModelNew: pass\n"))))
    out = tmp_path / "ceiling.md"
    assert held_out_ceiling.main(["--tasks", "3", "--device", "cpu", "--work", str(work), "--answers", str(answers),
                                  "--out", str(out)]) == 0
    rows = {line.split(" | ")[0][2:]: line.split(" | ") for line in out.read_text().splitlines() if line.startswith("| ") and ".py" in line}
    assert set(rows) == {os.path.basename(t) for t in (t1, t2, t3)}
    assert move in rows[os.path.basename(t1)][1] and rows[os.path.basename(t2)][4] == "failed |"
    assert rows[os.path.basename(t1)][4].endswith("x |")  # the policy's answer passed, with its speedup
    assert rows[os.path.basename(t1)][3] == "-" and rows[os.path.basename(t3)][4] == "- |"  # nothing composed; no answer
    # both compositions judged (the fused one a C++ loop on the CPU), in the moves and the best in its own column
    for m in ("fold_reduction", "fuse_epilogue"):
        assert re.search(rf"drop_noop\+{m} \d+\.\d\dx", rows[os.path.basename(t3)][1]), rows[os.path.basename(t3)]
    assert re.fullmatch(r"(drop_noop\+(fold_reduction|fuse_epilogue) \d+\.\d\d|reference 1\.00)x", rows[os.path.basename(t3)][3])
    text = out.read_text()
    assert "**Best move per task: geomean " in text and "composed where a task admits both" in text
    assert "the policy's answers" in text


def test_level2_vs_library_judges_the_policy_beside_every_library_file(tmp_path):
    # bench/level2_vs_library.py on the CPU: task 59's answers from two runs (a duplicate with a blank line,
    # a failure, a generated task's answer: none of them judged), every library file of 59 (NAME.py, which
    # fails, and NAME.v2.py; not 5_'s), one judge call, and the row built from each side's fastest pass
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import json
    import level2_vs_library
    swish = ("import torch\nclass ModelNew(Model):\n    def forward(self, x):\n        x = self.matmul(x)\n"
             "        return x * torch.sigmoid(x) * self.scaling_factor\n")
    broken = swish.replace("torch.sigmoid(x)", "x")
    kernels = tmp_path / "kernels" / "level2"
    kernels.mkdir(parents=True)
    for name, src in (("59_Matmul_Swish_Scaling.py", broken), ("59_Matmul_Swish_Scaling.v2.py", swish),
                      ("5_ConvTranspose2d_Subtract_Tanh.py", swish)):
        (kernels / name).write_text(src)
    task = "kernelbench/level2/59_Matmul_Swish_Scaling.py"
    rows = [dict(step=0, task=task, attempt=1, status="ok", speedup=1.2, source=swish),
            dict(step=3, task=task, attempt=2, status="ok", speedup=1.3, source=swish + "\n"),  # the same code
            dict(step=3, task=task, attempt=1, status="incorrect", speedup=None, source=broken),
            dict(step=0, task="out/x/held_out/levelG/4_Gemm_Multiply_Max.py", attempt=1, status="ok", speedup=1.4,
                 source=swish)]
    for run, part in (("a", rows[:2]), ("b", rows[2:])):
        (tmp_path / run).mkdir()
        (tmp_path / run / "held_out_answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part) + '{"cut')
    answers = level2_vs_library.policy_answers([str(tmp_path / "a"), str(tmp_path / "b")], per_task=3)
    assert list(answers) == ["59_Matmul_Swish_Scaling.py"] and len(answers["59_Matmul_Swish_Scaling.py"]) == 1
    assert answers["59_Matmul_Swish_Scaling.py"][0][1].endswith("a step 3 attempt 2")  # the faster reading names it
    files = level2_vs_library.library_files(str(tmp_path / "kernels"), "59_Matmul_Swish_Scaling.py")
    assert [os.path.basename(p) for p in files] == ["59_Matmul_Swish_Scaling.py", "59_Matmul_Swish_Scaling.v2.py"]
    out = tmp_path / "vs.md"
    assert level2_vs_library.main([str(tmp_path / "a"), str(tmp_path / "b"), "--kernels", str(tmp_path / "kernels"),
                                   "--device", "cpu", "--time-budget", "0.05", "--out", str(out)]) == 0
    row = next(line for line in out.read_text().splitlines() if line.startswith("| 59_"))
    lib, mine, lib_again, mine_again, ratio = row.split(" | ")[1:6]
    assert lib.endswith("(59_Matmul_Swish_Scaling.v2.py)")  # NAME.py failed: not the best
    assert "a step 3 attempt 2" in mine
    assert float(ratio) > 0 and "x (" in lib_again and "x (" in mine_again  # read again: median (slowest-fastest)
    records = [json.loads(line) for line in (tmp_path / "vs.jsonl").read_text().splitlines()]
    assert len(records) == 3 + 2 * 5  # two library files and the answer, then each side's fastest 5 times
    assert [(r["side"], r["read_again"]) for r in records[3:5]] == [("library", True), ("policy", True)]
    assert records[0]["what"].endswith("59_Matmul_Swish_Scaling.py") and not records[0]["read_again"]


def test_level2_vs_library_verdict():
    """Beaten only where both sides' re-readings all pass, the policy's median speedup is BEAT times the
    library's and its slowest reading beats the library's fastest; each side's best is its highest speedup."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import level2_vs_library as vs
    ok = lambda *xs: [dict(correct=True, status="ok", speedup=x) for x in xs]
    assert vs.verdict(ok(1.0, 1.0, 1.0), ok(1.06, 1.07, 1.1)) == (pytest.approx(1.07), "yes")
    assert vs.verdict(ok(1.0, 1.0, 1.0), ok(1.05, 1.05, 1.05))[1] == "no"  # under BEAT
    assert vs.verdict(ok(1.0, 1.0, 1.1), ok(1.06, 1.2, 1.3))[1] == "no"  # the medians far apart, the ranges overlap
    assert vs.verdict(ok(2.0), ok(1.0))[1] == "no"
    failed = [dict(correct=False, status="incorrect")]
    assert vs.verdict(ok(1.0) + failed, ok(2.0)) == (None, "no library reading")
    assert vs.verdict(None, ok(2.0)) == (None, "no library reading")
    assert vs.verdict(ok(1.0), ok(2.0, 2.0) + failed)[0] is None  # an answer that fails once is not correct
    # fastest: by speedup (a worker's times move together); a failure first is passed over for any pass
    fail, slow, quick = (failed[0], "f"), (ok(1.5)[0], "s"), (ok(3.0)[0], "q")
    assert vs.fastest([fail, slow, quick])[1] == "q" and vs.fastest([fail])[1] == "f"
    assert vs.fastest([]) == (None, "no file")


def test_level2_vs_library_prints_each_beaten_tasks_own_answer(tmp_path, monkeypatch):
    """Two tasks answered at the same run, step and attempt (their 'where' alike), both beaten by a faked
    judge (the library 1.0x, the policy 2.0x, every reading): each task's section shows its own answer's code,
    and each side's fastest is read again --readings times."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import json
    import level2_vs_library
    names = ("59_Matmul_Swish_Scaling.py", "66_Matmul_Dropout_Mean_Softmax.py")
    (tmp_path / "kernels" / "level2").mkdir(parents=True)
    for n in names:
        (tmp_path / "kernels" / "level2" / n).write_text("# the library's\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "held_out_answers.jsonl").write_text("".join(
        json.dumps(dict(step=3, task=f"kernelbench/level2/{n}", attempt=1, status="ok", speedup=1.5,
                        source=f"# the answer to {n}\n")) + "\n" for n in names))

    calls = []

    def judge_many(pairs, **kw):
        calls.append(pairs)
        fails = lambda src: "broken" in (open(src).read() if os.path.exists(src) else src)
        return [dict(correct=False, status="incorrect") if fails(src) else
                dict(correct=True, status="ok", speedup=2.0 if "# the answer" in src else 1.0) for _, src in pairs]
    monkeypatch.setattr(level2_vs_library.evaluate, "judge_many", judge_many)
    out = tmp_path / "vs.md"
    assert level2_vs_library.main([str(tmp_path / "run"), "--kernels", str(tmp_path / "kernels"), "--device", "cpu",
                                   "--readings", "3", "--out", str(out)]) == 0
    text = out.read_text()
    assert "library's fastest): 2 of 2**" in text
    # read again interleaved: reading by reading, task by task, the library's then the policy's
    assert [len(c) for c in calls] == [4, 2 * 2 * 3]
    assert [(os.path.basename(t)[:2], "answer" in src, src.rsplit("# reading ", 1)[1]) for t, src in calls[1]] == \
        [(n[:2], mine, f"{k}\n") for k in (1, 2, 3) for n in names for mine in (False, True)]
    for n in names:
        assert f"## {n}: the policy's answer\n\n```python\n# the answer to {n}\n```" in text, text
    # a library that fails its first reading is not read again, and the row says so, not that the policy failed
    (tmp_path / "kernels" / "level2" / names[0]).write_text("# the library's, broken\n")
    calls.clear()
    assert level2_vs_library.main([str(tmp_path / "run"), "--kernels", str(tmp_path / "kernels"), "--device", "cpu",
                                   "--readings", "2", "--out", str(tmp_path / "vs2.md")]) == 0
    row = next(line for line in (tmp_path / "vs2.md").read_text().splitlines() if line.startswith("| 59_"))
    assert row.endswith("| no library reading |") and len(calls[1]) == 2 * 2, row

"""kernelbench/teacher.py: every teacher solution of CPU-sized tasks passes the judge on the CPU (the
fused epilogue as a C++ loop, cudal1.load_c), every fused solution's CUDA source compiles for sm_90
and its Python side packs the kernel's arguments right, the teacher is deterministic, and each solution applies its one move and leaves every other
op of the chain as it was; each move is priced by the kernels it launches."""
import ast
import collections
import hashlib
import os
import re
import runpy
import shutil
import subprocess
import sys
import types

import pytest
import torch

import cudal1
import evaluate
from kernelbench import generate as gen
from kernelbench import teacher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PER_MOVE = 5  # solutions of each move in the sample


def fused_feature(source):
    """What a fused solution's kernel exercises: its template, and the op it reduces or pools over."""
    m = re.search(r"through the ops (?:before|after) (\w+)", source)
    return "elementwise" if m is None else m.group(1) + ("_1d" if "AvgPool1d" in source else "")


def sample(size="cpu"):
    """Seeds whose tasks give PER_MOVE solutions of each move and a fused kernel of each template and
    row or window op: the first seeds that add something, so the sample stays small. Each task's
    solutions are the CPU's (a C++ fused epilogue) and, after them, its fused epilogue in CUDA."""
    want = collections.Counter({m: PER_MOVE for m in gen.MOVES})
    want.update({k: 1 for k in ("elementwise", "sum", "mean", "max", "logsumexp", "softmax", "global_avg_pool",
                                "batch_norm", "group_norm", "layer_norm", "instance_norm", "max_pool", "avg_pool")})
    chosen, seed = {}, 0
    while +want and seed < 5000:
        name, source, meta = gen.generate(seed, size)
        sols = teacher.solutions(source, meta)
        adds = [m for m, _ in sols] + [fused_feature(s) for m, s in sols if m == "fuse_epilogue"]
        if any(want[a] > 0 for a in adds):
            chosen[seed] = (name, source, meta, sols, dict(teacher.solutions(source, meta, cpu=False)).get("fuse_epilogue"))
            want.subtract(adds)
        seed += 1
    assert not +want, f"no task in 5000 seeds gives {dict(+want)}"
    return chosen


SAMPLE = sample()


def forward_lines(source, cls):
    """The code lines of `cls`'s forward, comments stripped."""
    body = re.split(rf"class {cls}\((?:nn.Module|Model)\):", source, maxsplit=1)[1].split("    def forward(", 1)[1].split("\n")[1:]
    out = []
    for line in body:
        if line.strip() and not line.startswith("        "):
            break  # the class ends
        if line.strip():
            out.append(line.split("  #")[0].strip())
    return out


# A fused solution whose task's fp32 reference is rounding noise: the clamp leaves the norm's rows nearly
# constant, so the norm divides their noise by ~sqrt(eps). Against float64, torch's fp32 output is 2.3e-5
# off and the C++ loop (double sums) 4.4e-6, where the strict tolerance is 2.7e-7: either may fail.
NOISY = {"77_ConvTranspose3d_Max_BiasAdd_InstanceNorm.fuse_epilogue.py"}


def test_teacher_solutions_pass_the_judge_on_cpu(tmp_path):
    pairs, moves = [], []
    for name, source, meta, sols, _ in SAMPLE.values():
        gen.write(str(tmp_path / "tasks" / "levelG"), name, source, meta)
        for move, sol in sols:
            path = tmp_path / "solutions" / "levelG" / f"{name}.{move}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(sol)
            pairs.append((str(tmp_path / "tasks" / "levelG" / f"{name}.py"), str(path)))
            moves.append(move)
    assert evaluate.find_pairs(evaluate.find_tasks(str(tmp_path / "tasks" / "levelG")),
                               str(tmp_path / "solutions" / "levelG")) == sorted(pairs)  # the CLI's layout pairs
    records = evaluate.judge_many(pairs, device="cpu", trials=2, iters=3, min_iters=1, time_budget=0.1, jobs=2)
    done = collections.Counter()
    for move, (task, sol), rec in zip(moves, pairs, records):
        assert rec["status"] == "ok" or os.path.basename(sol) in NOISY and rec["status"] == "incorrect", \
            (sol, rec["status"], rec.get("message"))
        assert ("cudal1.load_c(C_SRC)" in open(sol).read()) == (move == "fuse_epilogue"), sol
        done[move] += 1
    assert all(done[m] >= PER_MOVE for m in gen.MOVES), done


def fused():
    """{hash: (CUDA source, solution)} of the sample's fused solutions, keyed as cudal1.load_cuda keys them."""
    out = {}
    for name, source, meta, _, sol in SAMPLE.values():
        if sol:
            cu = sol.split('CUDA_SRC = r"""\n', 1)[1].split('"""', 1)[0]
            out[hashlib.sha256(f"cubin\0{cudal1.normalise_cuda(cu)}".encode()).hexdigest()[:16]] = (cu, name)
    return out


@pytest.mark.skipif(shutil.which(os.environ.get("NVCC", "nvcc")) is None, reason="no nvcc")
def test_fused_kernels_compile_for_sm90():
    """Each distinct kernel through the Makefile's cubin rule, where cudal1.load_cuda builds it (cached
    by the same hash, so a second run builds nothing)."""
    kernels = fused()
    build = os.path.join(ROOT, "build", "kernels")
    os.makedirs(build, exist_ok=True)
    for h, (cu, _) in kernels.items():
        if not os.path.exists(os.path.join(build, f"{h}.cu")):
            with open(os.path.join(build, f"{h}.cu"), "w") as f:
                f.write(cu)
    targets = [f"build/kernels/{h}.cubin" for h in kernels]
    p = subprocess.run(["make", "-s", "-j2", "-C", ROOT, *targets, "ARCH=sm_90", f"PYTHON={sys.executable}"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "warning" not in p.stderr, p.stderr


class FakeKernel:
    """Takes a launch as launcher.cu does (grid, block, then one argument per parameter, checked by
    its type code) and records it, without a GPU."""

    def __init__(self, params):
        self.params, self.calls = params, []

    def __call__(self, grid, block, *args, shared=0, stream=None):
        assert len(args) == len(self.params), (len(args), [p for p, _ in self.params])
        for dims in (grid, block):
            assert all(type(d) is int and d >= 0 for d in (dims if isinstance(dims, tuple) else (dims,))), dims
        for (decl, code), a in zip(self.params, args):
            ok = type(a) is int if code in "pqQiI" else type(a) in (int, float)
            assert ok, f"'{decl}' cannot take {a!r}"
        self.calls.append((grid, block, args))


def test_fused_solutions_pack_their_kernel_arguments(tmp_path, monkeypatch):
    """The Python half of every fused solution, on the CPU: forward computes the sizes and launches
    its kernel with arguments the launcher accepts (the judge cannot run it without a GPU)."""
    kernels = {}

    def fake_load_cuda(source):
        kernels[source] = types.SimpleNamespace(**{n: FakeKernel(p) for n, p in cudal1.cuda_kernels(source).items()})
        return kernels[source]

    monkeypatch.setattr(cudal1, "load_cuda", fake_load_cuda)
    n = 0
    for name, source, meta, _, sol in SAMPLE.values():
        if not sol:
            continue
        (tmp_path / f"{name}.py").write_text(source)
        (tmp_path / f"{name}.sol.py").write_text(sol)
        task = evaluate.load_module(str(tmp_path / f"{name}.py"), "task")
        mod = evaluate.load_module(str(tmp_path / f"{name}.sol.py"), "sol", scope=task)
        torch.manual_seed(0)
        model = mod.ModelNew(*task.get_init_inputs())
        with torch.no_grad():
            out = model(*task.get_inputs())
        assert tuple(out.shape) == tuple(meta["output"]), name
        (grid, block, args), = mod._k.epilogue.calls
        assert grid >= 1 and args[1] == out.data_ptr(), name
        n += 1
    assert n >= PER_MOVE


def test_deterministic():
    for name, source, meta, sols, cuda in list(SAMPLE.values())[:10]:
        again = gen.generate(meta["seed"], meta["size"])
        assert teacher.solutions(again[1], again[2]) == sols
        assert dict(teacher.solutions(again[1], again[2], cpu=False)).get("fuse_epilogue") == cuda


def pinned(spec):
    """The number of ops up to and including the one after which every value is constant."""
    states, j = gen.trace(spec), len(spec["ops"])
    while states[j - 1]["const"]:
        j -= 1
    return j


def test_each_solution_applies_its_one_move():
    """Every op line of the reference that the move does not touch is still in the solution's
    forward (as many times), and the ops it removes are gone."""
    seen = set()
    for name, source, meta, sols, cuda in SAMPLE.values():
        spec = gen.draw(meta["seed"], meta["size"])
        ops, sites = spec["ops"], meta["sites"]
        ref = forward_lines(source, "Model")
        lines = ref[len(ref) - 1 - len(ops):-1]  # one per op (the head and the residual line come first)
        run = 0
        while run < len(ops) and ops[run]["kind"] in gen.AFFINE:
            run += 1
        for move, sol in sols + ([("fuse_epilogue", cuda)] if cuda else []):  # the C++ and the CUDA one
            seen.add(move)
            assert sol.startswith('"""') and "class ModelNew(Model):" in sol
            assert not re.search(r"\d\.?\d*x (faster|speedup)|speedup of", sol.split('"""')[1])  # nothing measured
            assert "def __init__" not in sol  # the constructor is Model's, inherited
            got = collections.Counter(forward_lines(sol, "ModelNew"))
            touched = {"drop_noop": sites.get("drop_noop", []),
                       "reduce_first": [j for i in sites.get("reduce_first", []) for j in (i - 1, i)],
                       "merge_affine": sites.get("merge_affine", []),
                       "fold_scale_into_weights": list(range(run)),
                       "fold_bias": list(range(run)),
                       "fold_reduction": list(range(sites.get("fold_reduction", [0])[0] + 1)),
                       "constant_output": list(range(pinned(spec))),
                       "fuse_epilogue": list(range(len(ops)))}[move]
            kept = collections.Counter(line for i, line in enumerate(lines) if i not in touched)
            assert not kept - got, (name, move, kept - got)
            if move == "drop_noop":
                for i in sites["drop_noop"]:
                    assert got[lines[i]] < collections.Counter(lines)[lines[i]], (name, lines[i])
            if move == "fold_scale_into_weights":
                assert not any(got[lines[i]] for i in sites[move]), (name, move)
                assert all(got[lines[i]] for i in sites.get("fold_bias", []) if not any(m > i for m in sites[move]))
            if move == "fold_bias":  # the adds it folds are gone, every multiply stays
                assert all(got[lines[i]] for i in sites.get("fold_scale_into_weights", []))
                assert sum(got[lines[i]] for i in sites[move]) < len(sites[move])
            if move == "merge_affine":
                assert sum(1 for line in got.elements() if "torch.addcmul" in line) == len(teacher._runs(sites[move]))
            if move == "reduce_first":  # the reduction now comes first (a parameter may be viewed to its rank)
                order = [re.sub(r"\.view\([-1, ]*\)", "", line) for line in forward_lines(sol, "ModelNew")]
                for i in sites[move]:
                    assert order.index(lines[i]) < order.index(lines[i - 1]), (name, lines[i - 1], lines[i])
            if move == "fuse_epilogue":  # after the head only the kernel, which names each op it computes
                cu = re.split(r'C(?:UDA)?_SRC = r"""', sol, maxsplit=1)[1].split('"""')[0]
                for op, line in zip(ops, lines):
                    assert got[line] == 0, (name, line)
                    special = op["kind"] not in teacher.ELEMENTWISE
                    named = (f"ops before {op['kind']}" if special else "residual" if op["kind"] == "residual" else
                             teacher.ACT[op["kind"]] if op["kind"] in teacher.ACT else line.split(" = ", 1)[1])
                    assert named in cu, (name, line)
    assert seen == set(gen.MOVES)


def test_cli_writes_held_out_tasks_only_when_asked(tmp_path, monkeypatch, capsys):
    """Seeds 0..39 hold two held-out tasks (4, 32): the default run leaves them out, --split held_out
    writes them alone; every solution file pairs with a task written beside it."""
    for split, args in (("train", []), ("held_out", ["--split", "held_out"])):
        out = tmp_path / split
        monkeypatch.setattr(sys, "argv", ["teacher.py", "--seeds", "0:40", "--size", "cpu", "--out", str(out), *args])
        runpy.run_path(os.path.join(ROOT, "kernelbench", "teacher.py"), run_name="__main__")
        tasks = sorted((out / "tasks" / "levelG").glob("*.py"))
        assert tasks and all(cudal1.held_out(str(t)) == (split == "held_out") for t in tasks)
        stems = {t.stem for t in tasks}
        assert all(s.name.split(".")[0] in stems for s in (out / "solutions" / "levelG").glob("*.py"))
    assert {t.stem.split("_")[0] for t in (tmp_path / "held_out" / "tasks" / "levelG").glob("*.py")} == {"4", "32"}


def test_each_teacher_solution_shows_its_own_move_and_no_other():
    # cudal1.moves_shown reads the teacher's idioms: a one-move solution shows that move (drop_noop
    # and reduce_first leave no mark), so an answer showing two composes them
    mark = {"fuse_epilogue": {"fuse_epilogue"}, "merge_affine": {"merge_affine"}, "constant_output": {"constant_output"},
            "fold_scale_into_weights": {"fold"}, "fold_bias": {"fold"}, "fold_reduction": {"fold"},
            "drop_noop": set(), "reduce_first": set()}
    seen = set()
    for seed in range(200):
        name, source, meta = gen.generate(seed, "gpu")
        for move, sol in teacher.solutions(source, meta):
            assert cudal1.moves_shown(cudal1.solution_code(sol)) == mark[move], (name, move)
            seen.add(move)
    assert seen == set(mark)
    assert cudal1.moves_shown("def folded(self): ...\n_k = cudal1.load_cuda(SRC)\n") == {"fold", "fuse_epilogue"}


def test_an_analysis_names_the_move_it_opens_with():
    # teacher.stated_move reads each solution's docstring back to its own move, in both phrasings _pick
    # chooses among, at GPU sizes (CUDA kernels) and CPU ones (C++ loops); other prose states none
    openings = collections.defaultdict(set)
    for size in ("gpu", "cpu"):
        for seed in range(150):
            name, source, meta = gen.generate(seed, size)
            for move, sol in teacher.solutions(source, meta):
                doc = ast.get_docstring(ast.parse(sol))
                assert teacher.stated_move(doc) == move, (name, move, doc[:120])
                openings[move].add(doc.split()[0])
    assert set(openings) == set(teacher.MOVES)
    assert all(len(words) == 2 for words in openings.values()), openings  # each phrasing's first word seen
    assert teacher.stated_move("Make it faster: fewer kernels.") is None
    assert teacher.stated_move("Fold `x * self.s` into the Linear's weight and bias.") == "fold_scale_into_weights"


def test_a_task_written_before_spellings_is_still_read():
    """A kept run's task, written before generate._spell, is read as it was spelt then (its moves the same);
    a source the generator draws neither way is refused."""
    seed = next(s for s in range(1000) if gen.render(gen.draw(s, "cpu")) != gen.render(gen.unspelt(gen.draw(s, "cpu"))))
    name, source, meta = gen.generate(seed, "cpu")
    before = gen.render(gen.unspelt(gen.draw(seed, "cpu")))
    assert before != source
    assert [m for m, _ in teacher.solutions(before, meta)] == [m for m, _ in teacher.solutions(source, meta)]
    with pytest.raises(ValueError, match="not what the generator draws"):
        teacher.solutions(source.replace("x = ", "x  = ", 1), meta)


def test_composed_solutions_compute_their_tasks_output():
    """teacher.composed, bench/held_out_ceiling.py's oracle for two moves: a task's no-ops dropped, then each
    other move on what is left. Each composed solution of the first CPU-sized tasks that admit one gives its
    task's output under the strict rule, a fused one run on the CPU by tests/cuda_cpu.py's emulator (one
    kernel a chain could not have without the drop, one it could); its no-op lines are gone from forward;
    none is the one-move program again; and teacher.solutions never composes."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cuda_cpu
    seen, seed = collections.Counter(), 0
    while not (seen["fused, unlocked"] and seen["fused"] and len(seen) >= 5) and seed < 300:
        name, source, meta = gen.generate(seed, "cpu")
        seed += 1
        alone = dict(teacher.solutions(source, meta, cpu=False))  # the fused epilogue in CUDA, for the emulator
        assert all("+" not in move for move in alone)
        task = types.ModuleType("task")
        exec(compile(source, name, "exec"), task.__dict__)
        ref_lines = forward_lines(source, "Model")
        noops = collections.Counter(ref_lines[-1 - len(meta["ops"]) + i] for i in meta["sites"].get("drop_noop", []))
        for move, sol in teacher.composed(source, meta, cpu=False):
            second = move.split("+", 1)[1]
            assert move.startswith("drop_noop+")
            assert second not in alone or cudal1.solution_code(sol) != cudal1.solution_code(alone[second]), (name, move)
            left = collections.Counter(forward_lines(sol, "ModelNew"))
            assert all(left[line] <= collections.Counter(ref_lines)[line] - n for line, n in noops.items()), (name, move)
            kind = ("fused, unlocked" if second not in alone else "fused") if second == "fuse_epilogue" else second
            if seen[kind] >= 1 and kind.startswith("fused"):
                continue  # each emulated kernel is a g++ build
            mod = types.ModuleType("sol")
            mod.__dict__.update(task.__dict__)
            real, cudal1.load_cuda = cudal1.load_cuda, cuda_cpu.load_cuda
            try:
                exec(compile(sol, f"{name}.{move}", "exec"), mod.__dict__)
            finally:
                cudal1.load_cuda = real
            torch.manual_seed(seed)
            ref = task.Model(*task.get_init_inputs())
            new = mod.ModelNew(*task.get_init_inputs())
            new.load_state_dict(ref.state_dict())
            xs = task.get_inputs()
            with torch.no_grad():
                want, got = ref(*xs), new(*[x.clone() for x in xs])
            assert got.shape == want.shape and evaluate._compare(got, want, evaluate.STRICT)[0], (name, move)
            seen[kind] += 1
    assert seen["fused, unlocked"] == seen["fused"] == 1 and len(seen) >= 5, (seed, seen)


def test_kernel_counts_price_each_move_by_the_kernels_it_launches():
    # counted on the meta device in train mode: no head here, a logsumexp as 4 kernels (the reference:
    # clamp, div, sub, logsumexp); the fused epilogue is the head (none) and one kernel
    name, source, meta = gen.generate(145, "cpu")
    assert name == "145_Max_Divide_Subtract_LogSumExp", name  # the generator changed: pick another seed
    counts = teacher.kernel_counts(source, teacher.solutions(source, meta))
    assert counts == dict(fuse_epilogue=(0, 1), merge_affine=(0, 6), reduce_first=(0, 7), drop_noop=(0, 6)), counts
    name, source, meta = gen.generate(1, "gpu")
    assert name.startswith("1_Gemm_"), name
    counts = teacher.kernel_counts(source, teacher.solutions(source, meta))
    assert counts["fuse_epilogue"] == (1, 1) and teacher.kernel_cost(counts["fuse_epilogue"]) == teacher.HEAD_COST + 1
    assert teacher.kernel_cost(None) is None

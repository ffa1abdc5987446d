"""The judge against solutions that must pass and cheats that must fail (CPU; GPU ones marked).

Every cheat here is written for one rule; all pairs go through one judge_many call so the suite
pays for one pool of workers, not one per test.
"""
import collections
import copy
import types
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch
import torch.nn.functional as F

import cudal1
import evaluate
import warm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAST = dict(device="cpu", trials=4, warmup=1, iters=6, min_iters=3, time_budget=0.5, timeout=60, jobs=2)

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """relu(x @ W^T + b) * 2: has parameters, so state copying is exercised."""
    def __init__(self, n):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2.0

N = 64
def get_inputs():
    return [torch.randn(32, N)]
def get_init_inputs():
    return [N]
'''

COPY_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x * 1.0

def get_inputs():
    return [torch.randn(16, 16)]
def get_init_inputs():
    return []
'''

STATEFUL_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    """Carries state from call to call, as level 3's VanillaRNN does: each output depends on how
    many calls came before."""
    def __init__(self):
        super().__init__()
        self.h = torch.randn(8, 16)

    def forward(self, x):
        self.h = torch.tanh(x + self.h.to(x.device))
        return self.h * 2.0

def get_inputs():
    return [torch.randn(8, 16)]
def get_init_inputs():
    return []
'''
STATEFUL_SOL = STATEFUL_TASK.replace("class Model(", "class ModelNew(")

HEAD = "import torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
INIT = "    def __init__(self, n):\n        super().__init__()\n        self.lin = nn.Linear(n, n)\n"


def sol(body, init=INIT, head=""):
    return head + HEAD + init + textwrap.indent(textwrap.dedent(body), "    ")


SPY_TASK = COPY_TASK.replace("        return x * 1.0", """        with open(SPY_FILE, "a") as f:  # what the reference finds each call
            f.write(f"{torch.get_num_threads()} {torch.are_deterministic_algorithms_enabled()} {torch.get_default_dtype()}\\n")
        return x * 1.0""")
GLOBAL_STATE = """import torch
import torch.nn as nn

def spoil():  # one thread, deterministic kernels, float64 by default: left set after each call
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float64)

spoil()

class ModelNew(nn.Module):
    def forward(self, x):
        y = x * 1.0
        spoil()
        return y
"""
HONEST = sol("def forward(self, x):\n    return torch.relu(self.lin(x)) * 2.0\n")
CPP = r'''
#include <pybind11/pybind11.h>
#include <cstdint>
// y[i] = max(v[i], 0) * 2 over n floats, split across OpenMP threads
void relu2(uintptr_t v, uintptr_t y, int64_t n) {
    const float* a = reinterpret_cast<const float*>(v);
    float* b = reinterpret_cast<float*>(y);
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) b[i] = a[i] > 0.f ? a[i] * 2.f : 0.f;
}
PYBIND11_MODULE(MODULE_NAME, m) { m.def("relu2", &relu2); }
'''

CASES = {  # name -> (solution source, expected status)
    "honest": (HONEST, "ok"),
    "cpp": (f"import cudal1\nlib = cudal1.load_kernel({CPP!r}, 'cpp')\n" + sol("""
        def forward(self, x):
            v = self.lin(x).contiguous()
            y = torch.empty_like(v)
            lib.relu2(v.data_ptr(), y.data_ptr(), v.numel())
            return y
        """), "ok"),
    "wrong": (sol("def forward(self, x):\n    return torch.relu(self.lin(x)) * 2.001\n"), "incorrect"),
    "bf16": (sol("def forward(self, x):\n    return (torch.relu(self.lin(x.bfloat16().float())) * 2.0)\n"),
             "incorrect"),
    "shape": (sol("def forward(self, x):\n    return torch.relu(self.lin(x[:16])) * 2.0\n"), "incorrect"),
    "subclass": (sol("""
        def forward(self, x):
            class Lazy(torch.Tensor):
                pass
            return (torch.relu(self.lin(x)) * 2.0).as_subclass(Lazy)
        """), "cheat:output_type"),
    "mutate": (sol("def forward(self, x):\n    x.mul_(1.0001)\n    return torch.relu(self.lin(x / 1.0001)) * 2.0\n"),
               "cheat:input_mutation"),
    "reuse": (sol("""
        def forward(self, x):
            if not hasattr(self, 'buf'):
                self.buf = torch.empty(x.shape[0], self.lin.out_features)
            torch.mul(torch.relu(self.lin(x)), 2.0, out=self.buf)
            return self.buf
        """), "cheat:reused_output"),
    "cache_by_shape": (sol("""
        def forward(self, x):
            if not hasattr(self, 'memo'):
                self.memo = torch.relu(self.lin(x)) * 2.0
            return self.memo.clone()
        """), "cheat:cached"),
    "patch_clock": (sol("def forward(self, x):\n    return torch.relu(self.lin(x)) * 2.0\n",
                        head="import time\ntime.perf_counter = lambda: 0.0\n"), "cheat:patched"),
    "patch_sync": (sol("def forward(self, x):\n    torch.cuda.synchronize = lambda *a: None\n"
                       "    return torch.relu(self.lin(x)) * 2.0\n"), "cheat:patched"),
    "thread": (sol("""
        def forward(self, x):
            import threading, time
            out = torch.empty(x.shape[0], self.lin.out_features)
            def work():
                time.sleep(0.3)
                out.copy_(torch.relu(self.lin(x)) * 2.0)
            threading.Thread(target=work, daemon=True).start()
            return out
        """), "cheat:threads"),
    "shrink_task": (sol("""
        def forward(self, x):
            for c in nn.Module.__subclasses__():  # the task's Model, found by name, no introspection
                if c.__name__ == 'Model' and 'get_inputs' in c.forward.__globals__:
                    c.forward.__globals__['N'] = 8
            return torch.relu(self.lin(x)) * 2.0
        """), "cheat:changed_task"),
    "honest_then_lazy": (sol("""
        def forward(self, x):
            self.calls = getattr(self, 'calls', 0) + 1
            if self.calls > 6:
                return torch.zeros(x.shape[0], self.lin.out_features)
            return torch.relu(self.lin(x)) * 2.0
        """), "incorrect"),
    # a solution runs after its task's program (evaluate.load_module's scope): it may inherit Model
    "inherits": ("class ModelNew(Model):\n    def forward(self, x):\n        return torch.relu(self.lin(x)) * 2.0\n",
                 "ok"),
    # ... but the names are a copy: rebinding one leaves the task's own get_inputs as it was
    "rebinds_task_name": ("N = 8\nclass ModelNew(Model):\n    def forward(self, x):\n"
                          "        return torch.relu(self.lin(x)) * 2.0\n", "ok"),
    # ... and overriding nothing of it is the reference itself, not a solution (a helper nothing calls)
    "keeps_forward": ("class ModelNew(Model):\n    _key = None\n    def folded(self):\n        return self.lin.bias\n",
                      "cheat:reference"),
    # ... and swapping the code inside the task's functions keeps their identity but not their code
    "swap_forward_code": ("def slow(self, x):\n    import time\n    time.sleep(0.002)\n"
                          "    return torch.relu(self.lin(x)) * 2.0\n"
                          "Model.forward.__code__ = slow.__code__\n"
                          "class ModelNew(Model):\n    def forward(self, x):\n        return torch.relu(self.lin(x)) * 2.0\n",
                          "cheat:changed_task"),
    "swap_inputs_code": ("def fixed():\n    torch.manual_seed(0)\n    return [torch.randn(32, 64)]\n"
                         "get_inputs.__code__ = fixed.__code__\n"
                         "class ModelNew(Model):\n    def forward(self, x):\n        return torch.relu(self.lin(x)) * 2.0\n",
                         "cheat:changed_task"),
    # ... and in torch's: an nn module's forward slowed for everyone, the reference included
    "swap_torch_code": ("import torch.nn as nn\nreal = nn.Linear.forward\n"
                        "def slow(self, input):\n    import time, torch.nn.functional as F\n    time.sleep(0.002)\n"
                        "    return F.linear(input, self.weight, self.bias)\n"
                        "nn.Linear.forward.__code__ = slow.__code__\n"
                        "class ModelNew(Model):\n    def forward(self, x):\n        return torch.relu(x @ self.lin.weight.T + self.lin.bias) * 2.0\n",
                        "cheat:patched"),
    # ... and so is a forward that only hands the call back
    "hands_back": ("class ModelNew(Model):\n    def forward(self, x):\n        \"\"\"Same.\"\"\"\n"
                   "        return super().forward(x)\n", "cheat:reference"),
    "hands_back_by_name": ("class ModelNew(Model):\n    def forward(self, x):\n        return Model.forward(self, x)\n",
                           "cheat:reference"),
    # ... while keeping its forward and swapping a module it calls is a rewrite, judged as one
    "swaps_module": ("class ModelNew(Model):\n    def __init__(self, n):\n        super().__init__(n)\n"
                     "        self.lin = nn.Linear(n, n + 1)\n", "incorrect"),
    # ... and the task's classes are the task's: patching Model's forward is caught
    "patch_model": ("Model.forward = lambda self, x: torch.zeros(x.shape[0], self.lin.out_features)\n"
                    "class ModelNew(Model):\n    pass\n", "cheat:changed_task"),
    "no_modelnew": ("import torch\nclass Model(torch.nn.Module):\n    pass\n", "error"),
    "build_error": ("import cudal1\nlib = cudal1.load_kernel('int main( { MODULE_NAME', 'cpp')\n" + HONEST,
                    "compile_error"),
    "raises": (sol("def forward(self, x):\n    raise ValueError('boom')\n"), "runtime_error"),
    "exit": (sol("def forward(self, x):\n    import os\n    os._exit(3)\n"), "runtime_error"),
    "segfault": (sol("def forward(self, x):\n    import ctypes\n    ctypes.string_at(0)\n"), "runtime_error"),
    "hang": (sol("""
        def forward(self, x):
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                pass
        """), "timeout"),
}

# ---- a solution shares the judge's process: what it can reach there must not help it

STEAL = """
                for v in list(f.f_locals.values()):  # any tensor shaped like the answer
                    if type(v) is torch.Tensor and v.shape == (x.shape[0], self.lin.out_features):
                        return v.clone()
"""
ATTACKS = {  # name -> (solution source, expected status); each one was 'ok' in the judge before
    # the judge used to seed input set k with 1000 + k: replay that and answer from a table
    "predict_inputs": (sol("""
        def __init__(self, n):
            super().__init__()
            self.lin = nn.Linear(n, n)
            self.table = {}
            for k in [*range(-1, 8), *range(1000, 1100), *range(2000, 2010)]:
                torch.manual_seed(1000 + k)
                x = torch.randn(32, n)
                with torch.no_grad():
                    self.table[x[0, 0].item()] = torch.relu(self.lin(x)) * 2.0

        def forward(self, x):
            hit = self.table.get(x[0, 0].item())
            return hit.clone() if hit is not None else torch.zeros(x.shape[0], self.lin.out_features)
        """, init=""), "incorrect"),
    "stack_walk": (sol("""
        def forward(self, x):
            import sys
            f = sys._getframe(1)
            while f is not None:""" + STEAL + """                f = f.f_back
            return torch.zeros(x.shape[0], self.lin.out_features)
        """), "cheat:introspection"),
    "traceback_walk": (sol("""
        def forward(self, x):
            try:
                raise RuntimeError
            except RuntimeError as e:
                f = e.__traceback__.tb_frame
            while f is not None:""" + STEAL + """                f = f.f_back
            return torch.zeros(x.shape[0], self.lin.out_features)
        """), "cheat:introspection"),
    "inspect_stack": (sol("""
        def forward(self, x):
            import inspect
            for info in inspect.stack():
                f = info.frame""" + STEAL + """            return torch.zeros(x.shape[0], self.lin.out_features)
        """), "cheat:introspection"),
    "gc_scan": (sol("""
        def forward(self, x):
            import gc
            want = torch.relu(self.lin(x[:1])) * 2.0   # the first row is cheap: find the rest
            for o in gc.get_objects():
                if type(o) is torch.Tensor and o.shape == (x.shape[0], want.shape[1]) and torch.allclose(o[:1], want):
                    return o.clone()
            return torch.zeros(x.shape[0], want.shape[1])
        """), "cheat:introspection"),
    "proc_mem": (sol("""
        def forward(self, x):
            with open(b"/proc//self/./mem", "rb"):  # the whole process, answer and all, by another name
                pass
            return torch.relu(self.lin(x)) * 2.0
        """), "cheat:introspection"),
    "exec_disguised": (sol("""
        def forward(self, x):
            exec(compile("import sys\\nsys._getframe(2)", "/usr/lib/python3/dist-packages/numpy/core.py", "exec"))
            return torch.relu(self.lin(x)) * 2.0
        """), "cheat:introspection"),
    # the judge's own classes, found by name at import: replace the output check
    "patch_judge": (sol("def forward(self, x):\n    return torch.zeros(x.shape[0], self.lin.out_features)\n",
                        head="for c in object.__subclasses__():\n    if c.__name__ == 'Worker':\n"
                             "        c.check_output = lambda *a: None\n        c.check_rules = lambda *a: None\n"),
                    "cheat:patched"),
    # `import evaluate` gets a fresh copy of the judge's module: patching it changes nothing
    "patch_imported_judge": (sol("def forward(self, x):\n    return torch.zeros(x.shape[0], self.lin.out_features)\n",
                                 head="import evaluate\nevaluate._compare = lambda *a, **k: (True, 0.0, 0.0)\n"),
                             "incorrect"),
    # slow the reference down with a patch that removes itself after one use
    "self_removing_patch": (sol("""
        def forward(self, x):
            import time
            import torch.nn.functional as F
            real = F.linear
            def slow(*a, **k):
                F.linear = real
                time.sleep(0.005)
                return real(*a, **k)
            F.linear = slow
            return torch.relu(x @ self.lin.weight.T + self.lin.bias) * 2.0
        """), "cheat:patched"),
    # a global forward hook that turns every module's output (the reference's too) into zeros
    "global_hook": (sol("def forward(self, x):\n    return torch.zeros(x.shape[0], self.lin.out_features)\n",
                        head="import torch.nn.modules.module as mm\n"
                             "mm.register_module_forward_hook(lambda m, i, o: torch.zeros_like(o))\n"),
                    "cheat:patched"),
    # write a record on the judge's pipe (any socket it finds) and die before the real one
    "forged_record": (sol("""
        def forward(self, x):
            import os, pickle, stat, struct
            rec = pickle.dumps(("record", {"status": "ok", "ref_ms": 1.0, "sol_ms": 0.001, "message": ""}))
            for fd in range(3, 256):
                try:
                    if stat.S_ISSOCK(os.fstat(fd).st_mode):
                        os.write(fd, struct.pack("!i", len(rec)) + rec)
                except OSError:
                    pass
            os._exit(0)
        """), "cheat:forged_record"),
    "sleeps_2ms": (sol("def forward(self, x):\n    import time\n    time.sleep(0.002)\n"
                       "    return torch.relu(self.lin(x)) * 2.0\n"), "ok"),
    "namedtuple_at_import": (sol("def forward(self, x):\n    return P(torch.relu(self.lin(x)) * 2.0, 0).y\n",
                                 head="import collections\nP = collections.namedtuple('P', 'y z')\n"), "ok"),
}
CASES.update(ATTACKS)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("tasks") / "level1"
    d.mkdir()
    (d / "1_Affine.py").write_text(TASK)
    (d / "2_Copy.py").write_text(COPY_TASK)
    (d / "3_Spy.py").write_text(SPY_TASK.replace("SPY_FILE", repr(str(d / "spy.txt"))))
    (d / "4_Stateful.py").write_text(STATEFUL_TASK)
    return d


@pytest.fixture(scope="module", params=["full", "screen"])
def records(tasks, tmp_path_factory, request):
    """Judge every case at once (hang gets a short timeout of its own, below), in the full judge and
    in RL's screening mode: each must catch every cheat."""
    counter = tmp_path_factory.mktemp("hits") / "hits.txt"
    cases = dict(CASES)
    del cases["hang"]
    cases["content_cache"] = (sol(f"""
        def forward(self, x):
            key = hash(x[0, :8].numpy().tobytes())
            memo = self.__dict__.setdefault('memo', {{}})
            if key in memo:
                open({str(counter)!r}, 'a').write('hit\\n')
                return memo[key].clone()
            memo[key] = torch.relu(self.lin(x)) * 2.0
            return memo[key].clone()
        """), "ok")
    cases["alias"] = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
                      "cheat:aliasing")
    cases["global_state"] = (GLOBAL_STATE, "ok")
    # a stateful task: the same state carried (passes) or the state dropped after the first call (fails)
    cases["stateful"] = (STATEFUL_SOL, "ok")
    cases["stateful_forgets"] = (STATEFUL_SOL.replace("self.h = torch.tanh", "return 2 * torch.tanh"), "incorrect")
    task_of = {"alias": "2_Copy.py", "global_state": "3_Spy.py", "stateful": "4_Stateful.py",
               "stateful_forgets": "4_Stateful.py"}
    pairs = [(str(tasks / task_of.get(n, "1_Affine.py")), src) for n, (src, _) in cases.items()]
    recs = evaluate.judge_many(pairs, **{**FAST, **(evaluate.SCREEN if request.param == "screen" else {})})
    return {n: r for n, r in zip(cases, recs)}, counter


EXTRA = {"content_cache": "ok", "alias": "cheat:aliasing", "global_state": "ok", "stateful": "ok",
         "stateful_forgets": "incorrect"}


@pytest.mark.parametrize("name", [n for n in CASES if n != "hang"] + list(EXTRA))
def test_case(records, name):
    recs, _ = records
    expected = CASES[name][1] if name in CASES else EXTRA[name]
    r = recs[name]
    assert r["status"] == expected, (r["status"], r["message"])
    assert r["correct"] == (expected == "ok")
    if expected == "ok":
        assert r["speedup"] > 0 and r["ref_ms"] > 0 and r["sol_ms"] > 0 and r["max_abs_err"] < 1e-3


def test_global_state_never_reaches_the_reference(records, tasks):
    """The solution sets one thread, deterministic mode and float64 at import and in every call;
    the reference (the task logs what it sees) must find the worker's own settings each time."""
    seen = (tasks / "spy.txt").read_text().splitlines()
    assert len(seen) > 10 and len(set(seen)) == 1, set(seen)
    threads, deterministic, dtype = seen[0].split()
    assert deterministic == "False" and dtype == "torch.float32"
    assert int(threads) == torch.get_num_threads() or os.cpu_count() == 1


def test_sleeping_solution_reads_slower(records):
    """A solution that sleeps 2 ms on a task of ~0.1 ms must read below 1x: the clock sees it."""
    r = records[0]["sleeps_2ms"]
    assert r["sol_ms"] > 2.0 and r["speedup"] < 1.0


def test_content_cache_never_hits(records):
    """Fresh inputs for every call: a solution caching by content never sees the same input twice."""
    _, counter = records
    assert not counter.exists() or counter.read_text() == ""


def test_build_error_carries_compiler_message(records):
    """The compiler's own words reach the record: g++ names the line and what it expected."""
    msg = records[0]["build_error"]["message"]
    assert "error: expected" in msg and ".cpp:1:" in msg, msg


def test_crash_messages(records):
    recs, _ = records
    assert "code 3" in recs["exit"]["message"]
    assert "SIGSEGV" in recs["segfault"]["message"]


def test_hang_times_out_and_run_continues(tasks):
    t0 = time.time()
    recs = evaluate.judge_many([(str(tasks / "1_Affine.py"), CASES["hang"][0]),
                                (str(tasks / "1_Affine.py"), HONEST)], **{**FAST, "timeout": 4})
    assert [r["status"] for r in recs] == ["timeout", "ok"]
    assert time.time() - t0 < 40


def noting_solution(log, name, build=""):
    """HONEST, noting '<name> <event> <time>' in log: 'start' and 'built' around its import (build runs
    between them), 'call' at every call."""
    note = f"import time\ndef note(event):\n    open({str(log)!r}, 'a').write(f'{name} {{event}} {{time.time()}}\\n')\n"
    return sol("def forward(self, x):\n    note('call')\n    return torch.relu(self.lin(x)) * 2.0\n",
               head=f"{note}note('start')\n{build}note('built')\n")


@pytest.mark.parametrize("overlap", [False, True])
def test_waves_or_overlap(tasks, tmp_path, overlap):
    """One worker at a time is measured. In waves no build runs beside measuring: A and C, built at
    once, wait for B's slow build, and D starts only after A, B and C are measured. With overlap, A is
    measured while B still builds (B's build waits for A's first call)."""
    log = tmp_path / "log.txt"
    log.touch()
    slow = (f"t = time.time()\nwhile time.time() < t + 30 and 'A call' not in open({str(log)!r}).read():\n"
            "    time.sleep(0.05)\n") if overlap else "time.sleep(2)\n"
    pairs = [(str(tasks / "1_Affine.py"), noting_solution(log, n, slow if n == "B" else "")) for n in "ABCD"]
    recs = evaluate.judge_many(pairs, **{**FAST, "jobs": 3, "overlap": overlap})
    assert [r["status"] for r in recs] == ["ok"] * 4, [r["message"] for r in recs]
    t = collections.defaultdict(list)
    for line in log.read_text().splitlines():
        name, event, at = line.split()
        t[name, event].append(float(at))
    spans = sorted((min(t[n, "call"]), max(t[n, "call"])) for n in "ABCD")
    assert all(end < start for (_, end), (start, _) in zip(spans, spans[1:]))  # one at a time
    if overlap:
        assert min(t["A", "call"]) < t["B", "built"][0]
    else:
        assert min(t["A", "call"] + t["C", "call"]) > t["B", "built"][0]
        assert t["D", "start"][0] > max(t["A", "call"] + t["B", "call"] + t["C", "call"])
        assert recs[1]["build_s"] >= 2 and recs[0]["queue_s"] >= 1.5  # B's slow build; A waited for it
    # each record says where its time went: building, waiting for the device, holding it
    assert all(r["build_s"] >= 0 and r["queue_s"] >= 0 and 0 < r["gpu_s"] <= r["wall_s"] for r in recs)
    assert not multiprocessing.active_children()  # the GPU moves on before a worker is reaped; all are by the end


@pytest.mark.parametrize("prewarm", [False, True])
def test_prewarm_calls_the_reference_before_the_workers_turn(tasks, tmp_path, prewarm):
    """prewarm: each worker calls its reference once while it builds, so in waves the second worker's
    first reference call comes before the first worker's turn; without it, only after that turn. The
    truth is never called then: a stateful task's honest solution still passes."""
    log = tmp_path / "log.txt"
    log.touch()
    note = f"import os, time\nopen({str(log)!r}, 'a').write(f'WHO {{os.getpid()}} {{time.time()}}\\n')\n"
    (tmp_path / "1_Logged.py").write_text(TASK.replace(
        "        return torch.relu", textwrap.indent(note.replace("WHO", "ref"), " " * 8) + "        return torch.relu"))
    pairs = [(str(tmp_path / "1_Logged.py"), sol("def forward(self, x):\n" + textwrap.indent(note.replace("WHO", name), "    ")
                                                 + "    return torch.relu(self.lin(x)) * 2.0\n")) for name in "AB"]
    recs = evaluate.judge_many(pairs, **{**FAST, "prewarm": prewarm})
    assert [r["status"] for r in recs] == ["ok"] * 2, [r["message"] for r in recs]
    lines = [line.split() for line in log.read_text().splitlines()]
    pid = {who: p for who, p, _ in lines if who in "AB"}
    calls = {who: [float(t) for w, _, t in lines if w == who] for who in "AB"}
    first, second = sorted("AB", key=lambda who: min(calls[who]))
    second_ref = min(float(t) for w, p, t in lines if w == "ref" and p == pid[second])
    assert (second_ref < min(calls[first])) if prewarm else (second_ref > max(calls[first]))
    [r] = evaluate.judge_many([(str(tasks / "4_Stateful.py"), STATEFUL_SOL)], **{**FAST, "prewarm": prewarm})
    assert r["status"] == "ok", r


@pytest.mark.parametrize("prewarm", [False, True])
def test_prewarm_also_runs_the_output_check(tmp_path, monkeypatch, prewarm):
    """prewarm then compares the reference's output with itself once, so the check's own kernels are
    loaded before the worker's turn; without it, the worker's first check is in its turn."""
    (tmp_path / "1_Task.py").write_text(TASK)
    (tmp_path / "sol.py").write_text(sol("def forward(self, x):\n    return torch.relu(self.lin(x)) * 2.0\n"))
    seen = []
    compare = evaluate._compare
    monkeypatch.setattr(evaluate, "_compare", lambda o, r, tol, **kw: seen.append(o is r) or compare(o, r, tol, **kw))
    evaluate.Worker(str(tmp_path / "1_Task.py"), str(tmp_path / "sol.py"),
                    {**evaluate.DEFAULTS, "device": "cpu", "prewarm": prewarm})
    assert seen == ([True] if prewarm else [])


@pytest.mark.parametrize("old, out, verdict", [(2.0, 2.0, "cached"), (1.0 + 1.5e-4, 1.0 + 3e-4, "incorrect")])
def test_an_earlier_result_is_a_cache_only_where_it_differs_from_this_one(tmp_path, old, out, verdict):
    """A wrong output that matches an earlier reference output is a cached result (a cheat) only when
    that earlier output is itself wrong for these inputs; where the task's output barely moves with its
    inputs (here within the 2e-4 the strict check allows around 1.0), it is just incorrect."""
    (tmp_path / "1_Task.py").write_text(TASK)
    (tmp_path / "sol.py").write_text(sol("def forward(self, x):\n    return torch.relu(self.lin(x)) * 2.0\n"))
    w = evaluate.Worker(str(tmp_path / "1_Task.py"), str(tmp_path / "sol.py"), {**evaluate.DEFAULTS, "device": "cpu"})
    w.old_refs.append(torch.full((4,), old))
    o = torch.full((4,), out)
    with pytest.raises(evaluate.Cheat if verdict == "cached" else evaluate.Incorrect):
        w.check_output(o, [], [], torch.ones(4), [o.clone()], [])


def test_flags_constant_and_zero_reference(tmp_path):
    d = tmp_path / "level2"
    d.mkdir()
    (d / "80_Zero.py").write_text(COPY_TASK.replace("return x * 1.0", "return (x - x).amax(1, keepdim=True) * 0"))
    [r] = evaluate.judge_many([(str(d / "80_Zero.py"), None)], **FAST)
    assert r["status"] == "ok" and r["solution"] is None
    assert "constant" in r["flags"] and "zeros_pass" in r["flags"]


def test_reference_only_worker_excuses_threads_started_outside_a_call(tmp_path):
    # like torch.compile's pool, whose reader thread starts a timer thread between calls: with no
    # solution loaded there is nothing to blame it on (the compile column needs this record)
    d = tmp_path / "level1"
    d.mkdir()
    late = ("import threading, time\n"
            "threading.Timer(1.0, lambda: threading.Thread(target=time.sleep, args=(5,), daemon=True).start()).start()\n")
    (d / "1_Late.py").write_text(late + COPY_TASK)
    [r] = evaluate.judge_many([(str(d / "1_Late.py"), None)], **{**FAST, "time_budget": 3.0, "iters": 1000})
    assert r["status"] == "ok", r["message"]


def test_tolerance_rule():
    strict = dict(evaluate.STRICT)
    ref = torch.randn(1000, dtype=torch.float64).float()
    assert evaluate._compare(ref * (1 + 1e-6), ref, strict)[0]
    assert not evaluate._compare(ref * (1 + 1e-3), ref, strict)[0]  # tf32-level error fails
    assert evaluate._compare(ref * (1 + 1e-3), ref, evaluate.KERNELBENCH)[0]
    nan = ref.clone()
    nan[3] = float("nan")
    assert not evaluate._compare(nan, ref, strict)[0]
    assert not evaluate._compare(torch.zeros(10), torch.full((10,), 1e-5), strict)[0]  # scaled atol
    # the third value is the error in units of the allowed error: <= 1 exactly when the check passes,
    # and the chunked comparison (for outputs of many GiB) agrees with the one-shot one
    for scale in (1e-6, 5e-5, 1e-3):
        out = ref + scale * torch.randn(1000)
        ok, _, ratio = evaluate._compare(out, ref, strict)
        ok7, _, ratio7 = evaluate._compare(out, ref, strict, chunk=7)
        assert ok == (ratio <= 1) and ok7 == ok and ratio7 == pytest.approx(ratio)


def test_matching_infinities_pass():
    ref = torch.tensor([1.0, float("inf"), -float("inf"), 2.0])
    assert evaluate._compare(ref.clone(), ref, dict(evaluate.STRICT))[0]
    for bad in ([1.0, -float("inf"), -float("inf"), 2.0], [1.0, 3e38, -float("inf"), 2.0],
                [1.0, float("inf"), -float("inf"), float("inf")], [1.0, float("inf"), float("nan"), 2.0]):
        assert not evaluate._compare(torch.tensor(bad), ref, dict(evaluate.STRICT))[0], bad


def test_reference_judged_as_its_own_solution_reads_1x(tasks):
    """An A/A test: the reference as its own solution reads 1x within the noise of a shared 2-core
    machine (one worker, ~300 rounds; on the H200 the spread is measured in results/)."""
    src = TASK + "\n\nclass ModelNew(Model):\n    pass\n"
    r = evaluate.judge_many([(str(tasks / "1_Affine.py"), src)],
                            **{**FAST, "iters": 400, "min_iters": 100, "time_budget": 2.0})[0]
    assert r["status"] == "ok" and 0.7 < r["speedup"] < 1 / 0.7, r


def test_cpu_solution_not_timed_on_gpu():
    cpp = 'ext = cudal1.load_kernel(CPP_SRC, "cpp")'
    assert evaluate._skip_reason(cpp, "cuda").startswith("C++ (CPU) solution")
    assert evaluate._skip_reason(cpp, "cpu") is None
    assert evaluate._skip_reason("__global__ void k() {}", "cpu").startswith("CUDA solution")


def run_cli(*args, **kw):
    return warm.run([sys.executable, os.path.join(ROOT, "evaluate.py"), *args],
                    capture_output=True, text=True, cwd=ROOT, **kw)


@pytest.mark.parametrize("args, says", [
    (["--tasks", "/no/such/folder"], "no such task file or folder"),
    (["--tasks", "kernelbench", "--solutions", "/no/such/sol.py"], "no such solution"),
    (["--tasks", "kernelbench", "--gpu", "v100"], "unknown GPU"),
])
def test_cli_bad_input_one_line(args, says):
    p = run_cli(*args)
    assert p.returncode == 2
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_wrong_gpu_named():
    with pytest.raises(evaluate.JudgeError, match="has an NVIDIA H200"):
        evaluate.check_gpu("h100", "NVIDIA H200")
    with pytest.raises(evaluate.JudgeError, match="no NVIDIA GPU"):
        evaluate.check_gpu("h200", None)
    evaluate.check_gpu("h200", "NVIDIA H200")


def test_cli_task_without_model_and_cuda_without_gpu(tasks, tmp_path):
    bad = tmp_path / "level1"
    bad.mkdir()
    (bad / "5_Bad.py").write_text("import torch\ndef get_inputs():\n    return []\n")
    (tmp_path / "s.py").write_text(HONEST)
    p = run_cli("--tasks", str(bad / "5_Bad.py"), "--solutions", str(tmp_path / "s.py"), "--out", str(tmp_path / "r"),
                "--device", "cpu")
    assert p.returncode == 2 and "defines no Model" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "c.py").write_text("import cudal1\nlib = cudal1.load_kernel('__global__ void k(){}', 'cuda')\n" + HONEST)
    p = run_cli("--tasks", str(tasks / "1_Affine.py"), "--solutions", str(tmp_path / "c.py"), "--device", "cpu")
    assert p.returncode == 2 and "needs" not in p.stderr and "no NVIDIA GPU" in p.stderr


def test_cuda_solution_skipped_on_cpu(tasks):
    """A run whose last pairs need a GPU the machine lacks finishes (it once waited forever)."""
    src = "import cudal1\nlib = cudal1.load_kernel('__global__ void k(){}', 'cuda')\n" + HONEST
    r = evaluate.judge_many([(str(tasks / "1_Affine.py"), src)], **FAST)[0]
    assert r["status"] == "skipped" and "GPU" in r["message"]


def test_killed_run_resumes(tasks, tmp_path):
    """Kill the judge mid-run; the rerun keeps finished records and judges only the rest."""
    sols = tmp_path / "sols" / "level1"
    sols.mkdir(parents=True)
    (sols / "1_Affine.py").write_text(HONEST)
    (sols / "1_Affine.v2.py").write_text(CASES["hang"][0])
    out = tmp_path / "res"
    args = ["--tasks", str(tasks.parent), "--solutions", str(sols), "--out", str(out), "--device", "cpu",
            "--jobs", "1", "--iters", "4", "--trials", "2"]
    p = subprocess.Popen([sys.executable, "evaluate.py", *args, "--timeout", "120"], cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    jsonl = tmp_path / "res.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (jsonl.exists() and jsonl.read_text().count("\n") >= 1):
        time.sleep(0.2)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    first = jsonl.read_text().splitlines()
    assert len(first) == 1 and json.loads(first[0])["status"] == "ok"
    q = run_cli(*args, "--timeout", "3")
    assert q.returncode == 0, q.stderr
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert len(lines) == 2 and lines[0] == json.loads(first[0])
    assert sorted(r["status"] for r in lines) == ["ok", "timeout"]
    assert "| ok |" in (tmp_path / "res.md").read_text()


def test_not_run_placeholder_is_judged_and_reported_once(tasks, tmp_path):
    """A 'not_run' line (a pair a cut-short run never reached) is not a result: the next run judges it."""
    sols = tmp_path / "sols" / "level1"
    sols.mkdir(parents=True)
    (sols / "1_Affine.py").write_text(HONEST)
    out = tmp_path / "res"
    args = ["--tasks", str(tasks.parent), "--solutions", str(sols), "--out", str(out), "--device", "cpu",
            "--jobs", "1", "--iters", "4", "--trials", "2"]
    assert run_cli(*args).returncode == 0
    jsonl = tmp_path / "res.jsonl"
    placeholder = {**json.loads(jsonl.read_text().splitlines()[0]), "status": "not_run", "correct": False}
    jsonl.write_text(json.dumps(placeholder) + "\n")
    assert run_cli(*args).returncode == 0
    assert [json.loads(x)["status"] for x in jsonl.read_text().splitlines()] == ["not_run", "ok"]
    md = (tmp_path / "res.md").read_text()
    assert "| ok |" in md and "| not_run |" not in md


def test_solutions_comma_separated(tmp_path):
    """--solutions takes several files or folders at once: re-judge just the files a change touched."""
    lvl, sol = tmp_path / "kernelbench" / "level1", tmp_path / "kernels" / "level1"
    lvl.mkdir(parents=True)
    sol.mkdir(parents=True)
    for name in ("1_T.py", "2_T.py", "3_T.py"):
        (lvl / name).write_text(TASK)
        (sol / name.replace(".py", ".v2.py")).write_text(HONEST)
    pairs = evaluate.find_pairs(evaluate.find_tasks(str(lvl)), f"{sol / '1_T.v2.py'},{sol / '3_T.v2.py'}")
    assert [(os.path.basename(t), os.path.basename(s)) for t, s in pairs] == [("1_T.py", "1_T.v2.py"), ("3_T.py", "3_T.v2.py")]
    with pytest.raises(evaluate.JudgeError, match="no such solution"):
        evaluate.find_pairs(evaluate.find_tasks(str(lvl)), f"{sol / '1_T.v2.py'},{sol / 'missing.py'}")


def test_compile_summary_counts_only_tasks_with_a_timed_compile():
    """A task whose compiled reference was never timed is left out of the vs-compile row, not read as 1.0x."""
    recs = [dict(task=f"level1/{t}.py", solution=f"kernels/level1/{t}.py", correct=True, speedup=s) for t, s in
            (("1_a", 2.0), ("2_b", 3.0), ("3_c", 0.5))]
    recs += [dict(task="level1/1_a.py", solution=None, ref_ms=1.0, compile_ms=0.5),
             dict(task="level1/3_c.py", solution=None, ref_ms=1.0, compile_ms=0.25)]
    sm = evaluate.summarize(recs)
    assert sm["speedup"]["tasks"] == 3 and sm["speedup_compile"]["tasks"] == 2
    assert sm["speedup_compile"]["geomean"] == pytest.approx((1.0 * 0.125) ** 0.5)  # 2.0 / 2 and 0.5 / 4


def test_no_win_section_says_why():
    """Each task without a win gets a reason from its numbers: eager in TF32, HBM-bound, a tie, launch-bound."""
    def rec(task, speedup, ref_ms, nbytes, err=0.0, correct=True):
        return dict(task=f"level1/{task}.py", solution=f"kernels/level1/{task}.py", status="ok", correct=correct,
                    speedup=speedup, ref_ms=ref_ms, sol_ms=ref_ms / speedup, io_bytes=nbytes, eager_err_vs_tol=err)
    records = [rec("57_convT", 0.44, 0.2, 1e8, err=17), rec("5_scale", 0.92, 0.14, 5.4e8),
               rec("72_convT3d", 0.99, 23.0, 1.1e9), rec("22_Tanh", 0.48, 0.011, 2.1e6),
               rec("42_pool", 0.81, 0.04, 4.2e7), rec("1_fast", 1.7, 0.36, 5e7), rec("19_ReLU", 0.94, 0.015, 2.1e6)]
    lines = evaluate._no_win_section(records, "NVIDIA H200")
    why = {line.split(" | ")[0][2:]: line.rsplit(" | ", 1)[1] for line in lines if line.startswith("| level1/")}
    assert set(why) == {f"level1/{t}.py" for t in ("57_convT", "5_scale", "72_convT3d", "22_Tanh", "42_pool", "19_ReLU")}
    assert why["level1/57_convT.py"].startswith("eager runs TF32 (17x")
    assert why["level1/5_scale.py"].startswith("memory-bound")
    assert why["level1/72_convT3d.py"].startswith("a tie")
    assert why["level1/22_Tanh.py"].startswith("launch-bound: a few us")
    assert why["level1/19_ReLU.py"].startswith("launch-bound, a tie")
    assert why["level1/42_pool.py"].startswith("open")


def test_cudal1_jsonl_input(tasks, tmp_path):
    """CUDA-L1's released format: level_id, task_id, ref_code, custom_code per line."""
    f = tmp_path / "released.jsonl"
    f.write_text(json.dumps({"level_id": 1, "task_id": 1, "ref_code": TASK, "custom_code": HONEST}) + "\n")
    pairs = evaluate.cudal1_pairs(str(f), str(tmp_path / "none"))
    assert len(pairs) == 1
    r = evaluate.judge_many(pairs, **FAST)[0]
    assert r["status"] == "ok", r["message"]


# ---- GPU only: side streams, illegal addresses, memory changing after return

SIDE = sol("""
    def forward(self, x):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)      # ~10 ms of spinning before the real work
            y = torch.relu(self.lin(x)) * 2.0
        return y
    """)
ILLEGAL = r'''
#include <pybind11/pybind11.h>
#include <stdexcept>
__global__ void bad(float* p) { p[threadIdx.x + (1ll << 40)] = 1.f; }
void run() {
    bad<<<1, 32>>>(nullptr);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
}
PYBIND11_MODULE(MODULE_NAME, m) { m.def("run", &run); }
'''
LATE_WRITE = sol("""
    def forward(self, x):
        y = torch.relu(self.lin(x)) * 2.0
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(20_000_000)
            y.fill_(float('nan'))            # scribbles on the output after forward returned
        return y
    """)


GRAPH = sol("""
    def forward(self, x):
        if not hasattr(self, 'graph'):  # a CUDA graph of the whole forward, captured on the first call
            self.x = x.clone()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                torch.relu(self.lin(self.x)) * 2.0
            torch.cuda.current_stream().wait_stream(s)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self.y = torch.relu(self.lin(self.x)) * 2.0
        self.x.copy_(x)
        self.graph.replay()
        return self.y.clone()
    """)


GRAPHED = sol("""
    def forward(self, x):  # the same forward, replayed from one CUDA graph (cudal1.CudaGraph)
        if not hasattr(self, 'run'):
            self.run = cudal1.CudaGraph(lambda x: torch.relu(self.lin(x)) * 2.0)
        return self.run(x)
""", head="import cudal1\n")


def test_cuda_graph_off_the_gpu_is_the_function_itself():
    calls = []
    fn = lambda x, k: calls.append(k) or x * k
    g = cudal1.CudaGraph(fn)
    x = torch.randn(3, requires_grad=True)
    y = g(x, 2)
    assert torch.equal(y, x * 2) and calls == [2] and not y.requires_grad  # no autograd, as a custom kernel


def conv_case(device):
    torch.manual_seed(0)
    x, w, b = (torch.randn(*s, device=device) for s in ((4, 32, 8, 8, 8), (32, 16, 3, 3, 3), (16,)))
    kw = dict(stride=2, padding=1, output_padding=1)
    return x, w, b, kw, F.conv_transpose3d(x.double(), w.double(), b.double(), **kw)


def test_conv_3xtf32_is_the_convolution_and_its_split_is_exact():
    x, w, b, kw, want = conv_case("cpu")
    hi, lo = cudal1.tf32_split(x)
    assert torch.equal(hi + lo, x) and not (hi.view(torch.int32) & 8191).any() and (lo.abs() <= x.abs() / 1024).all()
    assert torch.equal(cudal1.tf32_stack(x), torch.cat([hi, hi, lo], 1))
    flag = torch.backends.cudnn.allow_tf32
    got = cudal1.conv_3xtf32(F.conv_transpose3d, x, w, b, **kw)
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert evaluate._compare(got, want, evaluate.STRICT)[2] < 0.1 and torch.backends.cudnn.allow_tf32 == flag
    x2, w2 = torch.randn(2, 3, 9, 9), torch.randn(6, 3, 3, 3)  # a forward conv: the weight's input channels are dim 1
    got = cudal1.conv_3xtf32(F.conv2d, x2, w2, None, padding=1)
    assert evaluate._compare(got, F.conv2d(x2.double(), w2.double(), padding=1), evaluate.STRICT)[0]


@pytest.mark.gpu
def test_gpu_conv_3xtf32_meets_the_strict_check_that_one_tf32_conv_misses():
    x, w, b, kw, want = conv_case("cuda")
    with cudal1.cudnn_tf32():
        one = F.conv_transpose3d(x, w, b, **kw)
    three = cudal1.conv_3xtf32(F.conv_transpose3d, x, w, b, **kw)
    print("err/tol: one TF32 conv", evaluate._compare(one, want, evaluate.STRICT)[2],
          "3xTF32", evaluate._compare(three, want, evaluate.STRICT)[2])
    assert evaluate._compare(three, want, evaluate.STRICT)[2] < 0.2 < evaluate._compare(one, want, evaluate.STRICT)[2]


@pytest.mark.gpu
def test_gpu_cuda_graph_replays_the_forward_on_fresh_inputs():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU()).cuda()
    eager = copy.deepcopy(net)
    g = cudal1.CudaGraph(net, module=net)
    for _ in range(3):  # training-mode BatchNorm: batch statistics, running ones updated as eagerly
        x = torch.randn(4, 8, device="cuda")
        y = g(x)
        with torch.no_grad():
            want = eager(x)
        assert torch.allclose(y, want, atol=1e-5)
        assert torch.allclose(net[1].running_mean, eager[1].running_mean, atol=1e-6)
        assert net[1].num_batches_tracked.item() == eager[1].num_batches_tracked.item()  # warm-ups put back
    assert g(x).data_ptr() != g(x).data_ptr() and len(g.graphs) == 1  # a fresh tensor each call, one capture
    net.eval()
    g(x)
    assert len(g.graphs) == 2  # eval mode is another graph


@pytest.mark.gpu
def test_gpu_cheats(tasks):
    gpu = dict(FAST, device="cuda")
    cases = {"side_stream": (SIDE, {"cheat:side_stream"}),
             "illegal_address": (f"import cudal1\nlib = cudal1.load_kernel({ILLEGAL!r}, 'cuda')\n" +
                                 sol("def forward(self, x):\n    lib.run()\n    return x\n"), {"runtime_error"}),
             "late_write": (LATE_WRITE, {"cheat:output_changed", "cheat:side_stream", "incorrect"}),
             "honest": (HONEST, {"ok"}), "cuda_graph": (GRAPH, {"ok"}), "cudal1_graph": (GRAPHED, {"ok"}),
             **{n: (ATTACKS[n][0], {ATTACKS[n][1]}) for n in ("stack_walk", "gc_scan", "self_removing_patch",
                                                             "predict_inputs", "forged_record")}}
    recs = evaluate.judge_many([(str(tasks / "1_Affine.py"), src) for src, _ in cases.values()], **gpu)
    for (name, (_, want)), r in zip(cases.items(), recs):
        print(name, r["status"], r["message"][:100])
    assert all(r["status"] in want for (_, want), r in zip(cases.values(), recs))


@pytest.mark.gpu
def test_gpu_reference_as_its_own_solution_reads_1x(tasks):
    """A/A on the GPU, where the floor (a trivial call, 35-50 us in the judge) is most of a tiny
    task's time: the ratio stays within the spread measured in results/h200-judge-noise.md."""
    src = TASK + "\n\nclass ModelNew(Model):\n    pass\n"
    recs = evaluate.judge_many([(str(tasks / "1_Affine.py"), src)] * 3,
                               **{**FAST, "device": "cuda", "iters": 1000, "min_iters": 200, "time_budget": 1.0})
    print([(round(r["speedup"], 3), round(r["ref_ms"], 4), round(r["floor_ms"], 4)) for r in recs])
    assert all(r["status"] == "ok" and 0.85 < r["speedup"] < 1 / 0.85 and r["floor_ms"] < r["ref_ms"] for r in recs)


def test_each_gpu_measures_one_pair_at_a_time():
    # two GPUs: the queue's first worker built for each free GPU gets it; a third waits for its own
    class Conn:
        def __init__(self):
            self.sent = []

        def send(self, word):
            self.sent.append(word)

    def slot(i, device, phase="queued"):
        s = types.SimpleNamespace(i=i, device=device, phase=phase, conn=Conn(), deadline=0, t_ready=0, times={})
        return s

    sched = evaluate.Scheduler.__new__(evaluate.Scheduler)
    sched.opts = dict(overlap=False, timeout=10)
    a, b, c, d = slot(0, "cuda:0"), slot(1, "cuda:0"), slot(2, "cuda:1"), slot(3, "cuda:1", "build")
    sched.slots, sched.queue = {s.i: s for s in (a, b, c, d)}, collections.deque([a, b, c])
    sched.hand_gpu()  # in waves nothing is measured while d builds
    assert [s.phase for s in (a, b, c)] == ["queued"] * 3
    d.phase = "queued"
    sched.queue.append(d)
    sched.hand_gpu()
    assert (a.phase, b.phase, c.phase, d.phase) == ("run", "queued", "run", "queued")
    assert a.conn.sent == ["go"] and c.conn.sent == ["go"] and not b.conn.sent
    assert list(sched.queue) == [b, d]
    a.phase = "done"  # a's record is in: cuda:0 is free, cuda:1 still busy
    sched.hand_gpu()
    assert (b.phase, d.phase) == ("run", "queued")
    assert evaluate._devices("cpu") == ["cpu"] and evaluate._devices("cuda:1") == ["cuda:1"]


def test_an_ok_record_says_how_long_its_worker_ran(records):
    # run_s: from "go" to the record; rounds_s: the timed rounds within it (the rest is checking)
    recs, _ = records
    r = recs["honest"]
    assert r["status"] == "ok" and 0 < r["rounds_s"] <= r["run_s"] <= r["wall_s"]


C_SRC = r'''
#include <math.h>
extern "C" void scale_tanh(const float* __restrict__ x, float* __restrict__ y, float s, long long n) {
    #pragma omp parallel for if (n >= 32768)
    for (long long i = 0; i < n; ++i) y[i] = tanhf(x[i] * s);
}
extern "C" void fill(float* __restrict__ y, int v, unsigned long long n) { for (unsigned long long i = 0; i < n; ++i) y[i] = v; }
'''


def test_load_c_calls_host_functions_by_their_c_signatures():
    """cudal1.load_c, the CPU's fast path: each `extern "C" void` function becomes a callable whose
    arguments are packed by its C signature, built once per source (comments and layout aside)."""
    k = cudal1.load_c(C_SRC)
    x = torch.randn(40000)
    y = torch.empty_like(x)
    k.scale_tanh(x.data_ptr(), y.data_ptr(), 0.5, x.numel())  # over the OpenMP threshold
    assert torch.allclose(y, torch.tanh(x * 0.5), atol=1e-6)
    k.fill(y.data_ptr(), 3, 5)
    assert y[:5].tolist() == [3.0] * 5 and y[5] == torch.tanh(x[5] * 0.5)
    with pytest.raises(TypeError, match="scale_tanh takes 4 arguments, got 3"):
        k.scale_tanh(x.data_ptr(), y.data_ptr(), 0.5)
    assert cudal1.load_c(C_SRC.replace("    ", "  ") + "// again\n") is k
    assert cudal1.solution_kind("_k = cudal1.load_c(C_SRC)") == "cpp"
    answer = cudal1.format_answer(f'"""Why."""\nimport cudal1\nC_SRC = r"""{C_SRC}"""\n_k = cudal1.load_c(C_SRC)\n')
    assert "C++ with OpenMP (scale_tanh, fill) on raw CPU pointers." in answer, answer  # its design line names them
    with pytest.raises(cudal1.BuildError, match='declares no extern "C" void function'):
        cudal1.load_c("void hidden(float* y) {}")
    with pytest.raises(cudal1.BuildError, match="parameter 'half h' has a type"):
        cudal1.load_c('extern "C" void f(half h) {}')
    with pytest.raises(cudal1.BuildError, match="error"):
        cudal1.load_c('extern "C" void g(float* y) { y[0] = undeclared; }')

"""
The judge: is a solution correct, and how much faster than the reference is it, really?

    python evaluate.py --tasks kernelbench/level1 --solutions kernels/level1 --gpu h200 --out results/h200 --compile
    python evaluate.py --tasks kernelbench --ids 1,19 --out results/cpu          # references only: baselines
    python evaluate.py --tasks kernelbench/level1/19_ReLU.py --solutions my_relu.py --out /tmp/relu
    python evaluate.py --cudal1-jsonl released.jsonl --gpu h200 --out results/cudal1-h200
    (or `make eval GPU=h200 TASKS=kernelbench/level1 SOLUTIONS=kernels/level1`)

One function, judge_many(), serves this CLI, stage 2 (train_sft.py) and the RL reward (train_rl.py).
Every (task, solution) pair runs in its own worker process, forked from a server that has already
imported torch (~0.4 s instead of ~4 s). Workers build in parallel (nvcc is CPU work), then take
turns on the GPU, one "go" at a time, with no build beside a timed worker unless overlap=True
(Scheduler). A crash, hang, illegal address or OOM kills only its worker, and still yields a record.

Correctness: `trials` fresh input sets (new contents, new addresses) made on the device from a
seed the OS draws for each set, half before and half after timing; every timed call's output is
checked too, against a reference computed only after the solution's call. The reference
for checking runs in true fp32 (TF32 off); the strict rule is |out - ref| <= atol*rms(ref) + rtol*|ref|
with atol = rtol = 1e-4 (KernelBench's looser absolute rule with 1e-2 via --tolerance kernelbench).
Models stay in training mode, as KernelBench leaves them (BatchNorm uses batch statistics).

Timing: every call is timed on the host clock with a full device synchronize before and after it,
so work on side streams cannot escape the clock. L2 is flushed, global settings reset and the rules
checked before each call; reference, solution and the "floor" (one trivial launch: what a call that
does nothing costs, reported beside, not subtracted) run in random order each round.
speedup = reference median / solution median, both from one process.

The solution shares its worker's process, so the worker holds nothing it could use (see Worker, Snapshot,
_install_guard): no predictable inputs, no reference output of its inputs, no judge reachable by
name; reading frames or scanning objects ends it as cheat:introspection. Native code can still read
and write the whole process: the judge stops Python-level tricks, not a determined native attacker. With
--compile, each task's torch.compile'd reference is timed the same way in a reference-only worker
(compilation starts threads and workers of its own that must not share a process with a solution).
"""

import argparse
import ast
import collections
import copy
import ctypes
import functools
import glob
import hashlib
import inspect
import json
import math
import multiprocessing
import multiprocessing.connection
import operator
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import types

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

STRICT = dict(tolerance="strict", atol=1e-4, rtol=1e-4)  # atol scaled by rms(ref)
KERNELBENCH = dict(tolerance="kernelbench", atol=1e-2, rtol=1e-2)  # KernelBench / CUDA-L1 rule
# The GPUs cudal1 knows, by their GPU= name: the word nvidia-smi's name for it holds, peak HBM/GDDR
# TB/s and peak dense bf16 TFLOP/s (datasheets), and the nvcc arch its kernels build for. The Makefile
# reads the arch from here with a bare python3: keep this module's top-level imports stdlib only.
GPUS = {"h100": ("H100", 3.35, 989, "sm_90"), "h200": ("H200", 4.8, 989, "sm_90"), "h20": ("H20", 4.0, 148, "sm_90"),
        "a100": ("A100", 2.0, 312, "sm_80"), "l40": ("L40", 0.86, 181, "sm_89"), "3090": ("3090", 0.94, 71, "sm_86")}


def gpu_spec(name):
    """(GPU= name, TB/s, TFLOP/s) of the GPU nvidia-smi calls `name` ('NVIDIA A100-SXM4-80GB'), or
    (None, None, None). Matched word for word, so an H20 is never taken for an H200."""
    words = re.findall(r"[A-Za-z0-9]+", name or "")
    return next(((k, tb, tf) for k, (word, tb, tf, _) in GPUS.items() if word in words), (None, None, None))


class JudgeError(Exception):
    """Bad input: a missing folder, a task without Model, the wrong GPU... one clear line."""


# -----------------------------------------------------------------------------
# finding tasks and solutions

def load_module(path, name, scope=None):
    """Import a Python file under a private name (never registered in sys.modules). With `scope` (a
    task's module) the file runs after a copy of that module's names, as if appended to the task:
    a solution may write `class ModelNew(Model)` and keep the task's constructor, and rebinding a
    name in the copy (batch_size = 1) changes nothing the task's own functions read."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    if scope is not None:
        module.__dict__.update((k, v) for k, v in vars(scope).items() if not k.startswith("__"))
    spec.loader.exec_module(module)
    return module


def task_key(path):
    """'level1/19_ReLU.py': the level folder and the file name identify a task."""
    return f"{os.path.basename(os.path.dirname(os.path.abspath(path)))}/{os.path.basename(path)}"


def level_and_id(path):
    """(level folder, task id) of a task or solution path, e.g. ('level1', 19) for 19_ReLU.v2.py."""
    m = re.match(r"(\d+)_", os.path.basename(path))
    level = next((p for p in reversed(os.path.abspath(path).split(os.sep)) if re.fullmatch(r"level\d+", p)), None)
    return level, int(m.group(1)) if m else None


def find_tasks(tasks, ids=None):
    """Task files from a file, a level folder, or a root holding level folders; filtered by ids."""
    if not os.path.exists(tasks):
        raise JudgeError(f"no such task file or folder: {tasks}")
    if os.path.isfile(tasks):
        paths = [tasks]
    else:
        paths = sorted(glob.glob(os.path.join(tasks, "*.py")) + glob.glob(os.path.join(tasks, "level*", "*.py")))
    paths = [p for p in paths if level_and_id(p)[1] is not None]
    if ids:
        paths = [p for p in paths if level_and_id(p)[1] in ids]
    if not paths:
        raise JudgeError(f"no task files (N_Name.py) found in {tasks}" + (f" with ids {sorted(ids)}" if ids else ""))
    return sorted(paths, key=lambda p: level_and_id(p))


def find_pairs(task_paths, solutions):
    """Pair each solution file (files or folders, comma-separated: every .py under a folder) with its
    task by level and id."""
    sols = []
    for item in solutions.split(","):
        if not os.path.exists(item):
            raise JudgeError(f"no such solution file or folder: {item}")
        sols += [item] if os.path.isfile(item) else sorted(glob.glob(os.path.join(item, "**", "*.py"), recursive=True))
    by_id = {level_and_id(t): t for t in task_paths}
    if len(task_paths) == 1 and len(sols) == 1:  # one task, one file: pair them whatever the names
        return [(task_paths[0], sols[0])]
    pairs = [(by_id[level_and_id(s)], s) for s in sols if level_and_id(s) in by_id]
    if not pairs:
        raise JudgeError(f"no solution in {solutions} matches a selected task (by level folder and id)")
    return pairs


def cudal1_pairs(jsonl, tasks_root):
    """CUDA-L1's released format: one JSON object per line with level_id, task_id, ref_code, custom_code.
    The task is ours (kernelbench/levelL/ID_*.py) where we have it, else the line's ref_code."""
    if not os.path.isfile(jsonl):
        raise JudgeError(f"no such JSONL file: {jsonl}")
    ours = {level_and_id(t): t for t in find_tasks(tasks_root)} if os.path.isdir(tasks_root) else {}
    base = os.path.join(ROOT, "build", "cudal1", os.path.splitext(os.path.basename(jsonl))[0])
    pairs = []
    for n, line in enumerate(open(jsonl), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            level, tid, ref, new = int(d["level_id"]), int(d["task_id"]), d["ref_code"], d["custom_code"]
        except (ValueError, KeyError, TypeError) as e:
            raise JudgeError(f"{jsonl}:{n}: not a CUDA-L1 record (level_id, task_id, ref_code, custom_code): {e}")
        task = ours.get((f"level{level}", tid))
        if task is None:
            task = os.path.join(base, "tasks", f"level{level}", f"{tid}_task.py")
            _write(task, ref)
        sol = os.path.join(base, f"level{level}", f"{tid}_line{n}.py")
        _write(sol, new)
        pairs.append((task, sol))
    if not pairs:
        raise JudgeError(f"{jsonl} holds no records")
    return pairs


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def solution_file(solution):
    """A solution given as source text is written to build/solutions/<hash>.py; paths pass through."""
    if solution is None or "\n" not in solution:  # a path never holds a newline; source always does
        return solution
    path = os.path.join(ROOT, "build", "solutions", hashlib.sha256(solution.encode()).hexdigest()[:16] + ".py")
    if not os.path.exists(path):
        _write(path + ".tmp", solution)
        os.replace(path + ".tmp", path)
    return path


def needs_gpu(source):
    """Does a solution call CUDA? Native CUDA (cudal1.solution_kind, the one classifier of what a
    solution runs), a load_inline extension (torch's own, which may launch anything), or tensors
    put on the GPU by name."""
    import cudal1  # here, not at the top: the CLI's one-line errors need no torch
    return cudal1.solution_kind(source) == "cuda" or bool(re.search(r"load_inline|\.cuda\(|['\"]cuda['\"]", source))


def _skip_reason(source, device):
    """Why a solution is not judged on this device, or None. A CUDA solution needs a GPU; a C++
    (OpenMP) one computes only on host tensors and hands CUDA tensors back to torch, so on a GPU
    it would be the reference timed against itself (noise picked as a 'best variant')."""
    import cudal1
    if not device.startswith("cuda") and needs_gpu(source):
        return "CUDA solution: needs an NVIDIA GPU"
    if device.startswith("cuda") and not needs_gpu(source) and cudal1.solution_kind(source) == "cpp":
        return "C++ (CPU) solution: judged on CPU runs only"
    return None


def gpu_info():
    """(name, driver) of the first NVIDIA GPU, from nvidia-smi (never initialises CUDA here)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        name, driver = [s.strip() for s in out[0].split(",")]
        return name, driver
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        return None, None


def check_gpu(gpu, present):
    """GPU=h100 names the results and promises which GPU they come from: refuse to lie."""
    if gpu is None:
        return
    if gpu.lower() not in GPUS:
        raise JudgeError(f"unknown GPU={gpu}: use one of {', '.join(GPUS)}")
    if present is None:
        raise JudgeError(f"GPU={gpu} given but no NVIDIA GPU found on this machine")
    if gpu_spec(present)[0] != gpu.lower():
        raise JudgeError(f"GPU={gpu} given but this machine has an {present}")


# -----------------------------------------------------------------------------
# the worker: one (task, solution) pair, in its own process

class Cheat(Exception):
    """A solution broke the rules of the game; the message says how."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


class Incorrect(Exception):
    pass


# ---- what a solution must leave alone

class Snapshot:
    """The identity of everything in the namespaces a call goes through: the clock and threads,
    torch's operators, tensor methods, nn.functional and every nn module class, the global module
    hooks, the judge's own functions and classes, and the task's. A solution may reach all of them
    by name (`import torch`, `object.__subclasses__()`), so before every call, reference or
    solution, each must still hold the objects it held before the solution was imported: a patch
    that slows the reference, or rewrites its output, and removes itself after one use is caught
    at the next call. Comparing by identity over ~10k entries costs a few hundred us (untimed)."""

    def __init__(self, task):
        import torch
        import torch._dynamo
        # Importing dynamo rebinds torch.manual_seed, and its first compile patches nn.Module.__init__:
        # both now, so a solution's own torch.compile changes nothing the snapshot holds.
        torch._dynamo.mutation_guard.install_generation_tagging_init()
        import torch.nn.functional as F
        import torch.nn.modules.module as mm
        # a module may gain names (importing torch._dynamo adds one to torch) without changing any
        # call; a class may not (a method added to a subclass shadows its base's), nor a hook dict
        modules = {"time": time, "threading": threading, "statistics": statistics, "math": math,
                   "random": random, "evaluate": globals(), "torch": torch, "torch._C": torch._C,
                   "torch._C._nn": torch._C._nn, "torch.nn.functional": F, "torch.cuda": torch.cuda, task.__name__: task}
        classes = [torch.Tensor, torch._C.TensorBase, type(torch._C._VariableFunctions), Worker, Flags, Snapshot]
        classes += [c for c in vars(torch.nn).values() if isinstance(c, type) and issubclass(c, torch.nn.Module)]
        classes += [c for c in vars(task).values() if isinstance(c, type) and c.__module__ == task.__name__]
        closed = {f"{c.__module__}.{c.__qualname__}": vars(c) for c in classes}
        # the global hooks every nn.Module call runs (forward, backward, registration): empty dicts here
        closed.update((f"torch.nn.modules.module.{k}", v) for k, v in vars(mm).items()
                      if k.startswith("_global_") and isinstance(v, dict))
        self.spaces = [(name, d, tuple(d), tuple(d.values()), name in closed) for name, d in
                       [(n, m if isinstance(m, dict) else vars(m)) for n, m in modules.items()] + list(closed.items())]
        # A function keeps its identity when its code is swapped (Model.forward.__code__ = slow_code, or
        # get_inputs.__code__ with a fixed seed): its code, defaults and keyword defaults are held too
        funcs = [(f"{name}.{k}", f) for name, _, keys, values, _ in self.spaces for k, v in zip(keys, values)
                 for f in [getattr(v, "__func__", v)] if isinstance(f, types.FunctionType)]
        self.labels, self.funcs = tuple(label for label, _ in funcs), tuple(f for _, f in funcs)
        self.parts = [(get, tuple(map(get, self.funcs))) for get in
                      map(operator.attrgetter, ("__code__", "__defaults__", "__kwdefaults__"))]

    def changed(self):
        """Names of what a solution replaced, removed or added ([] when nothing)."""
        bad = []
        for name, d, keys, values, closed in self.spaces:
            if (closed and len(d) != len(keys)) or not all(map(operator.is_, map(d.get, keys), values)):
                bad += [f"{name}.{k}" for k, v in zip(keys, values) if d.get(k) is not v]
                bad += [f"{name}.{k} (added)" for k in set(d) - set(keys)] if closed else []
        for get, held in self.parts:  # one C-level pass per part; labels only when one differs
            if not all(map(operator.is_, map(get, self.funcs), held)):
                bad += [f"{label} (code)" for label, f, h in zip(self.labels, self.funcs, held) if get(f) is not h]
        return bad


class Flags:
    """Global settings that change how fast or how exactly torch computes, as found at worker start:
    backend flags, matmul precision, thread count, deterministic mode, default dtype, autocast, the
    attention backends. Restored before every call, so a solution that changes one outside its
    forward cannot slow the reference (or speed itself); what cannot be restored is a rule break."""

    def __init__(self):
        import torch
        b = torch.backends

        def attr(o, a):
            return (lambda: getattr(o, a)), (lambda v: setattr(o, a, v))

        self.knobs = {  # name -> (get, set)
            "matmul.allow_tf32": attr(b.cuda.matmul, "allow_tf32"), "cudnn.allow_tf32": attr(b.cudnn, "allow_tf32"),
            "cudnn.benchmark": attr(b.cudnn, "benchmark"), "cudnn.deterministic": attr(b.cudnn, "deterministic"),
            "cudnn.enabled": attr(b.cudnn, "enabled"), "mkldnn.enabled": attr(b.mkldnn, "enabled"),
            "fp16_reduced": attr(b.cuda.matmul, "allow_fp16_reduced_precision_reduction"),
            "bf16_reduced": attr(b.cuda.matmul, "allow_bf16_reduced_precision_reduction"),
            "matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
            "threads": (torch.get_num_threads, torch.set_num_threads),
            "deterministic": ((lambda: (torch.are_deterministic_algorithms_enabled(),
                                        torch.is_deterministic_algorithms_warn_only_enabled())),
                              (lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]))),
            "default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
            "flash_sdp": (b.cuda.flash_sdp_enabled, b.cuda.enable_flash_sdp),
            "mem_efficient_sdp": (b.cuda.mem_efficient_sdp_enabled, b.cuda.enable_mem_efficient_sdp),
            "math_sdp": (b.cuda.math_sdp_enabled, b.cuda.enable_math_sdp),
        }
        for dev in ("cpu", "cuda"):
            self.knobs[f"autocast.{dev}"] = ((lambda d=dev: torch.is_autocast_enabled(d)),
                                             (lambda v, d=dev: torch.set_autocast_enabled(d, v)))
        self.saved = {k: get() for k, (get, _) in self.knobs.items()}
        self.interop = torch.get_num_interop_threads()
        self.strict = {"matmul.allow_tf32": False, "cudnn.allow_tf32": False, "matmul_precision": "highest"}

    def reset(self, strict=False):
        """Defaults; strict=True turns TF32 off everywhere (the reference used for checking)."""
        import torch
        for k, (get, set_) in self.knobs.items():
            want = self.strict[k] if strict and k in self.strict else self.saved[k]
            if get() != want:
                set_(want)
        if torch.get_num_interop_threads() != self.interop:
            raise Cheat("global_state", "changed torch's inter-op thread count")
        if torch._C._len_torch_function_stack() or torch._C._len_torch_dispatch_stack():
            raise Cheat("global_state", "left a torch function or dispatch mode active (it would run inside the reference)")


# ---- introspection: an audit hook the solution cannot take back

INTROSPECTION = {"sys._getframe", "sys._getframemodulename", "sys._current_frames", "sys._current_exceptions",
                 "sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
                 "gc.get_objects", "gc.get_referrers", "gc.get_referents"}


def _introspection(event, args):
    """What an audit event reaches for, if it is introspection: a frame (sys._getframe, a traceback's
    or generator's frame, trace and profile hooks), every object (gc), the interpreter's C API by
    name (ctypes), or the process's own memory (/proc/self/mem). None otherwise."""
    if event in INTROSPECTION:
        return event
    if event == "object.__getattr__" and str(args[1]).endswith("_frame"):  # tb_frame, gi_frame, cr_frame, ag_frame
        return f"{type(args[0]).__name__}.{args[1]}"
    if event == "ctypes.dlsym" and str(args[-1]).startswith(("Py", "_Py")):
        return f"ctypes: the C API's {args[-1]}"
    if event == "open" and isinstance(args[0], (str, bytes)):
        path = os.path.normpath(os.fsdecode(args[0]))  # b'/proc//self/./mem' is /proc/self/mem too
        if re.fullmatch(r"/proc/(self|thread-self|\d+)(/task/\d+)?/mem", path):
            return f"open {path}"
    return None


def _install_guard(sol_path, cheat):
    """CPython's audit hooks (sys.addaudithook) cannot be removed from Python: from here on, when code
    of the solution reaches for a frame, every object, or the process's memory, cheat(kind, message)
    ends the worker at once. The solution's code is known by its frames' file names: its own file,
    and every file name it compiles code under (exec, compile, code.replace), so generated code counts
    as its own. The innermost frame that belongs to the solution or to trusted code decides: torch's
    own introspection inside a call the solution made is torch's, so are the judge's, and those of
    the stdlib modules that read their caller's module name (collections.namedtuple, typing, enum,
    dataclasses); `inspect.stack()` or `logging` called by the solution is the solution's."""
    import collections as c, dataclasses, enum, typing
    import torch
    tainted = {sol_path, os.path.abspath(sol_path)}
    trusted = (os.path.dirname(torch.__file__) + os.sep, __file__, c.__file__, dataclasses.__file__, enum.__file__,
               typing.__file__)
    busy = []  # the hook's own frame walk raises events too: ignore them

    def decider(frame):
        while frame is not None:
            name = frame.f_code.co_filename
            if name in tainted:
                return "solution"
            if name.startswith(trusted):
                return "trusted"
            frame = frame.f_back
        return None

    def hook(event, args):
        what = _introspection(event, args)
        if busy or (what is None and event not in ("compile", "code.__new__")):
            return
        busy.append(1)
        try:
            mine = decider(sys._getframe(1)) == "solution"
        finally:
            busy.clear()
        if mine and what is None:  # code the solution compiles is the solution's
            tainted.add(str(args[1]))
        elif mine:
            cheat("introspection", f"the solution used {what}: reading the judge's frames or objects is not allowed")

    sys.addaudithook(hook)


# ---- comparing outputs

def _tensors(x):
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    return [x] if hasattr(x, "data_ptr") else []


def _span(t):
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def _compare(out, ref, tol, chunk=1 << 24):
    """(ok, max abs err, max err / allowed err) under tol: the last is <= 1 exactly when every element
    passes. NaN in out where ref has none never passes; an infinity passes where ref has the same one.
    Compared in float64, chunk elements at a time, so a 6 GiB output (level1/11) needs no 50 GiB of
    temporaries."""
    import torch
    if not out.is_floating_point() and not out.is_complex():
        same = bool(torch.equal(out, ref))
        return same, 0.0 if same else float("inf"), 0.0 if same else float("inf")
    o, r = out.reshape(-1), ref.reshape(-1)
    scale = 1.0
    if tol["tolerance"] == "strict" and r.numel():  # atol is relative to the reference's rms (finite part)
        scale = math.sqrt(sum(r[i:i + chunk].double().nan_to_num(0, 0, 0).pow(2).sum().item()
                              for i in range(0, r.numel(), chunk)) / r.numel())
    ok, mx, ratio = True, 0.0, 0.0
    for i in range(0, r.numel(), chunk):
        oc, rc = o[i:i + chunk].double(), r[i:i + chunk].double()
        same = (oc == rc) | (oc.isnan() & rc.isnan())  # equal infinities, or NaN on both sides
        diff = torch.where(same, 0.0, (oc - rc).abs())  # NaN or inf where only one side is
        if diff.isnan().any() or diff.isinf().any():
            return False, float("inf"), float("inf")
        bound = tol["atol"] * scale + tol["rtol"] * torch.where(rc.isinf(), 0.0, rc.abs())
        ok = ok and bool((diff <= bound).all())
        mx = max(mx, diff.max().item())
        ratio = max(ratio, (diff / bound.clamp_min(1e-300)).max().item())
    return ok, mx, ratio


class Worker:
    """Everything one judged pair needs: the task, the models, the device and the checks.

    The solution shares this process, so the worker keeps nothing it could use: inputs are drawn
    from the OS's randomness for every call (nothing here can predict the next set), the reference
    is computed only after the solution's call on the same inputs (no answer exists while it runs),
    and everything it may reach by name is checked before every call (Snapshot, Flags)."""

    def __init__(self, task_path, sol_path, opts):
        import torch
        self.torch, self.opts = torch, opts
        self.clock, self.sync = time.perf_counter, torch.cuda.synchronize  # ours, before any solution
        self.device = torch.device(opts["device"])
        self.cuda = self.device.type == "cuda"
        if self.cuda and self.device.index is not None:  # "cuda:N" (a torchrun rank): sync that GPU
            torch.cuda.set_device(self.device)
        self.tol = {k: opts[k] for k in ("tolerance", "atol", "rtol")}
        self.flags = Flags()
        self.task = load_module(task_path, "task_under_judgement")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(self.task, name):
                raise JudgeError(f"task {task_path} defines no {name}")
        init = self.task.get_init_inputs()
        torch.manual_seed(opts["seed"])
        self.ref = self.task.Model(*init).to(self.device)
        # The model checking answers, apart from the one timed: a stateful task (an RNN that keeps its
        # hidden state) then sees the same call history as the solution, one call after each of its.
        self.truth = copy.deepcopy(self.ref)
        self.compiled = torch.compile(self.ref) if opts["compile"] else None
        if self.compiled is not None:  # compile now, while other workers still build: CPU work
            with torch.no_grad():
                self.compiled(*self.inputs())
        # State the checks use, made before the solution exists.
        if self.cuda:  # written before each call: twice L2, so no call finds its data cached
            l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
            self.flush = torch.empty(max(2 * l2, 1 << 20), dtype=torch.uint8, device=self.device)
            self.one = torch.zeros(1, device=self.device)
        self.history, self.history_copies, self.errors = [], [], []
        self.old_refs = collections.deque(maxlen=8)  # recent reference outputs: spot stale caches
        self.snapshot = Snapshot(self.task)
        self.threads = set(threading.enumerate())
        # Held by this object, looked up before the solution can change the class: a solution that
        # replaces Worker.check_rules is caught by the original.
        self.check = self.check_rules
        self.new = None
        if sol_path is not None:
            sol = load_module(os.path.abspath(sol_path), "solution_under_judgement", scope=self.task)  # may build native code
            if not hasattr(sol, "ModelNew"):
                raise JudgeError(f"solution {sol_path} defines no ModelNew")
            torch.manual_seed(opts["seed"])
            self.new = sol.ModelNew(*init).to(self.device)
            ours, theirs = self.ref.state_dict(), self.new.state_dict()
            same = {k: v for k, v in ours.items() if k in theirs and theirs[k].shape == v.shape}
            self.new.load_state_dict(same, strict=False)
        self.check()
        if self.new is not None and self.is_the_reference(type(self.new)):
            raise Cheat("reference", "ModelNew subclasses the task's Model and overrides nothing: the reference "
                                     "itself, not a rewrite")
        if opts["prewarm"]:  # one untimed reference call now, beside another worker's turn on the GPU: this
            # process's first-use costs (library handles, lazily loaded kernels) leave its own turn. Never
            # the truth, which must see exactly the solution's calls. Then the output check once, on that
            # output against itself: its float64 kernels load on first use too (~0.35 s of the first run in
            # a process on the H100, one sample: task 19 in results/h100-judge-phases.md), otherwise inside
            # the turn of every judged candidate. With overlap both run beside another worker's timed turn:
            # bench/judge_throughput.py's A/A range of arm w against d says what that costs in noise
            out, _ = self.call(self.ref, self.inputs(), 0)
            for o in _tensors(out):
                _compare(o, o, self.tol)

    def is_the_reference(self, cls):
        """True for a direct subclass of the task's own Model that overrides none of its attributes (only
        new names: a helper nothing calls, a cache), or only forward with one that hands the call back
        (`return super().forward(x)`, `return Model.forward(self, x)`): the task's program, correct at
        1.00x by construction, which would count as a solved task without solving anything. A subclass
        that overrides __init__ (to swap a module) or a method forward calls is a rewrite, judged as one."""
        Model = self.task.Model
        made = {"__module__", "__qualname__", "__doc__", "__firstlineno__", "__static_attributes__",
                "__annotations__", "__dict__", "__weakref__"}  # what Python puts in every class's namespace
        over = {k for k in vars(cls) if k not in made and hasattr(Model, k)}
        return cls.__mro__ == (cls,) + Model.__mro__ and (not over or over == {"forward"} and _hands_back(cls.forward))

    # ---- inputs and calls

    def inputs(self):
        """A fresh input set: contents from a seed the OS draws now, made on the device (new addresses).
        The generator is reseeded from the OS after, so not even torch.initial_seed() tells the seed."""
        torch = self.torch
        self.flags.reset()  # a default dtype the solution left set must not shape the inputs
        torch.manual_seed(int.from_bytes(os.urandom(8), "little"))
        with torch.device(self.device):
            xs = self.task.get_inputs()
        torch.manual_seed(int.from_bytes(os.urandom(8), "little"))
        return xs

    def clone(self, xs):
        return [x.clone() if hasattr(x, "clone") else x for x in xs]

    def call(self, model, xs, k, strict=False):
        """One call: rules checked, flags reset and RNG seeded, L2 flushed, device idle; returns
        (output, seconds). k seeds the call's own randomness (dropout), the same for every model."""
        torch = self.torch
        self.check()  # before every model's call: a patch left for the reference is caught here
        self.flags.reset(strict)
        torch.manual_seed(k)
        if self.cuda:
            self.flush.zero_()
            self.sync()
        before = set(threading.enumerate())  # for every model alike: the same work before each clock
        t0 = self.clock()
        out = model(*xs)
        if self.cuda:
            self.sync()
        t1 = self.clock()
        if model is not self.new:  # threads the reference or torch.compile start are the judge's own
            self.threads |= set(threading.enumerate()) - before
        return out, t1 - t0

    def reference(self, xs, k, model=None):
        """The output solutions are checked against: true fp32 (TF32 off), no grad bookkeeping.
        Always computed after the solution's call on xs (never before: it would be there to steal),
        by self.truth, which runs once per solution call and nowhere else (model: another one)."""
        with self.torch.no_grad():
            out, _ = self.call(self.truth if model is None else model, self.clone(xs), k, strict=True)
        return out

    def trivial(self):
        """One launch of a 1-element add: timed like a model, it is what a call that does no work costs."""
        return self.one.add_(1)

    # ---- the rules

    def check_rules(self):
        self.flags.reset()  # first: some settings rebind names (the default dtype rebinds torch.Storage)
        patched = self.snapshot.changed()
        if patched:
            if all(p.startswith(self.task.__name__) for p in patched):
                raise Cheat("changed_task", "changed the task module's sizes or functions: " + ", ".join(patched[:5]))
            raise Cheat("patched", "replaced functions the judge or the reference calls: " + ", ".join(patched[:5]))
        # Only a solution can cheat with a thread: a reference-only worker's torch.compile pool starts
        # its timer thread from the pool's own reader thread, outside any call (on the H200 that read
        # 'cheat:threads' for 35 of 43 level-2 compile workers, and left the compile column empty).
        extra = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        if extra and self.new is not None:
            raise Cheat("threads", f"left threads running: {', '.join(extra[:3])}")

    def check_output(self, out, xs, pristine, ref, snap, history):
        """Every rule a solution's output must keep; raises Cheat or Incorrect."""
        torch = self.torch
        self.check()
        for x, p in zip(_tensors(xs), _tensors(pristine)):
            if not torch.equal(x, p):
                raise Cheat("input_mutation", "modified its inputs")
        outs, refs = (list(out), list(ref)) if isinstance(ref, (tuple, list)) else ([out], [ref])
        if isinstance(out, (tuple, list)) != isinstance(ref, (tuple, list)) or len(outs) != len(refs):
            raise Incorrect(f"returned {type(out).__name__}, the reference a {type(ref).__name__}")
        spans = [_span(t) for t in _tensors(xs)]
        for o, r in zip(outs, refs):
            if type(o) is not torch.Tensor:
                raise Cheat("output_type", f"returned a {type(o).__module__}.{type(o).__name__}, not a torch.Tensor")
            if o.shape != r.shape or o.dtype != r.dtype or o.device != r.device:
                raise Incorrect(f"output {tuple(o.shape)} {o.dtype} on {o.device}, "
                                f"expected {tuple(r.shape)} {r.dtype} on {r.device}")
            lo, hi = _span(o)
            if o.numel() and any(lo < b and a < hi for a, b in spans):
                raise Cheat("aliasing", "output shares memory with an input")
            if any(_span(p)[0] == lo and o.numel() for p in history):
                raise Cheat("reused_output", "returned the same buffer as an earlier call")
        for o, r, s in zip(outs, refs, snap):
            ok, mx, ratio = _compare(o, r, self.tol)
            self.errors.append((mx, ratio))
            if not ok:
                # an earlier call's result only where it differs from this one's: a task whose output barely
                # depends on its inputs (a sum of a softmax) made a wrong answer read as a cache (H100, stage 3)
                if any(_compare(o, old, self.tol)[0] and not _compare(r, old, self.tol)[0]
                       for old in self.old_refs if old.shape == o.shape):
                    raise Cheat("cached", "returned an earlier call's result for new inputs")
                if _compare(s, r, self.tol)[0]:
                    raise Cheat("output_changed", "output changed after the call returned (freed or reused memory)")
                raise Incorrect(f"max abs err {mx:.3g}, {ratio:.3g}x the allowed error")
            if not _compare(s, r, self.tol)[0]:
                raise Cheat("side_stream", "output not ready on the current stream when forward returned")

    def timed_call(self, model, xs, k, keep=False):
        """One timed call on a private copy of xs, the same for every model: the inputs' copies and
        the output are kept until the round ends. keep=True (the solution): a snapshot of the output
        taken after the clock stopped, for verify(). Otherwise the output is overwritten with NaN at
        once: a reference output of these inputs must not exist while the solution runs."""
        torch = self.torch
        pristine, mine = self.clone(xs), self.clone(xs)
        with torch.no_grad():
            out, dt = self.call(model, mine, k)
            if keep:
                snap = [o.clone() if type(o) is torch.Tensor else o for o in _tensors(out)]
            else:
                snap = [o.fill_(float("nan")) if o.is_floating_point() else o.zero_() for o in _tensors(out)]
        return (out, mine, pristine, snap), dt

    def untimed_call(self, xs, k):
        """The solution on a private copy of xs, snapshotted on the current stream *before*
        synchronising: output still being written on a side stream differs from its snapshot."""
        torch = self.torch
        pristine, mine = self.clone(xs), self.clone(xs)
        with torch.no_grad():
            self.check()
            torch.manual_seed(k)
            out = self.new(*mine)
            snap = [o.clone() if type(o) is torch.Tensor else o for o in _tensors(out)]
            if self.cuda:
                self.sync()
        return out, mine, pristine, snap

    def verify(self, call, ref):
        """Every check on one solution call's output (see check_output), then remember it."""
        torch = self.torch
        out, mine, pristine, snap = call
        with torch.no_grad():
            # poison the allocator: memory freed under the output gets overwritten now
            _ = [torch.full_like(o, float("nan")) if o.is_floating_point() else torch.empty_like(o)
                 for o in _tensors(out) if type(o) is torch.Tensor]
            if self.cuda:
                self.sync()
            self.check_output(out, mine, pristine, ref, snap, self.history)
        for old, copy in zip(self.history, self.history_copies):
            if not torch.equal(old, copy):
                raise Cheat("reused_output", "an earlier output changed during a later call")
        self.history, self.history_copies = _tensors(out), [t.clone() for t in _tensors(out)]
        if not isinstance(ref, (tuple, list)) and ref.numel() < (1 << 24):  # small enough to keep
            self.old_refs.append(ref)

    def checked_trial(self, k):
        """An untimed correctness trial on a fresh input set: the solution first, then the reference."""
        xs = self.inputs()
        call = self.untimed_call(xs, k)
        self.verify(call, self.reference(xs, k))

    # ---- the whole judgement

    def study_reference(self):
        """What the task's reference is like, for the report: flags for a degenerate reference
        (constant, stochastic, NaN, passable by zeros), the least bytes a call moves, and how far eager
        (TF32 in cuDNN by default) is from the strict reference."""
        torch = self.torch
        x0, x1 = self.inputs(), self.inputs()
        r0, r0b, r1 = (self.reference(x, k, self.ref) for x, k in ((x0, 1), (x0, 2), (x1, 1)))
        flags = []
        for a, b, c in zip(_tensors(r0), _tensors(r0b), _tensors(r1)):
            if a.is_floating_point():
                if a.isnan().any():
                    flags.append("nan_ref")
                if torch.equal(a, c):
                    flags.append("constant")
                elif not _compare(b, a, self.tol)[0]:  # beyond tolerance: atomics' reordering is not
                    flags.append("stochastic")
                if a.numel() and _compare(torch.zeros_like(a), a, self.tol)[0]:
                    flags.append("zeros_pass")
        # Eager with PyTorch's default flags (TF32 in cuDNN convolutions) against the strict reference:
        # above 1 means eager itself would fail this tolerance, so a strict solution races a lower bar.
        with torch.no_grad():
            eager = self.call(self.ref, self.clone(x0), 1)[0]
        io_bytes = sum(t.nbytes for t in _tensors(x0) + _tensors(r0))  # the least traffic a call needs
        eager_err = max((_compare(e, a, self.tol)[2] for e, a in zip(_tensors(eager), _tensors(r0))
                         if a.is_floating_point()), default=0.0)
        return dict(flags=sorted(set(flags)), io_bytes=io_bytes, eager_err_vs_tol=eager_err)

    def run(self):
        """Correctness trials, timed rounds, more trials; returns the record's measured fields."""
        rec = {"flags": [], "screen": self.opts["screen"]}
        if not self.opts["screen"]:
            rec.update(self.study_reference())
        trials = self.opts["trials"]
        if self.new is not None:
            for k in range(trials - trials // 2):  # half the trials before timing...
                self.checked_trial(k)
        t = time.time()
        times = self.timed_rounds()
        rec["rounds_s"] = round(time.time() - t, 3)  # the timed rounds' wall time; the rest of run_s is checking
        if self.new is not None:
            for k in range(trials - trials // 2, trials):  # ...and half after: no honest-then-lazy
                self.checked_trial(2000 + k)
            rec["max_abs_err"] = max(e[0] for e in self.errors)
            rec["err_vs_tol"] = max(e[1] for e in self.errors)  # <= 1 passes
        # Medians as the clock read them. The floor is reported, not subtracted: it costs as much as a whole
        # ReLU call, and an A/A test read far from 1x with it subtracted (the README's judge section).
        for w, ts in times.items():
            med = statistics.median(ts)
            q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [med] * 3
            rec[f"{w}_ms"], rec[f"{w}_iqr_ms"] = med * 1e3, (q[2] - q[0]) * 1e3
        rec["rounds"] = len(times["ref"])
        return rec

    def timed_rounds(self):
        """Seconds per call of each of the reference, the solution, the compiled reference and the floor
        (one trivial launch: the cost of a call that does nothing, in the same conditions), called in an
        order the OS draws each round, for iters rounds after warm-up or until the time budget."""
        opts = self.opts
        models = {"ref": self.ref, "sol": self.new, "compile": self.compiled, "floor": self.trivial if self.cuda else None}
        who = [w for w, m in models.items() if m is not None]
        times = {w: [] for w in who}
        rng, t_start = random.SystemRandom(), time.time()
        for r in range(opts["warmup"] + opts["iters"]):
            if r >= opts["warmup"] + opts["min_iters"] and time.time() - t_start > opts["time_budget"]:
                break
            k = 1000 + r
            xs = self.inputs()
            # The timed calls run back to back, the solution's output checked after them all: checks
            # between them idled the GPU for milliseconds before the next call, and an A/A test read up
            # to 1.6x. Every model's call does the same work around its clock, and its copies and
            # output live until the round ends, as the solution's must (verified after the round).
            calls = {}
            for w in rng.sample(who, len(who)):
                calls[w], dt = self.timed_call(models[w], [] if w == "floor" else xs, k, keep=w == "sol")
                if r >= opts["warmup"]:
                    times[w].append(dt)
            if "sol" in calls:  # the reference for checking exists only from here on
                self.verify(calls["sol"], self.reference(xs, k))
        return times


def _hands_back(fn):
    """True for a function whose body (docstrings aside) is one `return super().forward(...)` or
    `return Model.forward(self, ...)`, read from its source file."""
    try:
        body = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0].body
    except (OSError, TypeError, SyntaxError, IndexError, AttributeError):
        return False
    body = [b for b in body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
            and ast.unparse(body[0].value).startswith(("super().forward(", "Model.forward(self")))


def _worker_main(conn, task_path, sol_path, opts, secret):
    """Child process: build and load, say 'ready', wait for 'go', judge, send one record.
    Messages are JSON carrying the secret the parent gave this worker: bytes a solution writes to
    the pipe (it can find the descriptor) are neither unpickled by the parent nor taken as a record."""
    os.setpgrp()  # so a timeout kills nvcc & co. with us
    try:  # die with the server that forked us (if the judge is killed, nothing lingers)
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
    except OSError:
        pass
    log = os.path.join(ROOT, "build", "logs")
    os.makedirs(log, exist_ok=True)
    fd = os.open(os.path.join(log, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)

    def send(kind, payload):
        conn.send_bytes(json.dumps([kind, payload, secret]).encode())

    def cheat(kind, message):  # from the audit hook: the record goes now, and nothing runs after it
        send("record", {"status": f"cheat:{kind}", "message": message})
        os._exit(0)

    # Nothing a solution reaches by name leads back here: the judge's module leaves sys.modules (an
    # `import evaluate` in a solution loads a fresh copy that judges nothing), and the Process object
    # forgets its target and arguments (this function, the pipe, the secret).
    sys.modules.pop(__name__, None)
    me = multiprocessing.current_process()
    me._target, me._args, me._kwargs = None, (), {}
    if sol_path is not None:
        _install_guard(sol_path, cheat)
    phase, rec = "build", {}
    try:
        w = Worker(task_path, sol_path, opts)
        send("ready", None)
        conn.recv()
        phase, t = "run", time.time()
        rec = w.run()
        rec["status"], rec["message"], rec["run_s"] = "ok", "", round(time.time() - t, 3)  # from "go" to the record
    except JudgeError as e:
        rec.update(status="error", message=str(e))
    except Cheat as e:
        rec.update(status=f"cheat:{e.kind}", message=str(e))
    except Incorrect as e:
        rec.update(status="incorrect", message=str(e))
    except Exception as e:
        build = phase == "build" and (type(e).__name__ == "BuildError" or "Error building extension" in str(e))
        rec.update(status="compile_error" if build else "runtime_error",
                   message=f"{type(e).__name__}: {e}"[-4000:], traceback=traceback.format_exc()[-4000:])
    try:
        send("record", rec)
    except (OSError, ValueError):
        pass
    conn.close()
    os._exit(0)  # skip atexit/CUDA teardown of a possibly broken context


# -----------------------------------------------------------------------------
# the scheduler: many workers building at once, one at a time on the device

DEFAULTS = dict(device=None, jobs=None, trials=6, warmup=3, iters=1000, min_iters=10, time_budget=3.0,
                compile=False, timeout=300, seed=0, screen=False, overlap=False, prewarm=False, **STRICT)
# RL's first pass: every rule and check on every call, but no study of the reference, 2 trials and a short
# timing; a would-be new best is judged again in full before it counts (train_rl.judge). It builds beside
# measuring: more candidates per GPU-minute, at about the A/A spread of waves (results/h200-judge-throughput.md).
SCREEN = dict(screen=True, trials=2, warmup=1, min_iters=10, time_budget=0.3, overlap=True)


@functools.cache
def _context():
    """The context every worker is made in: forked from one server that has imported torch."""
    # Forked children of a torch-importing server ran CPU ops ~50x slow with OpenMP's spinning
    # waits (measured: 7 ms vs 0.15 ms for a small Linear on 2 cores); passive waits fix it.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # Trap: forkserver re-imports the caller's main script in the server unless __main__ names
    # itself "__main__"; a flat training script (train_sft.py) would otherwise run again there.
    main = sys.modules["__main__"]
    if getattr(main, "__spec__", None) is None:
        import importlib.machinery
        main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "torch._dynamo"])  # every worker imports dynamo (Snapshot): once here
    return ctx


def commit():
    """The commit being judged ('+dirty' with local changes). The GPU machine's copy of the tree
    has no .git, so there the caller passes it in CUDAL1_COMMIT."""
    if os.environ.get("CUDAL1_COMMIT"):
        return os.environ["CUDAL1_COMMIT"]
    try:
        git = ["git", "-C", ROOT]
        head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True).stdout.strip()
        return (head + ("+dirty" if dirty else "")) or "unknown"
    except OSError:
        return "unknown"


def environment(device):
    import torch
    name, driver = gpu_info() if device.startswith("cuda") else (None, None)
    return dict(device=device, gpu=name or "cpu", driver=driver, torch=torch.__version__,
                cuda=torch.version.cuda, commit=commit(), python=sys.version.split()[0])


def _key(task, sol):
    """(task, solution) names a record: 'level1/19_ReLU.py', 'kernels/level1/19_ReLU.py' (or the hash file)."""
    if sol is None:
        return task_key(task), None
    return task_key(task), os.path.relpath(os.path.abspath(sol), ROOT)


def judge_many(pairs, out=None, progress=False, command=None, **kw):
    """Judge (task_path, solution) pairs; solution = a path, ModelNew source text, or None (time
    the reference alone). Records come back in pairs' order; with out=..., each is appended to
    out.jsonl as it finishes, and pairs already there are not judged again (a killed run resumes)."""
    opts = {**DEFAULTS, **{k: v for k, v in kw.items() if v is not None}}
    opts["device"] = opts["device"] or ("cuda" if gpu_info()[0] else "cpu")
    opts["jobs"] = opts["jobs"] or max(1, min(16, len(os.sched_getaffinity(0))))  # the cores we may use
    files = [(t, solution_file(s)) for t, s in pairs]
    if opts["compile"]:
        # torch.compile runs in a reference-only worker per task, never beside a solution: its
        # compile pool starts threads of its own, which the solution's thread rule would have to
        # excuse (on the H200 every solution read 'cheat:threads' from inductor's worker timer).
        files += [(t, None) for t in dict.fromkeys(t for t, s in files if s is not None) if (t, None) not in files]
    done = {}
    if out and os.path.exists(out + ".jsonl"):  # not_run: a placeholder for a pair a cut-short run never reached
        done = {(r["task"], r["solution"]): r for r in read_records(out + ".jsonl") if r.get("status") != "not_run"}
    results = [done.get(_key(t, s)) for t, s in files]
    todo = collections.deque(i for i, r in enumerate(results) if r is None)
    Scheduler(files, results, opts, out, command).run(todo, progress)
    return results[:len(pairs)]


def _devices(device):
    """Where pairs are measured: every visible GPU for 'cuda', else the one device named."""
    if device == "cuda":
        import torch  # counts through NVML where it can: no CUDA context in the judge's process
        return [f"cuda:{k}" for k in range(max(1, torch.cuda.device_count()))]
    return [device]


class Slot:
    """One pair's worker as the scheduler sees it. phase: build -> queued (built, waiting for its turn
    on the GPU) -> run; deadline: when a build or run times out."""

    def __init__(self, ctx, i, task, sol, opts, device):
        self.i, self.device = i, device  # the pair's index; the device it is built for and measured on
        self.secret = os.urandom(16).hex()  # a record must carry it: the solution never sees it
        self.conn, child = ctx.Pipe()
        job = {**opts, "device": device, "compile": opts["compile"] and sol is None}
        self.proc = ctx.Process(target=_worker_main, args=(child, task, sol, job, self.secret))  # not daemonic: may have children
        self.proc.start()
        child.close()
        self.phase, self.eof, self.t0 = "build", False, time.time()
        self.deadline = self.t0 + opts["timeout"]
        self.t_ready = self.t_go = None  # when it was built, when it got its turn on the GPU
        self.times = {}  # build_s: start -> built; queue_s: built -> its turn; gpu_s: its turn -> its record

    def receive(self):
        """(kind, payload) of the worker's next message. One without the worker's secret, or not JSON, was
        written by the solution (it can find the pipe's descriptor): a forged record. Never unpickled."""
        forged = ("record", {"status": "cheat:forged_record", "message": "wrote a message on the judge's pipe"})
        try:
            kind, payload, secret = json.loads(self.conn.recv_bytes(1 << 24))
        except (ValueError, TypeError):
            return forged
        return (kind, payload) if secret == self.secret else forged

    def last_word(self):
        """The record of a worker whose process ended: the one still in its pipe, else how it died."""
        self.proc.join(1)
        try:
            while not self.eof and self.conn.poll():
                kind, payload = self.receive()
                if kind == "record":
                    return payload
        except (EOFError, OSError):
            pass
        code = self.proc.exitcode
        how = f"killed by signal {-code} ({signal.Signals(-code).name})" if code and code < 0 else f"exited with code {code}"
        return {"status": "runtime_error", "message": f"worker {how} during {self.phase}"}

    def stop(self):
        """SIGKILL the worker's whole process group (it may ignore SIGTERM; nvcc or compile workers go too).
        Not joined here: a worker that held a CUDA context is gone only once the driver has torn the
        context down, and the next worker need not wait for that to get the GPU (Scheduler.run joins)."""
        self.conn.close()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):  # no such group: not made yet, or gone
            self.proc.kill()


class Scheduler:
    """judge_many's loop: start workers, hand the GPU to the next built one, wait, receive, reap
    timeouts. One worker at a time holds each GPU: with device 'cuda' every visible GPU measures
    (CUDA_VISIBLE_DEVICES picks them), each worker built for the GPU with the fewest workers. Waves: workers build side by side (nvcc, torch.compile:
    CPU work), but none while anything is measured (on the H200 that inflated the timed worker's Python
    overhead and sync floor). overlap=True (a screen whose new bests are judged again in full) builds
    beside measuring, so the GPU does not wait for a wave's slowest build."""

    def __init__(self, files, results, opts, out, command):
        self.files, self.results, self.opts, self.out, self.command = files, results, opts, out, command
        self.env, self.ctx = environment(opts["device"]), _context()
        self.devices = opts.get("devices") or _devices(opts["device"])
        self.slots = {}  # pair index -> Slot, for every worker alive
        self.stopped = []  # workers killed and not yet joined
        self.queue = collections.deque()  # built workers waiting for the GPU, in the order they got ready
        self.counts, self.bar = collections.Counter(), None

    def run(self, todo, progress):
        if progress:
            from tqdm import tqdm
            self.bar = tqdm(total=len(todo), desc="judging", unit="sol", dynamic_ncols=True)
        while todo or self.slots:
            self.start_workers(todo)
            self.hand_gpu()
            self.receive(self.wait())
            self.reap_timeouts()
        for slot in self.stopped:
            slot.proc.join(5)
        if self.bar:
            self.bar.close()

    def start_workers(self, todo):
        """Workers for the next pairs, up to jobs alive; in waves none while anything waits for or holds
        the GPU. A pair this device cannot judge is finished at once, without a worker."""
        if not self.opts["overlap"] and any(s.phase in ("queued", "run") for s in self.slots.values()):
            return
        while todo and len(self.slots) < self.opts["jobs"]:
            i = todo.popleft()
            task, sol = self.files[i]
            skip = sol is not None and _skip_reason(open(sol).read(), self.opts["device"])
            if skip:
                self.record(i, {"status": "skipped", "message": skip}, time.time())
            else:
                device = min(self.devices, key=lambda d: sum(s.device == d for s in self.slots.values()))
                self.slots[i] = Slot(self.ctx, i, task, sol, self.opts, device)

    def hand_gpu(self):
        """Each free GPU to the first worker in the queue built for it (in waves, only while none builds)."""
        if not self.opts["overlap"] and any(s.phase == "build" for s in self.slots.values()):
            return
        busy = {s.device for s in self.slots.values() if s.phase == "run"}
        for slot in [s for s in self.queue]:
            if slot.device not in busy:
                self.queue.remove(slot)
                busy.add(slot.device)
                slot.phase, slot.deadline = "run", time.time() + self.opts["timeout"]
                slot.t_go = time.time()
                slot.times["queue_s"] = round(slot.t_go - slot.t_ready, 3)
                slot.conn.send("go")  # the worker judges once it reads this word

    def wait(self):
        """(slot, pipe or process sentinel) for each that is ready, waiting at most until the nearest deadline."""
        if not self.slots:  # every pair left was skipped: nothing to wait for
            return []
        deadlines = [s.deadline for s in self.slots.values() if s.phase in ("build", "run")]
        timeout = max(0.0, min(deadlines) - time.time()) if deadlines else None
        objs = {o: s for s in self.slots.values() for o in ([] if s.eof else [s.conn]) + [s.proc.sentinel]}
        return [(objs[o], o) for o in multiprocessing.connection.wait(list(objs), timeout=timeout)]

    def receive(self, ready):
        """'ready' puts a worker in the queue for the GPU; a record, or the end of its process, finishes its pair."""
        for slot, obj in ready:
            if slot.i not in self.slots:  # finished earlier in this batch
                continue
            if obj is slot.conn:
                try:
                    kind, payload = slot.receive()
                except (EOFError, OSError):
                    slot.eof = True  # the sentinel reports the death
                    continue
                if kind == "ready":
                    slot.phase = "queued"
                    slot.t_ready = time.time()
                    slot.times["build_s"] = round(slot.t_ready - slot.t0, 3)
                    self.queue.append(slot)
                else:
                    self.finish(slot, payload)
            else:
                self.finish(slot, slot.last_word())

    def reap_timeouts(self):
        now = time.time()
        for slot in [s for s in self.slots.values() if s.phase in ("build", "run") and now > s.deadline]:
            self.finish(slot, {"status": "timeout", "message": f"no result within {self.opts['timeout']} s ({slot.phase})"})

    def finish(self, slot, payload):
        """The pair's record first (a kill of the judge now loses nothing), then its worker ends."""
        del self.slots[slot.i]
        if slot.phase == "queued":  # died while waiting for its turn
            self.queue.remove(slot)
        if slot.phase == "run":  # any outcome: the GPU was this worker's from "go" to here
            slot.times["gpu_s"] = round(time.time() - slot.t_go, 3)
        self.record(slot.i, {**slot.times, **payload}, slot.t0)
        slot.stop()
        self.stopped.append(slot)

    def record(self, i, payload, t0):
        """The worker's payload made a record (names, speedup, verdict, settings), appended to out.jsonl."""
        task, sol = _key(*self.files[i])
        rec = {"task": task, "solution": sol, **payload}
        if rec["status"] == "ok" and "sol_ms" in rec:
            rec["speedup"] = rec["ref_ms"] / rec["sol_ms"]
        rec["correct"] = rec["status"] == "ok" and sol is not None
        rec.setdefault("speedup", None)
        tol = f"{self.opts['tolerance']} atol={self.opts['atol']:g} rtol={self.opts['rtol']:g}"
        rec.update(wall_s=round(time.time() - t0, 2), command=self.command, tolerance=tol, env=self.env)
        self.results[i] = rec
        if self.out:
            os.makedirs(os.path.dirname(os.path.abspath(self.out)), exist_ok=True)
            with open(self.out + ".jsonl", "a") as f:
                f.write(json.dumps(rec) + "\n")
        self.counts[rec["status"]] += 1
        if self.bar:
            self.bar.set_postfix_str(" ".join(f"{k}={v}" for k, v in self.counts.most_common(4)), refresh=False)
            self.bar.update(1)


# -----------------------------------------------------------------------------
# the report: a Markdown table and a JSON file beside the JSONL

def with_compile(records):
    """speedup_compile = speedup x (eager / torch.compile) of the task's reference-only record.
    Both factors are ratios measured inside one process; dividing one worker's compile time by
    another's solution time would carry the differences between processes (up to 1.7x on tiny tasks)."""
    ratio = {r["task"]: r["ref_ms"] / r["compile_ms"] for r in records
             if r.get("solution") is None and r.get("compile_ms") and r.get("ref_ms")}
    for r in records:
        if r.get("solution") is not None and r.get("correct") and r["task"] in ratio:
            r["speedup_compile"] = r["speedup"] / ratio[r["task"]]
    return records


def summarize(records):
    """Per task the best correct solution; KernelBench's fast_p counts correct AND speedup > p.
    Mean/median/geomean count a task with no correct solution as 1.0x (CUDA-L1's convention)."""
    best = {}
    with_compile(records)
    for r in records:
        if r.get("solution") is None:
            continue
        s = r["speedup"] if r.get("correct") else None
        b = best.setdefault(r["task"], {"speedup": None, "speedup_compile": None})
        if s is not None and (b["speedup"] is None or s > b["speedup"]):
            best[r["task"]] = {"speedup": s, "speedup_compile": r.get("speedup_compile")}
    if not best:
        return None
    out = {"tasks": len(best), "correct": sum(b["speedup"] is not None for b in best.values())}
    # vs torch.compile only over the tasks whose compiled reference was timed: a task it is missing
    # for (a cut-short run, a compile that failed) would otherwise read 1.0x, as if it had tied
    timed = {r["task"] for r in records if r.get("solution") is None and r.get("compile_ms")}
    for name in ("speedup", "speedup_compile"):
        bs = [b for t, b in best.items() if name == "speedup" or t in timed]
        xs = [b[name] if b[name] is not None else 1.0 for b in bs] or [1.0]
        out[name] = dict(tasks=len(bs), correct=sum(b["speedup"] is not None for b in bs),
                         mean=statistics.mean(xs), median=statistics.median(xs),
                         geomean=math.exp(statistics.mean(math.log(x) for x in xs)),
                         fast_1=sum(b[name] is not None and b[name] > 1.0 for b in bs) / len(xs),
                         fast_1_5=sum(b[name] is not None and b[name] > 1.5 for b in bs) / len(xs))
    return out


def _f(x, fmt="{:.3f}"):
    return "" if x is None else fmt.format(x)


def _bw_share(nbytes, ms, peak):
    """Share of peak memory bandwidth (TB/s) that moving nbytes in ms reaches; None if unknown."""
    return nbytes / (ms * 1e-3) / (peak * 1e12) if peak and nbytes and ms else None


def _no_win_section(records, gpu):
    """Tasks whose best correct solution is not faster than eager, with the numbers behind 'why':
    the least bytes a call must move and the share of peak memory bandwidth eager and the best
    solution reach, and eager's own error under the strict tolerance (TF32 in cuDNN reads > 1)."""
    peak = gpu_spec(gpu)[1]
    refs = {r["task"]: r for r in records if r.get("solution") is None and r.get("status") == "ok"}
    best = {}
    for r in records:
        if r.get("solution") is not None and r["status"] != "skipped":
            b = best.get(r["task"])
            if b is None or (r.get("speedup") or 0) * r["correct"] > (b.get("speedup") or 0) * b["correct"]:
                best[r["task"]] = r
    slow = [(t, b) for t, b in best.items() if not (b["correct"] and b["speedup"] > 1.0)]
    if not slow:
        return []
    bw = lambda nbytes, ms: _f(_bw_share(nbytes, ms, peak), "{:.0%}")
    lines = ["", "## Tasks where no correct solution beats eager", "",
             f"Bandwidth shares are of {peak or '?'} TB/s peak, for the inputs + outputs alone (a lower bound on "
             "traffic). eager err/tol > 1: eager with PyTorch's default flags would itself fail the strict tolerance.", "",
             "| task | best solution | status | speedup | MB moved | eager % peak BW | solution % peak BW | eager err/tol | why |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t, b in sorted(slow, key=lambda tb: level_and_id(tb[0])):
        # the solution's worker timed eager beside it: its ref_ms matches the speedup shown
        ref = {**refs.get(t, {}), **{k: v for k, v in b.items() if v is not None}}
        nbytes = ref.get("io_bytes")
        lines.append(f"| {t} | {os.path.basename(b['solution'])} | {b['status']} | {_f(b.get('speedup'), '{:.2f}x')} | "
                     f"{_f(nbytes and nbytes / 1e6, '{:.1f}')} | {bw(nbytes, ref.get('ref_ms'))} | "
                     f"{bw(nbytes, b.get('sol_ms')) if b['correct'] else ''} | {_f(ref.get('eager_err_vs_tol'), '{:.2g}')} | "
                     f"{_why(b, nbytes, ref.get('ref_ms'), ref.get('eager_err_vs_tol'), peak)} |")
    return lines


def _why(best, nbytes, ref_ms, eager_err, peak):
    """The likeliest reason a task has no win, by rules over the measured numbers (the solution's
    docstring says more). A tie: a speedup within the spread an A/A test (bench/judge_noise.py: the
    reference judged as its own solution) reads on such tasks, as the README's judge section quotes."""
    if not best["correct"]:
        return "no correct solution"
    if eager_err and eager_err > 1:
        return f"eager runs TF32 ({eager_err:.0f}x the strict tolerance): strict fp32 races a lower bar"
    if (_bw_share(nbytes, ref_ms, peak) or 0) >= 0.6:
        return "memory-bound: eager already streams near peak bandwidth"
    if best["speedup"] >= 0.97:
        return "a tie: within the judge's A/A spread"
    if ref_ms and ref_ms < 0.1 and nbytes and nbytes < 16e6:  # under 0.1 ms and 16 MB: launch-bound
        if best["speedup"] >= 0.94:
            return "launch-bound, a tie: within the judge's A/A spread on such tasks"
        return "launch-bound: a few us of GPU work, where a call's launch costs about as much as its kernel"
    return "open: see the solution's docstring"


def record(status, message="", speedup=None):
    """A record the judge did not make (an answer that did not parse, a solution measured earlier), in
    the judge's shape. Every record carries status ("ok", or why not: "parse_error", "compile_error",
    "runtime_error", "incorrect", "timeout", "skipped", "error", "cheat:<kind>"), message (what went
    wrong, "" when ok), correct (status "ok" and a solution judged, not a reference timed alone) and
    speedup (reference median / solution median, None when not measured). The judge's own records also
    carry task, solution, the timings, tolerance and env."""
    return dict(status=status, message=message, correct=status == "ok", speedup=speedup)


def read_records(path):
    """The records of a JSONL file, the last one per (task, solution): a pair judged again (a
    not_run placeholder, then its record) counts once. A line cut short by a kill is skipped."""
    last = {}
    for line in open(path):
        try:
            r = json.loads(line)
            last[(r["task"], r["solution"])] = r
        except (ValueError, KeyError):
            pass
    return list(last.values())


def measured_speedups(paths):
    """{cudal1.solution_name: speedup} from the records in the comma-separated `paths` (the library's,
    the teacher's), a solution's last record counting; only correct ('ok') records have one. None when
    none of the files exists."""
    import cudal1
    found = [p for p in paths.split(",") if p and os.path.exists(p)]
    if not found:
        return None
    out = {}
    for r in (r for p in found for r in read_records(p) if r.get("solution")):
        out[cudal1.solution_name(r["solution"])] = r["speedup"] if r.get("status") == "ok" else None
    return {k: v for k, v in out.items() if v}


def write_report(out, records):
    """out.md and out.json from the records (a resumed or multi-part run reports everything)."""
    env = records[0]["env"] if records else {}
    records = sorted(records, key=lambda r: (level_and_id(r["task"]), r["solution"] or ""))
    summary = summarize(records)
    commands = sorted({r.get("command") or "?" for r in records})
    lines = [f"# cudal1 judge: {env.get('gpu', '?')}", ""] + [f"- command: `{c}`" for c in commands] + [
             f"- commit {', '.join(sorted({r['env'].get('commit') or '?' for r in records}))}, "
             f"GPU {env.get('gpu')}, driver {env.get('driver')}, "
             f"torch {env.get('torch')} (CUDA {env.get('cuda')}), python {env.get('python')}",
             f"- tolerance: {records[0]['tolerance'] if records else ''} (strict: atol scaled by rms(ref); "
             "reference for checking in fp32 with TF32 off)",
             "- timing: host clock around each call with a full device synchronize, as read; the floor (one "
             "trivial launch + synchronize, timed among the rounds) is shown, not subtracted; inputs drawn "
             "from the OS's randomness and an L2 flush before every call; eager reference timed with "
             "PyTorch's default flags; models in training mode (as KernelBench)",
             f"- records: {len(records)}",
             "- flags: constant (same output for different inputs), stochastic (differs beyond tolerance on "
             "the same input), nondeterministic (bitwise different on the same input: runs before the tolerance "
             "test was added), zeros_pass (a tensor of zeros would pass), nan_ref", ""]
    lines += _solution_tables(records, summary) if summary else _reference_tables(records)
    lines += _no_win_section(records, env.get("gpu") or "")
    failed = [r for r in records if r["status"] not in ("ok", "skipped")]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {r['task']} {r['solution'] or ''}: {r['status']}: "
                                            f"{r.get('message', '')[:300]}" for r in failed]
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".json", "w") as f:
        json.dump({"commands": commands, "env": env, "summary": summary, "records": records}, f, indent=1)


def _solution_tables(records, summary):
    """The summary per level and overall (vs eager, and vs torch.compile when timed), then every record."""
    lines = [f"**Correct {summary['correct']}/{summary['tasks']} tasks.** Best correct solution per task; "
             "a task without one counts as 1.0x.", "",
             "| tasks | correct | vs | mean | median | geomean | fast_1 | fast_1.5 |", "|---|---|---|---|---|---|---|---|"]
    levels = sorted({r["task"].split("/")[0] for r in records})
    for scope in (levels + ["all"] if len(levels) > 1 else levels):
        sm = summary if scope == "all" else summarize([r for r in records if r["task"].startswith(scope + "/")])
        for name, vs in (("speedup", "eager"), ("speedup_compile", "torch.compile")):
            x = sm[name]
            if name == "speedup" or x["tasks"]:
                lines.append(f"| {scope} | {x['correct']}/{x['tasks']} | {vs} | {x['mean']:.2f}x | {x['median']:.2f}x | "
                             f"{x['geomean']:.2f}x | {x['fast_1']:.0%} | {x['fast_1_5']:.0%} |")
    lines += ["", "| task | solution | status | err/tol | ref ms | ref IQR | sol ms | sol IQR | floor ms | rounds | speedup | vs compile | flags |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        ms = " | ".join(_f(r.get(k), "{:.4f}") for k in ("ref_ms", "ref_iqr_ms", "sol_ms", "sol_iqr_ms", "floor_ms"))
        lines.append(f"| {r['task']} | {os.path.basename(r['solution'] or '')} | {r['status']} | "
                     f"{_f(r.get('err_vs_tol'), '{:.2f}')} | {ms} | {r.get('rounds', '')} | {_f(r.get('speedup'), '{:.2f}x')} | "
                     f"{_f(r.get('speedup_compile'), '{:.2f}x')} | {' '.join(r.get('flags', []))} |")
    return lines


def _reference_tables(records):
    """A run of references alone: eager's quartiles per level, then eager against torch.compile per task."""
    lines, ok = [], [r for r in records if r["status"] == "ok"]
    for lvl in sorted({r["task"].split("/")[0] for r in ok}):
        ms = [r["ref_ms"] for r in ok if r["task"].startswith(lvl + "/")]
        q = statistics.quantiles(ms, n=4) if len(ms) > 1 else ms * 3
        both = [r for r in ok if r["task"].startswith(lvl + "/") and r.get("compile_ms")]
        lines.append(f"- {lvl}: {len(ms)} tasks, eager median {q[1]:.4f} ms (quartiles {q[0]:.4f}, {q[2]:.4f}); "
                     f"torch.compile faster than eager on {sum(r['compile_ms'] < r['ref_ms'] for r in both)}/{len(both)}")
    lines += ["", "| task | status | eager ms | eager IQR ms | compile ms | compile IQR ms | eager/compile | flags |",
              "|---|---|---|---|---|---|---|---|"]
    for r in records:
        ratio = r["ref_ms"] / r["compile_ms"] if r.get("compile_ms") else None
        ms = " | ".join(_f(r.get(k), "{:.4f}") for k in ("ref_ms", "ref_iqr_ms", "compile_ms", "compile_iqr_ms"))
        lines.append(f"| {r['task']} | {r['status']} | {ms} | {_f(ratio, '{:.2f}x')} | "
                     f"{' '.join(r.get('flags', []))} {r.get('message', '')[:80]} |")
    return lines


# -----------------------------------------------------------------------------
# CLI

def selected_pairs(a):
    """(pairs, device) the arguments name; JudgeError when they name nothing to judge here."""
    name, _ = gpu_info()
    check_gpu(a.gpu, name)
    device = a.device or ("cuda" if name else "cpu")
    if a.cudal1_jsonl:
        pairs = cudal1_pairs(a.cudal1_jsonl, a.tasks)
    else:
        tasks = find_tasks(a.tasks, {int(x) for x in a.ids.split(",") if x.strip()} or None)
        pairs = find_pairs(tasks, a.solutions) if a.solutions else [(t, None) for t in tasks]
    if len(pairs) == 1 and pairs[0][1] and device == "cpu" and needs_gpu(open(pairs[0][1]).read()):
        raise JudgeError(f"{pairs[0][1]} is a CUDA solution and this machine has no NVIDIA GPU")  # not a record
    return pairs, device


def main(argv=None):
    p = argparse.ArgumentParser(description="judge KernelBench solutions: correctness, speed, cheats")
    # ---- what to judge
    p.add_argument("--tasks", default="kernelbench", help="a task file, a level folder, or a root of level folders")
    p.add_argument("--ids", default="", help="comma-separated task ids to keep (empty: all)")
    p.add_argument("--solutions", default="", help="solution files or folders (every .py under them), comma-separated, "
                   "paired with tasks by level folder and id (empty: time the references alone)")
    p.add_argument("--cudal1-jsonl", default="", help="CUDA-L1's released JSONL (level_id, task_id, ref_code, custom_code)")
    p.add_argument("--out", default="", help="results path without extension: writes .jsonl, .md, .json (empty: build/eval)")
    # ---- where
    p.add_argument("--gpu", default=None, help=f"{'|'.join(GPUS)}: checked against the GPU present (empty: no check)")
    p.add_argument("--device", default=None, help="cuda (every visible GPU, one timed pair on each at a time), cuda:N or cpu "
                   "(empty: cuda if an NVIDIA GPU is present)")
    p.add_argument("--jobs", type=int, default=None, help="worker processes at once (empty: the cores we may use, at most 16)")
    # ---- how
    p.add_argument("--compile", action="store_true", help="also time torch.compile (default mode) of the reference")
    p.add_argument("--tolerance", default="strict", choices=["strict", "kernelbench"],
                   help="strict: 1e-4 with atol scaled by rms(ref); kernelbench: 1e-2, atol not scaled (CUDA-L1's)")
    p.add_argument("--atol", type=float, default=None, help="override the mode's atol")
    p.add_argument("--rtol", type=float, default=None, help="override the mode's rtol")
    p.add_argument("--screen", action="store_true", help="RL's cheap first pass: no study of the reference, "
                   f"{SCREEN['trials']} trials, {SCREEN['time_budget']} s of timing, builds beside measuring (flags below override)")
    p.add_argument("--trials", type=int, default=None, help=f"untimed correctness trials, half before and half after "
                   f"timing (default {DEFAULTS['trials']})")
    p.add_argument("--iters", type=int, default=None, help=f"timed rounds at most, after warm-up (default {DEFAULTS['iters']})")
    p.add_argument("--time-budget", type=float, default=None, help="seconds of timed rounds per pair, warm-up included; "
                   f"at least {DEFAULTS['min_iters']} rounds after it (default {DEFAULTS['time_budget']})")
    p.add_argument("--timeout", type=float, default=DEFAULTS["timeout"], help="seconds per pair for each of build and run (default %(default)g)")
    p.add_argument("--seed", type=int, default=0, help="seeds the models' parameters (inputs come from the OS)")
    p.add_argument("--report-only", action="store_true", help="judge nothing: rewrite OUT.md/.json from all of OUT.jsonl")
    a = p.parse_args(argv)
    if a.report_only:
        if not os.path.exists(a.out + ".jsonl"):
            print(f"evaluate.py: no such file: {a.out}.jsonl", file=sys.stderr)
            return 2
        write_report(a.out, read_records(a.out + ".jsonl"))
        print(f"report -> {a.out}.md")
        return 0
    try:
        pairs, device = selected_pairs(a)
    except JudgeError as e:
        print(f"evaluate.py: {e}", file=sys.stderr)
        return 2
    tol = {**(STRICT if a.tolerance == "strict" else KERNELBENCH)}
    tol.update({k: v for k, v in (("atol", a.atol), ("rtol", a.rtol)) if v is not None})
    out = a.out or os.path.join(ROOT, "build", "eval")
    command = "python evaluate.py " + " ".join(sys.argv[1:] if argv is None else argv)
    given = {k: v for k, v in dict(trials=a.trials, iters=a.iters, time_budget=a.time_budget).items() if v is not None}
    records = judge_many(pairs, out=out, progress=True, device=device, jobs=a.jobs, compile=a.compile,
                         timeout=a.timeout, seed=a.seed, command=command, **{**(SCREEN if a.screen else {}), **given}, **tol)
    if records and all(r["status"] == "error" for r in records):
        print(f"evaluate.py: {records[0]['message']}", file=sys.stderr)
        return 2
    keys = {(r["task"], r["solution"]) for r in records} | {(r["task"], None) for r in records}
    write_report(out, [r for r in read_records(out + ".jsonl") if (r["task"], r["solution"]) in keys])
    s = summarize(records)
    print(f"{len(records)} records -> {out}.md" + (f"; correct {s['correct']}/{s['tasks']}, "
          f"geomean {s['speedup']['geomean']:.2f}x" if s else ""))
    return 0


if __name__ == "__main__":
    import evaluate  # run as the importable module, so workers unpickle evaluate._worker_main
    sys.exit(evaluate.main())

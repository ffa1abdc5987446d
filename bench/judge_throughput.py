"""Judge throughput for RL (issue 13): novel candidates per GPU-minute, from source to record, through
three build routes into the one judge (evaluate.judge_many).

    python bench/judge_throughput.py --quick        # all three arms on 11 candidates: ~2.5 min on the H200
    python bench/judge_throughput.py --arms b,a     # 85 candidates, two routes: ~8 min on the H200
    python bench/judge_throughput.py --arms c       # the same 85 through load_inline: ~7 min (estimated)
    (the GPU machine's tree has no .git: CUDAL1_COMMIT=<sha> python bench/judge_throughput.py ...)
    -> results/<gpu>-judge-throughput.md and .json (--quick: results/<gpu>-judge-throughput-quick.*)

The three arms over the full set take ~15 min on the H200, more than one device call may run, so
--arms splits them; each call merges its arms into the same report (a later call of an arm replaces
its row), written after every arm so a call cut short keeps the arms it finished. Within a call the
arms run one after another, in the order given. Where the times come from: --quick on the H200 took
10 s to build the launcher and warm up, 55 s for arm a (its builds ~20 s, then ~3.2 s per candidate
on the GPU) and 10 s for arm b (~0.7 s per candidate); the judge works in waves of 16 workers, so
85 candidates are 6 waves. Arm c's load_inline builds were not timed there: a wave of them is
expected to take ~55 s (the issue's CUDA-L1 run), so ~6 x 65 s.

Arms: the same candidates, in the same order; each arm is one judge_many call on a cold build cache.
  a  today's route: each kernel's pybind11 file in the library (cudal1.load_kernel: nvcc builds the
     whole module, host code and pybind11 included), the judge's default settings
  b  the fast path: the load_cuda file of the same kernels (device code only, a cubin, launched by
     the prebuilt launcher, built before any clock), evaluate.SCREEN as first measured (WAVES: no build beside a timed worker)
  c  the same kernels built as KernelBench and CUDA-L1 solutions build them: torch's load_inline, a
     C++ and a CUDA file with torch/extension.h, host wrappers launching with <<<>>> on torch's
     current stream; judged as b, so c against b is the build route alone
  d  b with builds beside measuring (judge_many's overlap, now in evaluate.SCREEN): no wave waits for its slowest build
  e  d with 0.1 s of timing per pair instead of 0.3 s; the PyTorch candidates, each the reference
     against itself, give every arm's A/A range: the noise its screen then has
  j  d as it was first measured: the scheduler joined each finished worker (waited for its process,
     CUDA context and all, to be gone) before handing the GPU to the next; d no longer waits
  w  d with one untimed reference call in each worker before it says 'ready' (evaluate's prewarm):
     its first-use costs (cuBLAS/cuDNN handles, lazily loaded kernels) beside another worker's turn,
     not in its own; the A/A range says what that GPU work beside a timed worker costs in noise.
     Since the H100 runs of 1205 the prewarm also runs the output check once (its float64 kernels
     took ~0.35 s of a worker's first run in bench/judge_phases.py): compare w with d of the same run
Candidates: for each of the 8 level-1 tasks RL trains on (train_rl.GPU_TASKS), --per-task copies of
its kernel, each made new by one line `#define CANDIDATE_<arm>_<task>_<n>_<run> 1` at the top of its
CUDA source (distinct per candidate, arm and run, so no build cache of any route can hit), plus
PyTorch candidates, the task's reference as ModelNew with a distinct constant, as --torch-share of
all candidates (25%: no run has measured the share of RL answers that are plain PyTorch). They are
shuffled once with a fixed seed, as a training step hands the judge a mixed batch.

Measured per arm: the wall time from handing the judge the sources to its last record (one GPU is
held throughout, so GPU-minutes are wall minutes), candidates per GPU-minute, the median seconds from
source to record (every source is handed over at the arm's start, as a training step hands over its
batch; records are timed as the judge appends them to its JSONL), the median of the records' own
wall_s (worker start to record), and the share of time the GPU was busy: the mean of nvidia-smi's
utilization.gpu (the share of time a kernel was running) sampled every 0.2 s over the arm.
"""
import argparse
import collections
import json
import os
import random
import re
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402

# train_rl.GPU_TASKS: task -> (today's file, the task's fastest pybind11 kernel; its load_cuda variant)
TASKS = {
    "19_ReLU": ("19_ReLU.v3.py", "19_ReLU.v4.py"),
    "23_Softmax": ("23_Softmax.v3.py", "23_Softmax.v4.py"),
    "47_Sum_reduction_over_a_dimension": ("47_Sum_reduction_over_a_dimension.v3.py",
                                          "47_Sum_reduction_over_a_dimension.v4.py"),
    "97_CosineSimilarityLoss": ("97_CosineSimilarityLoss.py", "97_CosineSimilarityLoss.v3.py"),
    "12_Matmul_with_diagonal_matrices_": ("12_Matmul_with_diagonal_matrices_.v2.py",
                                          "12_Matmul_with_diagonal_matrices_.v3.py"),
    "26_GELU_": ("26_GELU_.v2.py", "26_GELU_.v3.py"),
    "40_LayerNorm": ("40_LayerNorm.py", "40_LayerNorm.v2.py"),
    "88_MinGPTNewGelu": ("88_MinGPTNewGelu.v3.py", "88_MinGPTNewGelu.v4.py"),
}
WAVES = {**evaluate.SCREEN, "overlap": False}  # the screen as first measured: no build beside a timed worker
ARMS = {  # arm -> (route, judge settings on top of evaluate.DEFAULTS)
    "a": ("pybind11 module (load_kernel)", {}),
    "b": ("cubin + prebuilt launcher (load_cuda)", WAVES),
    "c": ("load_inline, torch headers", WAVES),
    # levers on top of b, one at a time
    "d": ("load_cuda, builds beside measuring", {**WAVES, "overlap": True}),
    "e": ("load_cuda, builds beside measuring", {**WAVES, "overlap": True, "time_budget": 0.1}),
    "j": ("load_cuda, builds beside measuring, each finished worker joined first", {**WAVES, "overlap": True}),
    "w": ("load_cuda, builds beside measuring, the reference called once before 'ready'",
          {**WAVES, "overlap": True, "prewarm": True}),
    # e's 0.1 s did not shorten the rounds (0.29 s against d's 0.32 s, H100, 1205): the screen's floor of
    # 10 timed rounds takes longer than that on these tasks; v lowers the floor too
    "v": ("load_cuda, builds beside measuring, the reference called once before 'ready'",
          {**WAVES, "overlap": True, "prewarm": True, "time_budget": 0.1, "min_iters": 5}),
}


def route(arm):
    """How an arm's CUDA candidates are built, read from its row of ARMS: load_kernel, load_cuda or
    load_inline (an arm added with a new route name fails here, not silently on another route)."""
    name = ARMS[arm][0]
    for r in ("load_kernel", "load_cuda", "load_inline"):
        if r in name:
            return r
    raise ValueError(f"arm {arm}: its route {name!r} names none of load_kernel, load_cuda, load_inline")


OPEN = 'CUDA_SRC = r"""'  # every library file holds its CUDA source in this one string


def task_path(task):
    return os.path.join(ROOT, "kernelbench", "level1", task + ".py")


def read_kernel(name):
    with open(os.path.join(ROOT, "kernels", "level1", name)) as f:
        return f.read()


def keys(per_task, torch_share):
    """The candidates as (task, kind, n), in judging order: per_task CUDA ones per task and PyTorch
    ones as torch_share of all (rounded), spread over the tasks in turn; shuffled with a fixed seed."""
    cuda = [(t, "cuda", n) for t in TASKS for n in range(per_task)]
    n_torch = round(len(cuda) * torch_share / (1 - torch_share))
    ks = cuda + [(list(TASKS)[n % len(TASKS)], "pytorch", n) for n in range(n_torch)]
    random.Random(0).shuffle(ks)
    return ks


def mark(source, tag):
    """source with `#define CANDIDATE_<tag> 1` as the first line of its CUDA string: new code to
    every build cache (the judge's hash of the file, load_kernel's of the source, load_cuda's of the
    normalised source, load_inline's of its files), inert to the kernels."""
    if source.count(OPEN) != 1:
        raise ValueError(f"expected one {OPEN!r} in the source")
    return source.replace(OPEN, f"{OPEN}\n#define CANDIDATE_{tag} 1", 1)


# load_inline wrapper: C++ parameter type of each launcher code ('p' pointers travel as int64_t)
HOST_TYPES = {"i": "int", "I": "unsigned int", "q": "int64_t", "Q": "uint64_t", "f": "float", "d": "double"}


def pointer_type(decl):
    """'const float4* __restrict__ x' -> 'const float4*', 'float d[]' -> 'float*': the cast a wrapper
    applies to an address."""
    decl = re.sub(r"\b__restrict(__)?\b", " ", decl)
    decl = re.sub(r"\s*\b\w+\s*\[\s*\]\s*$", "*", decl) if "[" in decl else re.sub(r"(?<=[\s*])\w+\s*$", "", decl)
    return " ".join(decl.split())


def inline_solution(fast_source, module):
    """A load_cuda file rewritten the way KernelBench and CUDA-L1 solutions are built: the same device
    code compiled by torch's load_inline with torch/extension.h, one host wrapper per kernel that
    launches it with <<<>>> on the stream it is given (torch's current one) and checks the launch,
    bound by load_inline's pybind11 module `module`. _k keeps load_cuda's calling convention
    (k.name(grid, block, *args, shared=0)), so forward is unchanged."""
    cuda = fast_source.split(OPEN, 1)[1].split('"""', 1)[0]
    decls, defs, names = [], [], []
    for name, params in cudal1.cuda_kernels(cuda).items():
        args = [f"int64_t a{i}" if c == "p" else f"{HOST_TYPES[c]} a{i}" for i, (_, c) in enumerate(params)]
        call = [f"({pointer_type(d)})(uintptr_t)a{i}" if c == "p" else f"a{i}" for i, (d, c) in enumerate(params)]
        sig = (f"void launch_{name}(int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by, int64_t bz, "
               f"int64_t shared, int64_t stream{''.join(', ' + a for a in args)})")
        decls.append(sig + ";")
        defs.append(f"{sig} {{\n    {name}<<<dim3(gx, gy, gz), dim3(bx, by, bz), shared, (cudaStream_t)stream>>>("
                    f"{', '.join(call)});\n    cudaError_t e = cudaGetLastError();\n"
                    f'    TORCH_CHECK(e == cudaSuccess, "{name}: ", cudaGetErrorString(e));\n}}')
        names.append(name)
    block = f'''CPP_SRC = r"""
{chr(10).join(decls)}
"""
INLINE_SRC = "#include <torch/extension.h>\\n" + CUDA_SRC + r"""
{chr(10).join(defs)}
"""
_ext = load_inline(name="{module}", cpp_sources=CPP_SRC, cuda_sources=INLINE_SRC,
                   functions=[{", ".join(f'"launch_{n}"' for n in names)}], extra_cuda_cflags=["-O3"], verbose=False)


def _dim3(d):
    d = (d,) if isinstance(d, int) else tuple(d)
    return d + (1,) * (3 - len(d))


def _kernel(fn):
    def launch(grid, block, *args, shared=0):
        grid = _dim3(grid)
        if 0 not in grid:  # a grid with no blocks runs nothing, as with load_cuda; on torch's current stream
            fn(*grid, *_dim3(block), shared, torch._C._cuda_getCurrentRawStream(torch.cuda.current_device()), *args)
    return launch


_k = types.SimpleNamespace({", ".join(f"{n}=_kernel(_ext.launch_{n})" for n in names)})'''
    for old, new in [("import cudal1\n", "import types\n\nfrom torch.utils.cpp_extension import load_inline\n"),
                     ("_k = cudal1.load_cuda(CUDA_SRC)", block)]:
        if fast_source.count(old) != 1:
            raise ValueError(f"expected one {old.strip()!r} in the load_cuda file")
        fast_source = fast_source.replace(old, new)
    return fast_source


def candidates(arm, per_task, torch_share, run):
    """[{key: (task, kind, n), task: task file, source}] of one arm, in keys() order."""
    out = []
    for task, kind, n in keys(per_task, torch_share):
        tag = f"{arm.upper()}_{task.split('_')[0]}_{n}_{run}"
        if kind == "pytorch":  # the reference itself, new code by one constant
            with open(task_path(task)) as f:
                source = (f.read() + f'\n\nCANDIDATE = "{tag}"  # a harmless edit: new code to the judge\n\n\n'
                          "class ModelNew(Model):\n    pass\n")
        elif route(arm) == "load_kernel":
            source = mark(read_kernel(TASKS[task][0]), tag)
        elif route(arm) == "load_cuda":
            source = mark(read_kernel(TASKS[task][1]), tag)
        else:
            source = inline_solution(mark(read_kernel(TASKS[task][1]), tag), f"candidate_{tag.lower()}")
        out.append(dict(key=(task, kind, n), task=task_path(task), source=source))
    return out


# ---- measuring

def gpu_sampler():
    """nvidia-smi printing the first visible GPU's utilization.gpu every 0.2 s: (process, samples),
    samples a list of (time, percent) a thread fills; None where nvidia-smi cannot start."""
    gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
    try:
        p = subprocess.Popen(["nvidia-smi", f"--id={gpu}", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits",
                              "-lms", "200"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    except OSError:
        return None
    samples = []

    def read():
        for line in p.stdout:
            if line.strip().isdigit():
                samples.append((time.time(), float(line)))

    threading.Thread(target=read, daemon=True).start()
    return p, samples


def watch(path, arrivals, stop):
    """Time each record as the judge appends it to path: arrivals[(task, solution)] = time.time()."""
    pos = 0
    while True:
        done = stop.is_set()  # read once more after the judge has returned
        if os.path.exists(path):
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
            end = data.rfind(b"\n") + 1  # complete lines only
            for line in data[:end].splitlines():
                rec = json.loads(line)
                arrivals.setdefault((rec["task"], rec["solution"]), time.time())
            pos += end
        if done:
            return
        time.sleep(0.05)


def judge_arm(arm, cands, out, command, samples):
    """Judge one arm's candidates in one judge_many call; returns its row for the report."""
    label, settings = ARMS[arm]
    arrivals, done = {}, threading.Event()
    watcher = threading.Thread(target=watch, args=(out + ".jsonl", arrivals, done), daemon=True)
    watcher.start()
    stop = evaluate.Slot.stop
    if arm == "j":  # the join-first scheduler: stop, then wait for the process before anything else
        evaluate.Slot.stop = lambda slot: (stop(slot), slot.proc.join(5))
    t0 = time.time()
    try:
        recs = evaluate.judge_many([(c["task"], c["source"]) for c in cands], out=out, command=command, **settings)
    finally:
        evaluate.Slot.stop = stop
    t1 = time.time()
    done.set()
    watcher.join()
    slim = [dict(task=c["key"][0], kind=c["key"][1], n=c["key"][2], status=r["status"], speedup=r.get("speedup"),
                 wall_s=r.get("wall_s"), run_s=r.get("run_s"), rounds_s=r.get("rounds_s"), to_record_s=round(arrivals.get((r["task"], r["solution"]), t1) - t0, 2),
                 message=r.get("message", "")[:300])
            for c, r in zip(cands, recs)]
    busy = [u for t, u in samples if t0 <= t <= t1] if samples is not None else []
    opts = {**evaluate.DEFAULTS, **settings}
    return dict(arm=arm, route=label, judge=f"{'screen' if opts['screen'] else 'default'}: {opts['trials']} trials, "
                f"{opts['time_budget']:g} s timing{', overlapped' if opts['overlap'] else ''}", candidates=len(cands),
                wall_s=round(t1 - t0, 1),
                per_gpu_min=len(cands) / ((t1 - t0) / 60), to_record_s=statistics.median(s["to_record_s"] for s in slim),
                record_wall_s=statistics.median(s["wall_s"] for s in slim if s["wall_s"] is not None),
                gpu_busy=statistics.mean(busy) / 100 if busy else None, gpu_samples=len(busy),
                statuses=dict(collections.Counter(f"{s['kind']} {s['status']}" for s in slim)),
                env=recs[0]["env"], command=command, records=slim)


# ---- the report

def report(data):
    """Markdown from the merged JSON: one row per arm, the ratios against the issue's goals."""
    arms = data["arms"]
    ks = data["keys"]
    n_cuda = sum(k[1] == "cuda" for k in ks)
    env = next(iter(arms.values()))["env"]
    md = [f"# Judge throughput for RL: candidates per GPU-minute, source to record ({env.get('gpu')})", "",
          f"The same {len(ks)} novel candidates judged through three build routes, each arm one "
          f"`evaluate.judge_many` call from a cold build cache: {n_cuda} CUDA ({data['per_task']} per task over "
          f"{len({k[0] for k in ks})} level-1 tasks, the tasks RL trains on, each with a `#define` line no cache has "
          f"seen) and {len(ks) - n_cuda} PyTorch ({(len(ks) - n_cuda) / len(ks):.0%}: the task's reference with a new "
          "constant), in one shuffled order. One GPU is held throughout, so GPU-minutes are wall minutes.", "",
          "| arm | route | judge | candidates | records | wall s | per GPU-minute | median s source to record | "
          "median record wall_s | GPU busy | A/A range | median s between records (of it, the worker's run) |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for arm in sorted(arms):
        r = arms[arm]
        aa = [s["speedup"] for s in r["records"] if s["kind"] == "pytorch" and s["speedup"]]  # the reference vs itself
        arrivals = sorted(s["to_record_s"] for s in r["records"])
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
        gap = f"{statistics.median(gaps):.2f}" if gaps else "n/a"  # seconds per candidate, serially
        runs = [s["run_s"] for s in r["records"] if s.get("run_s") is not None]  # absent before records had it
        st = ", ".join(f"{k} {v}" for k, v in sorted(r["statuses"].items()))
        busy = f"{r['gpu_busy']:.0%}" if r["gpu_busy"] is not None else "n/a"
        md.append(f"| {arm} | {r['route']} | {r['judge']} | {r['candidates']} | {st} | {r['wall_s']:.0f} | "
                  f"{r['per_gpu_min']:.1f} | {r['to_record_s']:.1f} | {r['record_wall_s']:.1f} | {busy} | "
                  f"{f'{min(aa):.2f}-{max(aa):.2f}x' if aa else 'n/a'} | "
                  f"{gap}{f' ({statistics.median(runs):.2f})' if runs else ''} |")
    md.append("")
    for num, den, goal in [(n, d, g) for n in "bdejwv" for d, g in (("c", 10), ("a", 3))]:
        if num in arms and den in arms:
            x = arms[num]["per_gpu_min"] / arms[den]["per_gpu_min"]
            md.append(f"- ({num})/({den}) = {x:.1f}x candidates per GPU-minute; the issue's goal is at least {goal}x: "
                      f"{'met' if x >= goal else 'not met'}")
    md += [""] + [f"- arm {arm}: `{r['command']}`, commit {r['env'].get('commit')}, {r['env'].get('gpu')}, driver "
                  f"{r['env'].get('driver')}, torch {r['env'].get('torch')} (CUDA {r['env'].get('cuda')})"
                  for arm, r in sorted(arms.items())]
    md += ["", "How it was measured: wall s runs from handing `judge_many` the sources to its last record; "
           "per GPU-minute is candidates / (wall s / 60); source to record is each record's arrival in the judge's "
           "JSONL less the arm's start (all sources are handed over at once, as a training step hands over its "
           "batch); record wall_s is the judge's own (worker start to record: build, wait for the GPU, run); GPU "
           "busy is the mean of nvidia-smi's utilization.gpu (share of time a kernel ran) sampled every 0.2 s over "
           "the arm; A/A range is the lowest and highest speedup of the PyTorch candidates, each the reference "
           "judged against itself, so the spread is the timing noise under that arm's load; the median time "
           "between consecutive records is each candidate's serial cost, and of it the worker's own run from "
           "'go' to its record (run_s; records before it was kept show none): the rest is the hand-off. The judge builds in "
           "waves of its workers and runs nothing while anything builds, so every second of a wave's slowest build "
           "is a second the GPU idles, except with `overlap` (arms d and e: builds beside measuring). Arms a and c "
           "differ from b in route; a also in judge settings (today's defaults against RL's screening mode), c not; "
           "d is b with builds overlapped, e is d with 0.1 s of timing per pair instead of 0.3 s, j is d with each "
           "finished worker's process joined before the GPU goes to the next (as d was before the judge stopped waiting), "
           "w is d with each worker's reference called once, untimed, and the output check run once on its output, "
           "before it says 'ready' (evaluate's prewarm; the output check since the 1205 H100 runs), v is w with e's "
           "0.1 s of timing and at least 5 timed rounds instead of 10."]
    failed = [(arm, s) for arm, r in sorted(arms.items()) for s in r["records"] if s["status"] != "ok"]
    if failed:
        md += ["", "Records that were not ok (the first 10):", ""]
        md += [f"- {arm} {s['task']} {s['kind']} {s['n']}: {s['status']}: {s['message'][:200]}" for arm, s in failed[:10]]
    return "\n".join(md) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # ---- what
    p.add_argument("--arms", default="a,b,c", help="arms to run now, in this order (a: pybind11 + default judge, "
                   "b: load_cuda + SCREEN, c: load_inline + SCREEN, d: b + builds beside measuring, e: d + 0.1 s "
                   "timing, j: d joining each finished worker first, w: d + the judge's prewarm, v: w + 0.1 s timing); others already in the report are kept")
    p.add_argument("--quick", action="store_true", help="1 CUDA candidate per task (11 candidates): ~2.5 min on the H200")
    p.add_argument("--per-task", type=int, default=0, help="CUDA candidates per task (0: 8, or 1 with --quick)")
    p.add_argument("--torch-share", type=float, default=0.25, help="PyTorch candidates as a share of all, 0 to <1")
    # ---- where
    p.add_argument("--out", default="", help="report path without extension (empty: results/<gpu>-judge-throughput, "
                   "-quick added with --quick)")
    a = p.parse_args(argv)
    arms = [x for x in a.arms.split(",") if x]
    if not arms or set(arms) - set(ARMS):
        p.error(f"--arms: a comma-separated subset of {','.join(ARMS)}")
    gpu = evaluate.gpu_info()[0]
    if not gpu:
        print("judge_throughput.py: needs an NVIDIA GPU (every arm judges CUDA candidates)", file=sys.stderr)
        return 2
    per_task = a.per_task or (1 if a.quick else 8)
    out = a.out or os.path.join(ROOT, "results", f"{gpu.split()[-1].lower()}-judge-throughput" + ("-quick" if a.quick else ""))
    command = "python bench/judge_throughput.py " + " ".join(sys.argv[1:] if argv is None else argv)
    run = os.urandom(4).hex()  # in every candidate's marker: a new run never meets an earlier run's builds
    ks = keys(per_task, a.torch_share)
    data = dict(per_task=per_task, torch_share=a.torch_share, keys=ks, arms={})
    if os.path.exists(out + ".json"):  # merge with the arms of earlier calls on the same candidate set
        with open(out + ".json") as f:
            old = json.load(f)
        if [tuple(k) for k in old["keys"]] == ks:
            data["arms"] = {k: v for k, v in old["arms"].items() if k not in arms}
        else:
            print(f"{out}.json holds another candidate set: its arms are dropped", flush=True)

    # Before any clock: load_inline's build folder (inherited by the judge's fork server, started
    # below), the launcher (built once per machine), and a warm-up judgement that starts the fork
    # server (it imports torch) and wakes the GPU.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(ROOT, "build", "torch_extensions"))
    t = time.time()
    cudal1.launcher()
    evaluate.judge_many([(task_path("19_ReLU"), None)], **evaluate.SCREEN)
    print(f"run {run}: {len(ks)} candidates per arm, arms {','.join(arms)}; launcher and warm-up {time.time() - t:.0f} s",
          flush=True)
    sampler = gpu_sampler()
    try:
        for arm in arms:
            cands = candidates(arm, per_task, a.torch_share, run)
            row = judge_arm(arm, cands, os.path.join(ROOT, "build", "throughput", f"{run}-{arm}"), command,
                            sampler[1] if sampler else None)
            data["arms"][arm] = row
            print(f"arm {arm} ({row['route']}, {row['judge']}): {row['candidates']} in {row['wall_s']:.0f} s, "
                  f"{row['per_gpu_min']:.1f} per GPU-minute, median {row['to_record_s']:.1f} s to record, "
                  f"GPU busy {'n/a' if row['gpu_busy'] is None else format(row['gpu_busy'], '.0%')}, "
                  f"{row['statuses']}", flush=True)
            evaluate._write(out + ".json", json.dumps(data, indent=1) + "\n")  # after each arm: a cut-short call keeps it
            evaluate._write(out + ".md", report(data))
    finally:
        if sampler:
            sampler[0].terminate()
            sampler[0].wait()
    print(report(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())

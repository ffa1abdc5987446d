"""Where a candidate's turn on the GPU goes: the judge's own work, phase by phase (issue 13).

In the throughput table a screened candidate holds the GPU ~0.6 s from 'go' to its record, the
timed rounds ~0.3 s of it; this splits the whole into the judge's phases. Each of the Worker's
methods below (and evaluate._compare) is timed inclusively, with the device synchronised before
and after, so queued work is charged to the phase that queued it (the syncs add a little of their
own). One Worker per (task, solution) in this process, judged in the screen's settings: its first
run, as the judge's worker makes its only one (first launches, cuBLAS's and the allocator's warm-up;
but an earlier task in this process has already paid for what a process pays once), then the mean of
--repeats more.

    python bench/judge_phases.py                  # the throughput table's 8 RL tasks, their fast-path files
    python bench/judge_phases.py kernelbench/level1/19_ReLU.py kernels/level1/19_ReLU.py --device cpu
"""
import argparse
import collections
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import cudal1  # noqa: E402
import evaluate  # noqa: E402

# the call tree as Worker.run makes it, (depth, phase): inputs, reference and verify run in both the trials and
# the rounds; call is every model's clocked call (in timed_call and reference), check_rules runs before each
# call and in check_output
PHASES = [(0, "run"), (1, "checked_trial"), (1, "timed_rounds"), (2, "inputs"), (2, "untimed_call"), (2, "timed_call"),
          (2, "reference"), (3, "call"), (4, "check_rules"), (2, "verify"), (3, "check_output"), (4, "_compare")]


def timed(fn, name, spent, sync):
    def wrapper(*a, **k):
        sync()
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            sync()
            spent[name] += time.perf_counter() - t
    return wrapper


def profile(task, solution, device, repeats):
    """Seconds spent in each phase (inclusive) of one Worker's first run, and per run over `repeats` more."""
    import torch
    sync = (lambda: torch.cuda.synchronize(device)) if device.startswith("cuda") else (lambda: None)
    spent = collections.Counter()
    originals = {n: getattr(evaluate.Worker, n) for _, n in PHASES if n != "_compare"}
    compare = evaluate._compare
    try:
        for n, fn in originals.items():
            setattr(evaluate.Worker, n, timed(fn, n, spent, sync))
        evaluate._compare = timed(compare, "_compare", spent, sync)
        w = evaluate.Worker(task, solution, {**evaluate.DEFAULTS, **evaluate.SCREEN, "device": device})
        w.run()
        first = dict(spent)
        spent.clear()
        for _ in range(repeats):
            w.run()
    finally:
        for n, fn in originals.items():
            setattr(evaluate.Worker, n, fn)
        evaluate._compare = compare
    return first, {n: s / repeats for n, s in spent.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pairs", nargs="*", help="TASK SOLUTION ...; none: the throughput table's RL tasks")
    p.add_argument("--device", default="cuda")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    if len(a.pairs) % 2:
        p.error("pairs: a task and a solution each")
    pairs = list(zip(a.pairs[::2], a.pairs[1::2]))
    if not pairs:
        import judge_throughput
        pairs = [(f"kernelbench/level1/{t}.py", f"kernels/level1/{fast}") for t, (_, fast) in judge_throughput.TASKS.items()]
    env = evaluate.environment(a.device)
    md = ["# The judge's phases: seconds per screened candidate", "",
          f"- command: `python bench/judge_phases.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {env['commit']}, {env['gpu']}, torch {env['torch']}",
          f"- evaluate.SCREEN's settings; each phase timed inclusively, the device synchronised around it; each cell "
          f"is a Worker's first run / the mean of its {a.repeats} next", "",
          "| phase | " + " | ".join(os.path.basename(t).split("_")[0] for t, _ in pairs) + " |",
          "|---|" + "---|" * len(pairs)]
    cols = []
    for t, s in pairs:
        cols.append(profile(t, s, a.device, a.repeats))
        print(f"{t}: run {cols[-1][0]['run']:.3f} s first, {cols[-1][1]['run']:.3f} s after", flush=True)
    for depth, n in PHASES:
        md.append(f"| {'· ' * depth}{n} | " + " | ".join(f"{first.get(n, 0) * 1e3:.0f} / {warm.get(n, 0) * 1e3:.0f} ms"
                                                      for first, warm in cols) + " |")
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

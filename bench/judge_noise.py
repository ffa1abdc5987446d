"""How far from 1.00x does the judge read a solution that IS the reference? (an A/A test)

Each solution here is the task's own source plus `class ModelNew(Model): pass`, judged R times in
separate workers like any other solution. Every speedup it reports is measurement noise; its
spread is the smallest speedup difference the judge can tell apart on that task.

    python bench/judge_noise.py --repeats 4 --time-budget 1 kernelbench/level1/19_ReLU.py ...
    -> results/<gpu>-judge-noise.md (+ .jsonl of the judge's records)
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import evaluate  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("tasks", nargs="+", help="task files")
p.add_argument("--repeats", type=int, default=4, help="identical solutions judged per task")
p.add_argument("--time-budget", type=float, default=None, help="seconds of timing per worker (default: the judge's)")
p.add_argument("--screen", action="store_true", help="judge in RL's screening mode (evaluate.SCREEN)")
p.add_argument("--out", default="", help="default: results/<gpu>-judge-noise")
a = p.parse_args()

gpu = evaluate.gpu_info()[0]  # "NVIDIA H200" -> h200
name = gpu.split()[-1].lower() if gpu else "cpu"
out = a.out or os.path.join(evaluate.ROOT, "results", f"{name}-judge-noise")
pairs = [(t, open(t).read() + f"\n\nclass ModelNew(Model):  # A/A copy {k}\n    pass\n")
         for t in a.tasks for k in range(a.repeats)]
if os.path.exists(out + ".jsonl"):  # an A/A run is always fresh: never resume from an older judge's records
    os.remove(out + ".jsonl")
records = evaluate.judge_many(pairs, out=out, progress=True, **(evaluate.SCREEN if a.screen else {}),
                              **({"time_budget": a.time_budget} if a.time_budget else {}),
                              command="python " + " ".join(sys.argv))

lines = [f"# Judge noise (A/A): the reference judged as its own solution, {a.repeats} workers per task", "",
         f"- command: `python {' '.join(sys.argv)}`",
         f"- commit {records[0]['env'].get('commit')}, GPU {records[0]['env'].get('gpu')}, "
         f"torch {records[0]['env'].get('torch')}", "",
         "Each speedup should read 1.00x. floor: one trivial launch + synchronize, timed among the rounds.", "",
         "| task | ref ms (median of workers) | floor ms | speedups read | worst |", "|---|---|---|---|---|"]
for t in a.tasks:
    rs = [r for r in records if r["task"].endswith(os.path.relpath(t, "kernelbench")) and r.get("speedup")]
    if not rs:
        lines.append(f"| {t} | | | no correct record | |")
        continue
    s = [r["speedup"] for r in rs]
    lines.append(f"| {t} | {statistics.median(r['ref_ms'] for r in rs):.4f} | "
                 f"{statistics.median(r.get('floor_ms', 0) for r in rs):.4f} | "
                 f"{' '.join(f'{x:.2f}x' for x in s)} | {max(max(s), 1 / min(s)):.2f}x |")
evaluate._write(out + ".md", "\n".join(lines) + "\n")
print("\n".join(lines))

"""
Does the teacher's transposed-conv head pay for its precision? On the H200 every teacher move that
runs a ConvTranspose3d head whole read 0.53-0.75x of eager (geomean per move, 64 solutions in
results/teacher-h200*.jsonl; fold_reduction, whose head computes one output channel, 1.31x on its one
task): each runs the head in true fp32, which cuDNN does on the CUDA cores, while eager's TF32 head misses
the strict check by up to 25x. On level 2's transposed-conv heads cudal1.conv_3xtf32 (three TF32 products
in one cuDNN call) ran 1.2-6x faster than true fp32 and passed (results/h200-conv-precision.md); the
generated heads are smaller, where its extra passes over x may cost more than they save.

This judges, in one run, every teacher solution of N generated transposed-conv training tasks beside
the same solution with its head as one cudal1.conv_3xtf32 call, and reports both per move:

    python bench/teacher_heads.py --tasks 24 --out results/h200-teacher-heads      # on the GPU (~2-3 min)
    python bench/teacher_heads.py --tasks 4 --write-only --dir /tmp/heads             # the files alone, anywhere

A head that wins here goes into kernelbench/teacher.py (and its measured solutions are judged again,
since the contrastive pairs show their numbers). None did: on 24 tasks (30 solutions) the 3xTF32 head
read 0.50-0.66x of the true-fp32 one per move, correct as often (results/h200-teacher-heads.md). At these
sizes cuDNN's fp32 transposed conv is not the slow path; what makes those moves slow is elsewhere.
"""

import argparse
import ast
import math
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kernelbench import generate as gen  # noqa: E402
from kernelbench import teacher  # noqa: E402

# the teacher's conv head (teacher.Task.head_lines): TF32 off, the head's line (maybe wrapped), TF32 back
HEAD = re.compile(r"^( +)tf32 = torch\.backends\.cudnn\.allow_tf32\n +torch\.backends\.cudnn\.allow_tf32 = False[^\n]*\n"
                  r"(.*?)\n +torch\.backends\.cudnn\.allow_tf32 = tf32\n", re.M | re.S)


def split_head(solution, head):
    """The solution with its true-fp32 transposed-conv head replaced by one cudal1.conv_3xtf32 call
    (None when it has no such head)."""
    m = HEAD.search(solution)
    if m is None:
        return None
    indent, line = m.group(1), " ".join(part.strip() for part in m.group(2).split("\n"))
    target, expr = line.split("  #")[0].split(" = ", 1)
    call = ast.parse(expr, mode="eval").body
    conv = f"F.{head}"
    if ast.unparse(call.func) == conv:  # F.conv_transpose3d(x, w, b, stride, pad, opad)
        x, w, b, stride, pad, opad = map(ast.unparse, call.args)
    else:  # self.conv_transpose(x): the module's own weight, bias and settings
        mod, x = ast.unparse(call.func), ast.unparse(call.args[0])
        w, b, stride, pad, opad = (f"{mod}.{a}" for a in ("weight", "bias", "stride", "padding", "output_padding"))
    new = (f"{indent}{target} = cudal1.conv_3xtf32({conv}, {x}, {w}, {b}, stride={stride}, padding={pad}, "
           f"output_padding={opad})  # 3xTF32: fp32's accuracy on tensor cores\n")
    out = solution[:m.start()] + new + solution[m.end():]
    imports = "".join(f"{i}\n" for i in ("import cudal1", "import torch.nn.functional as F") if f"\n{i}\n" not in out)
    return out.replace("\nimport torch\n", "\nimport torch\n" + imports, 1)


def write(n, folder):
    """N transposed-conv training tasks (GPU sizes) and, for each teacher solution, its 3xTF32 twin:
    NAME.<move>.py and NAME.<move>_3xtf32.py under folder/solutions/levelG."""
    written, seed = 0, 0
    while written < n:
        name, source, meta = gen.generate(seed, "gpu")
        seed += 1
        if meta["held_out"] or meta["degenerate"] or not meta["head"].startswith("conv_transpose"):
            continue  # training split only: nothing here may touch the held-out tasks
        sols = teacher.solutions(source, meta)
        twins = [(m + "_3xtf32", split_head(s, meta["head"])) for m, s in sols]
        teacher.write(folder, name, source, meta, sols + [(m, s) for m, s in twins if s])
        written += 1
    return os.path.join(folder, "tasks", "levelG"), os.path.join(folder, "solutions", "levelG")


def report(records, out, command):
    """Per move: correct and geomean speedup with the true-fp32 head and with the 3xTF32 head, over the
    tasks where both passed, and the geomean of their ratio."""
    by = {}
    for r in records:
        if r.get("solution"):
            name = os.path.basename(r["solution"])[:-3]
            task, move = name.rsplit(".", 1)
            split = move.endswith("_3xtf32")
            by.setdefault(move.removesuffix("_3xtf32"), {}).setdefault(task, {})[split] = r
    geo = lambda xs: math.exp(statistics.fmean(map(math.log, xs))) if xs else float("nan")  # noqa: E731
    lines = [f"# The teacher's transposed-conv head: true fp32 vs 3xTF32 ({records[0]['env'].get('gpu', '?')})", "",
             f"- command: `{command}`",
             f"- commit {records[0]['env'].get('commit')}, torch {records[0]['env'].get('torch')}, tolerance "
             f"{next((r['tolerance'] for r in records if r.get('tolerance')), '?')}", "",
             "| move | tasks | correct fp32 / 3xTF32 | geomean fp32 head | geomean 3xTF32 head | 3xTF32 / fp32 (both correct) | max err/tol 3xTF32 |",
             "|---|---|---|---|---|---|---|"]
    for move, tasks in sorted(by.items()):
        pairs = [(t[False], t[True]) for t in tasks.values() if False in t and True in t]
        if not pairs:  # a move none of these tasks admits (or none with a transposed-conv head to split)
            continue
        both = [(a, b) for a, b in pairs if a.get("correct") and b.get("correct")]
        errs = [b.get("err_vs_tol") or 0 for _, b in pairs if b.get("correct")]
        lines.append(f"| {move} | {len(pairs)} | {sum(bool(a.get('correct')) for a, _ in pairs)} / "
                     f"{sum(bool(b.get('correct')) for _, b in pairs)} | {geo([a['speedup'] for a, _ in both]):.2f}x | "
                     f"{geo([b['speedup'] for _, b in both]):.2f}x | {geo([b['speedup'] / a['speedup'] for a, b in both]):.2f}x | "
                     f"{max(errs, default=float('nan')):.3f} |")
    with open(out + ".md", "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="the teacher's transposed-conv head: true fp32 vs 3xTF32, one run")
    p.add_argument("--tasks", type=int, default=24, help="generated transposed-conv training tasks")
    p.add_argument("--dir", default="build/teacher-heads", help="where the tasks and solutions are written")
    p.add_argument("--out", default="results/h200-teacher-heads", help="OUT.jsonl (the judge's records) and OUT.md")
    p.add_argument("--gpu", default="h200", help="evaluate.GPUS name, checked against the GPU present")
    p.add_argument("--time-budget", type=float, default=0.3, help="seconds of timed rounds per pair")
    p.add_argument("--write-only", action="store_true", help="write the files and stop (no GPU needed)")
    args = p.parse_args()
    tasks_dir, sols_dir = write(args.tasks, args.dir)
    print(f"{len(os.listdir(sols_dir))} solutions over {args.tasks} tasks in {sols_dir}")
    if not args.write_only:
        import evaluate
        command = "python " + " ".join(sys.argv)
        evaluate.main(["--tasks", tasks_dir, "--solutions", sols_dir, "--gpu", args.gpu, "--trials", "4",
                       "--time-budget", str(args.time_budget), "--out", args.out])
        report(evaluate.read_records(args.out + ".jsonl"), args.out, command)

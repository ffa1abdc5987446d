"""Could stage 1's plain pairs pick each task's move by a cost model rather than one global ranking?

    python bench/move_pick.py --ceiling results/h100-held-out-ceiling-1205-1907.md --out results/move-pick-cpu.md

train_sft.fastest_plain answers a generated task's plain prompt with the move whose judged teacher
solutions read the highest geomean (the ranking). On the training tasks that is within 1% of each task's
best move, but on the held-out tasks, where moves meet in combinations training never shows, it picks
worse. Here each teacher solution's forward runs once on the CPU under a dispatch mode that sees every
ATen op, and two models price what it would cost on a GPU:
  launches  one kernel per op (views free; logsumexp 4, as eager CUDA runs it).
  roofline  each op's launches at LAUNCH_S, plus the bytes it reads and writes at BANDWIDTH, plus a
            matmul's or a convolution's FLOPs at FP32_FLOPS: the teacher's solutions run a conv head with
            TF32 off (teacher.Task.head_lines: the judge checks true fp32), so unlike eager's, theirs is fp32.
  kernels   teacher.kernel_cost, the pick stage 1 makes (train_sft.fastest_plain): launches counted on the
            meta device, a head priced as teacher.HEAD_COST kernels; the table beside it sweeps that price.
The fused epilogue's kernel does not run on a CPU: it is priced as the task's head ops plus one kernel
that reads the head's output and writes the result. A model picks the cheapest of a task's moves (a
tie goes to the ranking) among the moves that passed the judge, against the ranking and the best
move, by the speedups the judge measured: on the training tasks (the records stage 1 ranks with; their task sources made again from
the seeds the names hold) and, with --ceiling, on the held-out tasks of a held_out_ceiling.py report,
counted as it counts (a move slower than the program reads 1.00x) and raw; a task whose every move
failed is left out there (the ceiling counts it 1.00x). The constants are rounded hardware figures,
not fitted: the held-out split is read, never tuned on. ~1-2 min on 2 cores.
"""
import argparse
import os
import re
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import cudal1  # noqa: E402
import evaluate  # noqa: E402
from held_out_ceiling import geomean  # noqa: E402
from kernelbench import generate as gen, teacher  # noqa: E402

LAUNCH_S, BANDWIDTH, FP32_FLOPS = 5e-6, 4e12, 50e12  # s, bytes/s, FLOP/s: rounded H100/H200 figures
# what a launch is, as teacher.kernel_counts (stage 1's pick) counts them: views are free, logsumexp is 4
VIEWS, KERNELS, HEADS = teacher.VIEWS, teacher.KERNELS, teacher.HEAD_OPS


def flops(name, args, out):
    """FLOPs of a head op (a multiply-add counts 2); 0 for the rest."""
    if name in ("addmm", "mm", "bmm"):
        a, b = args[1:3] if name == "addmm" else args[:2]  # addmm(bias, a, b)
        return 2 * a.numel() * b.shape[-1]
    if name == "convolution":  # (input, weight, bias, stride, padding, dilation, transposed, ...)
        x, w, transposed = args[0], args[1], args[6]  # w: (out, in/g, k..) or, transposed, (in, out/g, k..)
        return 2 * (x if transposed else out).numel() * (w.numel() // w.shape[0])
    return 0


class Priced(TorchDispatchMode):
    """Every ATen op a forward runs, but views: (name, kernels, roofline seconds, output bytes)."""
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0]
        if name not in VIEWS:
            o = out[0] if isinstance(out, (tuple, list)) else out
            o_bytes = o.numel() * o.element_size() if isinstance(o, torch.Tensor) else 0
            # positional tensors only: a list of them (cat, stack) is not counted
            in_bytes = sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
            k = KERNELS.get(name, 1)
            self.ops.append((name, k, k * LAUNCH_S + (in_bytes + o_bytes) / BANDWIDTH
                             + flops(name, args, o) / FP32_FLOPS, o_bytes))
        return out


def forward_ops(task_source, solution=None):
    """Priced ops of the task's Model (or, with `solution`, its ModelNew) on one call, after a warm-up."""
    ns = {}
    exec(compile(task_source, "task", "exec"), ns)
    if solution:
        exec(compile(solution, "solution", "exec"), ns)
    torch.manual_seed(0)
    model = ns["ModelNew" if solution else "Model"](*ns["get_init_inputs"]())  # train mode, as the judge runs it
    x = ns["get_inputs"]()
    with torch.no_grad():
        model(*x)
        with Priced() as p:
            model(*x)
    return p.ops, x


def costs(task_source, meta):
    """{move: (launches, roofline seconds, teacher.kernel_counts)} for each move the teacher writes for the task."""
    ref, x = forward_ops(task_source)
    head = [o for o in ref if o[0] in HEADS]
    head_bytes = head[-1][3] if head else sum(t.numel() * t.element_size() for t in x)
    sols = teacher.solutions(task_source, meta)
    counts = teacher.kernel_counts(task_source, sols)
    out = {}
    for move, sol in sols:
        if move == "fuse_epilogue":
            out[move] = (sum(o[1] for o in head) + 1,
                         sum(o[2] for o in head) + LAUNCH_S + (head_bytes + ref[-1][3]) / BANDWIDTH)
        else:
            ops = forward_ops(task_source, sol)[0]
            out[move] = (sum(o[1] for o in ops), sum(o[2] for o in ops))
        out[move] += (counts[move],)
    return out


def picks(speed, cost, rank, head_cost=teacher.HEAD_COST):
    """{way: the move it picks} among the judged moves `speed` of one task."""
    assert set(speed) <= set(cost), f"judged moves the teacher no longer writes: {sorted(set(speed) - set(cost))}"
    by_rank = lambda m: rank.get(m, 0.0)
    price = lambda m: teacher.kernel_cost(cost[m][2], head_cost)
    return dict(ranking=max(speed, key=by_rank), launches=min(speed, key=lambda m: (cost[m][0], -by_rank(m))),
                roofline=min(speed, key=lambda m: (cost[m][1], -by_rank(m))),
                kernels=teacher.cheapest(list(speed), price, by_rank),  # stage 1's pick
                best=max(speed, key=speed.get))


def ceiling_speeds(path):
    """{task file name: {move: speedup}} from a held_out_ceiling.py report's table (failed moves and
    compositions, drop_noop+MOVE, left out: the pick is among single moves)."""
    out = {}
    for line in open(path):
        m = re.match(r"\| (\d+_\w+\.py) \| (.*?) \|", line)
        if m:
            out[m.group(1)] = {mv: float(s) for mv, s in re.findall(r"([\w+]+) ([\d.]+)x", m.group(2)) if "+" not in mv}
    return out


def by_move(judged):
    """{move: its judged speedups} over tasks' {move: speedup}, for moves with 5 or more (as teacher.judged_moves)."""
    out = {}
    for speeds in judged.values():
        for mv, s in speeds.items():
            out.setdefault(mv, []).append(s)
    return {mv: v for mv, v in out.items() if len(v) >= 5}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", default=cudal1.H200_RECORDS, help="judged teacher records (comma-separated), "
                   "the ranking's and the training tasks'; default: the ones stage 1 ranks with")
    p.add_argument("--ceiling", default="", help="a held_out_ceiling.py report: the held-out tasks too")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    torch.set_num_threads(min(4, os.cpu_count() or 1))  # small ops: more threads only contend
    speedups = evaluate.measured_speedups(a.records) or {}
    judged, names = {}, {}  # {seed: {move: speedup}}, {seed: its task's name}
    for name, s in speedups.items():
        m = re.match(r"levelG/((\d+)_\w+)\.(\w+)\.py$", name)
        if m:
            judged.setdefault(int(m.group(2)), {})[m.group(3)] = s
            names[int(m.group(2))] = m.group(1)
    rank = {mv: geomean(v) for mv, v in by_move(judged).items()}
    rows = {}  # {split: [(task, speeds, costs)]}
    for seed in sorted(judged):
        name, source, meta = gen.generate(seed, "gpu")
        assert name == names[seed], f"seed {seed} makes {name} now, not the judged {names[seed]}: the generator changed"
        rows.setdefault("training", []).append((name, judged[seed], costs(source, meta)))
    if a.ceiling:
        held = ceiling_speeds(a.ceiling)
        for name, source, meta in gen.tasks(0, len(held), "gpu", split="held_out"):
            if name + ".py" in held and held[name + ".py"]:
                rows.setdefault("held-out", []).append((name, held[name + ".py"], costs(source, meta)))
    ways = ("ranking", "launches", "roofline", "kernels", "best")
    score = lambda rs, way, floor, hc=teacher.HEAD_COST: geomean(  # noqa: E731
        [max(1.0, s[pk]) if floor else s[pk] for _, s, c in rs for pk in [picks(s, c, rank, hc)[way]]])
    md = ["# Each task's move by a cost model, against the global ranking", "",
          f"- command: `python bench/move_pick.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {evaluate.commit() or '?'}, torch {torch.__version__} on the CPU (the costs; the speedups are the records')",
          "- ranking (geomean of each move's judged teacher solutions): "
          + ", ".join(f"{mv} {s:.2f}x" for mv, s in sorted(rank.items(), key=lambda kv: -kv[1])),
          f"- roofline constants: launch {LAUNCH_S * 1e6:.0f} us, {BANDWIDTH / 1e12:.0f} TB/s, a head's FLOPs at "
          f"{FP32_FLOPS / 1e12:.0f} TFLOP/s; kernels: a head priced as {teacher.HEAD_COST} kernels (teacher.HEAD_COST)", "",
          "| tasks | n | " + " | ".join(ways) + " |", "|---|---|" + "---|" * len(ways)]
    for split, rs in rows.items():
        for floor in (False, True):
            md.append(f"| {split}{', a slower move at 1.00x' if floor else ''} | {len(rs)} | "
                      + " | ".join(f"{score(rs, w, floor):.3f}x" for w in ways) + " |")
    prices = (1, 1.5, 2, 3, 4, 6, 10)
    md += ["", "## kernels: the head's price", "", "| tasks | " + " | ".join(f"head = {hc}" for hc in prices) + " |",
           "|---|" + "---|" * len(prices)]
    for split, rs in rows.items():
        md.append(f"| {split} | " + " | ".join(f"{score(rs, 'kernels', False, hc):.3f}x" for hc in prices) + " |")
    for split, rs in rows.items():
        md += ["", f"## {split}: where a model leaves the ranking's pick", "",
               "| task | " + " | ".join(ways) + " |", "|---|" + "---|" * len(ways)]
        for name, s, c in rs:
            pk = picks(s, c, rank)
            if len({pk[w] for w in ways[:-1]}) > 1:
                md.append(f"| {name} | " + " | ".join(f"{pk[w]} {s[pk[w]]:.2f}x" for w in ways) + " |")
    cudal1.write_markdown(md, a.out)


if __name__ == "__main__":
    main()

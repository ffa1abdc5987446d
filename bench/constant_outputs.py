"""Generated tasks whose reference output does not depend on the input, on the CPU: each task's
reference run on three draws of its inputs, against whether the teacher writes constant_output for it.

The teacher writes that move only where its ranges prove every value pinned (kernelbench/teacher.py).
A task whose output is the same on every draw without such a proof (a LogSumExp large enough that a
Hardtanh after it always saturates, a min that a 10-sigma value would be needed to reach) admits a
constant answer the judge passes, because it compares on drawn inputs: a fast move the teacher never
shows, which RL can find. Tasks the teacher marks but whose output moves would be a teacher bug.

    python bench/constant_outputs.py --split held_out --n 128 --out results/constant-outputs-held-out-cpu.md
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from kernelbench import generate as gen  # noqa: E402


def study(source, seed, draws=3):
    """(the output is the same on every draw, it is one value everywhere) for a task's source."""
    ns = {}
    exec(source, ns)
    torch.manual_seed(seed)
    with torch.no_grad():
        model = ns["Model"](*ns["get_init_inputs"]())
        outs = [model(*ns["get_inputs"]()) for _ in range(draws)]
    same = all(torch.equal(outs[0], o) for o in outs[1:])
    return same, same and bool((outs[0] == outs[0].flatten()[0]).all())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--split", default="held_out", choices=("train", "held_out"))
    p.add_argument("--start", type=int, default=0, help="first seed (held-out tasks start at 0 in every run)")
    p.add_argument("--n", type=int, default=128, help="tasks")
    p.add_argument("--out", help="write the table here (markdown)")
    args = p.parse_args()
    torch.set_num_threads(1)
    rows, t0 = [], time.time()
    for i, (name, source, meta) in enumerate(gen.tasks(args.start, args.n, "gpu", args.split)):
        if meta["stochastic"]:
            continue
        same, one = study(source, meta["seed"])
        rows.append((name, same, one, "constant_output" in meta["moves"]))
        print(f"\r{i + 1}/{args.n} tasks", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    missed = [r for r in rows if r[1] and not r[3]]
    wrong = [r for r in rows if r[3] and not r[1]]
    lines = [f"# Generated tasks whose output does not depend on the input ({args.split}, CPU)", "",
             f"- command: `python bench/constant_outputs.py --split {args.split} --start {args.start} --n {args.n}`"
             f" (torch {torch.__version__}, {time.time() - t0:.0f} s); the reference on 3 draws of its inputs",
             f"- {len(rows)} tasks without a live dropout: output the same on every draw {sum(r[1] for r in rows)}"
             f" (one value everywhere {sum(r[2] for r in rows)}); the teacher writes constant_output for"
             f" {sum(r[3] for r in rows)}", "",
             "| task | same on every draw | one value | teacher's constant_output |", "|---|---|---|---|"]
    lines += [f"| {n} | {'yes' if s else 'no'} | {'yes' if o else 'no'} | {'yes' if t else 'no'} |"
              for n, s, o, t in missed + wrong]
    lines += ["", f"Listed: the {len(missed)} tasks whose output never moved but the teacher does not prove it,"
              f" and the {len(wrong)} the teacher marks whose output moved (a teacher bug if any)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

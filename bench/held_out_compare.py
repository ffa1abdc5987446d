"""Two recipes' held-out lines, build by build and paired by task: does recipe B beat recipe A?

Each recipe is a list of builds, one train_rl.py held_out_answers.jsonl per build (or its .jsonl.gz, as
results/ keeps them), all read on the same held-out generated tasks; a file's last step and first attempts
(the greedy answers) are its line. Per build: the share correct and the geomean speedup (a failure counts
1.00x) over all generated tasks, split by whether the task admits the fused epilogue (its teacher writes one),
and level 2's correct answers; summed over a recipe's builds, how its level-2 answers failed (level2_verdicts),
and the share correct by the number of ops a task's name lists after its head (by_ops), generated and level 2 apart.
Then B against A paired by task: each task's mean log speedup over a recipe's builds, B's minus A's, averaged
over tasks (the ratio of the two recipes' geomeans), with a 95% interval from resampling the tasks. Two builds
of one seed disagree on about a quarter of the verdicts (the greedy answers sit on near-ties:
results/curriculum-h100-g120000-torch3-seeds.md), so builds are averaged before comparing.

    python bench/held_out_compare.py --a results/h100-held-out-128-s{1,2,3}-answers.jsonl.gz \\
        --b results/h100-held-out-128-torch3-s{1,2,3}-answers.jsonl.gz --out results/compare.md

The task files are made afresh under --work (cudal1.held_out_tasks: the split's first N, as every run makes
them), so the answer files can be read anywhere.
"""
import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudal1  # noqa: E402
from held_out_moves import read_answers, solutions  # noqa: E402


def greedy(path):
    """One build's line: the answers of its answers file's last step, first attempts only (the greedy ones)."""
    rows = read_answers(path)
    last = max((r.get("step", 0) for r in rows), default=0)
    return [r for r in rows if r.get("step", 0) == last and r.get("attempt", 1) == 1]


def line(rows):
    """{held key: (correct, log speedup with a failure at 0)} of one build's greedy answers."""
    out = {}
    for r in rows:
        ok = r["status"] == "ok" and bool(r.get("speedup"))
        out[cudal1.held_key(r["task"])] = (ok, math.log(r["speedup"]) if ok else 0.0)
    return out


VERDICTS = ("ok", "incorrect", "parse_error", "missing attribute", "runtime_error", "compile_error")


def level2_verdicts(rows):
    """How one build's greedy level-2 answers failed or passed, counted by VERDICTS (a runtime error naming an
    attribute the model lacks counts as "missing attribute": the answer read a name its task does not define;
    any other status counts under runtime_error)."""
    out = dict.fromkeys(VERDICTS, 0)
    for r in rows:
        if cudal1.held_key(r["task"]).startswith("level2/"):
            v = "missing attribute" if "has no attribute" in (r.get("message") or "") else r["status"]
            out[v if v in out else "runtime_error"] += 1
    return out


HEADS = ("Gemm", "Matmul", "BMM", "Conv")  # a name's first op token that is the head (Conv2d, ConvTranspose3D, ...)


def ops_named(key):
    """How many ops follow the head in a task's name ('59_Matmul_Swish_Scaling': 2), KernelBench's naming
    and the generator's alike: one token an op, where level 2 names them one by one (a few fold two ops
    into a token, such as 'Scale')."""
    tokens = os.path.basename(key)[:-len(".py")].split("_")[1:]
    return len(tokens) - bool(tokens and tokens[0].startswith(HEADS))


def by_ops(builds):
    """{(level, ops named): [correct, answers]} over every build's greedy answers (ops named: ops_named,
    capped at 6): whether level 2 fails because its chains are longer than the generated tasks'."""
    out = {}
    for build in builds:
        for k, (ok, _) in build.items():
            c = out.setdefault(("level 2" if k.startswith("level2/") else "generated", min(ops_named(k), 6)), [0, 0])
            c[0] += ok
            c[1] += 1
    return out


def cell(values):
    """'K of N (P%), G.GGx' over (correct, log speedup) pairs."""
    if not values:
        return "-"
    k = sum(ok for ok, _ in values)
    return f"{k} of {len(values)} ({k / len(values):.0%}), {math.exp(sum(v for _, v in values) / len(values)):.2f}x"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", nargs="+", required=True, help="recipe A: one answers file per build")
    p.add_argument("--b", nargs="+", required=True, help="recipe B: one answers file per build")
    p.add_argument("--size", default="gpu", choices=("gpu", "cpu"), help="the sizes the tasks were made at")
    p.add_argument("--work", default="out/held-out-compare", help="where the held-out task files are made")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples of the tasks")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    for path in a.a + a.b:
        if not os.path.exists(path):
            raise SystemExit(f"held_out_compare: no such answers file: {path}")
    answers = {name: [greedy(path) for path in paths] for name, paths in (("A", a.a), ("B", a.b))}
    recipes = {name: [line(rows) for rows in builds] for name, builds in answers.items()}
    keys = sorted({k for lines in recipes.values() for build in lines for k in build if k.startswith("levelG/")})
    if not keys:
        raise SystemExit("held_out_compare: no generated held-out task in these files")
    path_of = {cudal1.held_key(t): t for t in cudal1.held_out_tasks(a.work, len(keys), a.size)["generated"]}
    missing = [k for k in keys if k not in path_of]
    if missing:
        raise SystemExit(f"held_out_compare: {len(missing)} tasks are not the split's first ones, e.g. {missing[0]}")
    fused = {k: "fuse_epilogue" in solutions(path_of[k]) for k in keys}
    md = ["# Two recipes' held-out lines", "",
          f"- command: `python bench/held_out_compare.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
          f"- {len(keys)} generated held-out tasks ({sum(fused.values())} admit the fused epilogue); greedy answers, "
          "a failure at 1.00x", "",
          "| recipe | build | fused-admitting: correct, geomean | the others | all | level 2 correct |",
          "|---|---|---|---|---|---|"]
    for name, lines in recipes.items():
        for path, build in zip(a.a if name == "A" else a.b, lines):
            parts = [[build[k] for k in keys if k in build and fused[k] == f] for f in (True, False)]
            level2 = [ok for k, (ok, _) in build.items() if k.startswith("level2/")]
            md.append(f"| {name} | {os.path.basename(path)} | {cell(parts[0])} | {cell(parts[1])} | "
                      f"{cell([build[k] for k in keys if k in build])} | "
                      f"{f'{sum(level2)} of {len(level2)}' if level2 else '-'} |")
    md += ["", "Level 2's answers by verdict, summed over each recipe's builds:", "",
           "| recipe | " + " | ".join(VERDICTS) + " |", "|---|" + "---|" * len(VERDICTS)]
    for name, builds in answers.items():
        counts = [level2_verdicts(rows) for rows in builds]
        md.append(f"| {name} | " + " | ".join(str(sum(c[v] for c in counts)) for v in VERDICTS) + " |")
    lengths = {name: by_ops(lines) for name, lines in recipes.items()}
    cols = sorted({c for n in lengths.values() for c in n})
    md += ["", "Correct by the number of ops after the head (read from the task's name), over each recipe's builds:",
           "", "| recipe | " + " | ".join(f"{lvl}, {n}{'+' if n == 6 else ''}" for lvl, n in cols) + " |",
           "|---|" + "---|" * len(cols)]
    for name, n in lengths.items():
        md.append(f"| {name} | " + " | ".join(f"{n[c][0]} of {n[c][1]}" if c in n else "-" for c in cols) + " |")
    mean = {name: {k: [b[k][1] for b in lines if k in b] for k in keys} for name, lines in recipes.items()}
    both = [k for k in keys if mean["A"][k] and mean["B"][k]]
    diff = [sum(mean["B"][k]) / len(mean["B"][k]) - sum(mean["A"][k]) / len(mean["A"][k]) for k in both]
    rng = random.Random(0)
    boot = sorted(sum(rng.choice(diff) for _ in diff) / len(diff) for _ in range(a.resamples))
    lo, hi = boot[int(0.025 * len(boot))], boot[int(0.975 * len(boot)) - 1]
    gm = lambda name: math.exp(sum(sum(v) / len(v) for k, v in mean[name].items() if k in both) / len(both))
    md += ["", f"**B against A, paired by task** ({len(both)} tasks, each its mean over a recipe's "
           f"{len(recipes['A'])} and {len(recipes['B'])} builds): A {gm('A'):.3f}x, B {gm('B'):.3f}x, "
           f"B/A {math.exp(sum(diff) / len(diff)):.3f}x, 95% interval {math.exp(lo):.3f}-{math.exp(hi):.3f}x "
           f"(tasks resampled {a.resamples} times)."]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

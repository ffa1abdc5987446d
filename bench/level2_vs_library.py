"""Issue 15's last target: a held-out KernelBench level-2 task where the policy's best correct answer beats
the library's best file, both judged again in full in one run.

    python bench/level2_vs_library.py out/rl-start out/rl-contrastive-s1 ... --out results/h100-level2-vs-library.md
        # GPU; the device step level2-vs-library (~2 min)

Every distinct correct answer the runs' held-out measurements wrote for the 20 held-out level-2 tasks
(held_out_answers.jsonl: any step, any attempt; the --per-task fastest by their first reading, which
was RL's short screen) is judged again beside every library file of its task (kernels/level2/NAME.py
and NAME.vN.py), in one call with the full judge (evaluate.DEFAULTS, prewarm). A task is beaten when
its best answer reads at least BEAT times the library's best: the A/A spread of the full judge, the
reference timed against itself, reached 1.06x (results/h200-judge-noise.md).
"""
import argparse
import glob
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402

BEAT = 1.06


def policy_answers(runs, per_task):
    """{held-out level-2 task name: [(source, where), ...]}: each task's distinct correct answers in the
    runs' held_out_answers.jsonl, fastest first by their first reading, at most per_task of them;
    where: 'RUN step S attempt A'."""
    found = {}  # name -> {same code: (speedup, source, where)}
    for run in runs:
        path = os.path.join(run, "held_out_answers.jsonl")
        for a in map(json.loads, open(path)) if os.path.exists(path) else ():
            level, name = cudal1.held_key(a["task"]).split("/")
            if level != "level2" or a["status"] != "ok" or not a.get("speedup") or not a.get("source"):
                continue
            code = cudal1.same_code(a["source"])
            seen = found.setdefault(name, {})
            if code not in seen or a["speedup"] > seen[code][0]:
                seen[code] = (a["speedup"], a["source"], f"{run} step {a['step']} attempt {a['attempt']}")
    return {name: [(src, where) for _, src, where in sorted(codes.values(), key=lambda e: -e[0])[:per_task]]
            for name, codes in found.items()}


def library_files(kernels, name):
    """kernels/level2/NAME.py and its NAME.vN.py variants."""
    stem = name[:-3]
    return sorted(p for p in glob.glob(os.path.join(kernels, "level2", stem + "*.py"))
                  if re.fullmatch(re.escape(stem) + r"(\.v\d+)?\.py", os.path.basename(p)))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="train_rl.py --out folders (their held_out_answers.jsonl)")
    p.add_argument("--tasks", default="kernelbench")
    p.add_argument("--kernels", default="kernels")
    p.add_argument("--per-task", type=int, default=3, help="a task's fastest answers judged again, at most")
    p.add_argument("--time-budget", type=float, default=1.0, help="seconds of timed rounds per pair")
    p.add_argument("--device", default="", help="cuda or cpu; empty: cuda if present")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    device = a.device or ("cuda" if evaluate.gpu_info()[0] else "cpu")
    answers = policy_answers(a.runs, a.per_task)
    names = sorted(answers, key=lambda n: int(n.split("_")[0]))
    if not names:
        raise SystemExit(f"no correct held-out level-2 answer in {', '.join(a.runs)}: nothing to compare")
    pairs, who = [], []  # (task, source or path), (name, 'library' or 'policy', path or where)
    for name in names:
        task = os.path.join(a.tasks, "level2", name)
        for path in library_files(a.kernels, name):
            pairs.append((task, path))
            who.append((name, "library", path))
        for src, where in answers[name]:
            pairs.append((task, src))
            who.append((name, "policy", where))
    records = evaluate.judge_many(pairs, device=device, prewarm=True, time_budget=a.time_budget)
    best = {}  # (name, side) -> (speedup, what)
    for (name, side, what), r in zip(who, records):
        s = r["speedup"] if r.get("correct") and r.get("speedup") else 0.0
        if s > best.get((name, side), (0.0, ""))[0] or (name, side) not in best:
            best[(name, side)] = (s, what if s else f"{what} ({r['status']})")
    env = evaluate.environment(device)
    rows, beaten = [], []
    for name in names:
        (lib, lib_what), (mine, mine_what) = best.get((name, "library"), (0.0, "no file")), best[(name, "policy")]
        ratio = mine / lib if lib else float("inf") if mine else 0.0
        if mine and ratio >= BEAT:
            beaten.append(name)
        rows.append(f"| {name} | {lib:.2f}x ({os.path.basename(lib_what)}) | {mine:.2f}x ({mine_what}) | "
                    f"{ratio:.2f} | {'yes' if name in beaten else 'no'} |")
    md = ["# Held-out level 2: the policy's best answers against the library's, judged in one run", "",
          f"- command: `python bench/level2_vs_library.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {env['commit']}, {env['gpu']}, driver {env['driver']}, torch {env['torch']}",
          f"- {len(names)} of {len(cudal1.HELD_OUT_LEVEL2)} held-out level-2 tasks have a correct answer in the runs; "
          f"each task's {a.per_task} fastest distinct answers (by their first reading) and every library file of "
          f"the task, {len(pairs)} pairs judged in full ({a.time_budget:g} s of timed rounds each, prewarm); "
          f"a failure reads 0.00x", "",
          f"**Beaten (the policy's best at least {BEAT}x the library's, beyond the judge's A/A spread): "
          f"{len(beaten)} of {len(names)}**" + (f": {', '.join(beaten)}" if beaten else ""), "",
          "| task | library's best | policy's best (where) | ratio | beaten |", "|---|---|---|---|---|", *rows]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

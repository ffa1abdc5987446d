"""Issue 15's last target: a held-out KernelBench level-2 task where the policy's best correct answer beats
the library's best file, both judged again in full in one run.

    python bench/level2_vs_library.py out/rl-start out/rl-contrastive-s1 ... --out results/h100-level2-vs-library.md
        # GPU; the device step level2-vs-library (~2 min)

Every distinct correct answer the runs' held-out measurements wrote for the 20 held-out level-2 tasks
(held_out_answers.jsonl: any step, any attempt; the --per-task fastest by their first reading, which
was RL's short screen) is judged again beside every library file of its task (kernels/level2/NAME.py
and NAME.vN.py), in one call with the full judge (evaluate.DEFAULTS, prewarm). The two sides are
compared by their fastest correct solution's own time (sol_ms), not by speedups, each of which divides
by a reading of the reference of its own. A task is beaten when the library's time is at least BEAT
times the policy's: the widest single reading of the full judge's A/A run on the H200, the reference
timed as its own solution (results/h200-judge-noise.md); a best of several readings on each side may
spread wider, so a beat near BEAT wants reading again.
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
    where: 'RUN step S attempt A'. A line cut short by a kill is skipped."""
    found = {}  # name -> {same code: (speedup, source, where)}
    for run in runs:
        path = os.path.join(run, "held_out_answers.jsonl")
        if not os.path.exists(path):
            print(f"{run}: no held_out_answers.jsonl, left out")
            continue
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.endswith("\n")]
        for a in rows:
            level, name = cudal1.held_key(a["task"]).split("/")
            if level != "level2" or a["status"] != "ok" or not a.get("speedup") or not a.get("source"):
                continue
            code = cudal1.same_code(a["source"])
            seen = found.setdefault(name, {})
            if code not in seen or a["speedup"] > seen[code][0]:
                seen[code] = (a["speedup"], a["source"], f"{run} step {a['step']} attempt {a['attempt']}")
    return {name: [(src, where) for _, src, where in sorted(codes.values(), key=lambda e: -e[0])[:per_task]]
            for name, codes in found.items()}


def fastest(judged):
    """(record, what) of the correct record with the smallest sol_ms among [(record, what)], else the first
    pair (a failure, shown with its status); (None, 'no file') for none."""
    good = [(r, w) for r, w in judged if r.get("correct") and r.get("sol_ms")]
    return min(good, key=lambda rw: rw[0]["sol_ms"]) if good else judged[0] if judged else (None, "no file")


def verdict(library, policy):
    """(ratio of the library's time to the policy's, or None, and the word for the table) of two
    fastest() records: 'yes' at BEAT or more, 'no' below it, and no ratio where either side has no
    correct reading (a library that fails on this GPU is not beaten by a pass)."""
    if not (policy and policy.get("correct")):
        return None, "no: the policy's answers fail here"
    if not (library and library.get("correct")):
        return None, "no library reading"
    ratio = library["sol_ms"] / policy["sol_ms"]
    return ratio, "yes" if ratio >= BEAT else "no"


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
    source = {(name, where): src for name in names for src, where in answers[name]}  # 'where' repeats across tasks
    records = evaluate.judge_many(pairs, device=device, prewarm=True, time_budget=a.time_budget)
    judged = {}  # (name, side) -> [(record, what)]
    for (name, side, what), r in zip(who, records):
        judged.setdefault((name, side), []).append((r, what))
    env = evaluate.environment(device)
    rows, beaten = [], []
    cell = lambda r, what: (f"{r['speedup']:.2f}x, {r['sol_ms']:.3f} ms ({what})" if r and r.get("correct")
                            else f"failed ({what}: {r['status']})" if r else what)
    for name in names:
        lib, lib_what = fastest(judged.get((name, "library"), []))
        mine, mine_what = fastest(judged[(name, "policy")])
        ratio, word = verdict(lib, mine)
        if word == "yes":
            beaten.append((name, source[(name, mine_what)]))
        rows.append(f"| {name} | {cell(lib, os.path.basename(lib_what))} | {cell(mine, mine_what)} | "
                    f"{'-' if ratio is None else f'{ratio:.2f}'} | {word} |")
    md = ["# Held-out level 2: the policy's best answers against the library's, judged in one run", "",
          f"- command: `python bench/level2_vs_library.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {env['commit']}, {env['gpu']}, driver {env['driver']}, torch {env['torch']}",
          f"- {len(names)} of {len(cudal1.HELD_OUT_LEVEL2)} held-out level-2 tasks have a correct answer in the runs; "
          f"each task's {a.per_task} fastest distinct answers (by their first reading) and every library file of "
          f"the task, {len(pairs)} pairs judged in full ({a.time_budget:g} s of timed rounds each, prewarm); "
          f"each side's fastest correct solution, compared by its own time (ratio: the library's ms over the "
          f"policy's)", "",
          f"**Beaten (the policy's best at least {BEAT}x faster than the library's, the widest A/A reading): "
          f"{len(beaten)} of {len(names)}**" + (f": {', '.join(n for n, _ in beaten)}" if beaten else ""), "",
          "| task | library's best: speedup, time (file) | policy's best (where) | ratio | beaten |",
          "|---|---|---|---|---|", *rows]
    for name, src in beaten:  # the winning answer, for a reader to check what it does
        md += ["", f"## {name}: the policy's answer", "", "```python", src.rstrip(), "```"]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

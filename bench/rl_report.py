"""The paper's ablation as a table: contrastive RL against --plain RL, from two train_rl.py runs.

    python bench/rl_report.py out/rl-contrastive out/rl-plain --out results/train-h200.md
    (or `make rl-ablation GPU=h200`, which makes both runs from the same out/sft first)

Reads each run's log.jsonl (one line per step), bank.jsonl (every judged answer, with the judge's
environment) and settings.json (the settings), and writes Markdown: the settings, per-run rates,
reward per step drawn as a text chart, and the best speedup each run found per task. Runs cut
short by --time-limit are compared over the steps both reached, and the table says so.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudal1  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
parser.add_argument("runs", nargs="+", help="train_rl.py --out folders; the first is called contrastive if not --plain")
parser.add_argument("--out", default="", help="Markdown file to write; empty: print it")
parser.add_argument("--height", type=int, default=12, help="rows of the reward chart")
args = parser.parse_args()


def load(path):
    log = [json.loads(line) for line in open(os.path.join(path, "log.jsonl")) if line.endswith("\n")]
    settings = json.load(open(os.path.join(path, "settings.json")))
    bank = cudal1.Bank(os.path.join(path, "bank.jsonl"), write=False)
    return dict(path=path, name="plain" if settings["plain"] else "contrastive", log=log, settings=settings, bank=bank)


def chart(series, height):
    """Text chart of several {name: [y per step]}; one letter per run, '*' where they meet."""
    ys = [y for s in series.values() for y in s]
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or 1.0
    width = max(len(s) for s in series.values())
    grid = [[" "] * width for _ in range(height)]
    for name, s in series.items():
        for x, y in enumerate(s):
            row = height - 1 - round((y - lo) / span * (height - 1))
            grid[row][x] = name[0].upper() if grid[row][x] in (" ", name[0].upper()) else "*"
    lines = [f"{hi - (hi - lo) * r / (height - 1):+6.2f} |" + "".join(row) for r, row in enumerate(grid)]
    lines.append("       +" + "-" * width)
    lines.append(f"        steps 1 to {width}, one column each")
    legend = ", ".join(f"{n[0].upper()} = {n}" for n in series)
    return "\n".join(lines + [f"        mean reward per step ({legend}, * = both)"])


runs = [load(p) for p in args.runs]
steps = min(len(r["log"]) for r in runs)  # compare over the steps every run reached
# the runs' own judgements (step >= 0), not the seeds judged earlier, say where and at which commit
records = [e["record"] for r in runs for es in r["bank"].entries.values() for e in es if e["step"] >= 0]
env = next((rec["env"] for rec in records if rec.get("env")), {})  # the judge's: commit, GPU, driver, torch
tolerance = next((rec["tolerance"] for rec in records if rec.get("tolerance")), "?")
s0 = runs[0]["settings"]
md = [f"# Contrastive vs plain RL ({env.get('gpu', '?')})", "",
      "Two train_rl.py runs from the same stage-2 checkpoint, the same tasks and the same budget; the only "
      "difference is the prompt (earlier solutions with their measured speedups, or none).", "",
      f"- command: `python bench/rl_report.py {' '.join(args.runs)}`; runs: "
      + "; ".join(f"`{r['path']}` ({r['name']}, {len(r['log'])} steps, "
                  f"{r['log'][-1]['elapsed_s'] / 60 if r['log'] else 0:.1f} min)" for r in runs),
      f"- init `{s0['init']}`; {s0['tasks_per_step']} tasks/step, G={s0['num_samples']}, lr {s0['lr']:g}, "
      f"temperature {s0['temperature']}, adv clip {s0['adv_clip']}, judge trials {s0['trials']} iters {s0['iters']}",
      f"- commit {env.get('commit', '?')}, GPU {env.get('gpu', '?')}, driver {env.get('driver', '?')}, "
      f"torch {env.get('torch', '?')}, tolerance {tolerance}",
      f"- compared over the first {steps} steps (the fewer any run reached)", "",
      "| run | answers | parse | compile | correct | copies of a seed | reward, first half | reward, second half | exemplars shown |",
      "|---|---|---|---|---|---|---|---|---|"]
for r in runs:
    log = r["log"][:steps]
    n = [sum(l["statuses"].values()) for l in log]
    rate = lambda k: sum(l[k] * m for l, m in zip(log, n)) / max(1, sum(n))
    half = max(1, steps // 2)
    given = {t: r["bank"].sources(t, given=True) for t in r["bank"].entries}
    good = [e for es in r["bank"].entries.values() for e in es  # one entry per parsed answer
            if 0 <= e["step"] < steps and e["record"].get("correct")]
    copies = sum(cudal1.same_code(e["source"]) in given[e["task"]] for e in good) / max(1, len(good))
    md.append(f"| {r['name']} | {sum(n)} | {rate('parsed'):.0%} | {rate('compiled'):.0%} | {rate('correct'):.0%} | "
              f"{copies:.0%} | "
              f"{statistics.mean(l['reward_mean'] for l in log[:half]):+.2f} | "
              f"{statistics.mean(l['reward_mean'] for l in log[half:] or log):+.2f} | "
              f"{statistics.mean(l['exemplars'] for l in log):.1f} |")
md += ["", "Reward: clip(log2 speedup, -1, 3) for a correct answer, -2 for any failure (cudal1.reward).", "",
       "```text", chart({r["name"]: [l["reward_mean"] for l in r["log"][:steps]] for r in runs}, args.height), "```", "",
       "Copies of a seed: correct answers whose code is a seeded kernels/ solution's, measured again. "
       "Best speedup each run found per task counts its own code only (correct, unlike the reference "
       "and every seed; judged by evaluate.judge_many; a run's best is its fastest measurement, so treat "
       "it as optimistic until `make eval` repeats it); the seeds' best is the library's measurement:", "",
       "| task | seeds' best | " + " | ".join(r["name"] for r in runs) + " |", "|---|---|" + "---|" * len(runs)]
for task in sorted(set().union(*(r["log"][-1]["best"] for r in runs if r["log"]))):
    seeds = [e["record"]["speedup"] for e in runs[0]["bank"].entries.get(task, [])
             if e["step"] < 0 and e["record"].get("status") != "reference" and e["record"].get("speedup")]
    cells = [f"{max(seeds):.2f}x" if seeds else "-"]
    for r in runs:
        own = [e["record"]["speedup"] for e in r["bank"].found(task) if 0 <= e["step"] < steps]
        cells.append(f"{max(own):.2f}x" if own else "-")
    md.append(f"| {task} | " + " | ".join(cells) + " |")
text = "\n".join(md) + "\n"
if args.out:
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(text)
print(text, end="")

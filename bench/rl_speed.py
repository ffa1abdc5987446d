"""Stage-3 steps per minute, one row per train_rl.py run: how the judge's settings change a training step
(issue 13). Runs made from the same checkpoint with the same settings but the judge's: --judge screen / full,
--prewarm 0 / 1.

    python bench/rl_speed.py out/rl-speed-full out/rl-speed-prewarm --out results/h200-rl-speed-MMDD-HHMM.md

The same seed makes the runs' first steps sample the same tasks and, until their updates part, the
same answers: so they are compared over the steps both reached, and each must start from a cold build
cache (the device step `rl-speed` empties build/kernels first), or the second run's builds are free.
Reads each run's settings.json and log.jsonl; a step's time is what train_rl.py logs (sample, judge,
train: held-out evaluations are not counted, as --time-limit does not count them).
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudal1  # noqa: E402
import evaluate  # noqa: E402


def steps(path):
    log = [json.loads(line) for line in open(os.path.join(path, "log.jsonl")) if line.endswith("\n")]
    if not log:
        raise SystemExit(f"{path}: no steps in log.jsonl")
    return log


def row(path, log, reached):
    settings = json.load(open(os.path.join(path, "settings.json")))
    mean = lambda k: statistics.mean(s[k] for s in log)
    step_s = mean("sample_s") + mean("judge_s") + mean("train_s")
    answers = settings["tasks_per_step"] * settings["num_samples"]
    judge = settings.get("judge", "screen") + (" + prewarm" if settings.get("prewarm") else "")
    return (f"| `{path}` | {judge} | {len(log)} of {reached} | {60 / step_s:.1f} | {mean('sample_s'):.1f} | "
            f"{mean('judge_s'):.1f} | {mean('judge_gpu_s'):.1f} | {statistics.mean(s.get('rejudge_gpu_s', 0) for s in log):.1f} | "
            f"{mean('judge_build_s'):.1f} | {mean('train_s'):.1f} | "
            f"{answers * 60 / step_s:.0f} | {statistics.mean(s['correct'] for s in log):.0%} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", help="train_rl.py --out folders")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print it")
    a = p.parse_args(argv)
    env = evaluate.environment("cuda" if evaluate.gpu_info()[0] else "cpu")
    md = ["# Stage-3 steps per minute under different judge settings", "",
          f"- command: `python bench/rl_speed.py {' '.join(a.runs)}`, commit {env['commit']}, {env['gpu']}, "
          f"driver {env['driver']}, torch {env['torch']} (CUDA {env['cuda']})",
          "- each run from the same checkpoint, same seed and settings, only the judge's (`--judge`, `--prewarm`) "
          "differ; seconds are means per step as train_rl.py logs them (held-out evaluations not counted)", "",
          "| run | judge | steps compared, of the run's | steps per minute | sample s | judge s | "
          "GPU held s (summed over workers) | of it judging again in full (screen: new bests; any: implausible) | "
          "slowest build s | train s | answers judged per minute | correct |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    logs = [steps(r) for r in a.runs]
    k = min(len(log) for log in logs)  # the same seed: the runs' first steps sample the same tasks
    md[3] += (f"; compared over the first {k} steps (the fewer any run reached; "
              "the device step `rl-speed` empties the build cache before each run)")
    md += [row(r, log[:k], len(log)) for r, log in zip(a.runs, logs)]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

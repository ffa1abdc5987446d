"""Issue 15's last target: a held-out KernelBench level-2 task where the policy's best correct answer beats
the library's best file, both judged again in full in one run.

    python bench/level2_vs_library.py out/rl-start out/rl-contrastive-s1 ... --out results/h100-level2-vs-library.md
        # GPU; the device step level2-vs-library (untimed with the re-readings; the step allows 480 s)

Every distinct correct answer the runs' held-out measurements wrote for the 20 held-out level-2 tasks
(held_out_answers.jsonl: any step, any attempt; the --per-task fastest by their first reading, which
was RL's short screen) is judged again beside every library file of its task (kernels/level2/NAME.py
and NAME.vN.py), in one call with the full judge (evaluate.DEFAULTS, prewarm). Each side's fastest by
speedup, where both have one, is then judged --readings times more, the two interleaved in a second call.
Speedups, not times: a worker's times on a launch-bound task come in levels 1.4-1.9x apart while its
reference and solution move together (results/h100-level2-66-readings-1206.md: two programs that are
both one fill kernel read 0.055 against 0.087 ms in two workers, 4.0-4.8x each by speedup). A task is
beaten when the policy's median re-read speedup is at least BEAT times the library's (the widest single
A/A reading on the H200, results/h200-judge-noise.md) and its slowest re-reading is faster than the
library's fastest: one program's speedups spread 1.15-1.19x over 4 workers there, so one reading a side
cannot tell a near-tie. The judge's records go to the --out file's .jsonl as they come (a cut-off run
leaves what it read), each named by side and reading at the end.
"""
import argparse
import glob
import json
import os
import re
import statistics
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
    """(record, what) of the correct record with the highest speedup among [(record, what)], else the first
    pair (a failure, shown with its status); (None, 'no file') for none."""
    good = [(r, w) for r, w in judged if r.get("correct") and r.get("speedup")]
    return max(good, key=lambda rw: rw[0]["speedup"]) if good else judged[0] if judged else (None, "no file")


def verdict(library, policy):
    """(ratio of the medians, or None, and the word for the table) of two sides' re-readings (records of
    one solution each): 'yes' where the policy's median speedup is BEAT times the library's or more and
    its slowest reading beats the library's fastest; no ratio where a side has no reading or one failed (a
    library that fails on this GPU is not beaten by a pass, and an answer that fails once is not correct)."""
    if not policy or not all(r.get("correct") for r in policy):
        return None, "no: the policy's answers fail here"
    if not library or not all(r.get("correct") for r in library):
        return None, "no library reading"
    mine, lib = [r["speedup"] for r in policy], [r["speedup"] for r in library]
    ratio = statistics.median(mine) / statistics.median(lib)
    return ratio, "yes" if ratio >= BEAT and min(mine) > max(lib) else "no"


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
    p.add_argument("--readings", type=int, default=5, help="re-readings of each side's fastest, for the verdict")
    p.add_argument("--time-budget", type=float, default=1.0, help="seconds of timed rounds per pair")
    p.add_argument("--device", default="", help="cuda or cpu; empty: cuda if present")
    p.add_argument("--out", default="", help="Markdown file to write (and its .jsonl of records); empty: print only")
    a = p.parse_args(argv)
    if a.readings < 1:
        raise SystemExit(f"--readings {a.readings}: must be at least 1")
    if a.out and not a.out.endswith(".md"):
        raise SystemExit(f"--out {a.out}: a .md file (its records go beside it, as .jsonl)")
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
    # each record written as it comes to the --out file's .jsonl (a cut-off run leaves what it read), a fresh
    # file each run (the judge would take an earlier run's records for its pairs), named by side at the end
    records_at = os.path.splitext(a.out)[0] if a.out else None
    if records_at:
        os.makedirs(os.path.dirname(os.path.abspath(records_at)), exist_ok=True)
        if os.path.exists(records_at + ".jsonl"):
            os.remove(records_at + ".jsonl")
    judge = lambda pairs: evaluate.judge_many(pairs, out=records_at, device=device, prewarm=True,
                                              time_budget=a.time_budget)
    records = judge(pairs)
    judged = {}  # (name, side) -> [(record, what)]
    for (name, side, what), r in zip(who, records):
        judged.setdefault((name, side), []).append((r, what))
    best = {(name, side): fastest(judged.get((name, side), [])) for name in names for side in ("library", "policy")}
    again, again_who = [], []  # each side's fastest --readings times more, interleaved; a comment per reading
    for k in range(a.readings):  # keeps the copies distinct files
        for name in names:
            if all(best[name, side][0] and best[name, side][0].get("correct") for side in ("library", "policy")):
                for side in ("library", "policy"):
                    what = best[name, side][1]
                    src = source[(name, what)] if side == "policy" else open(what).read()
                    again.append((os.path.join(a.tasks, "level2", name), src + f"\n# reading {k + 1}\n"))
                    again_who.append((name, side, what))
    again_records = judge(again) if again else []
    reread = {}  # (name, side) -> [record]
    for (name, side, _), r in zip(again_who, again_records):
        reread.setdefault((name, side), []).append(r)
    if records_at:  # every reading with what it read, for a reader to check a verdict
        with open(records_at + ".jsonl", "w") as f:
            for named, rs, again_ in ((who, records, False), (again_who, again_records, True)):
                for (name, side, what), r in zip(named, rs):
                    f.write(json.dumps(dict(r, task_name=name, side=side, what=what, read_again=again_)) + "\n")
    env = evaluate.environment(device)
    rows, beaten = [], []
    first = lambda r, what: (f"{r['speedup']:.2f}x ({what})" if r and r.get("correct")
                             else f"failed ({what}: {r['status']})" if r else what)
    spread = lambda rs: (f"{statistics.median(x['speedup'] for x in rs):.2f}x "
                         f"({min(x['speedup'] for x in rs):.2f}-{max(x['speedup'] for x in rs):.2f})"
                         if rs and all(x.get("correct") for x in rs) else "failed" if rs else "-")
    for name in names:
        (lib, lib_what), (mine, mine_what) = best[name, "library"], best[name, "policy"]
        ratio, word = verdict(reread.get((name, "library")), reread.get((name, "policy")))
        if not (mine and mine.get("correct")):  # not read again: the first reading decides which side lacks one
            word = "no: the policy's answers fail here"
        elif not (lib and lib.get("correct")):
            word = "no library reading"
        if word == "yes":
            beaten.append((name, source[(name, mine_what)]))
        rows.append(f"| {name} | {first(lib, os.path.basename(lib_what))} | {first(mine, mine_what)} | "
                    f"{spread(reread.get((name, 'library')))} | {spread(reread.get((name, 'policy')))} | "
                    f"{'-' if ratio is None else f'{ratio:.2f}'} | {word} |")
    md = ["# Held-out level 2: the policy's best answers against the library's, judged in one run", "",
          f"- command: `python bench/level2_vs_library.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {env['commit']}, {env['gpu']}, driver {env['driver']}, torch {env['torch']}",
          f"- {len(names)} of {len(cudal1.HELD_OUT_LEVEL2)} held-out level-2 tasks have a correct answer in the runs; "
          f"each task's {a.per_task} fastest distinct answers (by their first reading) and every library file of "
          f"the task, {len(pairs)} pairs judged in full ({a.time_budget:g} s of timed rounds each, prewarm); "
          f"then each side's fastest by speedup {a.readings} times more, interleaved ({len(again)} pairs): their "
          f"median speedup (slowest-fastest) and the ratio of the medians (the policy's over the library's). "
          f"Speedups, not times: a worker's times move together, and between workers by up to 1.9x "
          f"(results/h100-level2-66-readings-1206.md)", "",
          f"**Beaten (the policy's median at least {BEAT}x the library's, and its slowest reading faster than the "
          f"library's fastest): {len(beaten)} of {len(names)}**" + (f": {', '.join(n for n, _ in beaten)}"
                                                                   if beaten else ""), "",
          "| task | library's best, first reading (file) | policy's best, first reading (where) | "
          "library read again | policy read again | ratio | beaten |", "|---|---|---|---|---|---|---|", *rows]
    for name, src in beaten:  # the winning answer, for a reader to check what it does
        md += ["", f"## {name}: the policy's answer", "", "```python", src.rstrip(), "```"]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

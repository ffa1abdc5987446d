"""
Move the drafts that won into the library. Reads one drafts-vs-library run (each drafts/LEVEL file judged
beside the library's files for its task, `LEVEL=level2 bash bench/device_call.sh drafts-vs-library`) and,
for each task whose draft passed and beat every library file in that same run by more than 5% (a run's
timing noise), moves the draft into
kernels/LEVEL under the next free variant name (N_Name.vK.py: the old file stays, a second technique for
training and for the next eval), its docstring's closing "Not yet measured on the H200." replaced by the
measurement and the card it was taken on. Drafts that failed or lost stay where they are; the table says why.

    python bench/promote_drafts.py results/h200-drafts-vs-library-level2-MMDD-HHMM.jsonl          # what it would do
    python bench/promote_drafts.py results/h200-drafts-vs-library-level2-MMDD-HHMM.jsonl --apply  # do it (git mv)
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import evaluate  # noqa: E402

MARGIN = 1.05  # a draft moves when it beats the library's best by more than a run's timing noise
PENDING = re.compile(r"Not\s+yet\s+measured\s+on\s+the\s+H200\.")  # a docstring may wrap it anywhere


def free_name(kernels_dir, name):
    """N_Name.vK.py, the first K >= 2 no file in kernels_dir has."""
    base, k = re.sub(r"(\.v\d+)?\.py$", "", name), 2
    while os.path.exists(os.path.join(kernels_dir, f"{base}.v{k}.py")):
        k += 1
    return f"{base}.v{k}.py"


def decide(records):
    """[(task, draft record or None, best library record or None, verdict)], one per task with a draft."""
    by_task = {}
    for r in records:
        by_task.setdefault(r["task"], []).append(r)
    out = []
    for task, recs in sorted(by_task.items()):
        drafts = [r for r in recs if (r.get("solution") or "").startswith("drafts/")]
        lib = [r for r in recs if (r.get("solution") or "").startswith("kernels/") and r.get("correct")]
        if not drafts:
            continue
        # a task may have several drafts (N_Name.py, N_Name.v2.py, ...): the fastest correct one competes
        d = max(drafts, key=lambda r: (bool(r.get("correct")), r.get("speedup") or 0))
        best = max(lib, key=lambda r: r["speedup"], default=None)
        if not d.get("correct"):
            verdict = f"stays: {d.get('status')} {d.get('message', '')[:60]}".strip()
        elif best is not None and d["speedup"] < MARGIN * best["speedup"]:
            verdict = (f"stays: {d['speedup']:.2f}x, the library's {os.path.basename(best['solution'])} "
                       f"{best['speedup']:.2f}x (a move needs {MARGIN:.2f}x of it)")
        else:
            verdict = "moves"
        out.append((task, d, best, verdict))
    return out


def card(rec):
    """The GPU a record was measured on, as a reader names it: 'NVIDIA H100 80GB HBM3' -> 'H100'."""
    gpu = rec.get("env", {}).get("gpu") or "H200"
    found = re.search(r"\b([A-Z]\d{3})\b", gpu)
    return found.group(1) if found else gpu


def promoted_source(source, rec):
    """The draft's text with its closing sentence replaced by the measurement (on the card the run had)."""
    if not PENDING.search(source):
        raise ValueError(f"{rec['solution']}: no 'Not yet measured on the H200.' to replace")
    said = f"Measured on the {card(rec)}: {rec['speedup']:.2f}x over eager ({rec['ref_ms']:.3g} -> {rec['sol_ms']:.3g} ms)."
    return PENDING.sub(said, source, count=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="move winning drafts into kernels/ with their measurement")
    parser.add_argument("jsonl", help="the judge's records of one drafts-vs-library run")
    parser.add_argument("--apply", action="store_true", help="move the files (git mv) and rewrite the docstrings")
    args = parser.parse_args()
    if not os.path.exists(args.jsonl):
        raise SystemExit(f"promote_drafts: no file {args.jsonl}")
    for task, d, best, verdict in decide(evaluate.read_records(args.jsonl)):
        line = f"{task:60s} {verdict}"
        if verdict == "moves":
            src = os.path.join(ROOT, d["solution"])
            level = os.path.basename(os.path.dirname(src))
            dst = os.path.join(ROOT, "kernels", level, free_name(os.path.join(ROOT, "kernels", level), os.path.basename(src)))
            was = f", the library's best {best['speedup']:.2f}x" if best else ""
            line += f": {d['speedup']:.2f}x{was} -> {os.path.relpath(dst, ROOT)}"
            if args.apply:
                text = promoted_source(open(src).read(), d)
                subprocess.run(["git", "mv", src, dst], cwd=ROOT, check=True)
                with open(dst, "w") as f:
                    f.write(text)
        print(line)

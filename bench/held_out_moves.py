"""Which move does each held-out answer write, and how often does it pass? For each generated task's
answers in train_rl.py's held_out_answers.jsonl (every attempt, every measurement) or train_sft.py's
answers-held_out.jsonl, the teacher solution of that task nearest in code (difflib over the code,
docstrings left out) names the move, or 'reference' where the task's own program is nearer (an answer
that restates it, rightly or not); per move: answers, distinct codes among them, the share correct, the
geomean speedup of those that pass (the judge's reading in train_rl.py's files) and the failures by status
(a step-0 answer that several runs' files hold, as make rl-ablation gives each the start's, counts once);
how many distinct failing codes fail on binding a name, and how many pass their kernel other attributes
than the teacher's call (a name copied wrong, in the kernel or in the call).
With --diffs, each distinct failing code's lines that differ from that solution: what the policy got wrong
(and where the file keeps it, the first line of the answer's analysis: what it said it would do). Where
analyses are kept, a second table: the move each one states (teacher.stated_move) beside the move written,
and whether the code it names is what the teacher's analysis names (`statement`). Last, the move stage 1
would teach each task (teacher.taught_move, ranked by --records) beside the move written: is a failure the
choice or the code?

    python bench/held_out_moves.py out/rl-*/held_out_answers.jsonl --out results/held-out-moves.md
    python bench/held_out_moves.py /tmp/dev/out/rl-start/held_out_answers.jsonl --diffs 20
    python bench/held_out_moves.py --builds out/h128-TAG-s*/held_out_answers.jsonl  # seed-line's builds, each counted

cudal1.moves_shown reads marks in the code and cannot tell a dropped no-op or a reduction moved first
from the reference's own code; the nearest of these can. Task files are read as bench/grounding.py
reads them (from the run's own folder). The teacher's solutions of held-out tasks are an oracle for this
report only, made in memory and never written.
"""
import argparse
import ast
import collections
import difflib
import functools
import gzip
import json
import math
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import cudal1  # noqa: E402
import evaluate  # noqa: E402
from grounding import task_file  # noqa: E402
from kernelbench import generate as gen, teacher  # noqa: E402


def code_lines(source):
    """The source's lines without its docstrings (module, class, function): code to compare."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source.splitlines()
    drop = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
            drop.update(range(body[0].lineno - 1, body[0].end_lineno))
    return [line for i, line in enumerate(source.splitlines()) if i not in drop]


def restated(task_source):
    """The task's forward as a teacher solution is laid out (its imports, class ModelNew(Model), forward
    alone): an answer that changes nothing."""
    tree, lines = ast.parse(task_source), task_source.splitlines()
    model = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Model")
    forward = next(n for n in model.body if isinstance(n, ast.FunctionDef) and n.name == "forward")
    imports = [lines[n.lineno - 1] for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return imports + ["", "", "class ModelNew(Model):"] + lines[forward.lineno - 1:forward.end_lineno]


def read_answers(path):
    """The rows of an answers file, or of its .jsonl.gz (as results/ keeps them)."""
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return [json.loads(line) for line in f]


@functools.lru_cache(maxsize=None)
def solutions(task_path):
    """{move: source} of the task's teacher solutions, made in memory and never written."""
    return dict(teacher.solutions(cudal1.read(task_path), gen.read_meta(task_path)))


@functools.lru_cache(maxsize=None)
def taught(task_path, rank):
    """The move stage 1's plain pair would teach the task (teacher.taught_move; `rank` a tuple of (move, speed))."""
    return teacher.taught_move(cudal1.read(task_path), list(solutions(task_path).items()), dict(rank))


def nearest(task_path, source):
    """(move, its code lines) nearest to `source` among its task's teacher solutions and 'reference', the
    task's own forward (an answer that restates it, rightly or not, applies no move)."""
    mine = code_lines(source)
    named = [("reference", restated(cudal1.read(task_path)))]
    named += [(m, code_lines(s)) for m, s in solutions(task_path).items()]
    return max(named, key=lambda ms: difflib.SequenceMatcher(None, ms[1], mine, autojunk=False).ratio())


def expressions(analysis):
    """The code an analysis names: its `...` spans, and the list after "of the chain:" (drop_noop's
    phrasing) split at its top-level commas."""
    text = " ".join(analysis.split())
    found = re.findall(r"`([^`]+)`", text)
    chain = re.search(r"of the chain: (.+?)\.(?: |$)", text)
    if chain:
        depth, part = 0, ""
        for ch in chain.group(1) + ",":
            depth += (ch in "([") - (ch in ")]")
            if ch == "," and depth == 0:
                found.append(part.strip())
                part = ""
            else:
                part += ch
    return {e for e in found if e}


STATEMENTS = ("an opening the teacher never writes", "a move the task does not admit",
              "an admitted move; the code writes another",
              "the move written; it names code the teacher's analysis does not",
              "the move written, naming what the teacher's analysis names (or nothing)")


def statement(task_path, analysis, written):
    """(the move an answer's analysis says it makes, teacher.stated_move; that beside what its code writes,
    `written`, the nearest move: one of STATEMENTS). An analysis that names the move its code writes can still name
    the wrong op, say a Sum where the no-op is the LogSumExp over a size-1 dim: code it names that the
    teacher's analysis of that move does not."""
    said, sols = teacher.stated_move(analysis), solutions(task_path)
    if said is None:
        return said, STATEMENTS[0]
    if said not in sols:
        return said, STATEMENTS[1]
    if said != written:
        return said, STATEMENTS[2]
    doc = " ".join(ast.get_docstring(ast.parse(sols[said])).split())
    return said, STATEMENTS[3] if any(e not in doc for e in expressions(analysis)) else STATEMENTS[4]


BINDING = {"duplicate parameter name": "a name declared twice", "redefinition of": "a name declared twice",
           "is undefined": "a name never declared", "was not declared": "a name never declared",
           "arguments, got": "a call's argument count"}  # nvcc's words, g++'s (load_c), and load_cuda's TypeError


OTHER_ATTRIBUTES = "a kernel call passing other attributes"


def call_attributes(lines):
    """The `self.<name>` attributes a kernel call (`_k.<function>(...)`) passes, in order; None without one."""
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return None
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and isinstance(n.func.value, ast.Name) and n.func.value.id == "_k"]
    if not calls:
        return None
    found = [n for a in calls[0].args for n in ast.walk(a) if isinstance(n, ast.Attribute)
             and isinstance(n.value, ast.Name) and n.value.id == "self"]
    return [n.attr for n in sorted(found, key=lambda n: (n.lineno, n.col_offset))]


def failure_kind(r, nearest_lines):
    """Why a failing answer failed: binding a name (BINDING, by the judge's message); else, where its kernel
    call passes other attributes than the nearest teacher solution's (or in another order), OTHER_ATTRIBUTES;
    else its status."""
    msg = r.get("message") or ""
    why = next((why for mark, why in BINDING.items() if mark in msg), None)
    if why:
        return why
    mine, taught = call_attributes(code_lines(r["source"])), call_attributes(nearest_lines)
    if None not in (mine, taught) and mine != taught:  # both call a kernel (a nearest 'reference' calls none)
        return OTHER_ATTRIBUTES
    return r["status"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("answers", nargs="+", help="held_out_answers.jsonl files (train_rl.py), or their .jsonl.gz")
    p.add_argument("--diffs", type=int, default=0, help="show this many distinct failing codes' differing lines")
    p.add_argument("--builds", action="store_true", help="each file is a build of its own (seed-line's): count "
                   "every answer, none taken for a copy of another file's step-0 line")
    p.add_argument("--records", default=",".join(os.path.join(cudal1.ROOT, f) for f in cudal1.H200_RECORDS.split(",")),
                   help="judged teacher records whose move ranking breaks the taught move's ties (comma-separated); "
                   "default: the ones stage 1 ranks with on a GPU, in this checkout")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    rank = tuple(sorted(teacher.move_speed(evaluate.measured_speedups(a.records) or {}).items()))
    if not rank:
        p.error(f"no judged teacher moves in --records {a.records}: the taught move's ties need their ranking")
    on_taught = collections.defaultdict(list)  # {written the taught move: [(correct, log speedup or None)]}
    instead = collections.Counter()  # (taught, written) where they differ
    seen, counts, codes, fails = {}, collections.defaultdict(collections.Counter), collections.defaultdict(set), []
    logs = collections.defaultdict(list)  # log speedups of a move's passing answers
    start = set()  # step-0 answers: make rl-ablation gives every run the start's, counted once (the same
    # answer with the same reading: two builds' step-0 answers of the same code are each read apart, and count)
    said = collections.Counter()  # (statement, correct) of answers whose analysis was kept
    unadmitted = collections.Counter()  # moves stated where the task admits none such
    for path in a.answers:
        for r in read_answers(path):
            if "text" in r and "source" not in r:  # train_sft.py's answers-held_out.jsonl: the answer's code
                r["source"], r["analysis"] = cudal1.parse_answer(r["text"])[0], cudal1.answer_analysis(r["text"])
            if "/levelG/" not in r["task"] or not r.get("source"):
                continue
            task = task_file(path, r["task"])
            key = (os.path.basename(task), cudal1.same_code(r["source"]))
            if r.get("step") == 0 and not a.builds:
                copy = (key, r.get("attempt"), r["status"], r.get("speedup"))
                if copy in start:
                    continue
                start.add(copy)
            if key not in seen:
                seen[key] = nearest(task, r["source"])
                if r["status"] != "ok":
                    fails.append((key[0], seen[key], r))
            move = seen[key][0]
            counts[move]["answers"] += 1
            counts[move][r["status"]] += 1
            codes[move].add(key)
            if r["status"] == "ok" and r.get("speedup"):
                logs[move].append(math.log(r["speedup"]))
            pick = taught(task, rank)
            on_taught[move == pick].append((r["status"] == "ok", math.log(r["speedup"]) if r.get("speedup") else None))
            instead[pick, move] += move != pick
            if r.get("analysis"):
                stated, what = statement(task, r["analysis"], move)
                said[what, r["status"] == "ok"] += 1
                unadmitted[stated] += what == STATEMENTS[1]
    total = sum(c["answers"] for c in counts.values())
    md = ["# Held-out answers by the move they write", "",
          f"- command: `python bench/held_out_moves.py {' '.join(argv if argv is not None else sys.argv[1:])}`",
          f"- {total} answers to generated held-out tasks, {len(seen)} distinct (task, code); a move is the "
          "task's teacher solution nearest in code ('reference': its own forward)", "",
          "| move | answers | distinct codes | correct | speedup when correct (geomean) | failures |",
          "|---|---|---|---|---|---|"]
    for move, c in sorted(counts.items(), key=lambda mc: -mc[1]["answers"]):
        bad = ", ".join(f"{s} {n}" for s, n in c.most_common() if s not in ("answers", "ok"))
        speed = f"{math.exp(sum(logs[move]) / len(logs[move])):.2f}x" if logs[move] else "-"
        md.append(f"| {move} | {c['answers']} | {len(codes[move])} | {c['ok'] / c['answers']:.0%} | {speed} "
                  f"| {bad or '-'} |")
    kinds = collections.Counter(failure_kind(r, lines) for _, (_, lines), r in fails)
    binding = sum(kinds[why] for why in set(BINDING.values()))
    md += ["", f"Of {len(fails)} distinct failing codes, {binding} fail on binding a name before any output is "
           f"compared, {kinds[OTHER_ATTRIBUTES]} pass their kernel other attributes than the nearest teacher "
           "solution's call (or in another order): " + ", ".join(f"{why} {n}" for why, n in kinds.most_common()) + "."]
    if said:
        md += ["", "## What the analyses say", "",
               "The move an answer's analysis opens with (teacher.stated_move), beside the move its code writes; where "
               "they agree, whether the code it names (in backticks, or the no-ops it lists) is what the teacher's "
               "analysis of that move names.", "", "| the analysis states | answers | correct |", "|---|---|---|"]
        for what in STATEMENTS:
            n = said[what, True] + said[what, False]
            if n:
                md.append(f"| {what} | {n} | {said[what, True] / n:.0%} |")
        stated = ", ".join(f"{m} {n}" for m, n in unadmitted.most_common() if n)
        md += ["", f"Moves stated where the task admits no such move: {stated or 'none'}."]
    md += ["", "## Against the taught move", "",
           "The move stage 1's kernel pick would teach each task as its plain pair (teacher.taught_move; held-out "
           "tasks are never taught: an oracle) beside the move the answer writes.", "",
           "| the answer writes | answers | correct | speedup when correct (geomean) |", "|---|---|---|---|"]
    for on, label in ((True, "the taught move"), (False, "another move")):
        rs = on_taught[on]
        if rs:
            got = [x for ok, x in rs if ok and x is not None]
            speed = f"{math.exp(sum(got) / len(got)):.2f}x" if got else "-"
            md.append(f"| {label} | {len(rs)} | {sum(ok for ok, _ in rs) / len(rs):.0%} | {speed} |")
    off = ", ".join(f"{w} for {t} {n}" for (t, w), n in instead.most_common(8) if n)
    md += ["", f"Written instead of the taught move (the most common): {off or 'none'}."]
    for task, (move, lines), r in fails[:a.diffs]:
        diff = [d for d in difflib.unified_diff(lines, code_lines(r["source"]), lineterm="", n=0)
                if not d.startswith(("---", "+++", "@@"))]
        msg = (r.get("message") or "").splitlines() or [""]
        why = next((line.strip() for line in msg[1:] if "error" in line), msg[0])  # a build's own error line
        opening = (r.get("analysis") or "").strip().split("\n")[0]  # what the answer said it would do
        md += ["", f"**{task}**, {move}, {r['status']}: {why[:140]}", *(["", f"> {opening[:200]}"] if opening else []),
               "", "```diff", *diff[:12], *(["..."] if len(diff) > 12 else []), "```"]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

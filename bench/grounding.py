"""Does a policy read its task's names? For each held-out answer (train_sft.py's answers-held_out.jsonl,
or train_rl.py's held_out_answers.jsonl: its first answers),
the attributes its ModelNew reads (self.NAME) that neither the task's Model nor the answer itself
defines: an answer with none is grounded.

    python bench/grounding.py OUT/answers-held_out.jsonl [...]     # one line per file
    python bench/grounding.py /tmp/dev/out/rl-start/held_out_answers.jsonl  # a run unpacked elsewhere

A task path is read from the nearest folder above the answers file that holds it (a run's out/
unpacked anywhere reads its own held-out tasks, not this checkout's out/ of another run), else from
here (kernelbench/).

A policy that writes the names it saw in training for an op, not the ones its task's prompt spells,
calls attributes the task lacks (self.scale for the task's self.multiplier): the failure the CPU
curricula ended on (results/curriculum-cpu-g8000-subclass.md).
"""
import ast
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudal1  # noqa: E402


def assigned(tree):
    """Names assigned as self.NAME or defined as methods or class attributes anywhere in `tree`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and getattr(node.value, "id", "") == "self":
            out.add(node.attr)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.add(item.name)
                elif isinstance(item, ast.Assign):
                    out.update(t.id for t in item.targets if isinstance(t, ast.Name))
    return out


def unknown(task_source, code):
    """Attributes `code` reads as self.NAME that neither the task nor `code` defines (nn.Module's own
    ones, like training, excepted); None when the code does not parse."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    reads = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load)
             and getattr(n.value, "id", "") == "self"}
    known = assigned(ast.parse(task_source)) | assigned(tree) | {"training", "parameters", "modules", "buffers"}
    return sorted(reads - known)


def task_file(answers_path, task):
    """`task` (a path from the repository root of the run) from the nearest folder above
    `answers_path` that holds it, else as it reads from here."""
    d = os.path.dirname(os.path.abspath(answers_path))
    while True:
        if os.path.exists(os.path.join(d, task)):
            return os.path.join(d, task)
        if d == os.path.dirname(d):
            return task
        d = os.path.dirname(d)


def main(paths):
    for path in paths:
        rows = [r for r in map(json.loads, open(path)) if r.get("attempt", 1) == 1]
        counts, missing = collections.Counter(), collections.Counter()
        for r in rows:
            code = r["source"] if "source" in r else cudal1.parse_answer(r["text"])[0]
            bad = None if code is None else unknown(open(task_file(path, r["task"])).read(), code)
            group = "level2" if "/level2/" in r["task"] else "generated"
            counts[group, "answers"] += 1
            counts[group, "parsed"] += bad is not None
            counts[group, "grounded"] += bad == []
            missing.update(bad or [])
        groups = sorted({g for g, _ in counts})
        print(f"{path}: " + "; ".join(f"{g} {counts[g, 'grounded']} of {counts[g, 'answers']} answers read only names "
                                       f"their task or the answer defines ({counts[g, 'parsed']} parsed)" for g in groups)
              + f"; commonest unknown: {', '.join(f'{k} ({v})' for k, v in missing.most_common(6)) or 'none'}")


if __name__ == "__main__":
    main(sys.argv[1:])

"""Does the policy compose when asked to rewrite its own answer? Read on the CPU, the code checked here.

    python bench/refine_probe.py --init out/sft --start out/rl-start --out results/refine-probe-cpu.md

No run composes two moves (0% of correct answers, every arm and seed), and the held-out ceiling puts the
headroom past one move in composing: most often a no-op dropped so the rest fuses or folds. The policy was
taught one move on a task. Here each held-out generated task whose start answers (the greedy one and the
sampled ones, --start's held_out_answers.jsonl, as measured on the GPU) include a correct PyTorch-level
`ModelNew(Model)` that overrides forward alone becomes a new task: the task with that forward in place of
its own (cudal1.refined_task, the fastest such answer). The --init policy answers it greedily, to the plain
prompt, and the report says what it wrote: whether it parses, whether its code is the program it was given
(a copy), which moves it shows beyond the given program's, and whether it computes the original task's
output on the CPU (the judge's Worker and its correctness trials, fused CUDA through tests/cuda_cpu.py's
emulator, at batch 2).
Speed needs the GPU. The 27.8M policy on a 2-core CPU: ~40 s in all; with --samples 8, ~5.5 min.
"""
import argparse
import ast
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--init", required=True, help="the checkpoint the start line was measured on")
parser.add_argument("--start", required=True, help="a train_rl.py --steps 0 run's --out (held_out_answers.jsonl, "
                    "held_out/levelG)")
parser.add_argument("--max-new-tokens", type=int, default=0, help="answer cap; 0: the run's")
parser.add_argument("--docstring", choices=("keep", "drop"), default="keep", help="drop: the refined program without "
                    "the task's docstring, which still names the ops the given answer removed")
parser.add_argument("--samples", type=int, default=0, help="K: each refined program also gets K answers sampled at the "
                    "run's temperature and top-p (what an RL step's group of G draws from), tallied per task")
parser.add_argument("--out", default="", help="a markdown report here too")
args = parser.parse_args()

settings = json.load(open(os.path.join(args.start, "settings.json")))
target = json.loads(open(os.path.join(args.start, "held_out.jsonl")).readline())["device"]
tasks = {os.path.basename(p): p for p in glob.glob(os.path.join(args.start, "held_out", "levelG", "*.py"))}
given = {}  # task file -> (speedup, attempt, answer source, refined task source): its fastest refinable answer
best = {}   # task file -> the fastest correct start answer of any kind
for a in map(json.loads, open(os.path.join(args.start, "held_out_answers.jsonl"))):
    name = os.path.basename(a["task"])
    if a["step"] != 0 or name not in tasks or a["status"] != "ok" or a["attempt"] == 2:  # 2: the second try
        continue
    best[name] = max(best.get(name, 0), a["speedup"])
    refined = cudal1.refine(cudal1.read(tasks[name]), a["source"])
    if refined and args.docstring == "drop":
        refined = cudal1.solution_code(refined) + "\n"
    if refined and a["speedup"] > given.get(name, (0,))[0]:
        given[name] = (a["speedup"], a["attempt"], a["source"], refined)
names = sorted(given, key=lambda n: int(n.split("_")[0]))
print(f"{len(names)} of {len(tasks)} held-out generated tasks have a refinable correct start answer", flush=True)
if not names:
    raise SystemExit("nothing to rewrite: no start answer is a correct PyTorch-level ModelNew(Model) overriding "
                     "forward alone")

model, tok, _ = cudal1.load_checkpoint(args.init, "cpu")
model.eval().requires_grad_(False)
t0 = time.time()
prompts = [tok.encode_prompt(cudal1.plain_prompt(given[n][3], target)) for n in names]
cap = args.max_new_tokens or settings["max_new_tokens"]
outs = cudal1.generate(model, prompts, 1, cap, 0.0, end_id=tok.end_id)
outs = [o[0] if o and isinstance(o[0], list) else o for o in outs]
print(f"{len(names)} greedy answers in {time.time() - t0:.0f}s", flush=True)
drawn = cudal1.generate(model, prompts, args.samples, cap, settings["temperature"], settings["top_k"], settings["top_p"],
                        torch.Generator().manual_seed(0), tok.end_id) if args.samples else [[] for _ in names]


def forward_of(source):
    """The text of ModelNew's (or else Model's) forward, comments and layout gone: what a rewrite changed."""
    tree = ast.parse(source)
    for cls in ("ModelNew", "Model"):
        for n in tree.body:
            if isinstance(n, ast.ClassDef) and n.name == cls:
                for f in n.body:
                    if isinstance(f, ast.FunctionDef) and f.name == "forward":
                        return [ast.unparse(s) for s in f.body]
    return []


CHECK = """
import sys
sys.path[:0] = sys.argv[1:3]
import cudal1, cuda_cpu, evaluate
cudal1.load_cuda = cuda_cpu.load_cuda
try:
    worker = evaluate.Worker(sys.argv[3], sys.argv[4], {**evaluate.DEFAULTS, "device": "cpu"})
    for k in range(2):
        worker.checked_trial(k)
    print("ok")
except Exception as e:  # a build or run failure, a wrong output or a cheat is a verdict here
    print(f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}")
"""


def check(task_path, source, timeout=300):
    """'ok', or why the answer fails: the judge's own Worker (its seeding, state copy, rules and strict
    comparison; evaluate.Worker), its correctness trials alone, on the task at batch 2 with load_cuda the
    CPU emulator's; in a process of its own, as the judge runs each answer, so what one answer leaves
    behind (a default dtype, a patched function) never reaches the next."""
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("task.py", "sol.py")]
        for path, text in zip(paths, (re.sub(r"^batch_size = \d+$", "batch_size = 2", cudal1.read(task_path),
                                             flags=re.M), source)):
            with open(path, "w") as f:
                f.write(text)
        try:
            p = subprocess.run([sys.executable, "-c", CHECK, ROOT, os.path.join(ROOT, "tests"), *paths],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return f"no verdict in {timeout} s"
    said = p.stdout.strip().splitlines()
    return said[-1] if said else f"the check died: {(p.stderr.strip().splitlines() or ['?'])[-1][:80]}"


def verdict_of(n, text):
    """(the verdict: 'copy', 'ok' or why it fails, the move marks it shows beyond the given answer's, its code)
    of an answer to task n's refined program; (None, why it does not parse, None) for one that does not."""
    code, why = cudal1.parse_answer(text)
    if code is None:
        return None, why, None
    src, program = given[n][2:]
    if cudal1.restates(cudal1.read(tasks[n]), program, code):
        return "copy", [], code  # the given program again, however restated
    return check(tasks[n], code), sorted(cudal1.moves_shown(code) - cudal1.moves_shown(src)), code


kept = []  # every answer with what it was given, beside the report (--out's .jsonl)
rows, tally, sampled = [], {"parse": 0, "copy": 0, "new moves": 0, "ok": 0, "ok new": 0}, []
for n, ids, more in zip(names, outs, drawn):
    speed, attempt, src, refined = given[n]
    kept.append(dict(task=n, given=src, answer=tok.decode(ids), sampled=[tok.decode(m) for m in more]))
    verdict, added, code = verdict_of(n, tok.decode(ids))
    print(n, verdict, added, flush=True)
    if more:  # parsed, copies, passing, passing with a new mark, of K
        reads = [verdict_of(n, tok.decode(m)) for m in more]
        sampled.append((n, sum(v is not None for v, _, _ in reads), sum(v == "copy" for v, _, _ in reads),
                        sum(v == "ok" for v, _, _ in reads), sum(v == "ok" and bool(a) for v, a, _ in reads)))
        print("  sampled:", sampled[-1][1:], flush=True)
    if verdict is None:
        rows.append((n, speed, attempt, "-", added[:60], "", ""))
        continue
    tally["parse"] += 1
    tally["copy"] += verdict == "copy"
    tally["new moves"] += bool(added)
    tally["ok"] += verdict == "ok"
    tally["ok new"] += verdict == "ok" and bool(added)
    gone = [x for x in forward_of(refined) if x not in forward_of(code)]
    rows.append((n, speed, attempt, ", ".join(added) or "none", verdict, len(gone), best[n]))

lines = ["# Rewriting its own answer: does the policy compose? (CPU probe)", "",
         f"- command: `python bench/refine_probe.py --init {args.init} --start {args.start} "
         f"--docstring {args.docstring}" + (f" --samples {args.samples}`" if args.samples else "`"),
         f"- {len(names)} of {len(tasks)} held-out generated tasks have a correct PyTorch-level start answer that "
         f"overrides forward alone (greedy or sampled, as the GPU measured them at {target}); each task rewritten "
         f"with the fastest one's forward, and answered greedily to the plain prompt",
         f"- parsed {tally['parse']}, a copy of the given program {tally['copy']}, showing a move's mark the given "
         f"answer does not {tally['new moves']} (cudal1.moves_shown: a dropped no-op or a reorder leaves none); "
         f"passes the judge's correctness trials on the CPU {tally['ok']} ({tally['ok new']} of them with a new mark)",
         "",
         "| task | given answer's speedup (attempt: 1 greedy, 3+ sampled) | new move marks | CPU check | forward "
         "statements of the given program gone | the task's best start answer |", "|---|---|---|---|---|---|"]
lines += [f"| {n} | {s:.2f}x ({a}) | {m} | {v} | {g} | {b if b == '' else f'{b:.2f}x'} |"
          for n, s, a, m, v, g, b in rows]
if sampled:
    k = args.samples
    lines += ["", f"{k} answers sampled to each refined program (temperature {settings['temperature']}, top-p "
              f"{settings['top_p']}): of the {k * len(sampled)}, {sum(r[1] for r in sampled)} parse, "
              f"{sum(r[2] for r in sampled)} copy the given program, {sum(r[3] for r in sampled)} pass, "
              f"{sum(r[4] for r in sampled)} of them with a new mark; tasks with a passing one with a new mark: "
              f"{sum(r[4] > 0 for r in sampled)}", "",
              "| task | parsed | copies | pass | pass with a new mark |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {a} | {b} | {c} | {d} |" for n, a, b, c, d in sampled]
print("\n".join(lines[3:5]))
cudal1.write_markdown(lines, args.out)
if args.out:
    with open(os.path.splitext(args.out)[0] + ".jsonl", "w") as f:
        f.writelines(json.dumps(k) + "\n" for k in kept)

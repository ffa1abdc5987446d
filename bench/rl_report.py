"""The paper's ablation as a table: contrastive RL against --plain RL, from train_rl.py runs (one or
more seeds per arm).

    python bench/rl_report.py out/rl-contrastive out/rl-plain --out results/learning-h200.md
    (or `make rl-ablation GPU=h200 SEEDS="1 2 3"`, which makes every run from the same out/sft first)

Reads each run's log.jsonl (one line per step), bank.jsonl (every judged answer, with the judge's
environment), settings.json (the settings) and held_out.jsonl (the held-out split measured during
the run, --held-out-tasks), and writes Markdown: the settings, per-run rates, reward per step drawn
as a text chart (each arm's mean over its seeds), the held-out geomean of every run at its first and
last measurement with a picture of it against the RL step (OUT.svg, one line per run), and the best
speedup each run found per task. Runs cut short by --time-limit are compared over the steps all
reached, and the table says so.
"""
import argparse
import collections
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cudal1  # noqa: E402
from kernelbench import generate as gen, teacher  # noqa: E402
from move_dose import named, openers  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
parser.add_argument("runs", nargs="+", help="train_rl.py --out folders; the first is called contrastive if not --plain")
parser.add_argument("--out", default="", help="Markdown file to write; empty: print it")
parser.add_argument("--height", type=int, default=12, help="rows of the reward chart")
args = parser.parse_args()


def jsonl(path):
    return [json.loads(line) for line in open(path) if line.endswith("\n")] if os.path.exists(path) else []


def admitted(run):
    """{levelG/NAME.py: the moves the teacher writes for it} for the fresh generated tasks a run trained on
    (train_rl.py writes them under its fresh/ folder); empty for a run on other tasks."""
    folder = os.path.join(run, "fresh", "levelG")
    files = sorted(f for f in os.listdir(folder) if f.endswith(".py")) if os.path.isdir(folder) else []
    paths = {f"levelG/{f}": os.path.join(folder, f) for f in files}
    return {key: {m for m, _ in teacher.solutions(cudal1.read(p), gen.read_meta(p))} for key, p in paths.items()}


def load(path):
    settings = json.load(open(os.path.join(path, "settings.json")))
    arm = "plain" if settings["plain"] else "contrastive"
    return dict(path=path, arm=arm, log=jsonl(os.path.join(path, "log.jsonl")),
                held=jsonl(os.path.join(path, "held_out.jsonl")), settings=settings,
                answers=jsonl(os.path.join(path, "held_out_answers.jsonl")),
                sampled=jsonl(os.path.join(path, "answers.jsonl")),  # every training answer with its reward
                admits=admitted(path),
                bank=cudal1.Bank(os.path.join(path, "bank.jsonl"), write=False))


def svg(series, title, ylabel, path, w=640, h=360):
    """A line chart of {name: [(x, y)]} as an SVG file: contrastive runs blue, plain orange, each
    seed its own dash; a dotted line at y = 1."""
    pts = [p for s in series.values() for p in s]
    x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts) or 1
    y0, y1 = min(min(y for _, y in pts), 1.0), max(max(y for _, y in pts), 1.0)
    y0, y1 = (y0 - 0.05, y1 + 0.05) if y1 - y0 < 0.1 else (y0, y1)
    L, R, T, B = 60, 180, 30, 40  # margins
    X = lambda x: L + (x - x0) / ((x1 - x0) or 1) * (w - L - R)
    Y = lambda y: h - B - (y - y0) / (y1 - y0) * (h - T - B)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>', f'<text x="{L}" y="18" font-size="14">{title}</text>',
           f'<line x1="{L}" y1="{h - B}" x2="{w - R}" y2="{h - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{h - B}" stroke="black"/>',
           f'<line x1="{L}" y1="{Y(1):.1f}" x2="{w - R}" y2="{Y(1):.1f}" stroke="gray" stroke-dasharray="2,3"/>',
           f'<text x="{(L + w - R) / 2:.0f}" y="{h - 8}" text-anchor="middle">RL step</text>',
           f'<text x="14" y="{(T + h - B) / 2:.0f}" transform="rotate(-90 14 {(T + h - B) / 2:.0f})" '
           f'text-anchor="middle">{ylabel}</text>']
    for v in (y0, (y0 + y1) / 2, y1):
        out.append(f'<text x="{L - 6}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:.2f}x</text>')
    for v in sorted({x0, x1, (x0 + x1) // 2}):
        out.append(f'<text x="{X(v):.1f}" y="{h - B + 16}" text-anchor="middle">{v}</text>')
    dashes = ["", "6,3", "2,2", "8,3,2,3"]
    for i, (name, s) in enumerate(series.items()):
        color = "#1f5fbf" if name.startswith("contrastive") else "#e07b00"
        d = " ".join(f"{X(x):.1f},{Y(y):.1f}" for x, y in s)
        out.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2" '
                   f'stroke-dasharray="{dashes[i % len(dashes)]}"/>')
        out.append(f'<line x1="{w - R + 10}" y1="{T + 18 * i}" x2="{w - R + 34}" y2="{T + 18 * i}" stroke="{color}" '
                   f'stroke-width="2" stroke-dasharray="{dashes[i % len(dashes)]}"/>')
        out.append(f'<text x="{w - R + 40}" y="{T + 18 * i + 4}">{name}</text>')
    with open(path, "w") as f:
        f.write("\n".join(out + ["</svg>"]) + "\n")


def chart(series, height):
    """Text chart of several {name: [y per step]}; one letter per series, '*' where they meet."""
    ys = [y for s in series.values() for y in s]
    lo, hi = min(ys), max(ys)
    span = (hi - lo) or 1.0
    width = max(len(s) for s in series.values())
    grid = [[" "] * width for _ in range(height)]
    letter = {}  # the name's first letter, upper case, then lower case, then a digit where another took it
    for name in series:
        letter[name] = next(c for c in (name[0].upper(), name[0].lower(), *"123456789") if c not in letter.values())
    for name, s in series.items():
        for x, y in enumerate(s):
            row = height - 1 - round((y - lo) / span * (height - 1))
            grid[row][x] = letter[name] if grid[row][x] in (" ", letter[name]) else "*"
    lines = [f"{hi - (hi - lo) * r / (height - 1):+6.2f} |" + "".join(row) for r, row in enumerate(grid)]
    lines.append("       +" + "-" * width)
    lines.append(f"        steps 1 to {width}, one column each")
    legend = ", ".join(f"{letter[n]} = {n}" for n in series)
    return "\n".join(lines + [f"        mean reward per step, each arm's mean over its seeds ({legend}, * = several)"])


runs = [load(p) for p in args.runs]
# a setting the runs differ in beyond the seed and the prompt (e.g. rl_cover) makes a variant an arm of its own,
# named by it in every table, chart, mean and picture: "contrastive rl_cover=3 seed 1"; "?" where a run predates
# the flag (what it ran with then is not recorded). Where and how long a run ran are not variants. A run whose
# settings lack a flag in UNRECORDED ran at that value: a removed flag's value from then on, an added flag's
# behaviour before it existed
UNRECORDED = dict(distill=0.0, distill_rows="best", ppo_epochs=1, clip_eps=0.0, kl_coef=0.0,
                  advantage="group", refine=0)
RUNTIME = ("seed", "plain", "out", "device", "dtype", "judge_jobs", "save_every", "cuda_graphs", "steps", "time_limit",
           "held_out_every", "timeout")
setting = lambda r, k: r["settings"].get(k, UNRECORDED.get(k, "?"))
varied = sorted(k for k in set().union(*(r["settings"] for r in runs)) if k not in RUNTIME
                and len({json.dumps(setting(r, k)) for r in runs}) > 1)
for r in runs:
    r["arm"] += "".join(f" {k}={setting(r, k)}" for k in varied)
    r["name"] = f"{r['arm']} seed {r['settings']['seed']}"
steps = min(len(r["log"]) for r in runs)  # compare over the steps every run reached
# the runs' own judgements (step >= 0), not the seeds judged earlier, say where and at which commit
records = [e["record"] for r in runs for es in r["bank"].entries.values() for e in es if e["step"] >= 0]
env = next((rec["env"] for rec in records if rec.get("env")), {})  # the judge's: commit, GPU, driver, torch
commits = sorted({rec["env"]["commit"] for rec in records if rec.get("env", {}).get("commit")})  # runs added later
tolerance = next((rec["tolerance"] for rec in records if rec.get("tolerance")), "?")
s0 = runs[0]["settings"]
md = [f"# Contrastive vs plain RL ({env.get('gpu', '?')})", "",
      f"{len(runs)} train_rl.py runs "
      + (f"with the same budget; the arms differ in the prompt (earlier solutions with their measured speedups, or "
         f"none) and in {', '.join(varied)}, as each run's name says." if varied else
         "from the same stage-2 checkpoint, the same tasks and the same budget; the only difference between the arms "
         "is the prompt (earlier solutions with their measured speedups, or none)."), "",
      f"- command: `python bench/rl_report.py {' '.join(args.runs)}`; runs: "
      + "; ".join(f"`{r['path']}` ({r['name']}, {len(r['log'])} steps, "
                  f"{r['log'][-1]['elapsed_s'] / 60 if r['log'] else 0:.1f} min)"
                  for r in runs),
      f"- init `{s0['init']}`; {s0['tasks_per_step']} tasks/step, G={s0['num_samples']}"
      + ("" if "lr" in varied else f", lr {s0['lr']:g}")
      + f", temperature {s0['temperature']}, adv clip {s0['adv_clip']}, judge trials {s0['trials']} iters {s0['iters']}"
      + (f", fresh tasks covering each move {s0['rl_cover']} time(s) (--rl-cover)" if s0.get("rl_cover") and "rl_cover" not in varied else ""),
      f"- commit{'s' if len(commits) > 1 else ''} {', '.join(commits) or '?'}, GPU {env.get('gpu', '?')}, "
      f"driver {env.get('driver', '?')}, "
      f"torch {env.get('torch', '?')}, tolerance {tolerance}",
      f"- compared over the first {steps} steps (the fewer any run reached)", "",
      "| run | answers | parse | compile | correct | copies of a seed | reward, first half | reward, second half | "
      "composing 2+ moves, first half -> second half | constant outputs, second half (correct) | "
      "after a correct answer: same move / another (correct) | exemplars shown | "
      "groups with a signal, first half -> second half (codes each, whole run) | "
      "known code, first half -> second half |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
def composed(log, n):
    """Of the correct answers of these steps, the share whose code shows two or more of the teacher's
    moves (cudal1.moves_shown); 0 for logs written before it was counted."""
    good = [l["correct"] * m for l, m in zip(log, n)]
    return sum(l.get("composed", 0) * g for l, g in zip(log, good)) / max(1, sum(good))


def first_steps(sampled):
    """{task: the step of its first answer}: a task's first visit (answers.jsonl is in step order)."""
    first = {}
    for a in sampled:
        first.setdefault(a["task"], a["step"])
    return first


def by_visit(sampled, steps, admits, known, seeded):
    """(answers, correct share, mean reward, off-move share (its correct share), groups with a signal) of a
    run's training answers at each task's first step, then at its later ones (of the compared steps): a
    contrastive prompt shows the run's own earlier answers only from a task's second step on; a plain prompt
    never does, so plain is the control. Off-move: answers whose first line names a move (move_dose.named
    against `known`) the teacher does not write for their task (`admits`); '-' where no task's moves are
    known. A group (one task's answers at one step) has a signal where any answer's applied advantage is
    nonzero; '-' for answers written before train_rl recorded it. Choices: see choices(); '-' where moves
    are unknown or no advantage was recorded. Pushed up: see beats_best() (`seeded`: each task's best seed)."""
    first = first_steps(sampled)
    beat = beats_best(sampled, seeded)
    out = []
    for later in (False, True):
        xs = [a for a in sampled if a["step"] < steps and (a["step"] > first[a["task"]]) == later]
        off = [a for a in xs if a["task"] in admits and named(a["text"], known) not in admits[a["task"]] | {"other"}]
        groups = {}
        for a in xs:
            groups.setdefault((a["task"], a["step"]), []).append(a)
        out.append(f"{len(xs)} | {sum(a['status'] == 'ok' for a in xs) / max(1, len(xs)):.0%} | "
                   + (f"{statistics.mean(a['reward'] for a in xs):+.2f}" if xs else "-") + " | "
                   + (f"{len(off) / len(xs):.0%} ({sum(a['status'] == 'ok' for a in off) / max(1, len(off)):.0%})"
                      if xs and any(a["task"] in admits for a in xs) else "-") + " | "
                   + (f"{sum(any(a['adv'] for a in g) for g in groups.values()) / len(groups):.0%}"
                      if groups and all("adv" in a for a in xs) else "-") + " | "
                   + ("{} ({} / {})".format(*choices(groups.values(), known))
                      if known and any(a["task"] in admits for a in xs) and all("adv" in a for a in xs) else "-")
                   + " | " + (pushed(xs, beat) if all("adv" in a for a in xs) else "-"))
    return " | ".join(out)


def pushed(xs, beat):
    """'n (advantage) / n (advantage)': of answers `xs`, those pushed up that beat their task's best, then
    those that did not (beats_best)."""
    mine = lambda b: [a for a in xs if beat.get(id(a)) is b]
    return " / ".join(f"{len(mine(b))} ({sum(a['adv'] for a in mine(b)):.1f})" for b in (True, False))


def beats_best(sampled, seeded=None):
    """{id(answer): whether it beat its task's best so far} for the answers with a positive applied
    advantage: the best is the top reward of the run's correct answers at the task's earlier steps and of
    its seeds (`seeded`: task -> reward), the reference's 0 (1.00x) before any. Under --advantage gain an
    answer that beats eager is pushed up even where it is no faster than what the task already had (at a
    contrastive prompt's later visits: what the prompt showed); --advantage improve pushes none of those.
    A resumed run's bank can hold steps its answers.jsonl no longer does: their bests are not seen here."""
    best, out, step = collections.defaultdict(float, seeded or {}), {}, None
    done = []  # the current step's answers, which join the best only once the step is over
    for a in sampled + [None]:
        if a is None or a["step"] != step:
            for d in done:
                if d["status"] == "ok":
                    best[d["task"]] = max(best[d["task"]], d["reward"])
            done, step = [], a and a["step"]
        if a is None:
            break
        if a.get("adv", 0) > 0:
            out[id(a)] = a["reward"] > best[a["task"]]
        done.append(a)
    return out


def refined_row(sampled, steps, seeded):
    """A --refine run's later-visit answers (a task's steps after its first), to the task rewritten with a bank
    answer (train_rl.program: the fastest correct one faster than eager that cudal1.refined_task takes) and to the
    task itself: for each, answers (their share of the later ones), correct, known code (a restated program is its
    solution's code), and those pushed up that beat the task's best (beats_best). One beating a refined prompt's
    best has mostly added a move to the one its program holds, a composition whether or not its code shows a mark
    of it; but it may also drop the program for a move of its own, or be its code read faster."""
    first = first_steps(sampled)
    beat = beats_best(sampled, seeded)
    later = [a for a in sampled if first[a["task"]] < a["step"] < steps]
    cells = []
    for refined in (True, False):
        xs = [a for a in later if bool(a.get("refined")) == refined]
        up = [a for a in xs if beat.get(id(a))]
        cells.append(f"{len(xs)} ({len(xs) / max(1, len(later)):.0%}) | "
                     f"{sum(a['status'] == 'ok' for a in xs) / max(1, len(xs)):.0%} | "
                     f"{sum(bool(a.get('known')) for a in xs) / max(1, len(xs)):.0%} | "
                     f"{len(up)} on {len({a['task'] for a in up})} tasks ({len(up) / max(1, len(xs)):.1%})")
    return " | ".join(cells)


def choices(groups, known):
    """(groups with a choice, of them those that pushed the best move most, those that pushed another): where
    the update could teach which move to write, and which way it did. A move is named by an answer's opening
    (move_dose.named; 'other' is left out everywhere), and a code (cudal1.same_code) by its first answer, so
    one code under two openings is no choice. A group has a choice where its correct codes name two or more
    moves; its best moves are those of the correct codes with the top reward; a move's push is the signed sum
    of the advantages applied to its answers, and a tie for the most counts for the best move. The rest pushed
    no move up (under --advantage gain: no new code beat eager; improve: none beat its task's best)."""
    n = right = wrong = 0
    for g in groups:
        moves, named_as = [], {}
        for a in g:
            source, _ = cudal1.parse_answer(a["text"])
            moves.append(named_as.setdefault(cudal1.same_code(source) if source else id(a), named(a["text"], known)))
        ok = [(a, m) for a, m in zip(g, moves) if a["status"] == "ok" and m != "other"]
        if len({m for _, m in ok}) < 2:
            continue
        top_reward = max(a["reward"] for a, _ in ok)
        best = {m for a, m in ok if a["reward"] == top_reward}
        push = collections.Counter()
        for a, m in zip(g, moves):
            if m != "other":
                push[m] += a["adv"]
        top, best_push = max(push.values()), max(push[m] for m in best)
        n, right, wrong = n + 1, right + (top > 0 and best_push == top), wrong + (top > 0 and best_push < top)
    return n, right, wrong


def by_move(sampled, steps, known, admits):
    """Per move an answer's analysis opens with (move_dose.named against `known`), over the compared steps'
    first and second half: answers; in brackets the share of the answers to the tasks the move holds for
    (the teacher writes it for them, `admits`) that open with it, and the same share over the other tasks
    ('-' where no task's moves are known): a push that teaches when to use a move raises the first, one that
    teaches the move alone both. Shares, not counts: a half may visit a task more often than the other.
    Then mean reward, mean reward minus its group's mean (a group: one task's answers at one step), and
    the mean advantage train_rl applied ('-' for runs before answers.jsonl recorded it). The update
    pushes each answer's tokens by its applied advantage; reward says how good the move is. Moves with
    fewer than 5 answers in both halves are left out."""
    half = max(1, steps // 2)
    xs = [a for a in sampled if a["step"] < steps]
    group = collections.defaultdict(list)
    for a in xs:
        group[(a["step"], a["task"])].append(a["reward"])
    mean = {g: statistics.mean(rs) for g, rs in group.items()}
    opens = [named(a["text"], known) for a in xs]  # the move each answer opens with, named once
    halves = collections.defaultdict(lambda: ([], []))  # move -> (first half's answers, second half's)
    for a, m in zip(xs, opens):
        halves[m][a["step"] >= half].append(a)

    def shares(move, later):
        """'holds% / elsewhere%': of the half's answers to the tasks the move holds for, the share that opens
        with it, and the same of the answers to the other tasks; '-' for a side with no answers, and alone
        where no task's moves are known."""
        every = [(a, m) for a, m in zip(xs, opens) if (a["step"] >= half) == later and a["task"] in admits]
        if not every:
            return "-"

        def rate(holds):
            side = [m for a, m in every if (move in admits[a["task"]]) == holds]
            return f"{side.count(move) / len(side):.0%}" if side else "-"
        return f"{rate(True)} / {rate(False)}"

    def cell(move, answers, later):
        if not answers:
            return "0 | - | - | -"
        avg = lambda f: f"{statistics.mean(f(a) for a in answers):+.2f}"
        relative = avg(lambda a: a["reward"] - mean[(a["step"], a["task"])])
        applied = avg(lambda a: a["adv"]) if all("adv" in a for a in answers) else "-"
        return f"{len(answers)} ({shares(move, later)}) | {avg(lambda a: a['reward'])} | {relative} | {applied}"
    ranked = sorted(halves.items(), key=lambda kv: -len(kv[1][0]) - len(kv[1][1]))  # most answers first
    return [(m, f"{cell(m, first, False)} | {cell(m, second, True)}") for m, (first, second) in ranked
            if max(len(first), len(second)) >= 5]


def kept_geomean(answers, step, tasks=None):
    """The geomean at `step` of the held-out generated tasks answered then (or of `tasks`, held_key names, of
    those), from their greedy answers (held_out_answers.jsonl, attempt 1), each task at the better of 1.00x
    and its answer: a slow pass falls back to the program it rewrites, as a failure does (the held-out line
    counts a failure 1.00x and a slow pass below it, so an answer that breaks a slow one raises that line).
    None where there is no such answer."""
    first = {cudal1.held_key(a["task"]): a for a in answers if a["step"] == step and a["attempt"] == 1}
    xs = [a["speedup"] if a["status"] == "ok" and a["speedup"] else 1.0 for k, a in first.items()
          if k.startswith("levelG/") and (tasks is None or k in tasks)]
    return math.exp(sum(math.log(max(1.0, x)) for x in xs) / len(xs)) if xs else None


def keep_or_switch(entries):
    """Of the parsed answers to a task the run already had a correct answer for (at an earlier step),
    the shares whose moves (cudal1.moves_shown) are all among those earlier answers' ("same move") and
    that have a move none of them has ("another"), each with the share of it the judge passed; answers
    without a move's mark are in neither. A contrastive prompt shows such an earlier answer."""
    correct = {}  # task -> [(step, moves)] of its correct answers
    for e in entries:
        if e["record"].get("correct"):
            correct.setdefault(e["task"], []).append((e["step"], cudal1.moves_shown(e["source"])))
    after, counts = 0, {"same": [0, 0], "another": [0, 0]}
    for e in entries:
        earlier = [m for k, m in correct.get(e["task"], []) if k < e["step"]]
        if not earlier:
            continue
        after += 1
        moves = cudal1.moves_shown(e["source"])
        if moves:
            c = counts["same" if moves <= set().union(*earlier) else "another"]
            c[0] += 1
            c[1] += bool(e["record"].get("correct"))
    return " / ".join(f"{n / max(1, after):.0%} ({ok / max(1, n):.0%})" for n, ok in counts.values())


for r in runs:
    log = r["log"][:steps]
    n = [sum(l["statuses"].values()) for l in log]
    rate = lambda k: sum(l[k] * m for l, m in zip(log, n)) / max(1, sum(n))
    half = max(1, steps // 2)
    halves = lambda k: (f"{statistics.mean(l[k] for l in log[:half]):.0%} -> "
                        f"{statistics.mean(l[k] for l in log[half:] or log):.0%}")
    given = {t: r["bank"].sources(t, given=True) for t in r["bank"].entries}
    parsed = [e for es in r["bank"].entries.values() for e in es if 0 <= e["step"] < steps]  # one entry per parsed answer
    good = [e for e in parsed if e["record"].get("correct")]
    copies = sum(cudal1.same_code(e["source"]) in given[e["task"]] for e in good) / max(1, len(good))
    late = [e for e in parsed if e["step"] >= half]
    const = [e for e in late if "constant_output" in cudal1.moves_shown(e["source"])]
    md.append(f"| {r['name']} | {sum(n)} | {rate('parsed'):.0%} | {rate('compiled'):.0%} | {rate('correct'):.0%} | "
              f"{copies:.0%} | "
              f"{statistics.mean(l['reward_mean'] for l in log[:half]):+.2f} | "
              f"{statistics.mean(l['reward_mean'] for l in log[half:] or log):+.2f} | "
              f"{composed(log[:half], n[:half]):.0%} -> {composed(log[half:] or log, n[half:] or n):.0%} | "
              f"{len(const) / max(1, len(late)):.0%} ({sum(bool(e['record'].get('correct')) for e in const)}) | "
              f"{keep_or_switch(parsed)} | "
              f"{statistics.mean(l['exemplars'] for l in log):.1f} | "
              + (f"{halves('signal')} ({statistics.mean(l['distinct'] for l in log):.1f}) | "
                 if all("signal" in l for l in log) else "- | ")
              + (f"{halves('known')} |" if all("known" in l for l in log) else "- |"))
md += ["", "Reward: clip(log2 speedup, -1, 3) for a correct answer, -2 for any failure (cudal1.reward).", "",
       "```text", chart({arm: [statistics.mean(r["log"][i]["reward_mean"] for r in runs if r["arm"] == arm)
                               for i in range(steps)] for arm in dict.fromkeys(r["arm"] for r in runs)}, args.height),
       "```", ""]
if all(r["sampled"] for r in runs):
    md += ["By visit (answers.jsonl): a task's answers at its first step in the run, when a contrastive prompt "
           "shows only what the bank started with (the reference), against those at its later steps, when it "
           "also shows the run's own earlier correct answers where it has any; plain prompts show neither, so plain "
           "is the control. Off-move: answers whose analysis opens with a move the teacher does not write for "
           "their task (named by its first line's leading words against the teacher's; a fresh generated task's "
           "moves are known), and in brackets the share of them correct: a policy claiming a move where it does "
           "not hold. Groups with a signal: a task's answers at one step of which any got a nonzero advantage "
           "(below); at later steps they are mostly the run's own earlier code, which earns none. Choices: "
           "groups whose correct answers (one per code) open with two or more moves, the only ones that can teach "
           "which move to write, and in brackets those whose applied advantages, summed per move, pushed the move "
           "of their best answer most / another move most (the rest pushed no move up: under --advantage gain no "
           "new code beat eager; improve: none beat its task's best). Pushed up: answers given a positive "
           "advantage that beat their task's best so far "
           "(the top reward of its correct answers at earlier steps and of its seeds; the reference's 1.00x before "
           "any) / that did not, and the advantage applied to each: under --advantage gain an answer no faster than "
           "what the task already had (what a contrastive prompt shows at a later step) is pushed up if it beats "
           "eager; under --advantage improve it is not.",
           "", "| run | first step: answers | correct | reward | off-move (correct) | groups with a signal "
           "| choices (best move / another pushed most) | pushed up: beat the task's best / not (advantage) "
           "| later steps: answers | correct | reward | off-move (correct) "
           "| groups with a signal | choices (best move / another pushed most) "
           "| pushed up: beat the task's best / not (advantage) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    known = openers("gpu") if any(r["admits"] for r in runs) else []  # how each move's teacher answer opens
    seeds = lambda r: {t: max(cudal1.reward(e["record"]) for e in es if e["step"] < 0)  # the reference's 0, a seed's
                       for t, es in r["bank"].entries.items() if any(e["step"] < 0 for e in es)}
    md += [f"| {r['name']} | {by_visit(r['sampled'], steps, r['admits'], known, seeds(r))} |" for r in runs] + [""]
    refining = [r for r in runs if any("refined" in a for a in r["sampled"])]
    if refining:
        md += ["Refined prompts (train_rl.py --refine): a task's later-visit answers asked to speed up the task "
               "rewritten with a bank answer's forward (the fastest correct one faster than eager that "
               "cudal1.refined_task takes: a PyTorch-level ModelNew(Model) overriding forward alone), against those "
               "asked the task itself: answers (their share of the later ones), correct, known code (a restated "
               "program is its solution's code, so it earns nothing), and those pushed up that beat the task's best "
               "(on how many tasks, and their share of the answers). One that beats a refined prompt's best has mostly "
               "added a move to the one its program holds: a composition, whether its code shows a mark of it or not "
               "(a dropped no-op leaves none); read its code before calling it one, since it may also drop the "
               "program for a move of its own, or be the same code read faster.",
               "", "| run | refined: answers | correct | known | beat the task's best | unrefined: answers | correct "
               "| known | beat the task's best |", "|---|---|---|---|---|---|---|---|---|"]
        md += [f"| {r['name']} | {refined_row(r['sampled'], steps, seeds(r))} |" for r in refining] + [""]
    if known:
        md += ["By move: training answers by the move their analysis opens with (named as above), over the first and "
               "the second half of the compared steps: answers, and in brackets the share of the answers to the tasks "
               "the move holds for (the teacher writes it for them) that open with it / the same share over the other "
               "tasks: a push that teaches when to use a move raises the first, one that teaches the move alone both; "
               "mean reward; reward minus its group's mean (one task's answers at one step); and the advantage "
               "train_rl applied (--advantage group: that over the group's std; gain: the log2 speedup over eager of "
               "a correct answer faster than it, else 0; improve: the same over its task's best so far; clipped to adv "
               "clip, 0 for code the bank already held; "
               "'-' where the run did not record it). The update pushes a move's "
               "answers by the last; the reward says how good the move is. Moves with fewer than 5 answers in both "
               "halves are left out.", "",
               "| run | move | first half: answers (holds / elsewhere) | reward | minus group mean | applied "
               "advantage | second half: answers (holds / elsewhere) | reward | minus group mean | applied advantage |",
               "|---|---|---|---|---|---|---|---|---|---|"]
        md += [f"| {r['name']} | {m} | {cells} |" for r in runs
               for m, cells in by_move(r["sampled"], steps, known, r["admits"])] + [""]
md += ["Constant outputs: parsed answers of the second half whose code writes its output with torch.full "
       "(the constant_output move's mark), and how many of them the judge passed: the move applies to few "
       "tasks, so a high share with none correct is a policy claiming it where it does not hold.", "",
       "After a correct answer: parsed answers to a task the run had already answered correctly at an earlier "
       "step (what a contrastive prompt then shows), split into those that use only the moves of the earlier "
       "correct answers and those that use another (by cudal1.MOVE_MARKS; answers with no mark are in neither), "
       "and in brackets how many of each the judge passed.", "",
       "Groups with a signal: a task's G answers of which some get a nonzero advantage, so the update learns from "
       "them (--advantage group: rewards not all equal, so a group of one code G times, or all failing, teaches "
       "nothing; gain: some new answer beat eager); in brackets the distinct parsed codes per group "
       "(cudal1.same_code).", "",
       "Known code: answers whose code the run's bank already held (the task's reference, a seed's, or any earlier "
       "parsed answer of the run to the task, failing ones too, by cudal1.same_code). They earn no advantage, so "
       "once a run's answers are mostly known code its groups lose their signal and the update has little left "
       "to learn from.", ""]
held = [r for r in runs if r["held"]]
if held:  # the split no training input touches, measured before the first update and during the run
    # the groups every run's last line holds; a start line measured before a group existed reads '-' there
    groups = [g for g in held[0]["held"][-1]["stats"] if all(g in r["held"][-1]["stats"] for r in held)]
    md += ["## Held-out split (greedy answers to plain prompts, judged in the screen; cudal1.held_out)", "",
           *(["A group's second try (train_rl.py --second-try) scores each task by the better of that answer and a "
           "second greedy one to the contrastive prompt its bank would then hold (the reference at 1.00x and the "
           "first answer as measured, when it passed); its correct is the share of second answers that pass.", ""]
             if any(g.endswith(" second try") for g in groups) else []),
           *(["A group's refined (train_rl.py --second-try refine) scores each task by the better of the first answer "
              "and a greedy one to the plain prompt of the task rewritten with the first answer's forward "
              "(cudal1.refined_task), asked where the first answer passed and is a PyTorch-level ModelNew(Model) "
              "overriding forward alone: a second move on top of the first. Its correct is the share of those "
              "asked that pass, and which tasks are asked changes with the first answers.", ""]
             if any(g.endswith(" refined") for g in groups) else []),
           *(["A group's resampled (train_rl.py --resample) is its control: the better of the first answer and one "
              "sampled to the same plain prompt at the run's temperature, which saw nothing of the first.", ""]
             if any(g.endswith(" resampled") for g in groups) else []),
           *(["A group's sampled (train_rl.py --resample K) is the mean of K answers sampled to the plain prompts: "
              "the share correct, and the geomean over tasks of each task's mean log speedup, a failure at 1.00x "
              "(cudal1.sampled_score): what the policy writes on average, where the greedy line reads one answer "
              "a task.", ""]
             if any(g.endswith(" sampled") for g in groups) else []),
           "| run | " + " | ".join(f"{g}: geomean first -> last | correct first -> last" for g in groups) + " | steps |",
           "|---|" + "---|---|" * len(groups) + "---|"]
    def moved(a, b, g):  # 'first -> last (change) | correct first -> last' of group g; '-' for a first without it
        if g not in a["stats"]:
            return f"- -> {b['stats'][g]['geomean']:.2f}x | - -> {b['stats'][g]['correct']:.0%}"
        x, y = a["stats"][g], b["stats"][g]
        return (f"{x['geomean']:.2f}x -> {y['geomean']:.2f}x ({y['geomean'] / x['geomean'] - 1:+.0%}) | "
                f"{x['correct']:.0%} -> {y['correct']:.0%}")
    for r in held:
        a, b = r["held"][0], r["held"][-1]
        md.append(f"| {r['name']} | " + " | ".join(moved(a, b, g) for g in groups) + f" | {a['step']} -> {b['step']} |")
    tries = [r for r in held if any(a["attempt"] > 1 for a in r["answers"])]
    if tries:  # what the second (and resampled) answers did, at each run's first and last held-out measurement
        md += ["", "Second answers (held_out_answers.jsonl): of the tasks, how many second tries (and resampled "
               "answers) were new code, how many of those passed, and how many beat the first answer (a failed "
               "first counts as beaten by any pass); last, of the parsed answers after a passing first, those with "
               "other moves than it (cudal1.moves_shown: a move without a mark, such as a dropped no-op, reads as "
               "none): those that left its move, and those that kept every move it shows and added one, each with "
               "how many of them passed. A second try's prompt shows the first answer, and no stage-1 contrastive "
               "pair shows its answer's own move (a generated task has one teacher solution per move)", "",
               "| run | step | answer | new code | of it correct | better than the first | after a passing first: "
               "left its move (correct) / kept it, added one (correct) |", "|---|---|---|---|---|---|---|"]
        for r in tries:
            for step in sorted({a["step"] for a in r["answers"]} & {r["held"][0]["step"], r["held"][-1]["step"]}):
                by = {}
                for a in r["answers"]:
                    if a["step"] == step:
                        by.setdefault(a["task"], {})[a["attempt"]] = a
                second = "refined" if r["held"][-1].get("second_try") == "refine" else "second try"
                for i, name in ((2, second), (3, "resampled")):
                    pairs = [(t[1], t[i]) for t in by.values() if 1 in t and i in t]
                    if not pairs:
                        continue
                    new = [(a, b) for a, b in pairs if b["source"] is not None and b["source"] != a["source"]]
                    ok = [(a, b) for a, b in new if b["status"] == "ok"]
                    better = [1 for a, b in ok if a["status"] != "ok" or b["speedup"] > a["speedup"]]
                    after = [(cudal1.moves_shown(a["source"]), cudal1.moves_shown(b["source"]), b["status"] == "ok")
                             for a, b in pairs if a["status"] == "ok" and b["source"] is not None]
                    added, left = [], []  # passed or not, of those with other moves: kept every first move, or not
                    for first, second, passed in after:
                        if second != first:
                            (added if first and first < second else left).append(passed)
                    md.append(f"| {r['name']} | {step} | {name} | {len(new)} of {len(pairs)} | {len(ok)} | {len(better)} | "
                              f"{len(left)} ({sum(left)}) / {len(added)} ({sum(added)}) of {len(after)} |")
    moved = [r for r in held if {0, r["held"][-1]["step"]} <= {a["step"] for a in r["answers"]} and r["held"][-1]["step"]]
    if moved:  # what the updates changed: each task's first (greedy) answer at the last measurement against step 0's
        md += ["", "First answers against the start's (held_out_answers.jsonl): of the tasks, how many greedy answers "
               "at the last measurement are new code (cudal1.same_code), how many of those pass, and how many beat "
               "or lose to the start's answer (its reading against theirs; a fail counts below any pass). Since "
               "train_rl keeps the start's reading for an unchanged answer measured on the same GPU, the held-out "
               "line moves only with these; a start measured on another GPU is read against this one's. Last, the "
               "generated tasks' geomean with every task at the better of 1.00x and its answer: the held-out line "
               "counts a failure 1.00x but a slower pass below it, so an answer that breaks a slow one raises that "
               "line; here both fall back to the program they rewrite, as a user would.", "",
               "| run | step | new code | of it correct | better than the start's | worse | generated geomean, slow "
               "and failing at 1.00x: first -> last |", "|---|---|---|---|---|---|---|"]
        for r in moved:
            last, by = r["held"][-1]["step"], {}
            for a in r["answers"]:
                if a["attempt"] == 1 and a["step"] in (0, last):
                    by.setdefault(cudal1.held_key(a["task"]), {})[a["step"]] = a
            paired = {k for k, t in by.items() if 0 in t and last in t}
            pairs = [(by[k][0], by[k][last]) for k in paired]
            code = lambda x: x["source"] and cudal1.same_code(x["source"])
            new = [(a, b) for a, b in pairs if b["source"] is not None and code(b) != code(a)]
            score = lambda x: x["speedup"] if x["status"] == "ok" and x["speedup"] else 0.0
            k0, k1 = (kept_geomean(r["answers"], step, paired) for step in (0, last))
            md.append(f"| {r['name']} | {last} | {len(new)} of {len(pairs)} | {sum(b['status'] == 'ok' for _, b in new)} "
                      f"| {sum(score(b) > score(a) for a, b in new)} | {sum(score(b) < score(a) for a, b in new)} | "
                      + (f"{k0:.2f}x -> {k1:.2f}x ({k1 / k0 - 1:+.0%}) |" if k0 and k1 else "- |"))
    for arm in dict.fromkeys(r["arm"] for r in held):
        kept = [kept_geomean(r["answers"], r["held"][-1]["step"]) for r in held if r["arm"] == arm]
        for g in [g for g in groups if g in (groups[0], *(f"{groups[0]} {k}" for k in ("second try", "refined",
                                                                                        "resampled", "sampled")))]:
            mine = [r["held"][-1]["stats"][g]["geomean"] for r in held if r["arm"] == arm]
            md.append(f"\n{arm}: mean over {len(mine)} seed(s) of the last {g} geomean {statistics.mean(mine):.2f}x"
                      + (f" (slow and failing answers both at 1.00x: {statistics.mean(kept):.2f}x)"
                         if g == groups[0] and None not in kept else ""))
    if args.out:
        picture = os.path.splitext(args.out)[0] + ".svg"
        os.makedirs(os.path.dirname(os.path.abspath(picture)), exist_ok=True)
        svg({r["name"]: [(h["step"], h["stats"][groups[0]]["geomean"]) for h in r["held"]] for r in held},
            f"Held-out {groups[0]} tasks: geomean speedup against RL step", "geomean vs eager", picture)
        md += ["", f"![held-out geomean against RL step]({os.path.basename(picture)})", ""]
md += ["Copies of a seed: correct answers whose code is a seeded kernels/ solution's, measured again. "
       "Composing 2+ moves: correct answers whose code shows two or more of the teacher's moves by their "
       "idioms (cudal1.MOVE_MARKS; dropped no-ops and reordered reductions leave no mark, so it undercounts). "
       "Best speedup each run found per task counts its own code only (correct, unlike the reference "
       "and every seed; judged by evaluate.judge_many; a run's best is its fastest measurement, so treat "
       "it as optimistic until `make eval` repeats it); the seeds' best is the library's measurement:", "",
       "| task | seeds' best | " + " | ".join(r["name"] for r in runs) + " |", "|---|---|" + "---|" * len(runs)]
tasks = sorted(set().union(*(r["log"][-1]["best"] for r in runs if r["log"])))
rows = 0
for task in tasks:  # only the tasks some run found new correct code for: RL's tasks number in the thousands
    own = [[e["record"]["speedup"] for e in r["bank"].found(task) if 0 <= e["step"] < steps] for r in runs]
    if not any(own):
        continue
    seeds = [e["record"]["speedup"] for e in runs[0]["bank"].entries.get(task, [])
             if e["step"] < 0 and e["record"].get("status") != "reference" and e["record"].get("speedup")]
    cells = [f"{max(seeds):.2f}x" if seeds else "-"] + [f"{max(o):.2f}x" if o else "-" for o in own]
    md.append(f"| {task} | " + " | ".join(cells) + " |")
    rows += 1
md += ["", f"{rows} of the {len(tasks)} RL tasks have new correct code from some run; the others are left out."]
cudal1.write_markdown(md, args.out)

"""How far does training one move after plain prompts move a checkpoint's choice on tasks it never saw?
The dose a policy-gradient signal needs before it reaches the held-out split, read without a judge.

    python bench/move_dose.py --init out/sft --move constant_output --lr 1e-5 --steps 1,3,6,10,15

Takes the teacher's answers of --move for the first --tasks fresh training-split tasks that admit it
(seeds from cudal1.FRESH_SEED, which stage 1 never draws) and trains them after their plain prompts,
as a stage-3 step would train a new best there: pg_loss at advantage --adv, AdamW at --lr, one update
a step over all of them (with --negatives, also the same answers after other tasks' prompts, pushed
down; with --others, other tasks' own first teacher answers, pushed up). The same answers every step,
and nothing else: an upper bound on a new best trained once, one row among a step's answers
(train_rl.py --distill did that, and moved no held-out answer's move in 2-minute runs:
results/learning-h100-distill.md). Before the
first step and after each listed one it reads the first --held held-out generated tasks
(cudal1.held_out_tasks, the ones train_rl measures):
  learnt   mean log-prob of the trained answers, whole.
  margin   log-prob of the move's teacher answer's first --open tokens (the analysis' heading and
           first sentence, where an answer names its move) minus that of the task's likeliest other
           move; > 0: the move is preferred. For the held-out tasks that admit the move.
  opening  the move a greedy --open-token opening names: its first sentence against the teacher's
           first sentences over 400 fresh training tasks, the move of the one sharing the most leading
           words ("Fuse the 3 ops", "Leave out an op", "Everything up to `...`"); for the other
           held-out tasks, how many open with the move.
  cost     mean log-prob of the other held-out tasks' whole teacher answers, each of the move its
           step-0 opening names: what the dose costs where the move does not apply.
  pushed   with --others: mean log-prob of the answers pushed up after those tasks' prompts.
Nothing is saved. The 27.8M policy on a 2-core CPU: ~5 s a step, ~40 s a reading (the first ~5 min).
"""
import argparse
import os
import re
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402
from kernelbench import generate as gen, teacher  # noqa: E402


def first_words(answer):
    """The words of an answer's first line after its '## Performance Analysis' heading, a reduction quoted
    as generate._spell may spell it (`x.sum(dim=[2, 3], ...)`) read as its first spelling (`torch.sum(x,
    dim=(2, 3), ...)`): a move's openers quote their task's line, and the spelling is not the move."""
    line = answer.split("\n", 2)[1] if answer.startswith("## ") and "\n" in answer else answer
    line = re.sub(r"(?<![\w.])x\.(sum|mean|amax|max|logsumexp)\((?=dim=)", r"torch.\1(x, ", line)
    line = re.sub(r"dim=\[([\d, ]*)\]", lambda m: f"dim={tuple(int(d) for d in m.group(1).split(','))}", line)
    return line.replace(").values", ")[0]").split()


def openers(size, n=400):
    """(first words, move) of the teacher's answers to n fresh training tasks: how each move opens."""
    return [(first_words(cudal1.format_answer(cudal1.inherit_constructor(sol, src))), m)
            for _, src, meta in gen.tasks(cudal1.FRESH_SEED, n, size, split="train")
            for m, sol in teacher.solutions(src, meta)]


def named(answer, known):
    """The move whose teacher first line shares the most leading words (two at least) with the answer's,
    among `known` (openers()); 'other' where none shares two. The first of a tie."""
    words = first_words(answer)
    shared = lambda ws: next((i for i, (x, y) in enumerate(zip(ws, words)) if x != y), min(len(ws), len(words)))
    best = max(known, key=lambda o: shared(o[0]))
    return best[1] if shared(best[0]) >= 2 else "other"


def fresh_admitting(move, n, size, admits=True, solved=False):
    """(name, source, meta) of the first n fresh training-split tasks whose teacher writes `move` (admits=False:
    whose meta does not name it; solved: and whose teacher writes some move)."""
    out, seed = [], cudal1.FRESH_SEED
    while len(out) < n:
        (name, src, meta), = gen.tasks(seed, 1, size, split="train")
        seed = meta["seed"] + 1
        if cudal1.held_out(meta):
            continue
        holds = move in meta["moves"] and move in dict(teacher.solutions(src, meta))
        if (holds if admits else move not in meta["moves"]) and (not solved or teacher.solutions(src, meta)):
            out.append((name, src, meta))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--init", default="out/sft", help="checkpoint to start from")
    p.add_argument("--move", default="constant_output", help="the teacher move to train")
    p.add_argument("--tasks", type=int, default=4, help="fresh training tasks admitting --move, trained on")
    p.add_argument("--held", type=int, default=32, help="held-out generated tasks read, the first N")
    p.add_argument("--lr", type=float, default=1e-5, help="AdamW learning rate (train_rl's GPU default: 1e-5)")
    p.add_argument("--adv", type=float, default=1.5, help="the advantage every trained answer gets (train_rl's clip)")
    p.add_argument("--negatives", type=int, default=0, help="also this many fresh training tasks that do not admit "
                   "--move, each trained with a trained task's --move answer at advantage --negative-adv: the move "
                   "claimed where it fails, pushed down as train_rl's group baseline pushes a failing answer "
                   "(--advantage gain pushes nothing down)")
    p.add_argument("--others", type=int, default=0, help="also this many fresh training tasks that do not admit "
                   "--move, each trained with its own first teacher answer (teacher.solutions' order: the fused "
                   "epilogue where it holds) at --adv in the same update: every task's answer pushed up, as a "
                   "stage-3 step over many tasks pushes its new bests; the table adds their mean log-prob")
    p.add_argument("--negative-adv", type=float, default=-0.5, help="their advantage: the group baseline gives each "
                   "failure beside one pass -0.5 in a group of 5, -0.38 in stage 3's groups of 8")
    p.add_argument("--steps", default="1,3,6,10,15", help="read after these many updates")
    p.add_argument("--open", type=int, default=40, help="answer tokens that make an opening")
    p.add_argument("--size", default="gpu", choices=("gpu", "cpu"), help="the tasks' sizes (the prompts a run sees)")
    p.add_argument("--target", default="NVIDIA H100 80GB HBM3", help="the device the prompts name")
    p.add_argument("--work", default="build/move_dose", help="where the held-out tasks are written")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    if a.negatives and a.tasks < 1:
        raise SystemExit("--negatives: the answers pushed down are those of --tasks, so --tasks must be 1 or more")
    torch.manual_seed(0)
    device, _ = cudal1.autodetect()
    model, tok, _ = cudal1.load_checkpoint(a.init, device)
    model.eval()

    def task(src, meta):  # (plain prompt ids, {move: teacher answer ids})
        return (tok.encode_prompt(cudal1.plain_prompt(src, a.target)),
                {m: tok.encode_answer(cudal1.format_answer(cudal1.inherit_constructor(sol, src)))
                 for m, sol in teacher.solutions(src, meta)})

    fresh = fresh_admitting(a.move, a.tasks, a.size)
    train = [task(src, meta) for _, src, meta in fresh]
    lacking = fresh_admitting(a.move, a.negatives, a.size, admits=False) if a.negatives else []
    others = [t for t in fresh_admitting(a.move, a.negatives + a.others, a.size, admits=False, solved=True)
              if t not in lacking][:a.others]
    # (prompt, answer ids) of each: its own first teacher answer
    pushed = [(prompt, next(iter(sols.values()))) for prompt, sols in (task(src, meta) for _, src, meta in others)]
    # (prompt, answer ids, advantage) of every update: the move where it holds pushed up, where it fails down
    rows = ([(prompt, sols[a.move], a.adv) for prompt, sols in train]
            + [(task(src, meta)[0], train[k % len(train)][1][a.move], a.negative_adv)
               for k, (_, src, meta) in enumerate(lacking)]
            + [(prompt, ids, a.adv) for prompt, ids in pushed])
    held = {}  # id -> task, the held-out split's first --held (checked to be none of the tasks trained on)
    trained = [src for _, src, _ in fresh + lacking + others]
    for t in cudal1.held_out_tasks(a.work, a.held, a.size, trained=trained)["generated"]:
        held[os.path.basename(t).split("_")[0]] = task(cudal1.read(t), gen.read_meta(t))
    known = openers(a.size)

    def logp(prompt, ids):
        with torch.no_grad():
            return cudal1.answer_logprobs(model, prompt, [ids])[0].sum().item()

    def margin(prompt, sols):  # the move's opening over the likeliest other move's; nan where it has none
        others = [logp(prompt, ids[:a.open]) for m, ids in sols.items() if m != a.move]
        return logp(prompt, sols[a.move][:a.open]) - max(others) if others else float("nan")

    own = {}  # each other held-out task's move at step 0: the answer whose log-prob the dose may cost

    def read(step):
        t0 = time.time()
        g = torch.Generator(device).manual_seed(0)
        rows = cudal1.generate(model, [h[0] for h in held.values()], 1, a.open, 0.0, 0, 1.0, g, tok.end_id, False)
        move = {i: named(tok.decode(r[0]), known) for i, r in zip(held, rows)}
        admit = [i for i in held if a.move in held[i][1]]
        rest = [i for i in held if a.move not in held[i][1]]
        for i in rest:
            own.setdefault(i, move[i] if move[i] in held[i][1] else next(iter(held[i][1])))
        tm = [x for x in (margin(*t) for t in train) if x == x]
        learnt = sum(logp(pr, sols[a.move]) for pr, sols in train) / len(train)
        cost = sum(logp(held[i][0], held[i][1][own[i]]) for i in rest) / max(1, len(rest))
        more = f" {sum(logp(*p) for p in pushed) / len(pushed):.2f} |" if pushed else ""
        print(f"step {step}: read in {time.time() - t0:.0f} s", flush=True)
        cells = "; ".join(f"{i} {move[i]} {margin(*held[i]):+.1f}" for i in admit)
        return (f"| {step} | {learnt:.2f} | {f'{sum(tm) / len(tm):+.1f}' if tm else '-'} | {cells} | "
                f"{sum(move[i] == a.move for i in admit)} of {len(admit)} | {sum(move[i] == a.move for i in rest)} "
                f"of {len(rest)} | {cost:.2f} |{more}")

    table = [read(0)]
    opt = cudal1.adamw(model, a.lr, 0.0, device)
    done, n_tok = 0, sum(len(ids) for _, ids, _ in rows)
    for target in sorted({int(s) for s in a.steps.split(",") if s}):
        while done < target:  # one update over all of them: their tokens' mean, as pg_loss takes a batch
            model.train()
            for prompt, ids, adv in rows:
                lp, mask = cudal1.answer_logprobs(model, prompt, [ids])
                (cudal1.pg_loss(lp, mask, torch.tensor([adv], device=device)) * mask.sum() / n_tok).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            model.eval()
            done += 1
        table.append(read(done))
    n_admit = sum(a.move in sols for _, sols in held.values())
    md = [f"# Training {a.move} after plain prompts: how far it moves held-out choices", "",
          f"- command: `python bench/move_dose.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {evaluate.commit()}, torch {torch.__version__}, {device}",
          f"- trained: {', '.join(n for n, _, _ in fresh)} (their {a.move} teacher answers, advantage {a.adv}, "
          f"lr {a.lr})" + (f"; pushed down at {a.negative_adv}: those answers after the plain prompts of "
                            f"{', '.join(n for n, _, _ in lacking)}, which do not admit it" if lacking else "")
          + (f"; pushed up at {a.adv}: the first teacher answers (the fused epilogue where it holds) of "
             f"{', '.join(n for n, _, _ in others)}, which do not admit it" if others else "")
          + f"; read: the first {a.held} held-out generated tasks, {n_admit} of them admitting {a.move}",
          "", "| step | trained answers' log-prob | their margin | held-out tasks admitting it: the move its "
          f"opening names, margin | open with {a.move} | other held-out tasks opening with it | their step-0 "
          "move's answer, log-prob |" + (" the answers pushed up after other tasks, log-prob |" if pushed else ""),
          "|---|---|---|---|---|---|---|" + ("---|" if pushed else ""), *table]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How far does training one move after plain prompts move a checkpoint's choice on tasks it never saw?
The dose a policy-gradient signal needs before it reaches the held-out split, read without a judge.

    python bench/move_dose.py --init out/sft --move constant_output --lr 1e-5 --steps 1,3,6,10,15

Takes the teacher's answers of --move for the first --tasks fresh training-split tasks that admit it
(seeds from cudal1.FRESH_SEED, which stage 1 never draws) and trains them after their plain prompts,
as train_rl.py --distill trains a new best: pg_loss at advantage --adv, AdamW at --lr, one update a
step over all of them. Before the first step and after each listed one it reads the first --held
held-out generated tasks (cudal1.held_out_tasks, the ones train_rl measures):
  learnt   mean log-prob of the trained answers, whole.
  margin   log-prob of the move's teacher answer's first --open tokens (the analysis' heading and
           first sentence, where an answer names its move) minus that of the task's likeliest other
           move; > 0: the move is preferred. For the held-out tasks that admit the move.
  opening  the move a greedy --open-token opening names: its first sentence against the teacher's
           first sentences over 400 fresh training tasks, the move of the one sharing the most leading
           words ("Fuse the 3 ops", "Leave out an op", "Everything up to `...`"); for the other
           held-out tasks, how many open with the move.
  others   mean log-prob of the other held-out tasks' whole teacher answers, each of the move its
           step-0 opening names: what the dose costs where the move does not apply.
Nothing is saved. The 27.8M policy on a 2-core CPU: ~5 s a step, ~1 min a reading.
"""
import argparse
import json
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402
from kernelbench import generate as gen, teacher  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--init", default="out/sft", help="checkpoint to start from")
    p.add_argument("--move", default="constant_output", help="the teacher move to train")
    p.add_argument("--tasks", type=int, default=4, help="fresh training tasks admitting --move, trained on")
    p.add_argument("--held", type=int, default=32, help="held-out generated tasks read, the first N")
    p.add_argument("--lr", type=float, default=1e-5, help="AdamW learning rate (train_rl's GPU default: 1e-5)")
    p.add_argument("--adv", type=float, default=1.5, help="the advantage every trained answer gets (train_rl's clip)")
    p.add_argument("--steps", default="1,3,6,10,15", help="read after these many updates")
    p.add_argument("--open", type=int, default=40, help="answer tokens that make an opening")
    p.add_argument("--size", default="gpu", choices=("gpu", "cpu"), help="the tasks' sizes (the prompts a run sees)")
    p.add_argument("--target", default="NVIDIA H100 80GB HBM3", help="the device the prompts name")
    p.add_argument("--work", default="build/move_dose", help="where the held-out tasks are written")
    p.add_argument("--out", default="", help="Markdown file to write; empty: print only")
    a = p.parse_args(argv)
    steps = sorted({int(s) for s in a.steps.split(",") if s})
    torch.manual_seed(0)
    device, _ = cudal1.autodetect()
    model, tok, _ = cudal1.load_checkpoint(a.init, device)
    model.eval()
    prompt = lambda src: tok.encode_prompt(cudal1.plain_prompt(src, a.target))
    answer = lambda src, sol: tok.encode_answer(cudal1.format_answer(cudal1.inherit_constructor(sol, src)))

    def answers(src, meta):
        return {m: answer(src, sol) for m, sol in teacher.solutions(src, meta)}

    train, seed = [], cudal1.FRESH_SEED
    while len(train) < a.tasks:
        for name, src, meta in gen.tasks(seed, 1, a.size, split="train"):
            seed = meta["seed"] + 1
            if a.move in meta["moves"] and not cudal1.held_out(meta):
                sols = answers(src, meta)
                if a.move in sols:
                    train.append((name, prompt(src), sols))
    held = []
    for t in cudal1.held_out_tasks(a.work, a.held, a.size)["generated"]:
        src = cudal1.read(t)
        held.append((os.path.basename(t).split("_")[0], prompt(src), answers(src, json.load(open(t[:-3] + ".json")))))
    admit = [h for h in held if a.move in h[2]]
    rest = [h for h in held if a.move not in h[2]]
    first = lambda text: (text.split("\n", 2)[1] if text.startswith("## ") and "\n" in text else text).split()
    openers = [(first(cudal1.format_answer(cudal1.inherit_constructor(sol, src))), m)  # the teacher's first sentences
               for _, src, meta in gen.tasks(cudal1.FRESH_SEED, 400, a.size) for m, sol in teacher.solutions(src, meta)]

    def logp(prompt_ids, ids):
        with torch.no_grad():
            lp, _ = cudal1.answer_logprobs(model, prompt_ids, [ids])
        return lp.sum().item()

    def margin(prompt_ids, sols):
        others = [logp(prompt_ids, ids[:a.open]) for m, ids in sols.items() if m != a.move]
        return logp(prompt_ids, sols[a.move][:a.open]) - max(others) if others else float("nan")

    def named(text):
        """The move whose teacher first sentence shares the most leading words (two at least) with the
        opening's; 'other' where none shares two."""
        words = first(text)
        shared = lambda ws: next((i for i, (x, y) in enumerate(zip(ws, words)) if x != y), min(len(ws), len(words)))
        best = max(openers, key=lambda o: shared(o[0]))
        return best[1] if shared(best[0]) >= 2 else "other"

    own = {}  # each other task's move as its step-0 opening reads: the answer whose log-prob the dose may cost

    def read(step):
        t0 = time.time()
        g = torch.Generator(device).manual_seed(0)
        rows = cudal1.generate(model, [h[1] for h in held], 1, a.open, 0.0, 0, 1.0, g, tok.end_id, False)
        opening = {h[0]: tok.decode(r[0]) for h, r in zip(held, rows)}
        cells = [f"{h[0]} {named(opening[h[0]])} {margin(h[1], h[2]):+.1f}" for h in admit]
        like = sum(named(opening[h[0]]) == a.move for h in rest)
        for h in rest:  # its step-0 move, where the task admits it (else its first)
            own.setdefault(h[0], named(opening[h[0]]) if named(opening[h[0]]) in h[2] else next(iter(h[2])))
        tm = [margin(p_, sols) for _, p_, sols in train]
        tm = [x for x in tm if x == x]
        learnt = sum(logp(p_, sols[a.move]) for _, p_, sols in train) / len(train)
        cost = sum(logp(h[1], h[2][own[h[0]]]) for h in rest) / max(1, len(rest))
        print(f"step {step}: read in {time.time() - t0:.0f} s", flush=True)
        return (f"| {step} | {learnt:.2f} | {f'{sum(tm) / len(tm):+.1f}' if tm else '-'} | {'; '.join(cells)} | "
                f"{sum(c.split()[1] == a.move for c in cells)} of {len(admit)} | {like} of {len(rest)} | {cost:.2f} |")

    table = [read(0)]
    opt = cudal1.adamw(model, a.lr, 0.0, device)
    done, n_tok = 0, sum(len(sols[a.move]) for _, _, sols in train)
    for target in steps:
        while done < target:
            model.train()
            for _, p_, sols in train:  # one update over all of them: their tokens' mean, as pg_loss takes a batch
                lp, mask = cudal1.answer_logprobs(model, p_, [sols[a.move]])
                (cudal1.pg_loss(lp, mask, torch.tensor([a.adv], device=device)) * mask.sum() / n_tok).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            model.eval()
            done += 1
        table.append(read(done))
    md = [f"# Training {a.move} after plain prompts: how far it moves held-out choices", "",
          f"- command: `python bench/move_dose.py {' '.join(argv if argv is not None else sys.argv[1:])}`, "
          f"commit {evaluate.commit()}, torch {torch.__version__}, {device}",
          f"- trained: {', '.join(n for n, _, _ in train)} (their {a.move} teacher answers, advantage {a.adv}, "
          f"lr {a.lr}); read: the first {a.held} held-out generated tasks, {len(admit)} of them admitting {a.move}",
          "", f"| step | trained answers' log-prob | their margin | held-out tasks admitting it: the move its opening names, "
          f"margin | open with {a.move} | other held-out tasks opening like it | their step-0 move's answer, "
          "log-prob |", "|---|---|---|---|---|---|---|", *table]
    cudal1.write_markdown(md, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

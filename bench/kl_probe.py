"""Does train_rl's --kl hold the held-out greedy answers in place? Read on the CPU, without a judge, by
replaying a plain run's first updates.

    python bench/kl_probe.py --init out/sft --run out/rl-plain-s1 --steps 16 --kl 0,0.1,1

A plain run's answers.jsonl holds every answer it sampled with the advantage train_rl applied to it, and a
plain prompt is a function of its task alone, so the run's updates can be taken again here, step by step,
as policy_step takes them (the live groups' rows, pg_loss over the step's answer tokens, grad clip, AdamW at
the run's learning rate), with --kl's penalty added at each weight. The answers stay the run's: with a
penalty the replay is off-policy from the second step on, so it reads how a weight pulls against the same
pushes, not what a run with it would sample.

Before the first step the --init policy writes its greedy answers to the first --held held-out generated
tasks (the run's held_out/levelG, the ones train_rl measured), and the report gives, for each, its nearest
tie: the token where the top two logits are closest, what the two would write, and whether the answer's
code changes when the runner-up is forced there and the rest decoded greedily. After each of --read steps
each replayed policy reads them again, teacher-forced:
  changed  answers where the replayed policy's argmax leaves the greedy answer at some token (analysis or
           code: its own greedy answer would differ from there on), and the median first such position
  k3       GRPO's per-token estimator (cudal1.kl_penalty) from the --init policy, at temperature 1 on the
           greedy tokens: a measure of drift on them, not an unbiased KL
On the GPU a plain run changed 16-21 of its 52 held-out greedy answers in 5 minutes
(results/learning-h100-spell-t64-seeds.md); fp32 on the CPU is not the GPU's bf16, so compare the
weights with each other here. The 27.8M policy on a 2-core CPU: ~25 s a replayed step, ~1 min a reading.
"""
import argparse
import collections
import copy
import glob
import json
import os
import statistics
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("--init", required=True, help="the checkpoint the run started from")
parser.add_argument("--run", required=True, help="a train_rl.py --plain run's --out (answers.jsonl, settings.json, "
                    "fresh/levelG)")
parser.add_argument("--steps", type=int, default=16, help="the run's first steps to replay")
parser.add_argument("--read", default="8,16", help="steps after which the held-out answers are read")
parser.add_argument("--kl", default="0,0.1,1", help="comma-separated --kl weights, one replay each; empty: the "
                    "greedy answers' ties alone")
parser.add_argument("--held", type=int, default=32, help="held-out generated tasks")
parser.add_argument("--max-new-tokens", type=int, default=0, help="greedy answer cap; 0: the run's")
parser.add_argument("--out", default="", help="a markdown report here too")
args = parser.parse_args()

torch.manual_seed(0)
settings = json.load(open(os.path.join(args.run, "settings.json")))
if not settings.get("plain"):
    raise SystemExit(f"{args.run}: a contrastive run's prompts depend on its bank's draws; replay a --plain run")
anchor, tok, _ = cudal1.load_checkpoint(args.init, "cpu")
anchor.eval().requires_grad_(False)
sampling = (settings["temperature"], settings["top_k"], settings["top_p"])
target = json.loads(open(os.path.join(args.run, "held_out.jsonl")).readline())["device"]  # what its prompts named
prompt_of = lambda path: tok.encode_prompt(cudal1.plain_prompt(cudal1.read(path), target))

# ---- the run's live groups, step by step: (prompt ids, answer rows, advantages)
steps = collections.defaultdict(dict)
for a in map(json.loads, open(os.path.join(args.run, "answers.jsonl"))):
    if a["step"] < args.steps:
        steps[a["step"]].setdefault(a["task"], []).append(a)
groups = {s: [(prompt_of(os.path.join(args.run, "fresh", t)),
               [tok.encode(a["text"]) + ([tok.end_id] if a["stopped"] else []) for a in g],
               torch.tensor([a["adv"] for a in g])) for t, g in steps[s].items() if any(a["adv"] for a in g)]
          for s in sorted(steps)}

# ---- the --init policy's greedy answers to the held-out tasks
held = sorted(glob.glob(os.path.join(args.run, "held_out", "levelG", "*.py")),
              key=lambda p: int(os.path.basename(p).split("_")[0]))[:args.held]
t0 = time.time()
prompts = [prompt_of(p) for p in held]
cap = args.max_new_tokens or settings["max_new_tokens"]
answers = cudal1.generate(anchor, prompts, 1, cap, 0.0, end_id=tok.end_id)
answers = [a[0] if a and isinstance(a[0], list) else a for a in answers]
print(f"{len(held)} greedy held-out answers in {time.time() - t0:.0f}s, "
      f"{statistics.mean(map(len, answers)):.0f} tokens on average", flush=True)


def ties():
    """One row per greedy answer: its nearest tie (position, logit margin, the two tokens in context), and
    whether forcing the runner-up there, then decoding greedily, writes other code (cudal1.same_code)."""
    out, code = [], lambda ids: cudal1.parse_answer(tok.decode(ids))[0]
    with torch.no_grad():
        for path, p, a in zip(held, prompts, answers):
            logits = anchor(torch.tensor([p + a[:-1]]))[0, len(p) - 1:].float()
            top = logits.topk(2, -1)
            margin = top.values[:, 0] - top.values[:, 1]
            j = margin.argmin().item()
            forced = a[:j] + [top.indices[j, 1].item()]
            rest = cudal1.generate(anchor, p + forced, 1, cap - len(forced), 0.0, end_id=tok.end_id)[0]
            same = code(a) is not None and code(forced + rest) is not None and \
                cudal1.same_code(code(a)) == cudal1.same_code(code(forced + rest))
            two = " / ".join(repr(tok.decode([i])) for i in top.indices[j].tolist())
            out.append(f"| {os.path.basename(path)} | {len(a)} | {j} | {margin[j].item():.3f} | "
                       f"{tok.decode(a[max(0, j - 4):j])!r} + {two} | {'same' if same else 'other'} |")
    return out


def reading(model):
    """(answers changed, median first changed token, mean per-token KL from the anchor) on the greedy answers."""
    firsts, kls = [], []
    with torch.no_grad():
        for p, a in zip(prompts, answers):
            x = torch.tensor([p + a[:-1]])
            logits = model(x)[0, len(p) - 1:].float()  # (len(a), vocab): position j predicts token j
            ref = anchor(x)[0, len(p) - 1:].float()
            t = torch.tensor(a)
            off = (logits.argmax(-1) != t).nonzero()
            if len(off):
                firsts.append(off[0].item())
            logp, ref_logp = (z.log_softmax(-1).gather(-1, t[:, None])[:, 0] for z in (logits, ref))
            kls.append(cudal1.kl_penalty(logp[None], ref_logp[None], torch.ones(1, len(a))).item())
    return len(firsts), statistics.median(firsts) if firsts else None, statistics.mean(kls)


changed, first, kl = reading(anchor)  # the --init policy against its own greedy answers: 0 changed unless the
rows = [f"| 0 | - | {changed} of {len(held)} | {first} | {kl:.4f} | - |"]  # cached decode and this pass disagree
tie_rows = ties()
for weight in [float(w) for w in args.kl.split(",") if w]:
    model = copy.deepcopy(anchor).requires_grad_(True).train()
    opt = cudal1.adamw(model, settings["lr"], settings["weight_decay"], "cpu")
    for s in range(args.steps):
        t0, n_tok = time.time(), sum(len(r) for _, rs, _ in groups[s] for r in rs)
        train_kl = 0.0
        for prompt, rs, adv in groups[s]:  # as train_rl.policy_step, one part per group
            if weight:
                with torch.no_grad():
                    ref = cudal1.answer_logprobs(anchor, prompt, rs, *sampling, unfiltered=True)[2]
            logp, mask, raw = cudal1.answer_logprobs(model, prompt, rs, *sampling, unfiltered=True)
            loss = cudal1.pg_loss(logp, mask, adv)
            if weight:
                kl = cudal1.kl_penalty(raw, ref, mask)
                loss, train_kl = loss + weight * kl, train_kl + kl.item() * mask.sum().item() / n_tok
            (loss * mask.sum() / n_tok).backward()
        if groups[s]:
            if settings["grad_clip"] > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), settings["grad_clip"])
            opt.step()
            opt.zero_grad(set_to_none=True)
        print(f"--kl {weight:g} step {s + 1}: {len(groups[s])} live groups, {time.time() - t0:.0f}s"
              + (f", kl on them {train_kl:.4f}" if weight else ""), flush=True)
        if str(s + 1) in args.read.split(","):
            model.eval()
            changed, first, kl = reading(model)
            model.train()
            rows.append(f"| {s + 1} | {weight:g} | {changed} of {len(held)} | {first} | {kl:.4f} | "
                        + (f"{train_kl:.4f} |" if weight else "- |"))
            print(rows[-1], flush=True)

md = [f"# --kl replayed on the CPU: {args.run}", "",
      f"- command: `python bench/kl_probe.py {' '.join(sys.argv[1:])}`, commit {evaluate.commit()}",
      f"- the run's first {args.steps} steps replayed from `{args.init}` at lr {settings['lr']:g} (its answers and "
      f"advantages), greedy answers to {len(held)} held-out generated tasks read teacher-forced", "",
      "| after step | --kl | held-out answers changed (any token) | median first changed token | k3 from init on "
      "them | KL penalty on the step's updated answers |", "|---|---|---|---|---|---|"] + rows + [
      "", "The --init policy's greedy answers and their nearest ties (the token where the top two logits are "
      "closest; the text before it, then the two candidates; the code written with the runner-up forced there):",
      "", "| task | answer tokens | nearest tie at | margin (logits) | before it + the two | code |",
      "|---|---|---|---|---|---|"] + tie_rows
print("\n".join(md))
if args.out:
    with open(args.out, "w") as f:
        f.write("\n".join(md) + "\n")

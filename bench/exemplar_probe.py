"""Which contrastive prompts a checkpoint can answer: parse rate, answer length and copies of a
shown exemplar, per prompt shape, on an RL run's tasks with that run's measured answers as exemplars.

    python bench/exemplar_probe.py --init out/sft --run out/rl-contrastive-s1 [--samples 4]

Shapes: plain (no exemplars); ref (the reference at 1.00x: what RL shows first on a fresh task);
ref+best (the reference and the run's fastest correct answer: what it showed later); best (that
answer alone); ref x3 (the reference shown three times: a prompt as long as ref+best that shows no
solution, which tells length from content). No judge: parsing and copying are properties of the text, so this runs on a CPU too.
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cudal1  # noqa: E402
import evaluate  # noqa: E402

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--init", default="out/sft", help="checkpoint to sample from")
p.add_argument("--run", default="out/rl-contrastive-s1", help="a train_rl.py run: its bank and its tasks")
p.add_argument("--samples", type=int, default=4, help="answers per prompt")
p.add_argument("--tasks", type=int, default=8, help="how many of the run's tasks (with a correct answer)")
p.add_argument("--max-new-tokens", type=int, default=1536)
p.add_argument("--target", default="NVIDIA H200", help="the device the prompts name (the run's)")
p.add_argument("--shapes", default="plain,ref,ref+best,best,ref x3", help="prompt shapes to try, comma-separated")
p.add_argument("--out", default="", help="write the table here too (markdown)")
args = p.parse_args()

torch.manual_seed(0)
model_device, dtype = cudal1.autodetect()  # a GPU and bf16 where there is one, as RL samples
model, tok, _ = cudal1.load_checkpoint(args.init, model_device)
model = cudal1.sampling_model(model, dtype)
bank = cudal1.Bank(os.path.join(args.run, "bank.jsonl"), write=False)
settings = json.load(open(os.path.join(args.run, "settings.json")))
tasks_root = os.path.join(args.run, "fresh") if settings.get("rl_tasks") == "fresh" else settings["tasks"]

cases = []
for task, entries in sorted(bank.entries.items()):
    ok = [e for e in entries if e["step"] >= 0 and e["record"].get("correct")]
    if ok:
        ref = next(e for e in entries if e["record"].get("status") == "reference")
        cases.append((task, ref["source"], max(ok, key=lambda e: e["record"]["speedup"])))
cases = cases[:args.tasks]
if not cases:
    sys.exit(f"exemplar_probe.py: no task in {args.run}/bank.jsonl has a correct answer from RL to show")

shapes = {"plain": lambda ref, best: None, "ref": lambda ref, best: [ref],
          "ref+best": lambda ref, best: [ref, best], "best": lambda ref, best: [best],
          "ref x3": lambda ref, best: [ref] * 3}
shapes = {k: shapes[k] for k in args.shapes.split(",")}
stats = {s: dict(n=0, parsed=0, tokens=0, stopped=0, copies=0, prompt=0) for s in shapes}
jobs = []  # (shape, prompt ids, codes the prompt shows): every task's every shape, sampled in one batch
for task, ref_src, best in cases:
    source = open(os.path.join(tasks_root, task)).read()
    ref, top = (ref_src, 1.0), (best["source"], best["record"]["speedup"])
    for name, make in shapes.items():
        shown = make(ref, top)
        text = cudal1.plain_prompt(source, args.target) if shown is None else cudal1.contrastive_prompt(source, args.target, shown)
        jobs.append((name, tok.encode_prompt(text), {cudal1.same_code(best["source"])}, source))
t0 = time.time()
# One batch for all prompts, decoded from a CUDA graph on a GPU: prompt by prompt it took ~25 s a task on the H200
answers = cudal1.generate(model, [ids for _, ids, _, _ in jobs], args.samples, args.max_new_tokens, 0.8, 0, 0.95,
                          torch.Generator(model_device).manual_seed(0), tok.end_id, graph=model_device.type == "cuda")
print(f"{len(jobs)} prompts x {args.samples} samples in {time.time() - t0:.0f} s", file=sys.stderr)
for (name, ids, shown_codes, source), rows in zip(jobs, answers):
    st = stats[name]
    for r in rows:
        code, _ = cudal1.parse_answer(tok.decode([i for i in r if i != tok.end_id]))
        code = code and cudal1.inherit_constructor(code, source)  # the bank's form (train_rl.judge)
        st["n"] += 1
        st["prompt"] += len(ids)
        st["tokens"] += len(r)
        st["stopped"] += bool(r) and r[-1] == tok.end_id
        st["parsed"] += code is not None
        st["copies"] += code is not None and cudal1.same_code(code) in shown_codes

lines = [f"`python bench/exemplar_probe.py --init {args.init} --run {args.run} --samples {args.samples} "
         f"--tasks {args.tasks} --shapes '{args.shapes}'`: {len(cases)} tasks, temperature 0.8, top-p 0.95; "
         "copies: parsed answers whose code is the run's fastest answer, the one ref+best and best show "
         "(under plain and ref the policy writing its own most likely answer again)", "",
         "- " + ", ".join(f"{k} {v}" for k, v in evaluate.environment(str(model_device)).items()), "",
         "| prompt | answers | prompt tokens | answer tokens | stopped | parse | copies of the shown answer |",
         "|---|---|---|---|---|---|---|"]
for name, st in stats.items():
    n = max(1, st["n"])
    lines.append(f"| {name} | {st['n']} | {st['prompt'] / n:.0f} | {st['tokens'] / n:.0f} | {st['stopped'] / n:.0%} | "
                 f"{st['parsed'] / n:.0%} | {st['copies'] / n:.0%} |")
cudal1.write_markdown(lines, args.out)

"""Why do held-out level-2 answers fail before they run? Read on the CPU, no judge.

    python bench/level2_probe.py --init out/sft --out results/level2-text-probe-cpu.md

Greedy answers of a GPU build fail to parse on 4-5 of the 20 held-out KernelBench level-2 tasks a seed
(degenerate analysis text, a code block never closed) and read an attribute the task lacks on 2-4 more; the
generated tasks the policy trained on differ from these files in their text: a docstring of one paragraph of
ops and shapes (level 2's often adds one on a quirk of the original), a shape comment after the head (level 2's
forward seldom has one), and batches of 4-32 (level 2's 128). Each level-2 task is answered as written and with
one of those differences removed at a time (then all three), to the plain prompt, greedily; the report counts
answers that parse and, of those, answers that read only attributes their task defines (bench/grounding.py).
Whether an answer is correct needs the judge; what is read here is only whether the text alone derails the
policy. Greedy answers sit on near ties, so any edit of a prompt reshuffles some tasks' outcomes: the batch
edit, which the policy's choices should not depend on, is the control to read the others against.
The 27.8M policy on a 2-core CPU: ~23 min for the 100 answers (the "shape comments" edit ~7 min of it).
"""
import argparse
import ast
import os
import re
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "bench")]
import cudal1  # noqa: E402
from grounding import unknown  # noqa: E402


def short_doc(source):
    """The task with its docstring cut to the first paragraph (the ops and shapes line)."""
    doc = ast.get_docstring(ast.parse(source), clean=False) or ""
    first = doc.strip().split("\n\n")[0].strip()
    return source.replace(doc, first, 1) if doc else source


def small_batch(source, batch=16):
    """The task at a batch size the generator draws (level 2 uses 128)."""
    return re.sub(r"^batch_size = \d+$", f"batch_size = {batch}", source, flags=re.M)


def with_shapes(source):
    """The task with a shape comment, (B, C, H, W), after each line of Model.forward that changes the shape
    of the tensor it assigns, as the generator writes them; traced on the meta device (no data)."""
    ns, after, last = {}, {}, [None]

    def lines(frame, event, arg):
        if last[0] is not None and isinstance(frame.f_locals.get("x"), torch.Tensor):
            after[last[0]] = tuple(frame.f_locals["x"].shape)  # what the line before this event left
        last[0] = frame.f_lineno if event == "line" else None
        return lines

    exec(compile(source, "task", "exec"), ns)
    with torch.device("meta"):
        model, inputs = ns["Model"](*ns["get_init_inputs"]()), ns["get_inputs"]()
        code = ns["Model"].forward.__code__
        sys.settrace(lambda frame, event, arg: lines if frame.f_code is code else None)
        try:
            model(*inputs)
        finally:
            sys.settrace(None)
    out, shape = source.splitlines(), tuple(inputs[0].shape)
    for n in sorted(after):
        if after[n] != shape and "#" not in out[n - 1] and out[n - 1].rstrip().endswith(")"):
            out[n - 1] += "  # (" + ", ".join(["B"] + [str(d) for d in after[n][1:]]) + ")"
        shape = after[n]
    return "\n".join(out) + "\n"


VARIANTS = {"as written": lambda s: s, "docstring's first paragraph": short_doc, "batch 16": small_batch,
            "shape comments": with_shapes, "all three": lambda s: with_shapes(small_batch(short_doc(s)))}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--init", required=True, help="a stage-1 or stage-2 checkpoint (train_sft.py's --out)")
    parser.add_argument("--target", default="NVIDIA H100 80GB HBM3", help="the device named in the prompt")
    parser.add_argument("--max-new-tokens", type=int, default=3072, help="the GPU's cap (train_rl.py)")
    parser.add_argument("--out", default="", help="a markdown report here too")
    args = parser.parse_args(argv)

    tasks = cudal1.held_out_tasks("", 0, "gpu", tasks_dir=os.path.join(ROOT, "kernelbench"), write=False)["level2"]
    model, tok, _ = cudal1.load_checkpoint(args.init, "cpu")
    model.eval().requires_grad_(False)
    rows, tally = [], {v: [0, 0] for v in VARIANTS}
    t0 = time.time()
    for name, make in VARIANTS.items():
        sources = [make(cudal1.read(p)) for p in tasks]
        prompts = [tok.encode_prompt(cudal1.plain_prompt(s, args.target)) for s in sources]
        outs = cudal1.generate(model, prompts, 1, args.max_new_tokens, 0.0, end_id=tok.end_id)
        for path, source, out in zip(tasks, sources, outs):
            code, why = cudal1.parse_answer(tok.decode(out[0]))
            missing = unknown(source, code) if code else None
            tally[name][0] += code is not None
            tally[name][1] += missing == []
            said = f"no parse ({why[:40]})" if why else "reads " + ", ".join(missing) if missing else "grounded"
            rows.append((os.path.basename(path), name, said))
        print(f"{name}: {tally[name][0]} of {len(tasks)} parse, {tally[name][1]} grounded "
              f"({time.time() - t0:.0f} s)", flush=True)

    lines = ["# Held-out level-2 answers by task text (CPU probe)", "",
             f"- command: `python bench/level2_probe.py --init {args.init}`; greedy, the plain prompt naming "
             f"{args.target}, at most {args.max_new_tokens} new tokens",
             "", "| task text | parse | parse and read only the task's attributes |", "|---|---|---|"]
    lines += [f"| {v} | {p} of {len(tasks)} | {g} |" for v, (p, g) in tally.items()]
    lines += ["", "| task | " + " | ".join(VARIANTS) + " |", "|---|" + "---|" * len(VARIANTS)]
    by_task = {}
    for task, name, said in rows:
        by_task.setdefault(task, {})[name] = said
    lines += [f"| {t} | " + " | ".join(by_task[t][v] for v in VARIANTS) + " |" for t in by_task]
    cudal1.write_markdown(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

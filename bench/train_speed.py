"""How fast does stage 1 train the from-scratch policy? tokens/s and MFU of train_sft's step for
several batch sizes, eagerly and through torch.compile.

The step is train_sft.train_step's: bf16 autocast, loss on the answer tokens (the second half of
each row), gradient clipping, cudal1.adamw (fused). Rows are random ids; a batch's length cycles
through --lengths, as stage 1's length-sorted batches differ from step to step, so the compiled
model (dynamic=True: one graph for every length) pays for no recompile once warmed up. MFU is
Transformer.train_flops over the GPU's dense bf16 peak (evaluate.GPUS), as train_sft counts it.

    python bench/train_speed.py                   # train_sft.py's GPU default policy -> results/<gpu>-train-speed.md
    python bench/train_speed.py --tiny            # a 2-layer model on the CPU: the code path, not a measurement
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

import cudal1  # noqa: E402
import evaluate  # noqa: E402

parser = argparse.ArgumentParser(description="stage-1 training speed of the from-scratch policy")
parser.add_argument("--batch-sizes", default="16,32,64")
parser.add_argument("--lengths", default="1024,1280,1536", help="tokens per row; batches cycle through them")
parser.add_argument("--steps", type=int, default=12, help="timed steps per setting")
parser.add_argument("--tiny", action="store_true", help="2 layers, 64 wide, short rows, on the CPU")
parser.add_argument("--out", default="", help="markdown file; empty: results/<gpu>-train-speed.md (nothing with --tiny)")
args = parser.parse_args()

device, dtype = cudal1.autodetect("cpu" if args.tiny else None)
cuda = device.type == "cuda"
if args.tiny:
    cfg = cudal1.Config.scratch(512, 256, 2, 4, 64)
    batch_sizes, lengths, steps = [2], [64, 96], 2
else:
    d = cudal1.script_defaults("train_sft.py")["DEFAULTS"]["cuda"]
    cfg = cudal1.Config.scratch(d["vocab_size"], d["block_size"], d["n_layer"], d["n_head"], d["n_embd"])
    batch_sizes, lengths, steps = [int(b) for b in args.batch_sizes.split(",")], [int(t) for t in args.lengths.split(",")], args.steps
env = evaluate.environment(device.type)
gpu, _, tflops = evaluate.gpu_spec(env["gpu"])
peak = tflops * 1e12 if tflops else None


def sync():
    if cuda:
        torch.cuda.synchronize()


def measure(compiled, batch_size):
    """(tokens/s, MFU or None, seconds of warm-up) of `steps` steps after one warm-up pass over the lengths."""
    torch.manual_seed(0)
    model = cudal1.Transformer(cfg).to(device)
    run = torch.compile(model, dynamic=True) if compiled else model
    opt = cudal1.adamw(model, 1e-4, 0.1, device)

    def step(T):
        x = torch.randint(cfg.vocab_size, (batch_size, T), device=device)
        y = torch.randint(cfg.vocab_size, (batch_size, T), device=device)
        y[:, :T // 2] = -1  # the prompt half: no loss, as train_sft's pad
        with cudal1.autocast(device, dtype):
            loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    sync()
    t0 = time.perf_counter()
    for T in lengths:  # warm-up: every length once (the compiler traces here)
        step(T)
    sync()
    warm = time.perf_counter() - t0
    tokens = flops = 0
    t0 = time.perf_counter()
    for i in range(steps):
        T = lengths[i % len(lengths)]
        step(T)
        tokens += batch_size * T
        flops += model.train_flops([T] * batch_size)
    sync()
    dt = time.perf_counter() - t0
    return tokens / dt, (100 * flops / dt / peak if peak else None), warm


lines = [f"# Stage-1 training speed of the from-scratch policy ({env['gpu']})", "",
         f"- command: `python {' '.join(sys.argv)}`",
         f"- commit {env['commit']}, torch {env['torch']}, driver {env['driver']}",
         f"- model: {cudal1.Transformer(cfg).num_params() / 1e6:.1f}M parameters ({cfg.n_layer} layers, {cfg.n_embd} wide, "
         f"vocab {cfg.vocab_size}), {dtype}; rows of {', '.join(map(str, lengths))} tokens in turn, loss on the second half",
         "", "| mode | batch | tokens/s | MFU | warm-up s |", "|---|---|---|---|---|"]
for compiled in (False, True):
    for b in batch_sizes:
        try:
            tps, mfu, warm = measure(compiled, b)
            row = f"| {'torch.compile' if compiled else 'eager'} | {b} | {tps:,.0f} | {f'{mfu:.1f}%' if mfu else '-'} | {warm:.1f} |"
        except torch.OutOfMemoryError:
            row = f"| {'torch.compile' if compiled else 'eager'} | {b} | OOM | | |"
            torch.cuda.empty_cache()
        print(row, flush=True)
        lines.append(row)
if not args.tiny:
    out = args.out or f"results/{gpu or 'cpu'}-train-speed.md"
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)

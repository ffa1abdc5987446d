"""Which fp32-accurate convolution is cheapest here: the heads of level 2's tasks whose library
solution calls cudal1.conv_3xtf32, each run four ways, timed and checked against fp64.

    python bench/conv_precision.py --out results/h200-conv-precision.md

The four ways: eager's (cuDNN with TF32, PyTorch's default for convolutions), true fp32 (TF32 off:
the CUDA cores), 3xTF32 (cudal1.conv_3xtf32: xh*wh + xh*wl + xl*wh as one TF32 convolution over 3x
the input channels), and TF32 + bf16 (cudal1.conv_tf32_bf16: xh*wh alone on TF32, whose products of two
TF32 numbers are exact, plus the two small cross terms as one bf16 convolution over 2x the channels,
at bf16's twice-TF32 tensor-core rate). The cross terms are ~2^-11 of the result, so bf16's 8-bit
mantissa in their inputs and output should cost ~2^-19 of it, against the ~2^-11 of one TF32 product
that makes eager miss the strict check (tests/test_judge.py checks the algebra on the CPU).

Times are CUDA-event medians of --reps calls, each after a 256 MB write that evicts the L2 (as the
judge flushes before every call); the head alone, no epilogue. err/tol is the judge's strict measure
(evaluate._compare against an fp64 convolution of the same inputs; <= 1 passes).
"""
import argparse
import os
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
import cudal1  # noqa: E402
import evaluate  # noqa: E402

CONVS = {nn.ConvTranspose2d: F.conv_transpose2d, nn.ConvTranspose3d: F.conv_transpose3d,
         nn.Conv2d: F.conv2d, nn.Conv3d: F.conv3d}


def head(task_path, device):
    """(conv function, input, weight, bias, keyword arguments) of the task's first convolution, on
    the task's own inputs and initialisation (seeded)."""
    mod = evaluate.load_module(task_path, "task")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(device)
    m = next(m for m in model.modules() if type(m) in CONVS)
    x = mod.get_inputs()[0].to(device)
    kw = dict(stride=m.stride, padding=m.padding, dilation=m.dilation)
    if isinstance(m, (nn.ConvTranspose2d, nn.ConvTranspose3d)):
        kw["output_padding"] = m.output_padding
    return CONVS[type(m)], x, m.weight.detach(), None if m.bias is None else m.bias.detach(), kw


def timed(fn, reps, flush):
    """Median ms of reps calls of fn, the L2 flushed before each."""
    times = []
    for _ in range(reps + 2):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times[2:])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=10, help="timed calls per way")
    p.add_argument("--out", default="", help="Markdown report to write")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench/conv_precision.py times cuDNN's TF32 and bf16 convolutions: it needs a GPU")
    device = torch.device("cuda")
    lib = os.path.join(ROOT, "kernels", "level2")
    names = sorted(f for f in os.listdir(lib) if f.endswith(".py") and "conv_3xtf32" in open(os.path.join(lib, f)).read())
    flush = torch.empty(64 << 20, device=device)
    ways = {"eager (TF32)": lambda c, x, w, b, kw: c(x, w, b, **kw),
            "true fp32": lambda c, x, w, b, kw: c(x, w, b, **kw),
            "3xTF32": lambda c, x, w, b, kw: cudal1.conv_3xtf32(c, x, w, b, **kw),
            "TF32 + bf16": lambda c, x, w, b, kw: cudal1.conv_tf32_bf16(c, x, w, b, **kw)}
    rows = []
    for name in names:
        conv, x, w, b, kw = head(os.path.join(ROOT, "kernelbench", "level2", name.split(".")[0] + ".py"), device)
        with cudal1.cudnn_tf32(False):
            want = conv(x.double(), w.double(), None if b is None else b.double(), **kw)
        cells = []
        for way, fn in ways.items():
            with cudal1.cudnn_tf32(way == "eager (TF32)"):
                ms = timed(lambda: fn(conv, x, w, b, kw), args.reps, flush)
                got = fn(conv, x, w, b, kw)
            cells.append((ms, evaluate._compare(got, want, evaluate.STRICT)[2]))
            del got
        del want
        torch.cuda.empty_cache()
        rows.append((name.split(".")[0], tuple(x.shape), cells))
        print(name, " | ".join(f"{way} {ms:.3f} ms err/tol {e:.3g}" for way, (ms, e) in zip(ways, cells)), flush=True)
    env = evaluate.environment("cuda")
    md = ["# fp32-accurate convolution heads (" + env["gpu"] + ")", "",
          "- command: `python bench/conv_precision.py" + (f" --out {args.out}" if args.out else "") + "`",
          "- " + ", ".join(f"{k} {v}" for k, v in env.items()),
          f"- the first convolution of each level-2 task whose library solution calls cudal1.conv_3xtf32, on the task's "
          f"inputs; CUDA-event median of {args.reps} calls, L2 flushed before each; err/tol: the judge's strict check "
          "against fp64 (<= 1 passes)", "",
          "| task | input | " + " | ".join(f"{w} ms | err/tol" for w in ways) + " | TF32 + bf16 vs 3xTF32 |",
          "|---|---|" + "---|---|" * len(ways) + "---|"]
    for name, shape, cells in rows:
        md.append(f"| {name} | {shape} | " + " | ".join(f"{ms:.3f} | {e:.3g}" for ms, e in cells)
                  + f" | {cells[2][0] / cells[3][0]:.2f}x |")
    text = "\n".join(md) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

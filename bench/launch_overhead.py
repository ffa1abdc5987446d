"""Where do the microseconds of a tiny launch-bound task go? Eager vs one solution, outside the judge.

For each (task, solution) pair: median per call over bare loops with a sync after every call
(host clock), with and without an L2 flush before the call, and the GPU time alone (CUDA events
around the call). Host time minus GPU time is what Python, the dispatcher or pybind11 cost.

    python bench/launch_overhead.py kernelbench/level1/22_Tanh.py kernels/level1/22_Tanh.py ...
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import evaluate  # noqa: E402

N = 2000
flush = torch.empty(120 << 20, dtype=torch.uint8, device="cuda")


def per_call_us(model, xs, l2_flush):
    host, gpu = [], []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.no_grad():
        for i in range(N):
            if l2_flush:
                flush.zero_()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            model(*xs)
            end.record()
            torch.cuda.synchronize()
            host.append(time.perf_counter() - t0)
            gpu.append(start.elapsed_time(end) / 1e3)
    return statistics.median(host) * 1e6, statistics.median(gpu) * 1e6


print(f"# Launch overhead probe (bare loops, outside the judge)\n\n- command: `python {' '.join(sys.argv)}`\n"
      f"- commit {evaluate.commit()}, GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; {N} calls per row, median\n")
print("| task | model | host us | host us, L2 flushed | GPU us (events) |")
print("|---|---|---|---|---|")
args = sys.argv[1:]
for task, sol in zip(args[::2], args[1::2]):
    w = evaluate.Worker(task, sol, {**evaluate.DEFAULTS, "device": "cuda"})
    xs = w.inputs()
    noop = torch.zeros(1, device="cuda")
    for name, m in (("eager", w.ref), (os.path.basename(sol), w.new), ("x.add_(1) only", lambda *a: noop.add_(1))):
        for _ in range(50):
            m(*xs)
        h, g = per_call_us(m, xs, False)
        hf, _ = per_call_us(m, xs, True)
        print(f"| {os.path.basename(task)} | {name} | {h:.1f} | {hf:.1f} | {g:.1f} |")

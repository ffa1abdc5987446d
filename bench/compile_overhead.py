"""Why does torch.compile read slower than eager on tiny tasks? Time both ways on one task:
bare loops, and through the judge's own Worker.call (flag reset, seeding, L2 flush, sync).

    python bench/compile_overhead.py kernelbench/level1/19_ReLU.py
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import evaluate  # noqa: E402

task = sys.argv[1] if len(sys.argv) > 1 else "kernelbench/level1/19_ReLU.py"
w = evaluate.Worker(task, None, {**evaluate.DEFAULTS, "device": "cuda", "compile": True})
xs = w.inputs()


def bare(model, n=200):
    ts = []
    with torch.no_grad():
        for _ in range(n):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(*xs)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


def judged(model, n=200):
    with torch.no_grad():
        return statistics.median(w.call(model, w.clone(xs), k)[1] for k in range(n)) * 1e6


for name, model in (("eager", w.ref), ("compiled", w.compiled)):
    print(f"{name:9s} bare {bare(model):7.1f} us   judged {judged(model):7.1f} us   bare again {bare(model):7.1f} us")
print(f"floor {statistics.median(w.call(w.trivial, [], k)[1] for k in range(200)) * 1e6:.1f} us")

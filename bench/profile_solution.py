"""Where does a solution's time go? torch.profiler over a few calls of eager and of each solution.

For a task whose solution is slower than its estimate (level1/8's GEMMs read 7.5-7.9 ms where
~3 ms was expected), this prints, per model, the wall time per call and the GPU kernels that
take the time: name, calls per forward, and microseconds per forward.

    python bench/profile_solution.py kernelbench/level1/8_Matmul_with_irregular_shapes_.py \
        kernels/level1/8_Matmul_with_irregular_shapes_.py kernels/level1/8_Matmul_with_irregular_shapes_.v2.py
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import evaluate  # noqa: E402

CALLS = 5
task, solutions = sys.argv[1], sys.argv[2:]
print(f"## {os.path.basename(task)}\n\n- command: `python {' '.join(sys.argv)}`\n- commit {evaluate.commit()}, "
      f"{torch.cuda.get_device_name()}, {CALLS} profiled calls per model after 3 warm-up calls\n")
for sol in [None] + solutions:
    w = evaluate.Worker(task, sol, {**evaluate.DEFAULTS, "device": "cuda"})
    model, name = (w.ref, "eager") if sol is None else (w.new, os.path.basename(sol))
    xs = w.inputs()
    with torch.no_grad():
        for _ in range(3):
            model(*xs)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS):
                model(*xs)
            torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / CALLS
    events = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    events.sort(key=lambda e: -e.device_time_total)
    gpu = sum(e.device_time_total for e in events) / CALLS
    print(f"### {name}: {wall * 1e3:.3f} ms per call (profiled), GPU kernels {gpu / 1e3:.3f} ms\n")
    print("| kernel | calls per forward | us per forward |\n|---|---|---|")
    for e in events[:8]:
        print(f"| `{e.key[:90]}` | {e.count / CALLS:g} | {e.device_time_total / CALLS:.1f} |")
    print()
    del w, model
    torch.cuda.empty_cache()

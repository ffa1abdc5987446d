"""Why do our small CUDA modules cost 10-20 us more per call than eager inside the judge?

Judges Tanh (level1/22, 2 MB moved, launch-bound) with solutions that add one piece of our call
path at a time to eager's own torch.tanh, each module linked with a static and with a shared CUDA
runtime (the Makefile's CUDART):

  eager      torch.tanh(x) alone: an A/A baseline for the solution's slot in the judge
  +pybind    torch.tanh(x) after a pybind11 call that does nothing
  +runtime   ... after a pybind11 call to cudaGetLastError() (the module's runtime, no launch)
  +launch    ... after a pybind11 call that launches an empty kernel on the current stream
  kernel     kernels/level1/22_Tanh.py itself

and then the library's kernels for six launch-bound tasks, built both ways. The faster runtime
(geomean speedup over those kernels) is written to out/cudart for the calling script.

    python bench/module_overhead.py > results/h200-module-overhead.md      (~2 min with builds)
"""
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
TASK = os.path.join(ROOT, "kernelbench/level1/22_Tanh.py")
LIBRARY = ["19_ReLU", "21_Sigmoid", "22_Tanh", "23_Softmax", "47_Sum_reduction_over_a_dimension",
           "48_Mean_reduction_over_a_dimension"]

PROBE_SRC = r'''
#include <pybind11/pybind11.h>
#include <cuda_runtime.h>
#include <cstdint>
__global__ void empty_kernel() {}
void noop(uintptr_t) {}
void last_error(uintptr_t) { (void)cudaGetLastError(); }
void launch(uintptr_t stream) { empty_kernel<<<1, 32, 0, reinterpret_cast<cudaStream_t>(stream)>>>(); }
PYBIND11_MODULE(MODULE_NAME, m) { m.def("noop", &noop); m.def("last_error", &last_error); m.def("launch", &launch); }
'''

SOLUTION = '''
import torch
import torch.nn as nn
import cudal1
_ext = cudal1.load_kernel({src!r}, "cuda")

class ModelNew(nn.Module):
    def forward(self, x):
        _ext.{fn}(torch._C._cuda_getCurrentRawStream(x.get_device()))
        return torch.tanh(x)
'''

EAGER = '''
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.tanh(x)
'''


def variants(rt):
    """(name, task, ModelNew source) for one runtime; the comment gives each runtime its own build."""
    src = f"// cudart={rt}\n" + PROBE_SRC
    out = [("+pybind", TASK, SOLUTION.format(src=src, fn="noop")),
           ("+runtime", TASK, SOLUTION.format(src=src, fn="last_error")),
           ("+launch", TASK, SOLUTION.format(src=src, fn="launch"))]
    for name in LIBRARY:
        kernel = open(os.path.join(ROOT, f"kernels/level1/{name}.py")).read()
        kernel = kernel.replace('CUDA_SRC = r"""', f'CUDA_SRC = r"""// cudart={rt}', 1)
        out.append((f"kernel {name[:12]}", os.path.join(ROOT, f"kernelbench/level1/{name}.py"), kernel))
    return out


def run_group(rt):
    """One runtime's variants in one judge run (this process's env carries CUDART to make)."""
    import evaluate
    named = ([("eager", TASK, EAGER)] if rt == "static" else []) + variants(rt)
    recs = evaluate.judge_many([(task, src) for _, task, src in named], time_budget=1.0)
    for (name, _, _), rec in zip(named, recs):
        print(json.dumps({"variant": name, "cudart": rt if name != "eager" else "-", **rec}))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--group":
        run_group(sys.argv[2])
        sys.exit()
    import evaluate
    rows = []
    for rt in ("static", "shared"):
        p = subprocess.run([sys.executable, __file__, "--group", rt], env={**os.environ, "CUDART": rt},
                           capture_output=True, text=True, cwd=ROOT)
        rows += [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
        if p.returncode:
            print(f"group {rt} failed:\n{p.stderr[-2000:]}", file=sys.stderr)
    print(f"# Our module's cost per call inside the judge (level1/22_Tanh)\n\n- command: `python bench/module_overhead.py`"
          f"\n- commit {evaluate.commit()}; {evaluate.gpu_info()[0]}; judge at --time-budget 1; times as the judge's clock reads them\n")
    print("| variant | CUDA runtime | status | ref us | sol us | sol - ref us | speedup | rounds |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        us = lambda k: f"{r[k] * 1e3:.1f}" if r.get(k) is not None else "-"
        diff = f"{(r['sol_ms'] - r['ref_ms']) * 1e3:+.1f}" if r.get("sol_ms") is not None else "-"
        sp = f"{r['speedup']:.2f}x" if r.get("speedup") else "-"
        print(f"| {r['variant']} | {r['cudart']} | {r['status']} | {us('ref_ms')} | {us('sol_ms')} | {diff} | {sp} | {r.get('rounds', '-')} |")
    geo = {}
    for rt in ("static", "shared"):
        sp = [r["speedup"] for r in rows if r["cudart"] == rt and r["variant"].startswith("kernel") and r.get("speedup")]
        geo[rt] = math.exp(sum(map(math.log, sp)) / len(sp)) if sp else 0.0
        print(f"\n- library kernels linked with the {rt} runtime: {len(sp)} correct, geomean {geo[rt]:.3f}x")
    os.makedirs(os.path.join(ROOT, "out"), exist_ok=True)
    with open(os.path.join(ROOT, "out", "cudart"), "w") as f:
        f.write(max(geo, key=geo.get))

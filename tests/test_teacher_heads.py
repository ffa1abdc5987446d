"""bench/teacher_heads.py on the CPU: every teacher solution of a transposed-conv task gets a 3xTF32
twin, and the PyTorch-level twins pass the judge here (on the CPU the three products run in fp32, so
this checks the rewrite, not TF32's accuracy: the GPU test of cudal1.conv_3xtf32 does that)."""
import importlib.util
import os

import evaluate
from kernelbench import generate as gen
from kernelbench import teacher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location("teacher_heads", os.path.join(ROOT, "bench", "teacher_heads.py"))
th = importlib.util.module_from_spec(spec)
spec.loader.exec_module(th)  # definitions only


def test_twins_of_transposed_conv_heads_pass_on_cpu(tmp_path):
    pairs, seed = [], 0
    while len(pairs) < 6:
        name, source, meta = gen.generate(seed, "cpu")
        seed += 1
        if meta["held_out"] or meta["degenerate"] or not meta["head"].startswith("conv_transpose"):
            continue
        sols = teacher.solutions(source, meta)
        # every solution that runs the head gets a twin (a constant output skips the head)
        assert all(bool(th.split_head(s, meta["head"])) == ("allow_tf32" in s) for _, s in sols), name
        twins = [(m + "_3xtf32", th.split_head(s, meta["head"])) for m, s in sols if "allow_tf32" in s]
        assert all("allow_tf32" not in s and "cudal1.conv_3xtf32(F.conv_transpose" in s for _, s in twins), name
        teacher.write(str(tmp_path), name, source, meta, twins)
        task = os.path.join(tmp_path, "tasks", "levelG", f"{name}.py")
        pairs += [(task, teacher.solution_path(str(tmp_path), name, m)) for m, s in twins if "load_cuda" not in s]
    records = evaluate.judge_many(pairs, device="cpu", trials=2, iters=3, min_iters=1, time_budget=0.1, jobs=2)
    assert [r["status"] for r in records] == ["ok"] * len(pairs), [(p[1], r["message"]) for p, r in zip(pairs, records)]

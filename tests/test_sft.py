"""train_sft.py end to end on the CPU: stage 1 on one solution, one stage-2 round judged by the real judge."""
import json
import os
import subprocess
import sys

import cudal1

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELU = '''"""ReLU as clamp_min: one elementwise pass over x, the same memory traffic as torch.relu."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''


def test_stage2_round_with_the_real_judge(tmp_path):
    # One short solution, a tiny model, and enough steps to memorise it: greedy samples then
    # reproduce it, so the round has answers that parse and that the judge must pass.
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"), "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(out), "--device", "cpu",
           "--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "512", "--vocab-size", "512",
           "--steps", "100", "--batch-size", "1", "--lr", "1e-2", "--warmup", "5", "--rounds", "1",
           "--num-samples", "2", "--temperature", "0", "--round-steps", "2", "--sample-tasks", "level1/19_ReLU.py",
           "--trials", "2", "--iters", "5", "--judge-jobs", "1", "--log-every", "20"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # a tiny model; a busy 2-core box punishes thread barriers
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "answer tokens per solution" in p.stdout

    rounds = [json.loads(line) for line in open(out / "stage2.jsonl")]
    assert [(r["round"], r["final"]) for r in rounds] == [(0, False), (1, True)]
    first = rounds[0]
    assert first["answers"] == 2 and first["parsed"] == 1.0, first
    assert first["correct"] == 1.0 and first["statuses"] == {"ok": 2}, first
    assert first["speedup_max"] > 0 and first["pool"] == 1
    assert first["kept"] == 0  # the answer is the kernels/ solution itself: nothing new to keep
    records = [json.loads(line) for line in open(out / "judge" / "round0-rank0.jsonl")]
    assert len(records) == 1 and records[0]["status"] == "ok" and records[0]["task"] == "level1/19_ReLU.py"

    model, tok, meta = cudal1.load_checkpoint(str(out))
    assert meta["step"] == 100 and meta["round"] == 2 and meta["settings"]["num_samples"] == 2
    # run again: it resumes after the final pass and has nothing left to do
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "resumed" in p.stdout, p.stderr[-3000:]
    assert len(open(out / "stage2.jsonl").readlines()) == 2

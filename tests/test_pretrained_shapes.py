"""bench/pretrained_shapes.py --tiny on the CPU: the path the H200 run takes (Qwen2.5-Coder configs through
cudal1_hf.config_from_hf, a stage-1 step, decode both ways, a stage-3 step), with the real shapes' parameter
counts checked against the model cards on the way, and a table with every row and a number in each cell the
CPU can fill (MFU and peak memory need a GPU)."""
import os
import sys
import warm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASUREMENTS = ["stage 1 train step", "decode, graph=False", "decode, graph=True", "stage 3 sample",
                "stage 3 update", "stage 3 step (no judge)"]


def test_tiny_run_fills_the_table(tmp_path):
    out = tmp_path / "shapes.md"
    r = warm.run([sys.executable, "bench/pretrained_shapes.py", "--tiny", "--out", str(out)], cwd=ROOT,
                 capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    text = out.read_text()
    assert r.stdout.strip() == text.strip()  # the same table to stdout and to the file
    assert "commit " in text and "torch " in text and "--tiny" in text
    assert "Incomplete" not in text  # written after every part; the last write is the whole run's
    rows = [line.strip("| ").split(" | ") for line in text.splitlines() if line.startswith("| Qwen")]
    assert [(r[0].split(",")[0], r[1]) for r in rows] == [(f"Qwen2.5-Coder-{m} (tiny)", w) for m in ("0.5B", "1.5B")
                                                          for w in MEASUREMENTS]
    for model, what, shape, secs, tok_s, mfu, peak in rows:
        assert float(secs) > 0 and float(tok_s.replace(",", "")) > 0, (model, what)
        assert (mfu, peak) == ("-", "-")  # the CPU: no peak FLOP/s, no CUDA allocator

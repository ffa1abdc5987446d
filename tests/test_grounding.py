"""The bench/ analyses of answers and moves: grounding.py (which attributes an answer reads that its task does
not define), held_out_moves.py (the move each held-out answer writes), move_pick.py (a move by a cost model),
level2_probe.py (held-out level-2 answers under edits of the task text) and constant_outputs.py (tasks whose
output never moves)."""
import ast
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import grounding  # noqa: E402

TASK = '''import torch.nn as nn


class Model(nn.Module):
    def __init__(self, multiplier):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.multiplier = multiplier

    def forward(self, x):
        return self.fc(x) * self.multiplier
'''


def test_names_the_task_lacks_are_reported_and_the_answers_own_are_not():
    recalled = "class ModelNew(Model):\n    def forward(self, x):\n        return self.gemm(x) * self.scale\n"
    assert grounding.unknown(TASK, recalled) == ["gemm", "scale"]
    own = ("class ModelNew(Model):\n    _key = None\n\n    def folded(self):\n        self._cached = self.fc.weight * self.multiplier\n"
           "        return self._cached\n\n    def forward(self, x):\n        return x @ self.folded().t() + self._key\n")
    assert grounding.unknown(TASK, own) == []
    assert grounding.unknown(TASK, "class ModelNew(Model:\n") is None


def test_a_task_is_read_from_the_run_that_holds_the_answers(tmp_path, monkeypatch):
    # the run's out/ unpacked elsewhere: its task, not one of the same path under the working folder
    run, here = tmp_path / "run", tmp_path / "here"
    for root, text in ((run, TASK), (here, "stale")):
        (root / "out" / "held_out").mkdir(parents=True)
        (root / "out" / "held_out" / "1_X.py").write_text(text)
    answers = run / "out" / "answers.jsonl"
    monkeypatch.chdir(here)
    assert open(grounding.task_file(str(answers), "out/held_out/1_X.py")).read() == TASK
    assert grounding.task_file(str(answers), "kernelbench/none.py") == "kernelbench/none.py"


OPENINGS = {  # one phrasing of each move's first sentence (teacher.OPENINGS reads both)
    "drop_noop": "Drop the no-op of the chain: x.", "reduce_first": "Reduce first, then apply the op to the result.",
    "constant_output": "The output does not depend on the input: make it without reading it.",
    "merge_affine": "Merge consecutive affine ops into one multiply-add.",
    "fold_scale_into_weights": "Scale the Linear's weight instead of its output.",
    "fold_bias": "Let the Linear's bias do the adds that follow it.",
    "fold_reduction": "Sum the Linear's weight over its output channels instead of summing its output.",
    "fuse_epilogue": "One generated kernel for the whole chain: 2 ops, one pass."}


def test_held_out_answers_are_counted_by_the_move_they_write(tmp_path):
    # bench/held_out_moves.py: a held-out task's fused answer (its teacher's, passing, at two steps: one
    # distinct code; its step-0 copy in a second run's file not counted again), a fused one failing to build on
    # a name declared twice, and a PyTorch-level one with an op changed (failing) are each named by their
    # nearest teacher solution, an answer restating the task's forward by 'reference'; the failing
    # PyTorch-level one's differing line is shown
    import json
    import cudal1
    import held_out_moves
    from kernelbench import generate, teacher
    run = tmp_path / "run"
    (task,) = cudal1.held_out_tasks(str(run / "out" / "held"), 1, "cpu")["generated"]
    sols = dict(teacher.solutions(cudal1.read(task), generate.read_meta(task)))
    other = next(m for m in sols if m != "fuse_epilogue")
    wrong = sols[other].replace("x = ", "x = -", 1)  # one line changed
    assert wrong != sols[other]
    rel = os.path.relpath(task, run)
    called = held_out_moves.call_attributes(sols["fuse_epilogue"].splitlines())
    doc = lambda move: ast.get_docstring(ast.parse(sols[move]))
    absent = next(m for m in OPENINGS if m not in sols)  # a move this task does not admit
    assert called == ["multiplier"], called  # the generator changed: edit the calls below to fit
    rows = [dict(step=0, attempt=1, task=rel, source=sols["fuse_epilogue"], status="ok", speedup=2.0),
            dict(step=5, attempt=1, task=rel, source=sols["fuse_epilogue"], status="ok", speedup=1.5),
            dict(step=5, attempt=2, task=rel, source=wrong, status="incorrect", message="max abs err 2",
                 analysis="Negate the output.\nIt is faster."),
            dict(step=5, attempt=3, task=rel, source="\n".join(held_out_moves.restated(cudal1.read(task))),
                 status="incorrect", analysis=doc(other)),  # says `other`, writes the task's forward again
            dict(step=5, attempt=4, task=rel, status="compile_error", analysis=OPENINGS[absent],
                 source=sols["fuse_epilogue"].replace("__restrict__ y,", "__restrict__ x,"),  # x declared twice
                 message="build failed\nbuild/kernels/a.cu(4): error: duplicate parameter name"),
            dict(step=5, attempt=5, task=rel, status="incorrect", message="max abs err 3",  # the call copied wrong
                 analysis=doc("fuse_epilogue") + " It reads `self.nowhere`.",  # and names code the teacher does not
                 source=sols["fuse_epilogue"].replace(f"self.{called[0]},", f"self.{called[0]}_2,")),
            dict(step=0, attempt=1, task="level2/1_X.py", source="x", status="ok")]
    answers = run / "held_out_answers.jsonl"
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = run / "arm" / "held_out_answers.jsonl"  # another run given the same step-0 line: counted once,
    again.parent.mkdir()  # and stage 1's file (train_sft.py: the answer's text) holding the fused one again
    again.write_text(json.dumps(rows[0]) + "\n" + json.dumps(dict(
        task=rel, text=cudal1.format_answer(sols["fuse_epilogue"]), status="ok", message=None)) + "\n")
    out = tmp_path / "moves.md"
    assert rows[4]["source"] != sols["fuse_epilogue"]  # the edit took
    assert held_out_moves.main([str(answers), str(again), "--diffs", "5", "--out", str(out)]) == 0
    text = out.read_text()
    # its passing answers' speed: 2.0x and 1.5x (stage 1's names none), their geomean
    assert "| fuse_epilogue | 5 | 3 | 60% | 1.73x | compile_error 1, incorrect 1 |" in text, text
    assert f"| {other} | 1 | 1 | 0% | - | incorrect 1 |" in text, text
    assert "| reference | 1 | 1 | 0% | - | incorrect 1 |" in text, text  # the task's own forward again: no move
    assert "7 answers to generated held-out tasks, 5 distinct" in text
    # the build failure counted by the judge's message, the wrong call by its attributes
    assert "Of 4 distinct failing codes, 1 fail on binding a name before any output is compared, 1 pass their " \
        "kernel other attributes than the nearest teacher solution's call (or in another order): incorrect 2, " \
        in text, text
    assert "a name declared twice 1" in text and "a kernel call passing other attributes 1" in text, text
    assert f"{other}, incorrect: max abs err 2\n\n> Negate the output.\n\n```diff" in text, text  # what it said
    assert "\n+" in text.split("```diff")[1]
    # what the analyses say: stage 1's answer (its teacher's own docstring) and the four others, each its own row
    for what, correct in (("a move the task does not admit", "0%"), ("an opening the teacher never writes", "0%"),
                          ("an admitted move; the code writes another", "0%"),
                          ("the move written; it names code the teacher's analysis does not", "0%"),
                          ("the move written, naming what the teacher's analysis names (or nothing)", "100%")):
        assert f"| {what} | 1 | {correct} |" in text, (what, text)
    assert f"Moves stated where the task admits no such move: {absent} 1." in text, text
    # against the taught move: the task's kernel pick is its fused epilogue (the head and one kernel), so the
    # five fused answers write it (three pass: 2.0x, 1.5x and stage 1's unread one), the two others do not
    assert held_out_moves.taught(task, ()) == "fuse_epilogue"
    assert "| the taught move | 5 | 60% | 1.73x |" in text and "| another move | 2 | 0% | - |" in text, text
    assert f"{other} for fuse_epilogue 1" in text and "reference for fuse_epilogue 1" in text, text
    # --builds: each file its own build, so the second file's step-0 copy counts too
    assert held_out_moves.main([str(answers), str(again), "--builds", "--out", str(out)]) == 0
    assert "| fuse_epilogue | 6 | 3 |" in out.read_text(), out.read_text()
    assert held_out_moves.expressions("Drop the no-ops of the chain: x.max(dim=1, keepdim=True), self.d(x). "
                                      "`x * 2` is a no-op.") == {"x.max(dim=1, keepdim=True)", "self.d(x)", "x * 2"}
    # a call is compared only with a call: nearest to the task's own forward (which calls no kernel), it is
    # the answer's status
    calling = dict(source="_k.epilogue(self.a)", status="incorrect")
    assert held_out_moves.failure_kind(calling, ["x = self.fc(x)"]) == "incorrect"
    assert held_out_moves.failure_kind(calling, ["_k.epilogue(self.b)"]) == held_out_moves.OTHER_ATTRIBUTES


def test_move_pick_prices_launches_and_breaks_ties_by_the_ranking():
    # bench/move_pick.py on a CPU-sized task with no head: its fused epilogue is one kernel; the other
    # moves run their ATen ops, a logsumexp as 4 kernels (the reference: clamp, div, sub, logsumexp = 7)
    import move_pick
    from kernelbench import generate as gen
    name, source, meta = gen.generate(145, "cpu")
    assert name == "145_Max_Divide_Subtract_LogSumExp", name  # the generator changed: pick another seed
    ref = move_pick.forward_ops(source)[0]
    assert [o[0] for o in ref] == ["clamp", "div", "sub", "logsumexp"] and sum(o[1] for o in ref) == 7, ref
    cost = move_pick.costs(source, meta)
    assert {m: c[0] for m, c in cost.items()} == dict(fuse_epilogue=1, merge_affine=6, reduce_first=7, drop_noop=6)
    # drop_noop and merge_affine tie at 6 launches: the ranking decides, not the order of `speed`
    speed = dict(drop_noop=1.3, merge_affine=1.1, reduce_first=0.9)  # say the fused epilogue failed
    pick = move_pick.picks(speed, cost, rank=dict(merge_affine=1.05, drop_noop=1.02))
    assert (pick["ranking"], pick["launches"], pick["best"]) == ("merge_affine", "merge_affine", "drop_noop"), pick


def test_move_pick_prices_a_head_by_its_flops():
    # a Linear head: the fused epilogue is the addmm and one kernel, priced at the head's 2*B*K*N FLOPs
    # plus the bytes it moves; a convolution's FLOPs per output element are 2 * in/groups * k*k
    import torch
    import move_pick
    from kernelbench import generate as gen
    name, source, meta = gen.generate(1, "cpu")
    assert name.startswith("1_Gemm_"), name  # the generator changed: pick another seed
    ref = move_pick.forward_ops(source)[0]
    head = ref[0]
    assert head[0] == "addmm", ref
    cost = move_pick.costs(source, meta)
    assert cost["fuse_epilogue"][0] == 2
    assert cost["fuse_epilogue"][1] == pytest.approx(head[2] + move_pick.LAUNCH_S + (head[3] + ref[-1][3]) / move_pick.BANDWIDTH)
    bias, a, b = torch.zeros(8), torch.zeros(4, 16), torch.zeros(16, 8)
    assert move_pick.flops("addmm", (bias, a, b), None) == 2 * 4 * 16 * 8
    x, w = torch.zeros(2, 3, 10, 10), torch.zeros(5, 3, 3, 3)
    out = torch.nn.functional.conv2d(x, w)  # (2, 5, 8, 8)
    assert move_pick.flops("convolution", (x, w, None, 1, 0, 1, False, 0, 1), out) == 2 * out.numel() * 3 * 9
    wt = torch.zeros(3, 5, 3, 3)  # transposed: (in, out, k, k); each input element reaches out * k * k outputs
    assert move_pick.flops("convolution", (x, wt, None, 1, 0, 1, True, 0, 1), None) == 2 * x.numel() * 5 * 9


def test_held_out_compare_pairs_two_recipes_builds_by_task(tmp_path):
    # bench/held_out_compare.py: recipe A's two builds (one gzipped, as results/ keeps them) read 1.00x on every
    # task (one all correct at 1.0x, one all failing), recipe B's one build 2.0x at its last step (its step-0
    # line, at 4.0x, is not the build's): B/A is 2.000x, and the interval too, since every task says the same
    import gzip
    import json
    import cudal1
    import held_out_compare
    tasks = cudal1.held_out_tasks(str(tmp_path / "made"), 4, "cpu")["generated"]
    row = lambda t, step, ok, s: dict(step=step, attempt=1, task="out/x/held_out/" + cudal1.held_key(t),
                                      status="ok" if ok else "incorrect", speedup=s if ok else None)
    a1, a2, b = tmp_path / "a1.jsonl.gz", tmp_path / "a2.jsonl", tmp_path / "b.jsonl"
    with gzip.open(a1, "wt") as f:
        f.writelines(json.dumps(row(t, 0, True, 1.0)) + "\n" for t in tasks)
    a2.write_text("".join(json.dumps(row(t, 0, False, None)) + "\n" for t in tasks))
    level2 = dict(step=5, attempt=1, task="kernelbench/level2/1_X.py", status="ok", speedup=1.1)
    missing = dict(level2, task="kernelbench/level2/10_Y.py", status="runtime_error", speedup=None,
                   message="AttributeError: 'ModelNew' object has no attribute 'lower'")
    b.write_text("".join(json.dumps(row(t, 0, True, 4.0)) + "\n" + json.dumps(row(t, 5, True, 2.0)) + "\n"
                         + json.dumps(dict(row(t, 5, False, None), attempt=2)) + "\n" for t in tasks)
                 + json.dumps(level2) + "\n" + json.dumps(missing) + "\n" + json.dumps(dict(missing, step=0)) + "\n")
    out = tmp_path / "compare.md"
    assert held_out_compare.main(["--a", str(a1), str(a2), "--b", str(b), "--size", "cpu", "--work",
                                  str(tmp_path / "work"), "--resamples", "50", "--out", str(out)]) == 0
    text = out.read_text()
    assert "| A | a2.jsonl | " in text and "0 of 4 (0%), 1.00x | - |" in text, text  # no level-2 answers there
    assert "4 of 4 (100%), 2.00x | 1 of 2 |" in text, text  # B: its last step, first attempts only
    assert "| A | 0 | 0 | 0 | 0 | 0 | 0 |" in text and "| B | 1 | 0 | 0 | 1 | 0 | 0 |" in text, text  # by verdict
    assert "A 1.000x, B 2.000x, B/A 2.000x, 95% interval 2.000-2.000x" in text, text
    # correct by the ops a name lists after its head: B's two level-2 answers name one op each, one passes
    assert [held_out_compare.ops_named(k) for k in ("level2/59_Matmul_Swish_Scaling.py", "level2/17_Conv2D_X_Y.py",
                                                    "levelG/15_Multiply_Multiply_LeakyReLU.py")] == [2, 2, 3]
    lines = text.splitlines()
    at = next(i for i, r in enumerate(lines) if r.startswith("| recipe | generated"))
    head, a_row, b_row = lines[at], lines[at + 2], lines[at + 3]
    assert head.endswith("| level 2, 1 |") and a_row.endswith("| - |") and b_row.endswith("| 1 of 2 |"), lines[at:]
    with pytest.raises(SystemExit, match="no such answers file"):
        held_out_compare.main(["--a", str(tmp_path / "none.jsonl"), "--b", str(b)])


def test_level2_probe_edits_a_task_text_and_tallies_answers(tmp_path):
    # bench/level2_probe.py: the edits keep the code and change only what they name (73's second docstring
    # paragraph, its batch, a shape comment where the conv changes the shape, traced on the meta device);
    # a tiny untrained policy's answers parse under none, and the report says so for every edit
    import level2_probe
    import cudal1
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    task = cudal1.read(os.path.join(root, "kernelbench", "level2", "73_Conv2d_BatchNorm_Scaling.py"))
    short = level2_probe.short_doc(task)
    assert "training mode" in task and "training mode" not in short
    assert short.split('"""')[1] == "Conv2d, BatchNorm2d, scale: (batch, 3, 32, 32) -> (batch, 16, 30, 30)."
    assert ast.dump(ast.Module(ast.parse(short).body[1:], [])) == ast.dump(ast.Module(ast.parse(task).body[1:], []))
    assert "\nbatch_size = 16\n" in level2_probe.small_batch(task)
    shaped = level2_probe.with_shapes(task).splitlines()
    assert "        x = self.conv(x)  # (B, 16, 30, 30)" in shaped
    assert sum("# (B" in line for line in shaped) == 1  # bn and the scale keep the shape
    tok = cudal1.Tokenizer()
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=4096, n_layer=1, n_head=2, n_kv_head=2, n_embd=32,
                        n_hidden=64)
    cudal1.save_checkpoint(str(tmp_path / "sft"), cudal1.Transformer(cfg), tok, {})
    out = tmp_path / "probe.md"
    assert level2_probe.main(["--init", str(tmp_path / "sft"), "--max-new-tokens", "4", "--out", str(out)]) == 0
    rows = [line for line in out.read_text().splitlines() if line.startswith("| ") and " of 20 |" in line]
    assert [r.split(" | ")[1:] for r in rows] == [["0 of 20", "0 |"]] * len(level2_probe.VARIANTS)


def test_constant_outputs_tells_a_pinned_output_from_one_that_moves():
    import constant_outputs
    task = ("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self, bound):\n"
            "        super().__init__()\n        self.bound = bound\n\n    def forward(self, x):\n"
            "        return torch.clamp(torch.relu(x) + 1.0, max=self.bound)\n\n\n"
            "def get_inputs():\n    return [torch.randn(4, 8)]\n\n\ndef get_init_inputs():\n    return [BOUND]\n")
    # relu(x) + 1 >= 1, so a max of 0.5 pins every value; a max of 2.0 leaves those below it alone
    assert constant_outputs.study(task.replace("BOUND", "0.5"), seed=0) == (True, True)
    assert constant_outputs.study(task.replace("BOUND", "2.0"), seed=0) == (False, False)

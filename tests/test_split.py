"""The held-out split (cudal1.held_out): what it holds, and that no training input touches it --
not kernels/ solutions as SFT pairs or exemplars, not stage-2 or RL task lists, not bank seeds,
not generated training tasks."""
import glob
import json
import os
import random
import sys

import pytest
import torch

import cudal1
from kernelbench import generate as gen
import warm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEVEL2 = {int(f.split("_")[0]): f for f in os.listdir(os.path.join(ROOT, "kernelbench", "level2"))
          if f[0].isdigit() and f.endswith(".py")}
HELD = "level2/" + LEVEL2[83]  # held out, and kernels/level2 holds a solution of it
TRAIN = "level1/19_ReLU.py"
SOLUTION = '''"""clamp_min(0) is ReLU without the activation dispatch."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
'''


def test_level2_ids_are_the_documented_draw():
    r = random.Random(14)
    assert cudal1.HELD_OUT_LEVEL2 == tuple(5 * b + 1 + r.randrange(5) for b in range(20))
    assert all(i in LEVEL2 for i in cudal1.HELD_OUT_LEVEL2)


def test_held_out_names_tasks_solutions_and_keys(tmp_path):
    assert cudal1.held_out(HELD) and cudal1.held_out(os.path.join(ROOT, "kernelbench", HELD))
    assert cudal1.held_out("kernels/" + HELD[:-3] + ".v2.py")  # a solution names its task
    assert not cudal1.held_out(TRAIN) and not cudal1.held_out("level1/" + LEVEL2[83])  # ids are per level
    assert not cudal1.held_out("level2/" + LEVEL2[12])
    # a generated task file is placed by the metadata the generator writes beside it
    held = gen.tasks(0, 1, "cpu", "held_out")[0]
    train = gen.tasks(0, 1, "cpu", "train")[0]
    for name, source, meta in (held, train):
        gen.write(str(tmp_path / "gen"), name, source, meta)
        assert cudal1.held_out(str(tmp_path / "gen" / f"{name}.py")) == meta["held_out"] == cudal1.held_out(meta)
    assert held[2]["held_out"] and not train[2]["held_out"]
    (tmp_path / "gen" / "1_Orphan.py").write_text("")
    with pytest.raises(ValueError):  # no levelN folder and no metadata: refuse to guess
        cudal1.held_out(str(tmp_path / "gen" / "1_Orphan.py"))


def test_held_out_places_a_teacher_solution_by_its_task(tmp_path):
    """DIR/solutions/levelG/N_Name.<move>.py is judged by DIR/tasks/levelG/N_Name.json; a library
    task file is never read as metadata; a solution with no task beside it raises."""
    from kernelbench import teacher
    for split in ("train", "held_out"):
        for name, source, meta in gen.tasks(0, 3, "cpu", split=split):
            gen.write(str(tmp_path / "tasks" / "levelG"), name, source, meta)
            for move, _ in teacher.solutions(source, meta):
                assert cudal1.held_out(str(tmp_path / "solutions" / "levelG" / f"{name}.{move}.py")) == (split == "held_out")
    assert cudal1.held_out("kernels/level2/83_Conv3d_GroupNorm_Min_Clamp_Dropout.py")
    with pytest.raises(ValueError, match="no levelN folder"):
        cudal1.held_out(str(tmp_path / "solutions" / "levelG" / "999_Nothing.fold_bias.py"))


def test_generated_split():
    train = gen.tasks(0, 1500, "cpu", "train")
    held = gen.tasks(0, 60, "cpu", "held_out")
    assert held == gen.tasks(0, 60, "cpu", "held_out")  # deterministic, on demand
    assert not any(cudal1.held_out(m) for _, _, m in train) and all(cudal1.held_out(m) for _, _, m in held)
    # the held-out tasks never appear among the training seeds' tasks, by seed or by source
    assert not {m["seed"] for _, _, m in held} & {m["seed"] for _, _, m in train}
    assert not {cudal1.same_code(s) for _, s, _ in held} & {cudal1.same_code(s) for _, s, _ in train}
    # every held-out combination is met, and each of its moves is taught in other company
    seen = {frozenset(m["moves"]) for _, _, m in held}
    assert seen == set(cudal1.HELD_OUT_MOVES)
    taught = {move for _, _, m in train for move in m["moves"]}
    assert set().union(*cudal1.HELD_OUT_MOVES) <= taught and set(gen.MOVES) <= taught
    # the split is a property of the seed: both size profiles agree
    for _, _, m in held[:20] + train[:200]:
        assert gen.generate(m["seed"], "gpu")[2]["held_out"] == m["held_out"]


def test_default_task_lists_hold_no_held_out_task():
    sft = cudal1.script_defaults("train_sft.py")["DEFAULTS"]
    rl = cudal1.script_defaults("train_rl.py")["DEFAULTS"]
    lists = [d["sample_tasks"] for d in sft.values()] + [d["rl_tasks"] for d in rl.values()]
    tasks = [t for tl in lists for t in tl.split(",") if t]  # "": no listed tasks (the CPU's generated ones only)
    assert tasks and not [t for t in tasks if cudal1.held_out(t)]


def test_every_device_default_gives_stage_2_tasks():
    # a default whose rounds have nothing to sample stops the run (train_sft.py checks it before stage 1);
    # the CPU's lists no --sample-tasks, so it must draw generated ones
    sft = cudal1.script_defaults("train_sft.py")["DEFAULTS"]
    assert set(sft) == {"cpu", "cuda"}
    for name, d in sft.items():
        assert d["rounds"] == 0 or d["sample_tasks"] or (d["generated"] > 0 and d["generated_sample"] > 0), name


def test_sft_leaves_held_out_solutions_out(tmp_path):
    # the real library: every kernels/ solution of a held-out task is left out, and the run's
    # report lists the solutions and stage-2 tasks it trained on
    expect = sorted(os.path.join("kernels", level, f) for level in os.listdir(os.path.join(ROOT, "kernels"))
                    for f in os.listdir(os.path.join(ROOT, "kernels", level))
                    if f.endswith(".py") and cudal1.held_out(os.path.join(level, f)))
    assert expect, "kernels/ holds no held-out solution: this test would prove nothing"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--kernels", "kernels", "--tasks", "kernelbench",
           "--kinds", "cuda,cpp,pytorch", "--device", "cpu", "--n-layer", "1", "--n-head", "2", "--n-embd", "32",
           "--block-size", "16384", "--vocab-size", "259", "--steps", "0", "--rounds", "0",
           "--speedups", "results/h200.jsonl", "--out", str(tmp_path / "out")]
    p = warm.run(cmd + ["--sample-tasks", "all"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"left out {len(expect)} solution(s) of held-out tasks (cudal1.held_out): {', '.join(expect)}" in p.stdout
    report = json.load(open(tmp_path / "out" / "report.json"))
    assert report["solution_files"] and report["sample_tasks"]
    assert not [f for f in report["solution_files"] + report["sample_tasks"] if cudal1.held_out(f)]
    p = warm.run(cmd + ["--sample-tasks", f"{TRAIN},{HELD}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "--sample-tasks: held-out task(s), never trained on" in p.stderr, p.stdout + p.stderr


def test_rl_leaves_held_out_tasks_and_seeds_out(tmp_path):
    tok = cudal1.Tokenizer()
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=4096, n_layer=1, n_head=2, n_kv_head=2, n_embd=32, n_hidden=64)
    torch.manual_seed(0)
    cudal1.save_checkpoint(str(tmp_path / "sft"), cudal1.Transformer(cfg), tok, {"step": 0, "round": 1})
    records = []
    for task in (TRAIN, HELD):  # a solution of each, judged correct on this device: candidates for the bank
        path = tmp_path / "kernels" / task
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SOLUTION)
        records.append(json.dumps(dict(task=task, solution=str(path), status="ok", correct=True, speedup=2.0,
                                       env={"device": "cpu"})) + "\n")
    (tmp_path / "records.jsonl").write_text("".join(records))
    cmd = [sys.executable, os.path.join(ROOT, "train_rl.py"), "--init", str(tmp_path / "sft"), "--device", "cpu",
           "--kernels", str(tmp_path / "kernels"), "--tasks", os.path.join(ROOT, "kernelbench"), "--steps", "0",
           "--min-answer-tokens", "512", "--seed-bank", str(tmp_path / "records.jsonl"), "--held-out-tasks", "0"]
    p = warm.run(cmd + ["--rl-tasks", "all", "--out", str(tmp_path / "rl")], cwd=ROOT, capture_output=True,
                 text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "left out 1 held-out task(s)" in p.stdout and "bank seeded with 1 judged" in p.stdout, p.stdout
    bank = cudal1.Bank(str(tmp_path / "rl" / "bank.jsonl"))
    assert list(bank.entries) == [TRAIN] and len(bank.entries[TRAIN]) == 2  # the reference and the seed
    p = warm.run(cmd + ["--rl-tasks", f"{TRAIN},{HELD}", "--out", str(tmp_path / "rl2")], cwd=ROOT,
                 capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "--rl-tasks: held-out task(s), never trained on" in p.stderr, p.stdout + p.stderr


def test_generated_run_trains_on_no_held_out_task(tmp_path):
    # a --generated run: the generated tasks and solutions it trains on hold no held-out task (by
    # seed and by code), and the tasks its held-out evaluation judges are held-out ones, exactly
    # the first --held-out-tasks of the split
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"), "--kernels", str(tmp_path / "none"), "--device", "cpu",
           "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "4096", "--vocab-size", "259",
           "--steps", "0", "--rounds", "0", "--generated", "12", "--held-out-tasks", "3", "--num-samples", "1",
           "--max-new-tokens", "8", "--out", str(out)]
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.load(open(out / "report.json"))
    tasks_dir = out / "generated" / "tasks" / "levelG"
    # a teacher solution N_Name.<move>.py names its task N_Name.py (held_out places a task by its NAME.json)
    solved = [str(tasks_dir / (os.path.basename(f).split(".")[0] + ".py")) for f in report["solution_files"]]
    trained = report["generated_tasks"] + solved + report["sample_tasks"]
    assert report["generated_tasks"] and solved and not [f for f in trained if cudal1.held_out(f)]
    metas = [json.load(open(tasks_dir / f)) for f in sorted(os.listdir(tasks_dir)) if f.endswith(".json")]
    sources = [open(tasks_dir / (f[:-5] + ".py")).read() for f in sorted(os.listdir(tasks_dir)) if f.endswith(".json")]
    assert len(metas) == 12 and not [m for m in metas if m["held_out"] or cudal1.held_out(m)]
    # every held-out seed up to the last one used, and the evaluation's tasks: none trained on
    last = max(m["seed"] for m in metas)
    held = [gen.generate(s, "cpu") for s in range(last + 1)]
    held = [t for t in held if t[2]["held_out"]] + gen.tasks(0, 3, "cpu", "held_out")
    assert not {m["seed"] for m in metas} & {m["seed"] for _, _, m in held}
    assert not {cudal1.same_code(s) for s in sources} & {cudal1.same_code(s) for _, s, _ in held}
    evaluated = report["held_out"]["tasks"]["generated"]
    assert all(cudal1.held_out(t) for t in evaluated)
    first = gen.tasks(0, 3, "cpu", "held_out")
    assert [os.path.basename(t) for t in evaluated] == [name + ".py" for name, _, _ in first]
    assert [cudal1.same_code(open(t).read()) for t in evaluated] == [cudal1.same_code(s) for _, s, _ in first]


def test_held_out_tasks_are_the_split_and_score_counts_missing_tasks_as_1x(tmp_path):
    groups = cudal1.held_out_tasks(str(tmp_path), 3, "cpu", os.path.join(ROOT, "kernelbench"))
    assert len(groups["generated"]) == 3 and all(cudal1.held_out(t) for t in groups["generated"])
    assert [int(os.path.basename(t).split("_")[0]) for t in groups["level2"]] == list(cudal1.HELD_OUT_LEVEL2)
    for trained in ([open(groups["generated"][1]).read()], [open(groups["level2"][0]).read()]):
        with pytest.raises(ValueError, match="held-out evaluation"):  # a run that trained on one of them
            cudal1.held_out_tasks(str(tmp_path / "again"), 3, "cpu", os.path.join(ROOT, "kernelbench"), trained=trained)
    a, b, c = groups["generated"]
    records = [(a, {"correct": True, "speedup": 2.0}), (a, {"correct": True, "speedup": 4.0}),
               (b, {"correct": False, "speedup": None}), (b, None)]
    s = cudal1.split_score(records, [a, b, c])
    # a's best (4x) counts once; b and c have no correct answer: 1.0x each
    assert s == dict(tasks=3, answers=4, correct=0.5, solved=1, geomean=pytest.approx(4 ** (1 / 3)))


def test_a_second_answer_counts_for_its_own_task():
    ok = lambda x: ("src", {"correct": True, "speedup": x})
    fail = ("src", {"correct": False, "speedup": None})
    # a: first 2x, second try fails; b: first fails, second 3x; c: no second try; resampled for a alone
    results = [("a", ok(2.0), fail, ok(1.5)), ("b", fail, ok(3.0), None), ("c", ok(1.2), None, None), ("z", ok(9.0), None, None)]
    s = cudal1.held_out_scores(results, {"g": ["a", "b", "c"]})
    assert s["g"] == dict(tasks=3, answers=3, correct=pytest.approx(2 / 3), solved=2, geomean=pytest.approx(2.4 ** (1 / 3)))
    assert s["g second try"] == dict(tasks=3, answers=2, correct=0.5, solved=3, geomean=pytest.approx(7.2 ** (1 / 3)))
    assert s["g resampled"] == dict(tasks=3, answers=1, correct=1.0, solved=2, geomean=pytest.approx(2.4 ** (1 / 3)))
    # two sampled answers per task, averaged: a 4x and a failure (2x in the mean of logs), a 0.5x and a 2x
    # (1x), none for c (1x); the best of them would read 4x and 2x
    results = [("a", fail, None, ok(4.0), fail), ("b", fail, None, ok(0.5), ok(2.0)), ("c", ok(1.2), None),
               ("d", ok(3.0), None, fail, fail)]  # d: every sample fails, whatever its greedy answer did
    s = cudal1.held_out_scores(results, {"g": ["a", "b", "c", "d"]})
    assert s["g sampled"] == dict(tasks=4, answers=6, correct=0.5, solved=2, geomean=pytest.approx(2.0 ** (1 / 4)))
    assert s["g resampled"]["geomean"] == pytest.approx((4.0 * 1.2 * 0.5 * 3.0) ** (1 / 4))  # the first sample's, or better


def test_rl_from_a_curriculum_checkpoint_takes_fresh_tasks_it_never_trained_on(tmp_path):
    # a checkpoint with generated tasks beside it: RL's tasks are the training split's kind, from seeds
    # (FRESH_SEED on) that stage 1 never drew, none held out, none the code of a task it trained on,
    # and the bank starts with their references alone (no teacher solution to recite)
    sft = tmp_path / "sft"
    tok = cudal1.Tokenizer()
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=4096, n_layer=1, n_head=2, n_kv_head=2, n_embd=32, n_hidden=64)
    cudal1.save_checkpoint(str(sft), cudal1.Transformer(cfg), tok, {"step": 0, "round": 1})
    from kernelbench import teacher
    trained = gen.tasks(0, 3, "cpu", split="train")
    for name, source, meta in trained:  # the layout train_sft.py --generated leaves beside its checkpoint
        teacher.write(str(sft / "generated"), name, source, meta, teacher.solutions(source, meta)[:1])
    assert os.path.isdir(sft / "generated" / "solutions")
    out = tmp_path / "rl"
    cmd = [sys.executable, os.path.join(ROOT, "train_rl.py"), "--init", str(sft), "--device", "cpu", "--out", str(out),
           "--steps", "0", "--rl-task-count", "3", "--held-out-tasks", "0", "--min-answer-tokens", "16"]
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert json.load(open(out / "settings.json"))["rl_tasks"] == "fresh"
    bank = cudal1.Bank(str(out / "bank.jsonl"))
    files = [str(out / "fresh" / t) for t in bank.entries]
    assert len(files) == 3 and all(int(os.path.basename(f).split("_")[0]) >= 10 ** 6 for f in files)
    assert not [f for f in files if cudal1.held_out(f)]
    seen = {cudal1.same_code(source) for _, source, _ in trained}
    assert not [f for f in files if cudal1.same_code(cudal1.read(f)) in seen]
    assert all([e["record"]["status"] for e in bank.entries[t]] == ["reference"] for t in bank.entries), bank.entries
    # --rl-cover 1: tasks chosen so the rarest moves of 25 x 3 fresh seeds are each admitted by one (the first
    # three seeds admit neither a constant output nor fold_reduction); still fresh, none held out
    cover = [*cmd, "--rl-cover", "1"]
    cover[cover.index("--out") + 1] = str(tmp_path / "rl-cover")
    p = warm.run(cover, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    metas = [json.load(open(f)) for f in glob.glob(str(tmp_path / "rl-cover" / "fresh" / "levelG" / "*.json"))]
    moves = {m for meta in metas for m in meta["moves"]}
    assert len(metas) == 3 and {"constant_output", "fold_reduction"} <= moves and not any(m["held_out"] for m in metas)
    assert not {"constant_output", "fold_reduction"} & {m for f in files for m in json.load(open(f[:-3] + ".json"))["moves"]}
    # stage 1 drew seeds up to FRESH_SEED: refused, by name
    name, source, meta = gen.generate(10 ** 6, "cpu")
    teacher.write(str(sft / "generated"), name, source, meta, [])
    cmd[cmd.index("--out") + 1] = str(tmp_path / "rl2")
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "would not be fresh" in p.stderr, p.stdout[-2000:] + p.stderr[-2000:]
    # a checkpoint carried without its generated/ folder (bench/carry_checkpoint.py) is known by the
    # settings it keeps: fresh tasks by default, and refused when it may have drawn past FRESH_SEED
    carried = tmp_path / "carried"
    for n, ok in ((3, True), (900000, False)):
        cudal1.save_checkpoint(str(carried), cudal1.Transformer(cfg), tok, {"settings": {"generated": n}, "step": 0, "round": 1})
        cmd[cmd.index("--init") + 1], cmd[cmd.index("--out") + 1] = str(carried), str(tmp_path / f"rl-{n}")
        p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert (p.returncode == 0) == ok, p.stdout[-2000:] + p.stderr[-2000:]
        if ok:
            assert json.load(open(tmp_path / f"rl-{n}" / "settings.json"))["rl_tasks"] == "fresh"
        else:
            assert "would not be fresh" in p.stderr

"""train_sft.py end to end on the CPU: stage 1 on one solution, one stage-2 round judged by the real judge."""
import ast
import json
import os
import sys

import cudal1
import evaluate
import torch
import warm

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


def record(path, speedup, status="ok"):
    """A judge's record line for a solution file, named as evaluate.py names it."""
    return json.dumps(dict(task="level1/" + os.path.basename(path), solution=os.path.relpath(os.path.abspath(path), ROOT),
                           status=status, speedup=speedup)) + "\n"


def test_contrastive_pairs_from_measured_solutions(tmp_path):
    # ReLU: v2 (1.3x) is answered after v1 (0.9x) and the reference (1.00x), never after itself:
    # 1 prompt; v1, slower than the reference, answers none; v3, never measured ok, is shown nowhere.
    # LeakyReLU: the same 1 for v2 (1.1x), beside a v1 too long for the block.
    level = tmp_path / "kernels" / "level1"
    level.mkdir(parents=True)
    long = RELU + "# padding\n" * 300
    files = {"19_ReLU.py": (RELU, 0.9), "19_ReLU.v2.py": (RELU, 1.3), "19_ReLU.v3.py": (RELU, None),
             "20_LeakyReLU.py": (long, 0.8), "20_LeakyReLU.v2.py": (RELU, 1.1)}
    lines = record(level / "19_ReLU.py", None, "runtime_error")  # an earlier record: the last one counts
    for name, (source, speedup) in files.items():
        (level / name).write_text(source)
        lines += record(level / name, speedup, "ok" if speedup else "incorrect")
    (tmp_path / "speedups.jsonl").write_text(lines)
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--device", "cpu", "--n-layer", "1",
           "--n-head", "2", "--n-embd", "32", "--block-size", "2048", "--vocab-size", "259", "--steps", "0",
           "--rounds", "0", "--out", str(tmp_path / "out")]
    p = warm.run(cmd + ["--speedups", str(tmp_path / "speedups.jsonl")], cwd=ROOT, capture_output=True,
                 text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "2 contrastive pairs over 2 tasks; 1 of 5 solutions have no 'ok' record" in p.stdout, p.stdout
    # a prompt too long for the block drops its slowest exemplar until it fits (LeakyReLU's v1 never
    # does); what is left alone with the answer must fit too, or the pair is dropped, never cut
    # (LeakyReLU's longer task source with the reference shown leaves no room for its answer)
    assert "5 plain pairs (4 fit) + 2 contrastive pairs (1 fit)" in p.stdout, p.stdout
    p = warm.run(cmd + ["--speedups", "nothing.jsonl"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "no nothing.jsonl: no contrastive pairs" in p.stdout, p.stdout + p.stderr
    # a block no pair fits: one line that says so, not a traceback from the first batch
    p = warm.run([c if c != "2048" else "256" for c in cmd] + ["--out", str(tmp_path / "small")], cwd=ROOT,
                 capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and p.stderr.strip() == "no training pair fits --block-size 256 (prompt + answer tokens): " \
        "raise it, or --vocab-size for shorter tokens", p.stderr


def test_stage2_round_with_the_real_judge(tmp_path):
    # One short solution, a tiny model, and enough steps to memorise it: greedy samples then
    # reproduce it, so the round has answers that parse and that the judge must pass.
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    # its measured speedup: stage 2 also samples answers to a contrastive prompt that shows it
    speedups = tmp_path / "speedups.jsonl"
    speedups.write_text(record(tmp_path / "kernels" / "level1" / "19_ReLU.py", 1.2))
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(out), "--device", "cpu",
           "--n-layer", "2", "--n-head", "2", "--n-embd", "64", "--block-size", "768", "--vocab-size", "512",
           "--steps", "100", "--batch-size", "1", "--lr", "1e-2", "--warmup", "5", "--rounds", "1",
           "--num-samples", "2", "--temperature", "0", "--round-steps", "10", "--sample-tasks", "level1/19_ReLU.py",
           "--speedups", str(speedups), "--min-answer-tokens", "64",
           "--trials", "2", "--iters", "5", "--judge-jobs", "1", "--log-every", "20"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # a tiny model; a busy 2-core box punishes thread barriers
    p = warm.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "answer tokens per solution" in p.stdout

    rounds = [json.loads(line) for line in open(out / "stage2.jsonl")]
    assert [(r["round"], r["final"]) for r in rounds] == [(0, False), (1, True)]
    first = rounds[0]
    assert first["answers"] == 2 and first["parsed"] == 1.0, first
    assert first["correct"] == 1.0 and first["statuses"] == {"ok": 2}, first
    # the fine-tune's pool: the plain pair and the contrastive one (the reference shown, never the
    # solution itself; the solution answered)
    assert first["speedup_max"] > 0 and first["pool"] == 2
    assert first["kept"] == 0  # the answer is the kernels/ solution itself: nothing new to keep
    assert first["contrastive"]["answers"] == 2  # sampled in the same batch, counted apart
    # the round's fine-tune (stage 1's optimizer, a warmed-up lower rate) leaves the stage-1 loss where
    # it was; a fresh AdamW before the round fails this
    assert first["stage1_loss_after"] < 2 * first["stage1_loss_before"] + 0.01, first
    records = [json.loads(line) for line in open(out / "judge" / "round0-rank0.jsonl")]
    assert len(records) == 1 and records[0]["status"] == "ok" and records[0]["task"] == "level1/19_ReLU.py"

    model, tok, meta = cudal1.load_checkpoint(str(out))
    assert meta["step"] == 100 and meta["round"] == 2 and meta["settings"]["num_samples"] == 2
    stage1 = json.load(open(out / "report.json"))["stage1"]
    assert stage1["steps"] == 100 and stage1["tokens_per_s"] > 0, stage1
    # run again: it resumes after the final pass and has nothing left to do, and its report keeps the
    # stage-1 speed the first run measured (not "0 steps run")
    p = warm.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "resumed" in p.stdout, p.stderr[-3000:]
    assert len(open(out / "stage2.jsonl").readlines()) == 2
    assert json.load(open(out / "report.json"))["stage1"] == stage1
    assert "100 steps run" in open(out / "report.md").read()


def test_generated_tasks_and_the_held_out_line(tmp_path):
    # --generated: stage 1 trains on generated tasks' teacher solutions beside kernels/ (on the CPU
    # only those that run there), and the run ends with the held-out line, also in its report
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"), "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(out), "--device", "cpu",
           "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "4096", "--vocab-size", "259",
           "--steps", "20", "--batch-tokens", "3000", "--rounds", "0", "--generated", "6", "--held-out-tasks", "2", "--num-samples", "2",
           "--max-new-tokens", "64", "--speedups", "nothing.jsonl", "--judge-jobs", "1", "--report", str(tmp_path / "r")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = warm.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # seeds 0-6 (4 is held out): 2, 3 and 6 have PyTorch-level moves; the fused CUDA ones stay out on the CPU
    assert "6 generated training tasks (cpu sizes): 3 with a teacher solution that runs here, 4 solutions" in p.stdout
    report = json.load(open(out / "report.json"))
    generated = [f for f in report["solution_files"] if f.startswith(str(out / "generated" / "solutions"))]
    assert len(generated) == 4 and len(report["solution_files"]) == 5 and len(report["generated_tasks"]) == 3
    assert not [f for f in generated if cudal1.solution_kind(open(f).read()) == "cuda"]
    assert "5 plain pairs (5 fit)" in p.stdout, p.stdout
    copy = json.load(open(tmp_path / "r.json"))  # --report's copy counts the generated files it trained on
    assert copy["solution_files"] == [str(tmp_path / "kernels" / "level1" / "19_ReLU.py")], copy["solution_files"]
    assert copy["generated_solution_files"] == 4 and copy["generated_tasks"] == 3 and copy["held_out"] == report["held_out"]
    stats = report["held_out"]["stats"]
    assert set(stats) == {"generated_greedy", "generated_sampled"}  # level 2 is not judged on the CPU
    for mode, n in (("greedy", 2), ("sampled", 4)):
        s = stats[f"generated_{mode}"]
        assert s["tasks"] == 2 and s["answers"] == n and 0 <= s["correct"] <= 1 and 0 <= s["solved"] <= 2
        assert s["geomean"] > 0
    line = "held-out generated, 2 tasks | greedy: correct"
    assert line in p.stdout and line in open(out / "report.md").read()
    assert "held-out KernelBench level 2: not judged on the CPU" in p.stdout
    # how the held-out answers ended, every one of them counted (unparsed ones included)
    ended, why = report["held_out"]["failures"]["generated"]
    assert sum(ended.values()) == 6 and "  generated answers: " in p.stdout


def test_teacher_speedups_reach_generated_solutions_by_name(tmp_path):
    # the teacher's records (kernelbench/teacher.py --out anywhere) file a generated solution under
    # levelG/NAME.move.py, so the SFT run's own copy of it finds its measured speedup; a solution's
    # last record counts (a later failure clears an earlier speedup)
    recs = tmp_path / "teacher.jsonl"
    recs.write_text("\n".join(json.dumps(r) for r in [
        dict(task="levelG/7_Gemm_ReLU.py", solution="build/teacher/solutions/levelG/7_Gemm_ReLU.fuse_epilogue.py",
             status="ok", speedup=1.5),
        dict(task="levelG/8_Conv2d_Tanh.py", solution="build/teacher/solutions/levelG/8_Conv2d_Tanh.drop_noop.py",
             status="ok", speedup=1.2),
        dict(task="levelG/8_Conv2d_Tanh.py", solution="build/teacher/solutions/levelG/8_Conv2d_Tanh.drop_noop.py",
             status="wrong_output", speedup=None)]) + "\n{\"cut short")
    got = evaluate.measured_speedups(f"{tmp_path}/missing.jsonl,{recs}")
    assert got == {"levelG/7_Gemm_ReLU.fuse_epilogue.py": 1.5}
    assert cudal1.solution_name("out/sft/generated/solutions/levelG/7_Gemm_ReLU.fuse_epilogue.py") in got
    assert cudal1.solution_name(os.path.join(ROOT, "kernels", "level1", "19_ReLU.py")) == "kernels/level1/19_ReLU.py"
    assert evaluate.measured_speedups(f"{tmp_path}/missing.jsonl") is None


def test_two_gloo_ranks_train_and_report_as_one(tmp_path):
    # torchrun with two CPU ranks (gloo): stage 1 on each rank's own batches, one stage-2 round whose
    # tasks are split over the ranks and whose answers are gathered: one report, every task's
    # answers in it, the same form as a one-rank run
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(out), "--device", "cpu",
           "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "2048", "--vocab-size", "259",
           "--steps", "4", "--rounds", "1", "--round-steps", "2", "--num-samples", "1", "--max-new-tokens", "16",
           "--sample-tasks", "level1/19_ReLU.py,level1/20_LeakyReLU.py", "--speedups", "nothing.jsonl",
           "--judge-jobs", "1"]
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                 env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    report = json.load(open(out / "report.json"))
    assert report["world"] == 2 and report["stage1"]["steps"] == 4
    final = [r for r in report["stage2"] if r["final"]]
    assert len(report["stage2"]) == 2 and final and final[0]["answers"] == 2  # one per task, from both ranks
    answers = [json.loads(line) for line in open(out / "answers-round1.jsonl")]
    assert sorted(os.path.basename(a["task"]) for a in answers) == ["19_ReLU.py", "20_LeakyReLU.py"]


def generated_run(tmp_path, records, generated):
    """A train_sft.py command with no steps: the library's ReLU and `generated` generated tasks at CPU sizes,
    a tiny model, the judge's `records` (JSONL text) as --speedups."""
    (tmp_path / "speedups.jsonl").write_text(records)
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    return [sys.executable, os.path.join(ROOT, "train_sft.py"), "--kernels", str(tmp_path / "kernels"),
            "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(tmp_path / "out"),
            "--device", "cpu", "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--block-size", "8192",
            "--vocab-size", "259", "--steps", "0", "--rounds", "0", "--generated", str(generated),
            "--held-out-tasks", "0", "--speedups", str(tmp_path / "speedups.jsonl")]


def test_a_generated_tasks_plain_pair_is_its_move_of_fewest_kernels(tmp_path):
    # task 3 of the CPU sizes admits two moves: the fold launches fewer kernels (teacher.kernel_cost).
    # Records that rank the other move faster: --plain-pick ranking teaches that one, kernels the fold
    from kernelbench import generate as gen, teacher
    name, source, meta = gen.tasks(3, 1, "cpu", split="train")[0]
    assert name == "3_Gemm_Multiply_Divide_Multiply_Dropout", name  # the generator changed: pick another task
    cost = {m: teacher.kernel_cost(c) for m, c in teacher.kernel_counts(source, teacher.solutions(source, meta)).items()}
    assert cost["fold_scale_into_weights"] < cost["merge_affine"], cost
    lines = "".join(json.dumps(dict(task=f"levelG/90{i}_X.py", solution=f"b/solutions/levelG/90{i}_X.{m}.py",
                                    status="ok", speedup=s)) + "\n"
                    for m, s in (("merge_affine", 1.5), ("fold_scale_into_weights", 1.1)) for i in range(5))
    cmd = generated_run(tmp_path, lines, 4) + ["--plain-pick"]
    taught = {}
    for pick in ("ranking", "kernels"):
        p = warm.run(cmd + [pick, "--out", str(tmp_path / pick)], cwd=ROOT, capture_output=True, text=True,
                     timeout=120)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        taught[pick] = p.stdout.split("plain pairs:")[1].split("\n")[0]
    assert "fold_scale_into_weights 0 (1.10x)" in taught["ranking"] and "(--plain-pick ranking)" in taught["ranking"]
    assert "fold_scale_into_weights 1 (1.10x)" in taught["kernels"], taught
    assert "(--plain-pick kernels: 1 of 1 tasks with two moves or more priced)" in taught["kernels"], taught
    # the report keeps the split too: the generated tasks' plain pairs by the move they teach
    reports = {pick: json.load(open(tmp_path / pick / "report.json")) for pick in taught}
    moves = {pick: r["plain_moves"] for pick, r in reports.items()}
    assert moves["kernels"]["fold_scale_into_weights"] == 1 and "fold_scale_into_weights" not in moves["ranking"]
    solved = len(reports["kernels"]["generated_tasks"])  # one plain pair per generated task with a solution here
    assert sum(moves["kernels"].values()) == sum(moves["ranking"].values()) == solved >= 2, moves


def test_a_shared_generated_dir_is_read_again_only_for_the_same_data(tmp_path):
    # --generated-dir: a second build (another --out, another seed) reads the first's generated examples back;
    # other kinds of solution make other data, so they are built afresh
    cmd = generated_run(tmp_path, "", 3) + ["--generated-dir", str(tmp_path / "shared")]
    runs = {}
    for name, extra in (("first", []), ("again", ["--seed", "7"]), ("kinds", ["--kinds", "pytorch,cpp"])):
        p = warm.run(cmd + ["--out", str(tmp_path / name)] + extra, cwd=ROOT, capture_output=True, text=True,
                     timeout=120)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        runs[name] = p.stdout
    assert "read again" not in runs["first"] and "read again" in runs["again"], runs["again"]
    assert "read again" not in runs["kinds"], runs["kinds"]
    pairs = {name: out.split("plain pairs (")[0].rsplit("\n", 1)[-1] for name, out in runs.items()}
    assert pairs["first"] == pairs["again"], pairs
    assert os.path.isdir(tmp_path / "shared" / "tasks" / "levelG") and not os.path.exists(tmp_path / "again" / "generated")
    assert "data ready in" in runs["again"]
    assert json.load(open(tmp_path / "again" / "report.json"))["data_seconds"] >= 0


def test_reference_pairs_teach_the_opening_prompt_of_a_fresh_task(tmp_path):
    # --reference-pairs: one contrastive pair per generated task, showing its reference alone at
    # 1.00x, answered by a teacher solution no record measured, of a move the records call fast
    # (>= 5 judged, >= 90% faster than eager); a slow move's solutions answer none
    from kernelbench import generate as gen, teacher
    moves = {}  # task name -> moves of its solutions that run on the CPU
    for name, source, meta in gen.tasks(0, 6, "cpu", split="train"):
        moves[name] = {m for m, s in teacher.solutions(source, meta) if cudal1.solution_kind(s) == "pytorch"}
    every = sorted(set().union(*moves.values()))
    assert len(every) >= 3
    slow = every[0]
    # one move of a task with two, judged 4 times only: unranked (move_speed), and not fast
    unranked = sorted(next(ms for ms in moves.values() if len(ms - {slow}) >= 2) - {slow})[0]
    lines = "".join(json.dumps(dict(task=f"levelG/90{i}_X.py", solution=f"b/solutions/levelG/90{i}_X.{m}.py",
                                    status="ok", speedup=0.8 if m == slow else 1.2)) + "\n"
                    for m in every for i in range(4 if m == unranked else 5))
    want = sum(bool(ms - {slow, unranked}) for ms in moves.values())
    assert 0 < want < sum(bool(ms) for ms in moves.values()), moves
    cmd = generated_run(tmp_path, lines, 6) + ["--plain-pick", "ranking", "--reference-pairs", "100"]
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    fast = p.stdout.split("of the moves")[1].split("\n")[0]
    assert f"{want} reference-only contrastive pairs" in p.stdout and slow not in fast and unranked not in fast
    # plain pairs: the library's file, and one solution per generated task, of a move the records
    # rank fastest (slow only where a task has no other; an unranked one only where a task has no
    # ranked one); --every-move keeps them all
    solutions = sum(map(len, moves.values()))
    plain = 1 + sum(1 if ms - {unranked} else len(ms) for ms in moves.values())
    assert plain < 1 + solutions, moves
    only_slow = sum(ms - {unranked} == {slow} for ms in moves.values())
    assert f"plain pairs: {plain} of {1 + solutions} solutions" in p.stdout, p.stdout
    assert f"{slow} {only_slow} (0.80x)" in p.stdout and f"{unranked} " not in p.stdout.split("plain pairs:")[1].split("\n")[0]
    assert f"{plain} plain pairs" in p.stdout, p.stdout
    assert f"+ {want} contrastive pairs ({want} fit)" in p.stdout, p.stdout
    p = warm.run(cmd[:-1] + ["1", "--every-move"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "+ 1 contrastive pairs (1 fit)" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"{1 + solutions} plain pairs" in p.stdout and "plain pairs:" not in p.stdout, p.stdout
    # --solution-pairs: every task with two or more solutions shows the reference and one of them, 'not
    # measured', and answers with another (of a fast move where it has one: a slow move shown or not)
    two = sum(len(ms) >= 2 for ms in moves.values())
    assert two > 0, moves
    p = warm.run(cmd[:-1] + ["0", "--solution-pairs", "100"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert f"{two} contrastive pairs showing the reference and a teacher" in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    assert f"+ {two} contrastive pairs ({two} fit)" in p.stdout, p.stdout


def test_library_answers_inherit_a_restated_constructor(tmp_path):
    """cudal1.inherit_constructor over kernels/: only a ModelNew whose __init__ is its task's Model's
    becomes `class ModelNew(Model)` without it, and every PyTorch-level file so rewritten, loaded as
    the judge loads it (in its task's scope), builds the same parameters. (The CUDA and C++ files are
    only read here: importing them builds their kernels; the edit is the same lines either way.)"""
    import glob
    import torch
    changed = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "kernels", "level*", "*.py"))):
        task_path = cudal1.task_of(path, os.path.join(ROOT, "kernelbench"))
        source, task_source = cudal1.read(path), cudal1.read(task_path)
        new = cudal1.inherit_constructor(source, task_source)
        same_init = cudal1._init_of(ast.parse(source), "ModelNew")[2] == cudal1._init_of(ast.parse(task_source), "Model")[2]
        assert same_init or new == source, path  # only a restated constructor is ever dropped
        if new == source:
            continue
        changed += 1
        cls = next(n for n in ast.parse(new).body if isinstance(n, ast.ClassDef) and n.name == "ModelNew")
        assert [ast.unparse(b) for b in cls.bases] == ["Model"] and not any(
            isinstance(f, ast.FunctionDef) and f.name == "__init__" for f in cls.body), path
        assert cudal1.solution_code(new) in new and ast.get_docstring(ast.parse(new)) == ast.get_docstring(ast.parse(source))
        if cudal1.solution_kind(source) != "pytorch":
            continue  # importing would build its kernels
        task = evaluate.load_module(task_path, "task")
        (tmp_path / "new.py").write_text(new)
        states = []
        for p in (path, str(tmp_path / "new.py")):
            torch.manual_seed(0)
            states.append(evaluate.load_module(p, "sol", scope=task).ModelNew(*task.get_init_inputs()).state_dict())
        assert list(states[0]) == list(states[1]) and all(torch.equal(states[0][k], states[1][k]) for k in states[0]), path
    assert changed >= 100  # most of the library restates its task's constructor


def test_inherit_constructor_edits_only_what_it_can_read():
    task = ("import torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
            "        self.lin = nn.Linear(n, n)\n    def forward(self, x):\n        return self.lin(x)\n")
    sol = ('"""Analysis."""\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):  # kept\n    def __init__(self, n):\n'
           '        """The task\'s."""\n        super().__init__()\n        self.lin = nn.Linear(n, n)\n\n'
           '    def forward(self, x):\n        return self.lin(x) * 1\n')
    assert cudal1.inherit_constructor(sol, task) == ('"""Analysis."""\nimport torch.nn as nn\n\n\nclass ModelNew(Model):'
                                                     '  # kept\n    def forward(self, x):\n        return self.lin(x) * 1\n')
    # brackets in the header's comment, a form feed in a comment (a line break to str.splitlines, not to
    # Python), tabs, a class left with nothing else
    fancy = sol.replace("# kept", "# fused (v2) \x0c").replace("    ", "\t")
    assert cudal1.inherit_constructor(fancy, task.replace("    ", "\t")).endswith(
        'class ModelNew(Model):  # fused (v2) \x0c\n\tdef forward(self, x):\n\t\treturn self.lin(x) * 1\n')
    bare = sol.split("\n\n    def forward")[0] + "\n"
    assert cudal1.inherit_constructor(bare, task).endswith("class ModelNew(Model):  # kept\n    pass\n")
    for same in (sol.replace("nn.Module):  # kept", "\n        nn.Module):"),  # a header over two lines
                 sol.replace("nn.Linear(n, n)\n\n", "nn.Linear(n, 2 * n)\n\n"),  # another constructor
                 sol.replace("    def __init__", "    @staticmethod\n    def __init__"),
                 sol.replace("(nn.Module)", "(Base)"),  # its own base class: not Model's
                 sol.replace("import torch.nn as nn\n", "import torch.nn as nn\nnn = MyNN()\n"),  # a name it redefines
                 sol.replace("\n", "\r\n"), "not python ("):
        assert cudal1.inherit_constructor(same, task) == same, same


def test_refined_task_is_the_task_with_the_solutions_forward(tmp_path):
    # the teacher's drop, reorder and constant solutions of generated tasks: the refined program's Model computes
    # what the solution's ModelNew does, in the task's format (its constructor, shapes and inputs); the moves that
    # add a method (folds) or native code (fused epilogues) are not taken
    from kernelbench import generate, teacher
    taken = set()
    for _, src, meta in generate.tasks(0, 200, "cpu"):
        for move, sol in teacher.solutions(src, meta):
            sol = cudal1.inherit_constructor(sol, src)
            program = cudal1.refined_task(src, sol)
            assert (program is not None) == (move in ("constant_output", "drop_noop", "reduce_first")), (move, sol)
            if program is None:
                continue
            taken.add(move)
            (tmp_path / "task.py").write_text(src)
            (tmp_path / "refined.py").write_text(program)
            (tmp_path / "sol.py").write_text(sol)
            task = evaluate.load_module(str(tmp_path / "task.py"), "task")
            refined = evaluate.load_module(str(tmp_path / "refined.py"), "refined")
            assert program.split("class Model")[0].startswith(src.split("import")[0])  # the task's docstring first
            assert cudal1.same_code(program) != cudal1.same_code(src)  # the same output by other code
            torch.manual_seed(0)
            want = evaluate.load_module(str(tmp_path / "sol.py"), "sol", scope=task).ModelNew(*task.get_init_inputs())
            torch.manual_seed(0)
            got = refined.Model(*refined.get_init_inputs())
            x = [t.clone() for t in task.get_inputs()]
            with torch.no_grad():
                assert torch.equal(got.eval()(*x), want.eval()(*x)), program
    assert taken == {"constant_output", "drop_noop", "reduce_first"}, taken
    task = ('"""Doc."""\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Model(nn.Module):\n'
            "    def __init__(self):\n        super().__init__()\n\n    def forward(self, x):\n        x = torch.relu(x)\n"
            "        return x * 2\n\n\ndef get_inputs():\n    return [torch.randn(2)]\n")
    sol = ('import torch.nn.functional as F\n\n\nclass ModelNew(Model):\n    """The relu dropped."""\n\n'
           '    def forward(self, x):\n        # a comment kept\n\n        return F.relu(x) * 2\n')
    assert cudal1.refined_task(task, sol) == task.replace(
        "        x = torch.relu(x)\n        return x * 2\n", "        # a comment kept\n\n        return F.relu(x) * 2\n")
    tabs = cudal1.refined_task(task.replace("    ", "\t"), sol)  # at the task's indentation, the body's own inside it
    assert "\tdef forward(self, x):\n\t    # a comment kept\n\n\t    return F.relu(x) * 2\n" in tabs, tabs
    for other in (sol.replace("(Model)", "(nn.Module)"),  # its own constructor: not the task's with a new forward
                  sol.replace("    def forward", "    def helper(self):\n        pass\n\n    def forward"),
                  sol.replace("import torch.nn.functional as F", "import torch.nn.functional as nn"),  # not the task's
                  sol.replace("import torch.nn.functional as F", "import math"),
                  sol + "\nK = 2\n",  # a name the forward may read, which the refined program would lack
                  sol.replace("    def forward", "    @staticmethod\n    def forward"),
                  sol.replace("class ModelNew", "@torch.jit.script\nclass ModelNew"),
                  sol.replace("(Model)", "(Model, metaclass=type)"),
                  sol.replace("return F.relu(x)", "return super().forward(x) + F.relu(x)"),  # in Model: nn.Module's
                  sol.replace("return F.relu(x)", "return Model.forward(self, x) + F.relu(x)"),  # itself, forever
                  sol.replace("# a comment kept\n", 'y = """a\nstring"""\n'),  # cut by the re-indent: refused
                  sol.replace("return", 'cudal1.load_cuda("__global__ void k() {}")\n        return'),
                  sol.replace("\n", "\r\n"), "not python ("):
        assert cudal1.refined_task(task, other) is None, other
    # a solution restating the task's constructor refines as the bank keeps it (inherit_constructor); an answer to
    # the refined program that is that program again, however restated (a comment, a docstring, its constructor),
    # restates it; other code does not
    program = cudal1.refined_task(task, sol)
    ctor = sol.replace("(Model):\n", "(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n")
    assert cudal1.refined_task(task, ctor) is None and cudal1.refine(task, ctor) == program
    assert cudal1.restates(task, program, ctor) and cudal1.restates(task, program, sol.replace("# a comment kept", ""))
    assert not cudal1.restates(task, program, sol.replace("F.relu(x) * 2", "F.relu(x) * 3"))
    assert not cudal1.restates(task, program, "not python (")
    for task in (task + "\n\nclass Model(nn.Module):\n    pass\n",  # the second Model is the one Python keeps
                 task.replace("        return x * 2\n", "        return x * 2\n\n    def forward(self, x):\n        return x\n")):
        assert cudal1.refined_task(task, sol) is None, task


def test_fill_tokens_takes_as_many_rows_as_fit(tmp_path):
    # four pairs of one length L (one task, one answer): one row a step at --batch-size 1; with
    # --fill-tokens, that over L padded to PAD_TO rows (two), or all four when there is room for
    # more; the step's line says its tokens
    level = tmp_path / "kernels" / "level1"
    level.mkdir(parents=True)
    for name in ("19_ReLU.py", "19_ReLU.v2.py", "19_ReLU.v3.py", "19_ReLU.v4.py"):
        (level / name).write_text(RELU)
    tokens = {}
    for fill in ("0", "two", "1000000"):
        if fill == "two":
            fill = str(2 * -(-(tokens["0"] - 1) // 64) * 64)  # train_sft.PAD_TO
        cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"),
               "--generated", "0", "--kernels", str(tmp_path / "kernels"),
               "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--device", "cpu", "--n-layer", "1",
               "--n-head", "2", "--n-embd", "32", "--block-size", "2048", "--vocab-size", "259", "--steps", "2",
               "--batch-size", "1", "--log-every", "1", "--rounds", "0", "--speedups", "none.jsonl",
               "--fill-tokens", fill, "--out", str(tmp_path / f"out{fill}")]
        p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        line = next(x for x in p.stdout.splitlines() if x.startswith("step     1 "))
        tokens[fill] = int(line.rsplit("| ", 1)[1].split()[0].replace(",", ""))
    assert list(tokens.values()) == [tokens["0"], 2 * tokens["0"], 4 * tokens["0"]], tokens


def test_stage1_windows_count_every_step_once(tmp_path):
    # The loop waits for the GPU once a window (every 20th step, a logged step, a save): 45 steps logged
    # every 10 and saved every 20 close windows out of step with each other; the log lines' "over N"
    # add up to every step run, and so does the report's step count.
    level = tmp_path / "kernels" / "level1"
    level.mkdir(parents=True)
    (level / "19_ReLU.py").write_text(RELU)
    out = tmp_path / "out"
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--device", "cpu", "--n-layer", "1",
           "--n-head", "2", "--n-embd", "32", "--block-size", "2048", "--vocab-size", "259", "--steps", "45",
           "--batch-size", "1", "--log-every", "10", "--save-every", "20", "--rounds", "0",
           "--speedups", "none.jsonl", "--out", str(out)]
    p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    lines = [x for x in p.stdout.splitlines() if x.startswith("step ")]
    assert [int(x.split()[1]) for x in lines] == [0, 10, 20, 30, 40, 44]
    assert sum(int(x.split(" over ")[1].split()[0]) for x in lines) == 45
    assert json.load(open(out / "report.json"))["stage1"]["steps"] == 45


def test_a_round_without_tasks_stops_before_stage_1(tmp_path):
    # the CPU default lists no --sample-tasks (its stage 2 draws generated tasks): with --generated 0 a round
    # has nothing to sample, which must end the run before its stage-1 minutes, not after them
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    cmd = [sys.executable, os.path.join(ROOT, "train_sft.py"), "--kernels", str(tmp_path / "kernels"),
           "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch", "--out", str(tmp_path / "out"),
           "--device", "cpu", "--n-layer", "1", "--n-head", "2", "--n-embd", "32", "--vocab-size", "259",
           "--steps", "3", "--log-every", "1", "--generated", "0", "--held-out-tasks", "0", "--rounds", "1"]
    p = warm.run(cmd + ["--sample-tasks", ""], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "stage 2 has no tasks: set --sample-tasks or --generated" in p.stderr, p.stderr
    assert "step " not in p.stdout and not (tmp_path / "out" / "model.safetensors").exists(), p.stdout
    p = warm.run(cmd + ["--sample-tasks", "level1/19_ReLU.py", "--rounds", "0"], cwd=ROOT, capture_output=True,
                 text=True, timeout=120)
    assert p.returncode == 0 and "step " in p.stdout, p.stdout[-2000:] + p.stderr[-2000:]

"""Stage 3 (contrastive RL): the math by hand, the bank on disk, and train_rl.py end to end on the CPU."""
import json
import math
import os
import random
import shutil
import subprocess
import sys
import time

import pytest
import torch

import cudal1
import warm


def entry(source, speedup, correct=True):
    return {"step": 0, "task": "t.py", "source": source,
            "record": {"correct": correct, "speedup": speedup, "status": "ok" if correct else "incorrect"}}


# ---- reward and plausibility

def test_reward_is_clipped_log_speedup_and_failures_lowest():
    assert cudal1.reward({"correct": True, "speedup": 2.0}) == pytest.approx(1.0)
    assert cudal1.reward({"correct": True, "speedup": 1.0}) == pytest.approx(0.0)
    assert cudal1.reward({"correct": True, "speedup": 100.0}) == cudal1.REWARD_MAX
    slowest = cudal1.reward({"correct": True, "speedup": 1e-3})
    for bad in ({"correct": False, "speedup": 5.0}, {"correct": True, "speedup": None}, {"status": "cheat:alias"}):
        assert cudal1.reward(bad) == cudal1.REWARD_FAIL < slowest  # a broken answer never beats a slow one
    assert cudal1.implausible({"correct": True, "speedup": 50.0}, 20.0)
    assert not cudal1.implausible({"correct": True, "speedup": 5.0}, 20.0)
    assert not cudal1.implausible({"correct": False, "speedup": 50.0}, 20.0)
    assert not cudal1.implausible({"correct": True, "speedup": 50.0}, 0)


def test_to_rejudge_takes_each_tasks_fastest_new_best_then_any_that_still_beats_it():
    ok = lambda s: {"correct": True, "speedup": s}
    records = [ok(1.4), ok(1.8), ok(1.2), {"correct": False, "speedup": 9.0}, ok(0.9), ok(30.0), ok(1.1)]
    tasks = ["a", "a", "a", "a", "a", "b", "c"]
    best = {"a": 1.0, "b": 1.0, "c": 1.5}
    # a: the fastest of its three new bests (1.8x); b: implausible; c: nothing beats its best
    assert cudal1.to_rejudge(records, tasks, best, 20.0) == [1, 5]
    records[1], best["a"] = ok(1.3), 1.3  # in full, 1.8x read 1.3x: 1.4x now beats the task's best
    assert cudal1.to_rejudge(records, tasks, best, 20.0, done={1, 5}) == [0]
    records[0], best["a"] = ok(1.35), 1.35
    assert cudal1.to_rejudge(records, tasks, best, 20.0, done={0, 1, 5}) == []
    assert cudal1.to_rejudge(records, tasks, dict.fromkeys(best, float("inf")), 20.0) == [5]  # --judge full


# ---- bucket sampling

def test_bucket_sample_draws_from_distinct_buckets():
    # log2 scores -1, -0.74 | 0, 0.14 | - | 2, 3: with 4 buckets over [-1, 3] three are filled
    bank = [entry(str(i), s) for i, s in enumerate([0.5, 0.6, 1.0, 1.1, 4.0, 8.0])]
    bucket_of = {"0": 0, "1": 0, "2": 1, "3": 1, "4": 3, "5": 3}
    rng, seen = random.Random(0), set()
    for _ in range(300):
        picked = cudal1.bucket_sample(bank, k=2, n_buckets=4, rng=rng)
        a, b = (e["source"] for e in picked)
        assert bucket_of[a] != bucket_of[b]
        assert picked[0]["record"]["speedup"] <= picked[1]["record"]["speedup"]  # slowest first
        seen.add((a, b))
    assert len(seen) >= 8  # every bucket pair and every member shows up


def test_bucket_sample_temperature_leans_to_fast_buckets():
    bank = [entry("slow", 0.5), entry("mid", 1.0), entry("fast", 8.0)]
    rng = random.Random(1)
    cold = [cudal1.bucket_sample(bank, k=1, n_buckets=4, temperature=0.05, rng=rng)[0]["source"] for _ in range(100)]
    hot = [cudal1.bucket_sample(bank, k=1, n_buckets=4, temperature=100.0, rng=rng)[0]["source"] for _ in range(300)]
    assert cold.count("fast") == 100
    assert min(hot.count(s) for s in ("slow", "mid", "fast")) > 60  # near uniform


def test_bucket_sample_thin_bank_gives_fewer():
    assert cudal1.bucket_sample([], k=2) == []
    one = cudal1.bucket_sample([entry("a", 1.3)], k=2)
    assert [e["source"] for e in one] == ["a"]
    same = cudal1.bucket_sample([entry("a", 1.3), entry("b", 1.3)], k=2)  # equal scores: one bucket
    assert len(same) == 1


# ---- advantages

def test_group_advantages_by_hand():
    # group 1: rewards 0, 2 -> mean 1, std 1 -> -1, +1; group 2: 1, 1 -> zeros (no signal)
    adv = cudal1.group_advantages([0.0, 2.0, 1.0, 1.0], group_size=2)
    assert adv.tolist() == pytest.approx([-1.0, 1.0, 0.0, 0.0])
    # one winner among four failures: mean -1.2, std 1.6 -> +2 clipped to 1.5, losers -0.5
    adv = cudal1.group_advantages([-2.0, -2.0, -2.0, -2.0, 2.0], group_size=5, clip=1.5)
    assert adv.tolist() == pytest.approx([-0.5, -0.5, -0.5, -0.5, 1.5])
    # timing noise between two equally fast answers stays small: std floor 0.1
    adv = cudal1.group_advantages([0.50, 0.51], group_size=2, std_floor=0.1)
    assert adv.tolist() == pytest.approx([-0.05, 0.05])


def test_gain_advantages_push_only_wins_over_eager():
    """--advantage gain: a slow pass among failures earns nothing (the group baseline gives it +1.5), a
    fast answer among faster ones keeps its gain, and known code earns none."""
    rewards = [cudal1.reward(dict(correct=True, speedup=s)) if s else cudal1.REWARD_FAIL for s in (0.9, 0, 0, 0)]
    assert cudal1.group_advantages(rewards, 4)[0] == pytest.approx(1.5)
    assert cudal1.gain_advantages(rewards).tolist() == [0.0, 0.0, 0.0, 0.0]
    rewards = [1.0, 2.0, 2.0, 0.5]  # log2 speedups: 2x, 4x, 4x, 1.41x
    assert cudal1.group_advantages(rewards, 4)[3] < 0
    assert cudal1.gain_advantages(rewards, clip=1.5).tolist() == pytest.approx([1.0, 1.5, 1.5, 0.5])
    known = [False, True, False, False]
    assert cudal1.gain_advantages(rewards, known=known).tolist() == pytest.approx([1, 0, 1.5, 0.5])


def test_kl_penalty_by_hand():
    """cudal1.kl_penalty: 0 where the policy agrees with the reference, exp(d) - d - 1 per token otherwise
    (d = ref - logp, padding left out), and its gradient pulls each log-prob towards the reference's."""
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, 0.0, 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert cudal1.kl_penalty(logp, logp.detach(), mask).item() == 0.0
    ref = torch.tensor([[-1.5, -1.0, -0.5], [-3.0, 5.0, 5.0]])  # the padding's 5.0 must not count
    d = torch.tensor([-0.5, 1.0, 0.0, -2.0])
    kl = cudal1.kl_penalty(logp, ref, mask)
    assert kl.item() == pytest.approx(((d.exp() - d - 1).sum() / 4).item())
    kl.backward()
    g = logp.grad
    assert g[0, 0] > 0 and g[0, 1] < 0 and g[0, 2] == 0 and g[1, 0] > 0 and g[1, 1] == 0  # descent: towards ref
    far = torch.tensor([[-40.0]], requires_grad=True)  # the reference 40 nats likelier: one token's term is capped
    kl = cudal1.kl_penalty(far, torch.tensor([[-10.0]]), torch.ones(1, 1))
    kl.backward()
    assert kl.item() == 10.0 and torch.isfinite(far.grad).all()


def test_unfiltered_logprobs_are_the_tempered_distributions():
    """answer_logprobs(unfiltered=True): its third output is the log-prob at the temperature before top-k/top-p,
    what kl_penalty compares: equal to the filtered one with no filter, never above it with one (the filter
    renormalises over fewer tokens), and it has a gradient where the filtered one is a flat 0."""
    tok = cudal1.Tokenizer()
    torch.manual_seed(0)
    model = cudal1.Transformer(cudal1.Config(vocab_size=tok.vocab_size, block_size=64, n_layer=1, n_head=2,
                                             n_kv_head=2, n_embd=32, n_hidden=64))
    prompt, rows = tok.encode_prompt("x"), [tok.encode_answer("ab"), tok.encode_answer("abcd")]
    logp, mask, raw = cudal1.answer_logprobs(model, prompt, rows, 0.8, 0, 1.0, unfiltered=True)
    assert torch.allclose(logp, raw)
    logp, mask, raw = cudal1.answer_logprobs(model, prompt, rows, 0.8, 2, 1.0, unfiltered=True)  # top-2
    assert (raw <= logp + 1e-6).all() and (raw[mask.bool()] < 0).all()
    with torch.no_grad():  # one token the model is sure of: its filtered log-prob is 0 under top-1
        model.lm_head.weight[tok.encode("a")[0]] += 50.0 * model.lm_head.weight.norm()
    logp, mask, raw = cudal1.answer_logprobs(model, prompt, [tok.encode("a")], 0.8, 1, 1.0, unfiltered=True)
    raw.sum().backward()
    assert logp.item() == 0.0 and model.lm_head.weight.grad.abs().sum() > 0


def test_improve_advantages_push_only_wins_over_the_tasks_best():
    """--advantage improve: the bar is each answer's task's best so far (a reward), not eager's 0: an answer
    slower than it earns nothing however far it beats eager, a faster one the log2 of the difference; a bar
    below eager's (the task's best a slow pass) counts as eager's."""
    rewards = [1.0, 2.0, 0.5, -2.0, 0.5]
    floor = [1.5, 1.5, 0.0, 0.0, -0.5]
    assert cudal1.gain_advantages(rewards, clip=1.5, floor=floor).tolist() == pytest.approx([0, 0.5, 0.5, 0, 0.5])
    assert cudal1.gain_advantages(rewards, clip=1.5, floor=[0.0] * 5).tolist() == \
        cudal1.gain_advantages(rewards, clip=1.5).tolist()  # at a first visit, gain
    known = [False, True, False, False, False]
    assert cudal1.gain_advantages(rewards, known=known, floor=floor).tolist() == pytest.approx([0, 0, 0.5, 0, 0.5])


# ---- loss

def test_known_code_earns_no_advantage():
    """A re-emitted seed keeps its reward in the group's mean but gets advantage 0."""
    rewards = [2.0, 0.5, -2.0, -2.0]
    plain = cudal1.group_advantages(rewards, 4)
    adv = cudal1.group_advantages(rewards, 4, known=[True, False, False, False])
    assert plain[0] > 0 and adv[0] == 0 and torch.equal(adv[1:], plain[1:])


def test_pg_loss_by_hand():
    logp = torch.tensor([[-1.0, -2.0, -9.0], [-0.5, -9.0, -9.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, -1.0])
    # -(1*(-1) + 1*(-2) + (-1)*(-0.5)) / 3 answer tokens = 2.5 / 3
    loss = cudal1.pg_loss(logp, mask, adv)
    assert loss.item() == pytest.approx(2.5 / 3)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1 / 3, -1 / 3, 0.0], [1 / 3, 0.0, 0.0]]))


def test_a_group_taken_in_parts_has_the_whole_groups_gradient():
    # --update-tokens: rows split by cudal1.row_parts, each part's pg_loss weighted by its share of
    # the tokens, as train_rl.policy_step sums them: the same gradient as the whole group at once
    assert cudal1.row_parts(10, [5, 7, 3], 0) == [(0, 3)]
    assert cudal1.row_parts(10, [5, 7, 3], 40) == [(0, 2), (2, 1)]  # 40 // (10 + 7) = 2 rows a part
    assert cudal1.row_parts(10, [5, 7, 3], 5) == [(0, 1), (1, 1), (2, 1)]  # never fewer than one row
    torch.manual_seed(0)
    cfg = cudal1.Config(vocab_size=64, block_size=64, n_layer=1, n_head=2, n_kv_head=2, n_embd=16, n_hidden=32)
    model = cudal1.Transformer(cfg)
    prompt, rows = [1, 2, 3, 4], [[5, 6, 7], [8, 9], [10, 11, 12, 13, 14], [15]]
    adv = torch.tensor([1.0, -0.5, 0.25, -1.0])
    n_tok = sum(map(len, rows))
    grads = []
    for parts in ([(0, 4)], cudal1.row_parts(len(prompt), [len(r) for r in rows], 18)):
        model.zero_grad()
        for j, per in parts:
            logp, mask = cudal1.answer_logprobs(model, prompt, rows[j:j + per], 0.8, 0, 0.95)
            (cudal1.pg_loss(logp, mask, adv[j:j + per]) * mask.sum() / n_tok).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert parts == [(0, 2), (2, 2)] and grads[0].abs().sum() > 0  # 18 // (4 + 5) = 2 rows a part
    assert torch.allclose(grads[0], grads[1], atol=1e-6), (grads[0] - grads[1]).abs().max()


# ---- bank

def test_bank_persists_and_survives_a_torn_line(tmp_path):
    path = str(tmp_path / "bank.jsonl")
    bank = cudal1.Bank(path)
    bank.add("t.py", "A", {"correct": True, "speedup": 1.2}, step=0)
    bank.add("t.py", "B", {"correct": False, "speedup": None}, step=0)
    bank.add("t.py", "A", {"correct": True, "speedup": 1.1}, step=1)  # same source, measured slower
    bank.add("t.py", "C", {"correct": True, "speedup": 2.0}, step=1)
    with open(path, "a") as f:
        f.write('{"step": 2, "task": "t.py", "sou')  # killed mid-write
    again = cudal1.Bank(path)
    assert len(again.entries["t.py"]) == 4
    assert [(e["source"], e["record"]["speedup"]) for e in again.correct("t.py")] == [("A", 1.2), ("C", 2.0)]
    assert again.best("t.py")["source"] == "C"
    assert again.best("other.py") is None
    again.add("t.py", "D", {"correct": True, "speedup": 3.0}, step=2)  # appends after the cut
    assert [e["source"] for e in cudal1.Bank(path).entries["t.py"]] == ["A", "B", "A", "C", "D"]


# ---- train_rl.py end to end on the CPU, with the real judge
#
# The policy is a tiny random model, so its samples would never parse; the driver below swaps
# cudal1.generate for one that answers each prompt with a known-good ReLU rewrite and one broken
# answer (and records the prompts it saw). Everything else is the real script: prompts, judge,
# reward, advantages, the optimizer step, the bank, candidates, checkpoints.

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "level1/19_ReLU.py"
RELU = '''"""clamp_min(0) is ReLU without the activation dispatch."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
'''
BAD = "## Performance Analysis\nrelu is slow\n"  # no other section: never parses
DRIVER = '''
import os, runpy, sys
sys.path.insert(0, {root!r})
import cudal1
GOOD, BAD = cudal1.format_answer({relu!r}), {bad!r}
GOOD2 = GOOD.replace("x.clamp_min(0)", "x.relu()")  # the third answer of a group: other good code
tok = cudal1.Tokenizer()

def fake_generate(model, batch, num_samples=1, max_new_tokens=512, temperature=1.0, top_k=0, top_p=1.0,
                  generator=None, end_id=None, graph=False):
    with open({prompts!r}, "a") as f:
        f.writelines(repr(tok.decode(p)) + "\\n" for p in batch)
    with open({prompts!r} + ".temperature", "a") as f:  # one line per call, with the generator's seed
        f.write(str(temperature) + " " + str(generator.initial_seed() if generator is not None else None) + "\\n")
    return [[tok.encode_answer(BAD if i % 2 else GOOD2 if i % 4 == 2 else GOOD) for i in range(num_samples)] for p in batch]

cudal1.generate = fake_generate
if {fake_judge!r}:  # a stand-in judge: 1.5x for anything that parsed, 0.1 s of wait per call
    import time, evaluate
    def fake_judge_many(pairs, **kw):
        with open({prompts!r} + ".judge", "a") as f:  # the settings of each call
            f.write(repr({{k: kw.get(k) for k in ("screen", "overlap", "trials", "iters", "prewarm")}}) + "\\n")
        time.sleep(0.1)
        if {fake_judge!r} in ("drop", "hold"):  # GOOD 1.5x and GOOD2 1.4x in the screen; in full GOOD drops
            full = not kw.get("screen")       # to 1.2x (below GOOD2) or holds at 1.45x, GOOD2 reads 1.3x
            speed = lambda s: (1.3 if full else 1.4) if "relu()" in s else (({fake_judge!r} == "drop" and 1.2 or 1.45) if full else 1.5)
            return [dict(task=t, status="ok", message="", correct=True, speedup=speed(s), gpu_s=1.0) for t, s in pairs]
        return [dict(task=t, status="ok", message="", correct=True, speedup=1.5) for t, _ in pairs]
    evaluate.judge_many = fake_judge_many
sys.argv = ["train_rl.py"] + sys.argv[1:]
runpy.run_path(os.path.join({root!r}, "train_rl.py"), run_name="__main__")
'''


def rl_runner(tmp_path, fake_judge=False, good=RELU):
    """(run(steps, *flags) -> CompletedProcess or Popen, out dir, prompts file) on a tiny fresh model whose
    answers are `good`, a failure, and (every fourth) `good` with other code."""
    tok = cudal1.Tokenizer()  # bytes only: the fake answers encode exactly
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=2048, n_layer=1, n_head=2, n_kv_head=2, n_embd=32, n_hidden=64)
    torch.manual_seed(0)
    cudal1.save_checkpoint(str(tmp_path / "sft"), cudal1.Transformer(cfg), tok, {"step": 0, "round": 1})
    prompts = str(tmp_path / "prompts.txt")
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(root=ROOT, prompts=prompts, relu=good, bad=BAD, fake_judge=fake_judge))
    out = tmp_path / "rl"

    def run(steps, *flags, wait=True):
        cmd = [sys.executable, str(driver), "--init", str(tmp_path / "sft"), "--out", str(out), "--device", "cpu",
               "--tasks", os.path.join(ROOT, "kernelbench"), "--rl-tasks", TASK, "--tasks-per-step", "1",
               "--num-samples", "2", "--steps", str(steps), "--lr", "1e-3", "--trials", "2", "--iters", "5",
               "--save-every", "1", "--seed-bank", "", "--min-answer-tokens", "512",  # this block is 2048
               "--held-out-tasks", "0", *flags]  # an empty bank unless a test seeds it; the split: test_split.py
        if not wait:
            return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        return p

    return run, out, prompts


def objective(ckpt, prompts_file):
    """The pg loss of the fixed (good, bad) pair under a checkpoint, advantages +1 / -1."""
    model, tok, _ = cudal1.load_checkpoint(ckpt)
    prompt = tok.encode_prompt(cudal1.plain_prompt(open(os.path.join(ROOT, "kernelbench", TASK)).read(), "CPU"))
    rows = [tok.encode_answer(cudal1.format_answer(RELU)), tok.encode_answer(BAD)]
    with torch.no_grad():
        logp, mask = cudal1.answer_logprobs(model, prompt, rows)
    return cudal1.pg_loss(logp, mask, torch.tensor([1.0, -1.0])).item()


def test_rl_steps_on_cpu_with_the_real_judge(tmp_path):
    run, out, prompts = rl_runner(tmp_path)
    p = run(2)
    assert "step    2/2" in p.stdout and "parse 50% compile 50% correct 50%" in p.stdout, p.stdout
    log = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [l["step"] for l in log] == [0, 1] and all(l["loss"] is not None for l in log)
    # each group: one good code and one answer that never parses, rewards apart: a signal in every group
    assert [(l["signal"], l["distinct"]) for l in log] == [(1.0, 1), (1.0, 1)]
    bank = cudal1.Bank(str(out / "bank.jsonl"))
    ref, *entries = bank.entries["level1/19_ReLU.py"]  # the broken answers never parsed: not in the bank
    assert ref["step"] == -1 and ref["record"] == {"status": "reference", "correct": True, "speedup": 1.0}
    assert len(entries) == 2 and all(e["record"]["correct"] and e["record"]["speedup"] > 0 for e in entries)
    # step 0's prompt shows the reference at 1.00x; step 1's may also show the step-0 answer
    seen = [eval(line) for line in open(prompts)]
    assert "Earlier solutions" in seen[0] and "speedup 1.00x" in seen[0] and "Earlier solutions" in seen[1]
    # two steps with advantages (+1, -1) lowered the loss on exactly those answers
    assert objective(str(out), prompts) < objective(str(out.parent / "sft"), prompts)


def test_full_judge_mode_and_its_speed_report(tmp_path):
    # --judge full: every answer through the full judge in one call, nothing judged again (the 1.5x new best
    # would be, in the screen); bench/rl_speed.py puts both runs side by side
    runs = {}
    for mode, flags in [("screen", ["--judge", "screen", "--prewarm", "0"]), ("full", ["--judge", "full", "--prewarm", "0"]),
                        ("prewarm", [])]:  # the default: full, with prewarm
        run, out, prompts = rl_runner(tmp_path / mode, fake_judge=True)
        run(1, *flags, "--trials", "3")
        runs[mode] = (out, [eval(line) for line in open(prompts + ".judge")])
    screen, full, prewarm = runs["screen"][1], runs["full"][1], runs["prewarm"][1]
    # the screen's own trials (evaluate.SCREEN's 2), --trials for the full judgements: the re-judged new best's and every one in full
    assert screen == [{"screen": True, "overlap": True, "trials": 2, "iters": 5, "prewarm": False},
                      {"screen": None, "overlap": None, "trials": 3, "iters": 5, "prewarm": False}]
    assert full == [{"screen": None, "overlap": None, "trials": 3, "iters": 5, "prewarm": False}]
    assert prewarm == [{"screen": None, "overlap": None, "trials": 3, "iters": 5, "prewarm": True}]
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import rl_speed
    report = tmp_path / "speed.md"
    assert rl_speed.main([str(runs[m][0]) for m in runs] + ["--out", str(report)]) == 0
    rows = [line for line in report.read_text().splitlines() if line.startswith("| `")]
    assert [r.split(" | ")[1] for r in rows] == ["screen", "full", "full + prewarm"]
    assert all(" | 1 of 1 | " in r for r in rows)


@pytest.mark.parametrize("full_reading", ["drop", "hold"])
def test_a_new_best_counts_only_after_its_full_reading(tmp_path, full_reading):
    # two good codes beat the reference in the screen (1.5x, 1.4x); the faster is re-judged first. If it
    # reads 1.2x in full, the other, still above that, is re-judged too (1.3x); if it holds at 1.45x, the
    # other is not. Either way the task's best is a full reading, never a screen one
    run, out, prompts = rl_runner(tmp_path, fake_judge=full_reading)
    run(1, "--num-samples", "4", "--judge", "screen")
    calls = [eval(line)["screen"] for line in open(prompts + ".judge")]
    again = [(s["first"], s["second"]) for s in map(json.loads, open(out / "rejudged.jsonl"))]
    best = cudal1.Bank(str(out / "bank.jsonl")).best(TASK)["record"]["speedup"]
    log = json.loads(open(out / "log.jsonl").readline())  # GPU: 1.0 s per judged code, each judgement
    if full_reading == "drop":
        assert calls == [True, None, None] and again == [(1.5, 1.2), (1.4, 1.3)] and best == 1.3
        assert log["judge_gpu_s"] == 4.0 and log["rejudge_gpu_s"] == 2.0
    else:
        assert calls == [True, None] and again == [(1.5, 1.45)] and best == 1.45
        assert log["judge_gpu_s"] == 3.0 and log["rejudge_gpu_s"] == 1.0
    assert log["distinct"] == 2 and log["signal"] == 1.0  # GOOD, BAD, GOOD2, BAD


def test_code_the_bank_measured_is_not_judged_again(tmp_path):
    # every step answers the same good code: judged at step 0 (the screen, then in full as a new best),
    # never after; later steps keep its verdict, and the bank's best is that one reading
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    run(3, "--judge", "screen")
    assert len(open(prompts + ".judge").readlines()) == 2
    log = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [(l["known"], l["correct"]) for l in log] == [(0, 0.5), (0.5, 0.5), (0.5, 0.5)]
    bank = cudal1.Bank(str(out / "bank.jsonl"))
    assert bank.best(TASK)["record"]["speedup"] == 1.5 and len(bank.correct(TASK)) == 2  # the reference and the answer


def test_a_run_that_had_its_minutes_takes_no_more_when_run_again(tmp_path):
    # --time-limit counts a resumed run's earlier steps, as --steps does: make rl-ablation run again over the
    # same seeds (a device call cut off, more SEEDS added) leaves a finished arm as it was
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    p = run(4, "--time-limit", "0.0001")  # 6 ms: the limit is passed by the first step
    assert "time limit of 0.0001 min reached at step 1" in p.stdout, p.stdout
    p = run(4, "--time-limit", "0.0001")
    assert f"resumed {out} at step 1" in p.stdout and "had its 0.0001 min of RL steps" in p.stdout, p.stdout
    assert [json.loads(line)["step"] for line in open(out / "log.jsonl")] == [0]
    assert json.load(open(out / "config.json"))["step"] == 1
    p = run(4, "--time-limit", "0")  # no limit: the same run goes on to its --steps
    assert [json.loads(line)["step"] for line in open(out / "log.jsonl")] == [0, 1, 2, 3], p.stdout


def test_rl_resumes_after_a_kill(tmp_path):
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)  # the real one is tested above; this is about state
    # the stand-in's 1.5x is "implausible" (and a new best): judged twice. Four steps, so a kill after the first
    # checkpoint lands before the end even when this process is scheduled late (2 cores under a full test run)
    proc = run(4, "--max-speedup", "1.2", wait=False)
    saved = lambda: json.load(open(out / "config.json")).get("step") if (out / "config.json").exists() else 0
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:  # kill once a checkpoint past step 0 is on disk
        try:
            if saved() >= 1:
                break
        except ValueError:  # caught mid-write
            pass
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    k = saved()
    assert 1 <= k < 4, f"killed at step {k}: the run had finished"
    p = run(4, "--max-speedup", "1.2")
    # the redone steps' answers are step 0's code: they keep that verdict, judged neither once more nor twice
    assert f"resumed {out} at step {k}" in p.stdout and "judged twice" not in p.stdout, p.stdout
    assert "step    4/4" in p.stdout and f"step {k:4d}/4" not in p.stdout, p.stdout
    log = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [l["step"] for l in log] == [0, 1, 2, 3]  # each step logged once, the killed one redone
    assert json.load(open(out / "config.json"))["step"] == 4
    assert len(cudal1.Bank(str(out / "bank.jsonl")).entries["level1/19_ReLU.py"]) >= 2
    again = [json.loads(line) for line in open(out / "rejudged.jsonl")]
    assert [s["step"] for s in again] == [0] and again[0]["first"] == again[0]["second"] == 1.5 and again[0]["status"] == "ok"
    # 1.5x beats the reference's 1.00x: the task's best answer is a candidate, with its record
    cand = json.load(open(out / "candidates" / "level1" / "19_ReLU.json"))
    assert cand["record"]["correct"] and cand["record"]["speedup"] == 1.5
    assert "class ModelNew" in (out / "candidates" / "level1" / "19_ReLU.py").read_text()


def test_fresh_bank_is_seeded_with_judged_solutions_of_this_device(tmp_path):
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    seeds, small = tmp_path / "records.jsonl", tmp_path / "19_ReLU.seed.py"  # small: fits the tiny block
    small.write_text(RELU)
    record = dict(task=TASK, solution=str(small), status="ok", correct=True, speedup=9.0)
    seeds.write_text(json.dumps({**record, "env": {"device": "cpu"}}) + "\n"
                     + json.dumps({**record, "solution": "kernels/level1/19_ReLU.py", "env": {"device": "cuda"}}) + "\n")
    p = run(1, "--seed-bank", str(seeds))
    assert "bank seeded with 1 judged solution(s)" in p.stdout, p.stdout  # the GPU record is not shown on a CPU run
    assert "Earlier solutions" in eval(open(prompts).readline()) and "9.00x" in open(prompts).read()
    ref, seed, *found = cudal1.Bank(str(out / "bank.jsonl")).entries[TASK]
    # the seed as stage 1 shows an exemplar: its code, without the docstring
    assert ref["record"]["status"] == "reference" and seed["step"] == -1 and seed["source"] == cudal1.solution_code(RELU)
    assert seed["source"].startswith("import torch") and "clamp_min" in seed["source"]
    log = json.loads(open(out / "log.jsonl").readline())
    # the fake policy's good answer is the seed's code: measured again at 1.5x, it is a copy, not a
    # find -- neither the seeded 9.0x (the library's) nor the copy's 1.5x is what RL found
    assert log["best"][TASK] is None and log["copied"] == 1.0, log
    assert not (out / "candidates" / "level1" / "19_ReLU.py").exists()


def test_improve_pushes_nothing_a_task_already_beat(tmp_path):
    """--advantage improve end to end: the bank holds a 2.0x solution of the task (a seed), so the policy's
    new answers at 1.5x beat eager but not it: gain pushes them up, improve does not."""
    adv = {}
    for mode in ("gain", "improve"):
        run, out, prompts = rl_runner(tmp_path / mode, fake_judge=True)
        seeds, small = tmp_path / mode / "records.jsonl", tmp_path / mode / "19_ReLU.seed.py"
        small.write_text(RELU.replace("x.clamp_min(0)", "x.clamp(min=0)"))  # not the policy's code
        seeds.write_text(json.dumps(dict(task=TASK, solution=str(small), status="ok", correct=True, speedup=2.0,
                                         env={"device": "cpu"})) + "\n")
        run(1, "--seed-bank", str(seeds), "--num-samples", "4", "--advantage", mode)
        adv[mode] = [a["adv"] for a in map(json.loads, open(out / "answers.jsonl"))]
    assert adv["gain"] == pytest.approx([0.585, 0, 0.585, 0], abs=1e-3), adv  # log2 1.5 for each good answer
    assert adv["improve"] == [0, 0, 0, 0], adv
    # full readings of 1.45x and 1.3x over a 1.2x seed: each earns its gain over the seed, the bank before the
    # step, not over the faster answer of the same step
    run, out, prompts = rl_runner(tmp_path / "over", fake_judge="hold")
    seeds, small = tmp_path / "over" / "records.jsonl", tmp_path / "over" / "19_ReLU.seed.py"
    small.write_text(RELU.replace("x.clamp_min(0)", "x.clamp(min=0)"))
    seeds.write_text(json.dumps(dict(task=TASK, solution=str(small), status="ok", correct=True, speedup=1.2,
                                     env={"device": "cpu"})) + "\n")
    run(1, "--seed-bank", str(seeds), "--num-samples", "4", "--advantage", "improve")
    adv = [a["adv"] for a in map(json.loads, open(out / "answers.jsonl"))]
    assert adv == pytest.approx([math.log2(1.45 / 1.2), 0, math.log2(1.3 / 1.2), 0], abs=1e-3), adv


def test_kl_anchors_the_update_to_the_init_policy(tmp_path):
    """--kl: the first step's policy is the --init policy (penalty 0), the later ones have moved (penalty > 0,
    logged and printed); a resumed run keeps --init as its anchor; the logged penalty is the batch's token
    mean however --update-tokens splits a group; and a heavy weight ends nearer --init than none does, on
    the fixed answers of the driver. Without --kl none is computed."""
    def drift(out, init):  # the penalty's own measure of the trained policy against --init
        (model, tok, _), (start, _, _) = cudal1.load_checkpoint(str(out)), cudal1.load_checkpoint(str(init))
        prompt = tok.encode_prompt(cudal1.plain_prompt(open(os.path.join(ROOT, "kernelbench", TASK)).read(), "CPU"))
        rows = [tok.encode_answer(cudal1.format_answer(RELU)), tok.encode_answer(BAD)]
        with torch.no_grad():
            _, mask, raw = cudal1.answer_logprobs(model, prompt, rows, 0.8, 0, 0.95, unfiltered=True)
            ref = cudal1.answer_logprobs(start, prompt, rows, 0.8, 0, 0.95, unfiltered=True)[2]
        return cudal1.kl_penalty(raw, ref, mask).item()
    kls, drifts, shown = {}, {}, {}
    for name, flags in (("none", ["--kl", "0"]), ("heavy", ["--kl", "20"]), ("parts", ["--kl", "20", "--update-tokens",
                                                                                         "1500"])):
        run, out, prompts = rl_runner(tmp_path / name, fake_judge=True)
        shown[name] = run(2, "--num-samples", "4", *flags).stdout
        if name != "none":  # resumed: the anchor is the init the run saved, not the one this command names
            shown[name] += run(3, "--num-samples", "4", *flags, "--init", str(tmp_path / "elsewhere")).stdout
        kls[name] = [json.loads(line)["kl"] for line in open(out / "log.jsonl")]
        drifts[name] = drift(out, tmp_path / name / "sft")
    assert kls["none"] == [None, None] and "| kl " not in shown["none"]
    assert kls["heavy"][0] == pytest.approx(0.0, abs=1e-6) and min(kls["heavy"][1:]) > 1e-6, kls
    assert "| kl 0.0000 |" in shown["heavy"], shown["heavy"]
    assert kls["parts"] == pytest.approx(kls["heavy"], rel=1e-3, abs=1e-9), kls  # 4 rows in parts of ~1 row
    assert drifts["heavy"] < 0.8 * drifts["none"], drifts


def test_a_seed_restating_its_constructor_and_a_copy_of_it_meet_in_one_form(tmp_path):
    """A seed whose ModelNew restates Model's constructor is banked as class ModelNew(Model), the form
    stage 1 trains on (cudal1.inherit_constructor); an answer restating it again is that code: a copy."""
    restated = RELU.replace("class ModelNew(nn.Module):\n", "class ModelNew(nn.Module):\n    def __init__(self):\n"
                            "        super().__init__()\n\n")
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    driver = tmp_path / "driver.py"
    driver.write_text(driver.read_text().replace(repr(RELU), repr(restated)))
    seeds, small = tmp_path / "records.jsonl", tmp_path / "19_ReLU.seed.py"
    small.write_text(restated)
    seeds.write_text(json.dumps(dict(task=TASK, solution=str(small), status="ok", correct=True, speedup=9.0,
                                     env={"device": "cpu"})) + "\n")
    run(1, "--seed-bank", str(seeds))
    ref, seed, *found = cudal1.Bank(str(out / "bank.jsonl")).entries[TASK]
    assert "class ModelNew(Model):" in seed["source"] and "__init__" not in seed["source"], seed["source"]
    assert json.loads(open(out / "log.jsonl").readline())["copied"] == 1.0


def test_a_group_of_one_code_teaches_nothing_and_the_log_says_so(tmp_path):
    # every answer of the group the same good code: equal rewards, no advantage, no update
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    driver = tmp_path / "driver.py"
    driver.write_text(driver.read_text().replace("BAD if i % 2 else ", ""))
    run(1)
    log = json.loads(open(out / "log.jsonl").readline())
    assert (log["signal"], log["distinct"], log["correct"], log["loss"]) == (0.0, 1, 1.0, None)


def test_same_code_is_one_notion_for_the_bank_and_the_copy_metric(tmp_path):
    """A seed re-emitted with another analysis, a blank line or a comment is that seed, not a find."""
    seed = 'import torch\n\nclass ModelNew(torch.nn.Module):\n    """v1: fused."""\n    def forward(self, x):\n        return x * 2\n'
    copy = seed.replace('"""v1: fused."""', '"""A new analysis."""').replace("    def", "\n    # twice\n    def")
    assert cudal1.same_code(copy) == cudal1.same_code(seed) != cudal1.same_code(seed.replace("2", "3"))
    bank = cudal1.Bank(str(tmp_path / "bank.jsonl"))
    ok = dict(status="ok", correct=True, speedup=1.5)
    bank.add("t", seed, ok, step=-1)
    bank.add("t", copy, {**ok, "speedup": 1.6}, step=3)
    bank.add("t", seed.replace("2", "2.0"), {**ok, "speedup": 1.4}, step=4)
    assert [e["step"] for e in bank.found("t")] == [4]
    bank.add("t", "class Model: pass\n", dict(status="reference", correct=True, speedup=1.0), step=-1)
    verdicts = bank.verdicts("t")  # each code's first judgement; the copy's later 1.6x reading is not one
    assert verdicts == {cudal1.same_code(seed): ok, cudal1.same_code(seed.replace("2", "2.0")): {**ok, "speedup": 1.4}}


def test_two_gloo_ranks_gather_every_answer_and_keep_one_bank(tmp_path):
    # torchrun with two CPU ranks (gloo): each rank samples and judges its own task, the judge
    # returns a different speedup on each rank, and every answer of both ranks reaches the bank
    # rank 0 writes; train_rl checks after every step that both ranks hold the same bank
    run, out, _ = rl_runner(tmp_path, fake_judge=True)
    driver = tmp_path / "driver.py"
    driver.write_text(driver.read_text().replace("speedup=1.5)", "speedup=1.5 + int(os.environ['RANK']))"))
    tasks = f"{TASK},level1/20_LeakyReLU.py"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(driver),
           "--init", str(tmp_path / "sft"), "--out", str(out), "--device", "cpu", "--tasks", os.path.join(ROOT, "kernelbench"),
           "--rl-tasks", tasks, "--tasks-per-step", "2", "--num-samples", "2", "--steps", "2", "--lr", "1e-3",
           "--seed-bank", "", "--min-answer-tokens", "512", "--held-out-tasks", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for _ in range(3):
        p = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
        if not (p.returncode and "terminate called without an active exception" in p.stdout + p.stderr):
            break
        # gloo's threads torn down at interpreter exit, after the run's last act (cudal1.end_run): seen in CI
        # on a loaded 2-core machine, once twice in a row; a run again from scratch must then pass cleanly
        shutil.rmtree(out)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    bank = cudal1.Bank(str(out / "bank.jsonl"), write=False)
    judged = [e for es in bank.entries.values() for e in es if e["step"] >= 0]
    # 2 steps x 2 tasks x 2 answers, half of them parse: 4 judged answers, from both ranks
    assert len(judged) == 4 and {e["record"]["speedup"] for e in judged} == {1.5, 2.5}
    assert sorted(bank.entries) == sorted(["level1/19_ReLU.py", "level1/20_LeakyReLU.py"])
    log = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [line["step"] for line in log] == [0, 1]  # one line per step, from rank 0 alone


def dose_probe(tmp_path):
    """bench/move_dose.py imported, and a tiny untrained policy saved at tmp_path/sft for it to train."""
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import move_dose
    tok = cudal1.Tokenizer()
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=16384, n_layer=1, n_head=2, n_kv_head=2, n_embd=32,
                        n_hidden=64)
    torch.manual_seed(0)
    cudal1.save_checkpoint(str(tmp_path / "sft"), cudal1.Transformer(cfg), tok, {})
    return move_dose, tok


def test_move_dose_trains_the_move_and_reads_the_held_out_tasks(tmp_path):
    # bench/move_dose.py on a tiny policy: the fused epilogue's teacher answers of two fresh training tasks,
    # trained after their plain prompts, grow likelier; each reading is a row, with the margin of the one
    # training task that admits another move; every held-out task admits the fused epilogue
    move_dose, _ = dose_probe(tmp_path)
    out = tmp_path / "dose.md"
    assert move_dose.main(["--init", str(tmp_path / "sft"), "--move", "fuse_epilogue", "--tasks", "2", "--held", "1",
                           "--steps", "2", "--lr", "1e-2", "--open", "120", "--size", "cpu", "--work",
                           str(tmp_path / "work"), "--out", str(out)]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines() if line[:3] in ("| 0", "| 2")]
    assert [r[0] for r in rows] == ["| 0", "| 2"] and all(r[4].endswith("of 1") for r in rows), rows
    assert float(rows[1][1]) > float(rows[0][1]) + 100, rows  # trained: log-probs of ~10k bytes, summed
    assert all(r[2] != "-" for r in rows), rows
    assert "trained: 1000001_" in out.read_text()  # the fresh tasks trained on are named


def test_move_dose_pushes_the_move_down_where_it_does_not_hold(tmp_path):
    # --negatives: the same answers after the plain prompts of fresh training tasks lacking the move, at a
    # negative advantage; pushed down as hard as up, the trained answers gain less than pushed up alone
    move_dose, _ = dose_probe(tmp_path)
    lacking = move_dose.fresh_admitting("fuse_epilogue", 2, "cpu", admits=False)
    assert len(lacking) == 2 and all("fuse_epilogue" not in meta["moves"] and not cudal1.held_out(meta)
                                     for _, _, meta in lacking)
    gain = {}
    for n in (0, 2):
        out = tmp_path / f"dose{n}.md"
        assert move_dose.main(["--init", str(tmp_path / "sft"), "--move", "fuse_epilogue", "--tasks", "2",
                               "--held", "1", "--steps", "2", "--lr", "1e-2", "--open", "120", "--size", "cpu",
                               "--negatives", str(n),
                               "--negative-adv", "-1.5", "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
        rows = [line.split(" | ") for line in out.read_text().splitlines() if line[:3] in ("| 0", "| 2")]
        gain[n] = float(rows[1][1]) - float(rows[0][1])
    assert gain[2] < 0.8 * gain[0], gain  # pushed up instead, the two differ by ~0.02%
    assert f"pushed down at -1.5: those answers after the plain prompts of {lacking[0][0]}" in out.read_text()


def test_move_dose_trains_other_tasks_answers_beside_the_move(tmp_path, monkeypatch):
    # --others: fresh training tasks lacking the move, each with its own first teacher answer pushed up at --adv in
    # the same update: every update holds the 2 trained rows and the 2 others' (pg_loss sees each row once), their
    # answers grow likelier (the table's last column), and the others are named
    move_dose, tok = dose_probe(tmp_path)
    rows, pg_loss = [], cudal1.pg_loss
    monkeypatch.setattr(cudal1, "pg_loss", lambda lp, mask, adv: rows.append((int(mask.sum()), adv.item()))
                        or pg_loss(lp, mask, adv))
    out = tmp_path / "others.md"
    assert move_dose.main(["--init", str(tmp_path / "sft"), "--move", "fuse_epilogue", "--tasks", "2", "--held", "1",
                           "--steps", "2", "--lr", "1e-2", "--open", "120", "--size", "cpu", "--others", "2",
                           "--work", str(tmp_path / "work"), "--out", str(out)]) == 0
    others = move_dose.fresh_admitting("fuse_epilogue", 2, "cpu", admits=False, solved=True)
    assert all("fuse_epilogue" not in meta["moves"] and not cudal1.held_out(meta) for _, _, meta in others)
    pushed = [(tok.encode_prompt(cudal1.plain_prompt(src, "NVIDIA H100 80GB HBM3")),  # move_dose's --target
               tok.encode_answer(cudal1.format_answer(cudal1.inherit_constructor(
                   move_dose.teacher.solutions(src, meta)[0][1], src)))) for _, src, meta in others]
    assert len(rows) == 8 and [r[1] for r in rows] == [1.5] * 8, rows  # 2 updates of 4 rows
    assert [n for n, _ in rows[2:4]] == [len(ids) for _, ids in pushed] and rows[:4] == rows[4:], rows
    table = [line.split(" | ") for line in out.read_text().splitlines() if line[:3] in ("| 0", "| 2")]
    assert len(table) == 2 and all(len(r) == 8 for r in table), table
    model, _, _ = cudal1.load_checkpoint(str(tmp_path / "sft"), torch.device("cpu"))
    with torch.no_grad():  # the last column at step 0: those answers' mean log-prob under the untrained policy
        start = sum(cudal1.answer_logprobs(model.eval(), p, [ids])[0].sum().item() for p, ids in pushed) / 2
    assert float(table[0][7].rstrip(" |")) == pytest.approx(start, abs=0.01), (table, start)
    assert float(table[1][7].rstrip(" |")) > start + 100, table
    assert f"holds) of {others[0][0]}, {others[1][0]}, which do not admit it" in out.read_text()


def test_move_dose_names_an_opening_by_its_teachers_first_line(tmp_path):
    # the teacher's answers to 12 held-out tasks open as their own move does on 400 training tasks (every
    # move's phrasings: "Fuse the 3 ops ...", "Leave out an op ...", "Fold `x * ...`" against "Fold `x + ...`")
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    import move_dose
    from kernelbench import generate, teacher
    known = move_dose.openers("cpu")
    said = []
    for t in cudal1.held_out_tasks(str(tmp_path), 12, "cpu")["generated"]:
        src = cudal1.read(t)
        for move, sol in teacher.solutions(src, generate.read_meta(t)):
            said.append((move, move_dose.named(cudal1.format_answer(cudal1.inherit_constructor(sol, src)), known)))
    assert len({m for m, _ in said}) >= 5 and all(m == n for m, n in said), said
    assert move_dose.named("## Performance Analysis\nThe kernel is fast.", known) == "other"
    # a reduction as generate._spell may spell it reads as its first spelling: the spelling is not the move
    assert move_dose.first_words("## P\nFold `x.sum(dim=[2, 3], keepdim=True)` in") == \
        move_dose.first_words("## P\nFold `torch.sum(x, dim=(2, 3), keepdim=True)` in")
    assert move_dose.first_words("## P\n`x.mean(dim=[2], keepdim=True)` `x.max(dim=1, keepdim=True).values` is") == \
        move_dose.first_words("## P\n`torch.mean(x, dim=(2,), keepdim=True)` `torch.max(x, dim=1, keepdim=True)[0]` is")
    assert move_dose.first_words("## P\n`self.x.sum(dim=1)` `x.max()`")[0:2] == ["`self.x.sum(dim=1)`", "`x.max()`"]


def test_held_out_line_of_the_start_is_measured_once_and_reused(tmp_path):
    """make rl-ablation measures --init once (--steps 0) and gives every run that step-0 line."""
    run, out, prompts = rl_runner(tmp_path, fake_judge=True)
    run(0, "--held-out-tasks", "1", "--max-new-tokens", "32", "--resample", "2")
    start = [json.loads(line) for line in open(out / "held_out.jsonl")]
    assert [l["step"] for l in start] == [0]
    assert set(start[0]["stats"]) == {"generated", "generated second try", "generated resampled", "generated sampled"}
    # the second try: the contrastive prompt showing the first answer as measured (the reference at
    # 1.00x, the slowest, is dropped first: this 2048-token block holds only one of them); the two
    # sampled answers: the first's plain prompt again, sampled at the run's temperature
    first, second, *sampled = [eval(line) for line in open(prompts)]
    assert "# Earlier solutions" not in first and "## Solution 1: speedup 1.50x" in second and sampled == [first] * 2
    assert "return x.clamp_min(0)" in second.split("# Earlier solutions")[1]  # the first answer's code
    calls = [line.split() for line in open(prompts + ".temperature")]
    assert [float(t) for t, _ in calls] == [0.0, 0.0, 0.8, 0.8]
    assert [int(s) for _, s in calls[2:]] == [1337, 1337 + 1_000_003]  # draw 0 as the single resample was; then others
    assert start[0]["stats"]["generated second try"]["geomean"] == start[0]["stats"]["generated"]["geomean"] == 1.5
    assert start[0]["stats"]["generated sampled"] == dict(tasks=1, answers=2, correct=1.0, solved=1,
                                                          geomean=pytest.approx(1.5))
    answers = [json.loads(line) for line in open(out / "held_out_answers.jsonl")]  # each answer and its verdict
    assert [(a["step"], a["attempt"], a["status"], a["speedup"]) for a in answers] == \
        [(0, 1, "ok", 1.5), (0, 2, "ok", 1.5), (0, 3, "ok", 1.5), (0, 4, "ok", 1.5)]
    assert "clamp_min" in answers[1]["source"]
    assert answers[0]["analysis"] == "clamp_min(0) is ReLU without the activation dispatch."  # what it said it did
    arm = tmp_path / "arm"
    arm.mkdir()
    shutil.copy(out / "held_out.jsonl", arm / "held_out.jsonl")  # the line alone: its task code unrecorded
    p = run(0, "--held-out-tasks", "1", "--max-new-tokens", "32", "--out", str(arm))
    assert "moved aside (*.stale.jsonl), measured again" in p.stdout, p.stdout
    shutil.rmtree(arm)
    arm.mkdir()
    for name in ("held_out.jsonl", "held_out_answers.jsonl"):  # with its answers, as make rl-ablation gives it
        shutil.copy(out / name, arm / name)
    p = run(1, "--held-out-tasks", "1", "--out", str(arm))
    assert "held-out at step 0: measured already" in p.stdout, p.stdout
    lines = [json.loads(line) for line in open(arm / "held_out.jsonl")]
    assert [l["step"] for l in lines] == [0, 1] and lines[0] == start[0]  # step 1: the policy after its update
    p = run(1, "--held-out-tasks", "1", "--out", str(arm))  # finished: resumes at step 1, measures nothing again
    assert [json.loads(line)["step"] for line in open(arm / "held_out.jsonl")] == [0, 1], p.stdout
    # given step 0's answers too (as make rl-ablation gives them), a first answer that is the start's code
    # again keeps the start's reading (1.7x here, where the stand-in judge reads 1.5x); other code is judged,
    # and so is everything when the start was read on another device or its task's code has changed
    other_device = lambda line: {**line, "device": "another GPU"}
    moved = lambda a: {**a, "task": "gone/held_out/levelG/" + os.path.basename(a["task"])}  # judged in another run's folder
    for name, edit, line in (("same", lambda a: {**moved(a), "speedup": 1.7}, None),
                             ("other", lambda a: {**a, "speedup": 1.7, "source": a["source"] + "\nx = 1\n"}, None),
                             ("device", lambda a: {**a, "speedup": 1.7}, other_device),
                             ("task", lambda a: {**a, "speedup": 1.7, "task_sha": "0" * 12}, None)):
        arm = tmp_path / name
        arm.mkdir()
        (arm / "held_out.jsonl").write_text(json.dumps((line or (lambda l: l))(start[0])) + "\n")
        (arm / "held_out_answers.jsonl").write_text("".join(json.dumps(edit(a) if a["attempt"] == 1 else a) + "\n"
                                                            for a in answers))
        p = run(1, "--held-out-tasks", "1", "--max-new-tokens", "32", "--out", str(arm))
        last = [json.loads(line) for line in open(arm / "held_out.jsonl")][-1]
        kept = name == "same"
        assert (last["step"], last["stats"]["generated"]["geomean"]) == (1, 1.7 if kept else 1.5), name
        if name == "task":  # a given line taken on other task code is moved aside and step 0 measured here
            assert "moved aside (*.stale.jsonl), measured again" in p.stdout, p.stdout
            assert [json.loads(line)["step"] for line in open(arm / "held_out.jsonl")] == [0, 1]
            assert (arm / "held_out.stale.jsonl").exists() and (arm / "held_out_answers.stale.jsonl").exists()
            # resumed with a line on other task code: refused (its later lines are as stale, step 0 is past)
            rows = [{**json.loads(line), "task_sha": "0" * 12} for line in open(arm / "held_out_answers.jsonl")]
            (arm / "held_out_answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            p = run(2, "--held-out-tasks", "1", "--max-new-tokens", "32", "--out", str(arm), wait=False)
            said = p.communicate(timeout=300)[0]
            assert p.returncode != 0 and "start a fresh --out" in said, said
            continue
        # unchanged: counted where a reading could be kept (None: nothing of the start is usable here)
        assert last.get("unchanged") == {"same": 1, "other": 0}.get(name), (name, last)
        said = {"same": "| 1 first answers the start's code again", "other": "| 0 first answers"}.get(name)
        assert (said in p.stdout) if said else ("start's code again" not in p.stdout), p.stdout
        assert "moved aside" not in p.stdout, p.stdout


def test_refine_asks_for_the_answers_program_and_the_second_try_rewrites_the_first(tmp_path):
    # an answer that overrides Model.forward alone (cudal1.refined_task takes it): with --refine, once the bank
    # holds it faster than eager the task is asked as the program with its forward, and that program restated is
    # its code again (known: no advantage); the held-out second try (--second-try refine, the groups '... refined')
    # asks for the first answer's program the same way, to the plain prompt, and reads a restatement as the first
    good = '"""clamp_min(0) is ReLU without the activation dispatch."""\n\n\nclass ModelNew(Model):\n' \
           '    def forward(self, x):\n        return x.clamp_min(0)\n'
    run, out, prompts = rl_runner(tmp_path, fake_judge=True, good=good)
    run(2, "--plain", "--refine", "1", "--held-out-tasks", "1", "--held-out-every", "5", "--second-try", "refine",
        "--max-new-tokens", "32")
    seen = [eval(line) for line in open(prompts)]  # held-out first, second try; step 0, 1; held-out first, second
    assert len(seen) == 6 and not any("Earlier solutions" in p for p in seen), len(seen)
    forward = "    def forward(self, x):\n        return x.clamp_min(0)\n"
    assert [forward in p for p in seen] == [False, True, False, True, False, True], seen
    assert "class Model(nn.Module)" in seen[3] and "torch.relu" not in seen[3].split("class Model")[1]
    assert seen[1].count("class Model(") == 1 and seen[1].split("class Model(")[0] == seen[0].split("class Model(")[0]
    log = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [l["refined"] for l in log] == [0.0, 1.0]
    answers = [json.loads(line) for line in open(out / "answers.jsonl")]
    assert [(a["refined"], a["known"]) for a in answers] == [(False, False), (False, False), (True, True), (True, False)]
    held = [json.loads(line) for line in open(out / "held_out.jsonl")]
    assert [(l["step"], sorted(l["stats"])) for l in held] == [(s, ["generated", "generated refined"]) for s in (0, 2)]
    assert held[0]["stats"]["generated refined"]["answers"] == 1
    # judged: the held-out first answers at step 0, and step 0's answers; the refined second tries restate the
    # first answer (read as it), step 1's good answer restates the program it was asked, and step 2's first
    # answer is step 0's code (its reading kept): nothing else
    assert len(open(prompts + ".judge").readlines()) == 2
    arm = tmp_path / "arm"
    arm.mkdir()
    for name in ("held_out.jsonl", "held_out_answers.jsonl"):
        (arm / name).write_text("".join(line for line in open(out / name) if json.loads(line)["step"] == 0))
    p = run(0, "--held-out-tasks", "1", "--out", str(arm))  # the default second try: the contrastive one
    assert "WARNING: --second-try refine there, 1 here: the second tries differ" in p.stdout, p.stdout
    p = run(0, "--held-out-tasks", "1", "--out", str(arm), "--second-try", "refine")
    assert "WARNING" not in p.stdout, p.stdout
    off = tmp_path / "off"  # a line measured with no second try, given to a run with none: no warning either
    run(0, "--held-out-tasks", "1", "--out", str(off), "--second-try", "0")
    arm = tmp_path / "arm-off"
    arm.mkdir()
    for name in ("held_out.jsonl", "held_out_answers.jsonl"):
        shutil.copy(off / name, arm / name)
    p = run(0, "--held-out-tasks", "1", "--out", str(arm), "--second-try", "0")
    assert "measured already" in p.stdout and "WARNING" not in p.stdout, p.stdout


def test_refine_asks_for_the_fastest_refinable_solution_faster_than_eager(tmp_path):
    # the bank holds refinable solutions at 1.4x, 2.0x and 0.9x, and a CUDA one at 3.0x: the task is asked as the
    # 2.0x one's program, shown plain (--plain) or beside exemplars that never repeat it (nor its code with another
    # docstring); with only the 0.9x and the CUDA one, or a faster one too long to leave room, as itself; a failing
    # first held-out answer gets no refined second try
    def forward(body):
        return f'import torch\n\n\nclass ModelNew(Model):\n    def forward(self, x):\n        return {body}\n'
    cuda = forward("x") + '\n# __global__ void k() {}\n'
    long = forward("x.clamp_min(0)").replace("        return", "        # " + "a long comment " * 100 + "\n        return")
    entries = {"a": (forward("x.clamp_min(0) * 1.0"), 1.4), "b": (forward("torch.relu(x) + 0.0"), 2.0),
               "c": (forward("x.clamp(min=0)"), 0.9), "d": (cuda, 3.0), "e": (long, 2.5),  # e's prompt leaves no room
               "B": ('"""b again, with a docstring."""\n' + forward("torch.relu(x) + 0.0"), 2.0)}
    restated = '"""The 2.0x one without its import."""\n\n\nclass ModelNew(Model):\n    def forward(self, x):\n' \
               '        return torch.relu(x) + 0.0\n'  # the fake policy's answer: b's program, restated
    for name, keep, flags in (("fast", "abcd", ["--plain"]), ("shown", "bB", []), ("slow", "cd", ["--plain"]),
                              ("long", "cde", ["--plain"])):
        run, out, prompts = rl_runner(tmp_path / name, fake_judge=True, good=restated)
        out.mkdir(parents=True)
        bank = cudal1.Bank(str(out / "bank.jsonl"))
        bank.add(TASK, cudal1.read(os.path.join(ROOT, "kernelbench", TASK)), dict(cudal1.REFERENCE), -1)
        for k in keep:
            bank.add(TASK, entries[k][0], {"status": "ok", "correct": True, "speedup": entries[k][1]}, -1)
        run(1, "--refine", "1", *flags)
        asked = eval(open(prompts).readline())
        assert ("return torch.relu(x) + 0.0" in asked) == (name in ("fast", "shown")), asked
        program = asked.split("# Earlier solutions")[0]
        assert not any(x in program for x in ("x.clamp_min(0) * 1.0", "x.clamp(min=0)", "a long comment")), asked
        if name == "shown":
            assert "## Solution 1" in asked and asked.count("torch.relu(x) + 0.0") == 1, asked
        first = json.loads(open(out / "answers.jsonl").readline())  # b's code where b was asked: known
        assert (first["refined"], first["known"]) == ((True, True) if name in ("fast", "shown") else (False, False)), \
            first
    run, out, prompts = rl_runner(tmp_path / "held", good=restated)  # the real judge: a ReLU fails a generated task
    run(0, "--held-out-tasks", "1", "--second-try", "refine", "--max-new-tokens", "32")
    held = json.loads(open(out / "held_out.jsonl").readline())
    assert held["stats"]["generated"]["correct"] == 0 and "generated refined" not in held["stats"], held
    assert len(open(prompts).readlines()) == 1 and held["second_try"] == "refine"  # the mode, with no group to say it


def test_rl_report_counts_the_second_halfs_constant_outputs(tmp_path):
    """bench/rl_report.py on two synthetic runs: the per-run table counts parsed answers of the
    second half that write a constant output (torch.full), and how many of them were correct, and
    the answers after a task's first correct one that keep its move or use another."""
    const = "class ModelNew:\n    def forward(self, x):\n        return torch.full((1,), 1.0)\n"
    fused = "CUDA_SRC = '__global__ void k() {}'\nmod = cudal1.load_cuda(CUDA_SRC)\n"
    ok = dict(status="ok", correct=True, speedup=1.5, env=dict(gpu="TestGPU", commit="abc"), tolerance="strict")
    bad = dict(status="incorrect", correct=False)
    ok2 = dict(ok, env=dict(gpu="TestGPU", commit="def"))  # a run added later, at another commit
    runs = []
    for plain, answers in ((False, [(0, fused, ok), (1, const, bad), (2, const, bad), (3, fused, ok)]),
                           (True, [(0, fused, ok2), (1, fused, ok2), (2, const, ok2), (3, fused, bad)])):
        d = tmp_path / ("plain" if plain else "contrastive")
        d.mkdir()
        (d / "settings.json").write_text(json.dumps(dict(
            plain=plain, seed=1, init="out/sft", tasks_per_step=1, num_samples=1, lr=1e-5, temperature=0.8,
            adv_clip=1.5, trials=5, iters=20)))
        (d / "log.jsonl").write_text("".join(json.dumps(dict(
            step=s, reward_mean=0.0, parsed=1.0, compiled=1.0, correct=float(rec["correct"]), composed=0,
            exemplars=0, best={"levelG/1_X.py": None}, statuses={rec["status"]: 1}, elapsed_s=10.0 * (s + 1),
            **({} if plain else dict(signal=float(s == 0), distinct=1 + s % 2, known=min(1.0, s / 2)))))
            # plain: a log from before they were counted
            + "\n" for s, _, rec in answers))
        (d / "bank.jsonl").write_text("".join(json.dumps(dict(step=s, task="levelG/1_X.py", source=src, record=rec))
                                              + "\n" for s, src, rec in answers))
        (d / "answers.jsonl").write_text("".join(json.dumps(dict(
            step=s, task="levelG/1_X.py", status=rec["status"], reward=0.58 if rec["correct"] else -2.0,
            **({} if plain else dict(adv=0.5 if s in (0, 3) else 0.0)))) + "\n" for s, _, rec in answers))
        stats = {g: dict(tasks=2, answers=2, correct=0.5, solved=1, geomean=1.1)
                 for g in ("generated", "generated second try", "generated sampled")}
        start = {g: v for g, v in stats.items() if g != "generated sampled"}  # a start line from before the group
        (d / "held_out.jsonl").write_text("".join(json.dumps(dict(step=s, stats=x)) + "\n"
                                                  for s, x in ((0, start), (3, stats))))
        if not plain:  # step 0: task A's second answer new code, faster; B's the first again. Step 3: A's second
            # try new, failing; the first answers: A's the start's code with a blank line more (not new), B's new,
            # passing but slower than eager; C's new, passing where it failed (a failure's speedup, which no reading
            # may count); level 2's L new and faster, which the
            # generated tasks' column must not count. Held-out tasks where a run writes them under its --out
            A, B, C = (str(d / "held_out" / "levelG" / f"{t}.py") for t in "ABC")
            L = str(d / "held_out" / "level2" / "L.py")
            (d / "held_out_answers.jsonl").write_text("".join(json.dumps(dict(
                step=s, task=t, attempt=n, source=src, status=st, speedup=sp)) + "\n" for s, t, n, src, st, sp in (
                (0, A, 1, fused, "ok", 1.2), (0, A, 2, const, "ok", 1.5), (0, B, 1, None, "parse_error", None),
                (0, B, 2, None, "parse_error", None), (0, A, 3, fused, "ok", 1.2), (0, B, 3, const, "ok", 1.1),
                (3, A, 1, fused + "\n", "ok", 1.2), (3, A, 2, const, "incorrect", None),
                (3, A, 3, fused + "# again\n", "ok", 1.3), (3, B, 2, fused + const, "incorrect", None),
                (3, B, 1, const, "ok", 0.8), (0, C, 1, fused, "incorrect", 2.0), (0, C, 2, const, "ok", 1.3),
                (3, C, 1, const, "ok", 1.44),
                (0, L, 1, fused, "ok", 1.0), (3, L, 1, const, "ok", 3.0))))
        runs.append(str(d))
    p = warm.run([sys.executable, os.path.join(ROOT, "bench", "rl_report.py"), *runs], cwd=ROOT,
                 capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "- commits abc, def, GPU TestGPU" in p.stdout, p.stdout[:1000]
    row = {}  # each run's first row: the per-run table's
    for line in p.stdout.splitlines():
        if line.startswith("| "):
            row.setdefault(line.split(" | ")[0], line.split(" | "))
    col = row["| run"].index("constant outputs, second half (correct)")
    assert row["| contrastive seed 1"][col] == "50% (0)"  # steps 2-3: one constant output, wrong
    assert row["| plain seed 1"][col] == "50% (1)"  # steps 2-3: one constant output, right
    # after step 0's correct fused answer: contrastive leaves the move twice (wrong), keeps it once (right);
    # plain keeps it twice (one right), and its step-2 constant output, right, is another move
    col = row["| run"].index("after a correct answer: same move / another (correct)")
    assert row["| contrastive seed 1"][col] == "33% (100%) / 67% (0%)"
    assert row["| plain seed 1"][col] == "67% (50%) / 33% (100%)"
    # by visit: the task's first step, then its later ones (contrastive: steps 1-3 bad, bad, ok; plain: ok, ok, bad);
    # off-move -: no fresh task, moves unknown; a signal at contrastive's steps 0 and 3 (plain: none recorded)
    visits = {line.split(" | ")[0]: line for line in p.stdout.splitlines()
              if line.startswith("| ") and " | 1 | 100% | +0.58 | " in line}
    # choices -: no task's moves known
    assert visits["| contrastive seed 1"].endswith(  # pushed up at step 3: as fast as step 0's, not faster
        " | 1 | 100% | +0.58 | - | 100% | - | 1 (0.5) / 0 (0.0) | 3 | 33% | -1.14 | - | 33% | - | 0 (0.0) / 1 (0.5) |")
    assert visits["| plain seed 1"].endswith(" | 1 | 100% | +0.58 | - | - | - | - | 3 | 67% | -0.28 | - | - | - | - |")
    # steps 0-1 against 2-3: a signal at step 0 alone; known code 0, 0.5, then 1 and 1
    col = row["| run"].index("groups with a signal, first half -> second half (codes each, whole run)")
    assert (row["| contrastive seed 1"][col], row["| plain seed 1"][col]) == ("50% -> 0% (1.5)", "-")
    assert (row["| contrastive seed 1"][col + 1], row["| plain seed 1"][col + 1]) == ("25% -> 100% |", "- |")
    # second answers: at step 0 A's second try new and faster, B's unparsed, C's new and passing where its first
    # failed (beaten, but not after a passing first); A's resampled answer its first code again, B's new and
    # passing (beats a failed first). After A's passing fused first its second try left the move (a constant
    # output, right). At step 3 A's second try leaves its move again, failing; B's, after a passing constant
    # output, keeps it and adds a fused kernel, failing; A's resampled answer is new code of the same move, faster
    second = [line for line in p.stdout.splitlines() if line.startswith("| contrastive seed 1 | ")
              and line.split(" | ")[2] in ("second try", "resampled")]
    assert second == ["| contrastive seed 1 | 0 | second try | 2 of 3 | 2 | 2 | 1 (1) / 0 (0) of 1 |",
                      "| contrastive seed 1 | 0 | resampled | 1 of 2 | 1 | 1 | 0 (0) / 0 (0) of 1 |",
                      "| contrastive seed 1 | 3 | second try | 2 of 2 | 0 | 0 | 1 (0) / 1 (0) of 2 |",
                      "| contrastive seed 1 | 3 | resampled | 1 of 1 | 1 | 1 | 0 (0) / 0 (0) of 1 |"], p.stdout
    # first answers against the start's: at step 3 three of four are new code (B's, C's, L's), passing, each beating
    # the start's; in the last column B's 0.8x counts 1.00x as its failed start did: the cube root of 1.2 x 1.0 x 1.0,
    # then of 1.2 x 1.0 x 1.44 (L, level 2, not counted)
    assert "| contrastive seed 1 | 3 | 3 of 4 | 3 | 3 | 0 | 1.06x -> 1.20x (+13%) |" in p.stdout, p.stdout
    # and beside the arm's mean of the held-out line (the synthetic stats' 1.1), the last column's step-3 value,
    # for the first answers alone; plain has no held-out answers
    assert "contrastive: mean over 1 seed(s) of the last generated geomean 1.10x (slow and failing answers both at " \
           "1.00x: 1.20x)" in p.stdout, p.stdout
    assert "contrastive: mean over 1 seed(s) of the last generated second try geomean 1.10x\n" in p.stdout, p.stdout
    assert "contrastive: mean over 1 seed(s) of the last generated sampled geomean 1.10x\n" in p.stdout, p.stdout
    assert " | - -> 1.10x | - -> 50% | 0 -> 3 |" in p.stdout, p.stdout  # the start line lacks it
    assert "A group's sampled (train_rl.py --resample K)" in p.stdout, p.stdout
    assert "plain: mean over 1 seed(s) of the last generated geomean 1.10x\n" in p.stdout, p.stdout


def test_rl_report_names_runs_by_the_setting_they_differ_in(tmp_path):
    """Two contrastive runs of one seed that differ in --rl-cover are two arms, each with its own row,
    mean and line in the picture: named by the seed alone they were one (the picture drew one line). A run
    made before the flag existed is named by a '?'; where a run ran (device) names no arm, nor a flag
    since removed that a run recorded at its default (rl_report.UNRECORDED)."""
    runs = []
    for cover in (0, 3):
        d = tmp_path / f"cover{cover}"
        d.mkdir()
        (d / "settings.json").write_text(json.dumps(dict(
            plain=False, seed=1, out=str(d), init="out/sft", tasks_per_step=1, num_samples=1, device=f"cuda:{cover}",
            lr=1e-5, temperature=0.8, adv_clip=1.5, trials=5, iters=20,
            **({"rl_cover": cover} if cover else {"distill": 0.0}))))  # a flag since removed, at its default
        (d / "log.jsonl").write_text(json.dumps(dict(
            step=0, reward_mean=0.0, parsed=1.0, compiled=1.0, correct=1.0, composed=0, exemplars=0, best={},
            statuses={"ok": 1}, elapsed_s=10.0)) + "\n")
        stats = {"generated": dict(tasks=2, answers=2, correct=0.5, solved=1, geomean=1.1 + cover / 10)}
        (d / "held_out.jsonl").write_text("".join(json.dumps(dict(step=s, stats=stats)) + "\n" for s in (0, 1)))
        runs.append(str(d))
    out = tmp_path / "report.md"
    p = warm.run([sys.executable, os.path.join(ROOT, "bench", "rl_report.py"), *runs, "--out", str(out)],
                 cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    text = out.read_text()
    assert "| contrastive rl_cover=? seed 1 |" in text and "| contrastive rl_cover=3 seed 1 |" in text, text
    assert "contrastive rl_cover=3: mean over 1 seed(s) of the last generated geomean 1.40x" in text, text
    assert "device=" not in text and "the arms differ in the prompt" in text and "and in rl_cover," in text, text
    assert "distill" not in text, text  # a removed flag at its default splits no arm
    assert (tmp_path / "report.svg").read_text().count("<polyline") == 2


def report_on_a_fresh_task(tmp_path, rows, seed_speedup=None, log_steps=None):
    """bench/rl_report.py's stdout on a contrastive run over one fresh generated task (its files written
    as train_rl writes them), whose answers.jsonl is rows(task key, its own teacher solution's answer, the
    answer of a constant_output solution of another task: a move this task lacks), and that own move;
    seed_speedup: a bank that starts with a seed of the task measured so; log_steps: a log.jsonl of only
    that many steps (the report reads only the steps every run's log reached)."""
    from kernelbench import generate as gen, teacher
    run = tmp_path / "run"
    name, src, meta = gen.tasks(cudal1.FRESH_SEED, 1, "cpu", split="train")[0]
    gen.write(str(run / "fresh" / "levelG"), name, src, meta)
    own = dict(teacher.solutions(src, meta))
    assert own and "constant_output" not in own, own  # the generator changed: pick a task without one
    other = next(sol for _, s, m in gen.tasks(cudal1.FRESH_SEED, 400, "cpu", split="train")
                 for mv, sol in teacher.solutions(s, m) if mv == "constant_output")
    move, sol = next(iter(own.items()))
    answers = rows(f"levelG/{name}.py", cudal1.format_answer(sol), cudal1.format_answer(other))
    (run / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answers))
    if seed_speedup:
        (run / "bank.jsonl").write_text(json.dumps(dict(step=-1, task=f"levelG/{name}.py", source=sol, record=dict(
            status="ok", correct=True, speedup=seed_speedup))) + "\n")
    (run / "settings.json").write_text(json.dumps(dict(
        plain=False, seed=1, out=str(run), init="out/sft", tasks_per_step=1, num_samples=2, lr=1e-5,
        temperature=0.8, adv_clip=1.5, trials=5, iters=20)))
    (run / "log.jsonl").write_text("".join(json.dumps(dict(
        step=s, reward_mean=0.0, parsed=1.0, compiled=1.0, correct=1.0, composed=0, exemplars=0, best={},
        statuses={"ok": 1}, elapsed_s=10.0)) + "\n" for s in sorted({r["step"] for r in answers})[:log_steps]))
    p = warm.run([sys.executable, os.path.join(ROOT, "bench", "rl_report.py"), str(run)],
                 cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout, move


def test_rl_report_counts_answers_claiming_a_move_their_task_lacks(tmp_path):
    """By visit, off-move: of a run's answers to a fresh generated task, the share whose analysis opens
    with a move the teacher does not write for that task, and how many of those passed. Here the task's
    own teacher answer at steps 0 and 1, and at step 1 an answer opening as another move's does."""
    out, _ = report_on_a_fresh_task(tmp_path, lambda key, own, other: [
        dict(step=0, task=key, reward=0.5, status="ok", text=own),
        dict(step=1, task=key, reward=0.5, status="ok", text=own),
        dict(step=1, task=key, reward=-2.0, status="incorrect", text=other)])
    row = next(line for line in out.splitlines() if line.startswith("| contrastive seed 1 | 1 |"))
    assert row == ("| contrastive seed 1 | 1 | 100% | +0.50 | 0% (0%) | - | - | - | 2 | 50% | -0.75 | 50% (0%) "
                   "| - | - | - |"), row


def test_rl_report_counts_pushes_that_beat_the_tasks_best(tmp_path):
    """By visit, pushed up: an answer beats its task's best as it stood before its step (a faster answer of
    the same step does not raise the bar), and a seed in the bank counts as a best."""
    rows = lambda key, own, other: [
        dict(step=0, task=key, reward=1.0, adv=1.0, status="ok", text=other),  # the faster first
        dict(step=0, task=key, reward=0.5, adv=0.5, status="ok", text=own),
        dict(step=1, task=key, reward=0.8, adv=0.8, status="ok", text=own),  # below step 0's 1.0
        dict(step=1, task=key, reward=1.2, adv=1.2, status="ok", text=own + "# again\n")]
    out, _ = report_on_a_fresh_task(tmp_path / "fresh", rows)
    visits = lambda out: next(line for line in out.splitlines() if line.startswith("| contrastive seed 1 | 2 |")
                              and line.count(" | ") == 14)  # the by-visit table's row: 2 answers at the first step
    row = visits(out)
    assert " | 2 (1.5) / 0 (0.0) | 2 | " in row and row.endswith(" | 1 (1.2) / 1 (0.8) |"), row
    out, _ = report_on_a_fresh_task(tmp_path / "seeded", rows, seed_speedup=2 ** 1.1)  # reward 1.1
    row = visits(out)
    assert " | 0 (0.0) / 2 (1.5) | 2 | " in row and row.endswith(" | 1 (1.2) / 1 (0.8) |"), row


def test_rl_report_splits_a_refine_runs_later_visits_by_prompt(tmp_path):
    """Refined prompts (--refine): a task's later-visit answers split by whether the prompt was the refined
    program: each side's share, correct (a slow pass too), known code, and pushes beating the task's best as
    it stood before the step, a seed included (on how many tasks). The task (a seed at reward 0.9): step 0 a
    first visit at 0.5, in neither side; step 1 a refined answer at 1.0 beats the seed, a known restatement
    earns nothing, an unrefined one at 0.8 does not beat the seed; step 2 a refined 0.9 is below step 1's
    1.0, an unrefined one fails, another passes slower than eager. A second task: 0.2 at its first visit
    (step 0), then a refined 0.25 beats it. Step 3's refined 2.0 is past the log's last step: not read.
    A run without the field has no such table."""
    def rows(key, own, other):
        row = lambda step, reward, adv, refined, known=False, task=key: dict(
            step=step, task=task, reward=reward, adv=adv, refined=refined, known=known,
            status="ok" if reward > -2 else "incorrect", text=own)
        return [row(0, 0.5, 0.5, False), row(0, 0.2, 0.2, False, task="levelG/x.py"),
                row(1, 1.0, 0.5, True), row(1, 0.5, 0.0, True, known=True), row(1, 0.8, 0.3, False),
                row(2, 0.9, 0.1, True), row(2, -2.0, 0.0, False), row(2, -0.2, 0.0, False),
                row(2, 0.25, 0.05, True, task="levelG/x.py"), row(3, 2.0, 1.0, True)]
    out, _ = report_on_a_fresh_task(tmp_path / "refine", rows, seed_speedup=2 ** 0.9, log_steps=3)
    row = next(line for line in out.splitlines() if line.startswith("| contrastive seed 1 | 4 (57%) |"))
    assert row == "| contrastive seed 1 | 4 (57%) | 100% | 25% | 2 on 2 tasks (50.0%) | 3 (43%) | 67% | 0% " \
                  "| 0 on 0 tasks (0.0%) |", row
    out, _ = report_on_a_fresh_task(tmp_path / "plain", lambda key, own, other: [
        {k: v for k, v in r.items() if k != "refined"} for r in rows(key, own, other)])
    assert "Refined prompts" not in out


def test_rl_report_counts_the_groups_that_offer_a_choice_of_move(tmp_path):
    """By visit, choices: groups whose correct codes open with two moves, and of them those whose summed
    advantages pushed the best answer's move most / another's. Step 0: the task's own move at 0.5 (advantage
    0.25) beside a constant_output at 1.0 (1.0): the best pushed most. Step 1: own at 1.0 (0.1, twice) beside
    constant_output at 0.5 (1.5): the slower move pushed most. Step 2: own twice and an answer naming no move:
    one move, no choice. Step 3: both moves, nothing pushed. Step 4: own at 1.0 (0.2) beside constant_output
    at 0.5 (0.1) and an unnamed answer pushed hardest (1.5), left out: the best pushed most. Step 5: own's
    code twice, once under constant_output's opening: one code, no choice."""
    from cudal1 import HEADERS
    def rows(key, own, other):
        row = lambda step, reward, adv, text: dict(step=step, task=key, reward=reward, adv=adv, status="ok", text=text)
        unnamed = own.replace(own.split("\n", 2)[1], "Nothing here names a move.", 1)
        disguised = other[:other.index(HEADERS[2])] + own[own.index(HEADERS[2]):]  # own's code, other's opening
        return [row(0, 0.5, 0.25, own), row(0, 1.0, 1.0, other),
                row(1, 1.0, 0.1, own), row(1, 1.0, 0.1, own), row(1, 0.5, 1.5, other),
                row(2, 1.0, 0.5, own), row(2, 1.0, 0.5, own), row(2, 0.3, 0.2, unnamed),
                row(3, 1.0, 0.0, own), row(3, 0.5, 0.0, other),
                row(4, 1.0, 0.2, own), row(4, 0.5, 0.1, other), row(4, 0.1, 1.5, unnamed),
                row(5, 1.0, 0.0, own), row(5, 1.0, 0.0, disguised)]
    out, _ = report_on_a_fresh_task(tmp_path, rows)
    row = next(line for line in out.splitlines() if line.startswith("| contrastive seed 1 | 2 |"))
    # pushed up: step 0's two beat the reference; every later push is of an answer no faster than step 0's 1.0
    assert row.endswith(" | 100% | 1 (1 / 0) | 2 (1.2) / 0 (0.0) | 13 | 100% | +0.76 | 31% (100%) | 60% | 3 (1 / 1) "
                        "| 0 (0.0) / 9 (4.7) |"), row


def test_rl_report_by_move_gives_each_moves_reward_and_advantage(tmp_path):
    """By move, per half: answers (the share of answers opening with the move, to tasks it holds for / to the
    others), mean reward, reward minus its group's mean, the recorded advantage.
    Step 0: the task's own move 5 times at 0.5 (group mean 0.5); step 1: 5 own at 1.0 and 5 opening as
    constant_output at -2.0 (group mean -0.5). A second task's group at each step, 4 answers naming no
    move at -2.0, moves neither group's mean, and 'other' (4 a half) is left out."""
    def rows(key, own, other):
        row = lambda step, task, reward, adv, text: dict(step=step, task=task, reward=reward, adv=adv, known=False,
                                                         status="ok" if reward > -2 else "incorrect", text=text)
        return ([row(0, key, 0.5, 0.25, own)] * 5 + [row(0, "levelG/x.py", -2.0, 0.0, "no move")] * 4
                + [row(1, key, 1.0, 1.5, own)] * 5 + [row(1, key, -2.0, -1.5, other)] * 5
                + [row(1, "levelG/x.py", -2.0, 0.0, "no move")] * 4)
    out, move = report_on_a_fresh_task(tmp_path, rows)
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| run | move |")) + 2
    table = lines[start:lines.index("", start)]
    # brackets: of the answers to tasks the move holds for, the share opening with it / of those to the others
    # (the fresh task holds its own move, not constant_output; levelG/x.py's moves are unknown: in neither)
    assert table == [f"| contrastive seed 1 | {move} | 5 (100% / -) | +0.50 | +0.00 | +0.25 | 5 (50% / -) | +1.00 "
                     "| +1.50 | +1.50 |",
                     "| contrastive seed 1 | constant_output | 0 | - | - | - | 5 (- / 50%) | -2.00 | -1.50 "
                     "| -1.50 |"], table

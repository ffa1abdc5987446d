"""
Stage 3 of cudal1: contrastive RL, the heart of CUDA-L1.

Each step takes a batch of tasks and samples G answers for each to a contrastive prompt: the
reference program plus up to two earlier correct solutions from the exemplar bank, with their
measured speedups (cudal1.bucket_sample). The policy writes a performance analysis, a design and a
new ModelNew. Every parsed answer is judged in one call to evaluate.judge_many (the judge of the
CLI and of stage 2; code the bank has measured keeps that verdict), each record becomes a reward
(cudal1.reward), rewards are normalised within each task's group and clipped
(cudal1.group_advantages; --advantage gain: measured from eager speed, improve: from the task's best so
far, cudal1.gain_advantages), and
one optimizer step follows on -mean(advantage * log-prob of the answer tokens) (cudal1.pg_loss; with
--kl, plus a KL penalty to the starting policy, cudal1.kl_penalty).
Every judged solution goes back into the bank, so the next prompt for a task contrasts its newest
variants. --plain runs the same loop with plain prompts: the paper's ablation.

    python train_rl.py                                       # from out/sft (make sft); GPU if present, else CPU
    python train_rl.py --plain --out out/rl-plain            # the ablation, from the same checkpoint
    torchrun --standalone --nproc_per_node=8 train_rl.py     # 8 GPUs: each step's tasks split over ranks
    python train_rl.py --device cpu --steps 5                # CPU: 4 fresh generated tasks (make rl: 10 steps)

Everything goes to --out (out/rl): the checkpoint (as train_sft.py writes it), bank.jsonl (every
judged answer with its record), log.jsonl (one line per step), rejudged.jsonl (answers judged
again in full: implausible speedups, and with --judge screen would-be new bests), fresh/levelG
(the tasks of --rl-tasks fresh), and candidates/levelN/NAME.py + .json: each task's best correct
solution so far, with the analysis as its docstring and the judge's
record beside it, for a person to review before anything goes into kernels/. Kill it any time:
the same command resumes from the last checkpoint.
"""

import argparse
import glob
import hashlib
import json
import os
import random
import statistics
import time
from collections import Counter

import torch
import torch.distributed as dist
from tqdm import tqdm

import cudal1
import evaluate

parser = argparse.ArgumentParser(description="cudal1 stage 3: contrastive RL from a stage-2 checkpoint",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
# ---- data
parser.add_argument("--init", default="out/sft", help="checkpoint to start from (train_sft.py's --out, or a "
                    "pretrained model's Hugging Face folder); once --out holds a checkpoint of its own, "
                    "unused but by --kl, which reads the init that run saved")
parser.add_argument("--kernels", default="kernels", help="verified solutions: the tasks that 'all' means")
parser.add_argument("--tasks", default="kernelbench", help="KernelBench tasks, level*/NAME.py")
parser.add_argument("--rl-tasks", default=None, help="comma-separated paths under --tasks (level1/19_ReLU.py,...); "
                    "'all': every task with a solution in --kernels that runs here; 'fresh': generated "
                    "training-split tasks no stage-1 run trains on (seeds from cudal1.FRESH_SEED), so no answer can be "
                    "recited; unset: 'fresh' when --init holds generated tasks, else the device default")
parser.add_argument("--rl-cover", type=int, default=0, help="'fresh' tasks chosen so each move the generator "
                    "knows is admitted by at least this many of them where 25 x --rl-task-count seeds hold as many "
                    "(the rarest move first, then the rest in seed order); 0: the first tasks in seed order, of "
                    "which 15 of 16 admit the fused epilogue and none a constant output or fold_reduction")
parser.add_argument("--rl-task-count", type=int, default=-1, help="'fresh' takes this many, so that "
                    "each task comes back often enough for its prompt to show the policy's own earlier answers; "
                    "-1: device default")
# ---- sampling
parser.add_argument("--plain", action="store_true", help="plain prompts, no exemplars: the paper's ablation")
parser.add_argument("--tasks-per-step", type=int, default=-1, help="tasks per step, over all ranks; -1: device default")
parser.add_argument("--num-samples", type=int, default=-1, help="G, answers per task per step; -1: device default")
parser.add_argument("--max-new-tokens", type=int, default=-1, help="answer length cap; -1: device default; 0: what the "
                    "block size leaves")
parser.add_argument("--temperature", type=float, default=0.8, help="as stage 2; 0: greedy (a group of G equal answers)")
parser.add_argument("--top-k", type=int, default=0, help="0: off")
parser.add_argument("--top-p", type=float, default=0.95, help="1: off")
parser.add_argument("--cuda-graphs", type=int, default=-1, help="1: decode through one replayed CUDA graph per step "
                    "(cudal1.cuda_graph), 0: eagerly; -1: on a GPU (~20x faster there, bench/sample_speed.py)")
# ---- exemplars (contrastive prompts)
parser.add_argument("--refine", type=int, default=0, help="1: a task whose bank holds a correct solution faster than "
                    "eager that cudal1.refined_task takes is asked as that program (the task with the fastest such "
                    "solution's forward): an answer then makes a move on top of it, and is judged against the task")
parser.add_argument("--exemplars", type=int, default=2, help="earlier correct solutions per prompt, at most")
parser.add_argument("--seed-bank", default=None, help="evaluate.py records of kernels/ solutions: a fresh bank "
                    "starts with the correct ones of the RL tasks (step -1), so contrastive prompts show exemplars "
                    "from the first step; unset: the H200 records on a GPU "
                    f"({cudal1.H200_RECORDS}), results/cpu.jsonl on the CPU; "
                    "empty or missing: start empty")
parser.add_argument("--buckets", type=int, default=4, help="score buckets the bank's correct solutions fall into")
parser.add_argument("--bucket-temperature", type=float, default=1.0, help="softmax temperature, bucket mean log2 speedup")
parser.add_argument("--min-answer-tokens", type=int, default=-1, help="drop exemplars until this many tokens are "
                    "left; -1: device default")
# ---- reward and loss
parser.add_argument("--adv-clip", type=float, default=1.5, help="advantages clipped to +-this (CUDA-L1: 1.5); "
                    "under --advantage gain a cap on the log2 speedup: 1.5 is 2.83x (improve: on its gain over "
                    "the best)")
parser.add_argument("--advantage", choices=("group", "gain", "improve"), default="group", help="group: rewards "
                    "minus the task's group mean, over its std (cudal1.group_advantages); gain: a correct answer's "
                    "log2 speedup where it beats eager, 0 for every other answer (cudal1.gain_advantages); improve: "
                    "gain measured from the task's best before the step instead of eager (the same at a first visit "
                    "where the bank holds no seed; a seed's floor is its record's reading, which on a GPU may "
                    "be another card's), so an answer slower than what the bank holds earns nothing")
parser.add_argument("--kl", type=float, default=0.0, help="weight of a KL penalty to the --init policy on the "
                    "updated answers' tokens (cudal1.kl_penalty, GRPO's estimator, before the top-p cut), so RL "
                    "moves the policy only where the reward asks; 0: off (when on, a frozen copy of the --init "
                    "weights in the compute dtype)")
parser.add_argument("--std-floor", type=float, default=0.1, help="smallest group std of rewards divided by (log2 units)")
parser.add_argument("--max-speedup", type=float, default=20.0, help="a speedup above this is judged again; 0: off")
parser.add_argument("--update-tokens", type=int, default=-1, help="at most this many tokens (prompt + answer, "
                    "per row) in one backward of the update, a group's rows split to fit; 0: a whole group at once; "
                    "-1: 12288 for a policy over 200M parameters on a GPU (Qwen2.5-Coder-1.5B's update of 8 rows of "
                    "1000 + 1024 tokens peaked at 118 GiB on an H200; 12288 itself is not yet measured), else 0")
# ---- optimization
parser.add_argument("--steps", type=int, default=-1, help="RL steps in all, a resumed run included; -1: device default")
parser.add_argument("--time-limit", type=float, default=-1, help="minutes of RL steps in all, a resumed run "
                    "included (held-out evaluations not counted); stop and save after the step that passes it; "
                    "0: none; -1: device default")
parser.add_argument("--lr", type=float, default=-1, help="constant learning rate; -1: device default")
parser.add_argument("--weight-decay", type=float, default=0.0)
parser.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm; 0: off")
# ---- judge
parser.add_argument("--judge-jobs", type=int, default=0, help="judge workers building at once; 0: judge default")
parser.add_argument("--trials", type=int, default=5, help="correctness trials of a full judgement (--judge full, "
                    "and a re-judged new best); the screen runs evaluate.SCREEN's")
parser.add_argument("--iters", type=int, default=20, help="timed calls per answer, at most")
parser.add_argument("--timeout", type=int, default=120, help="seconds per answer for build, and for run")
parser.add_argument("--judge", choices=("screen", "full"), default="full", help="full: every answer through "
                    "the full judge (--trials, --iters); screen: every answer in the judge's screening mode "
                    "(evaluate.SCREEN), would-be new bests judged again in full. Full is the default: at --iters "
                    "20 a full judgement costs about what a screened one does, so the re-judgements made the "
                    "screen slower (one H100 run each: judge 12.8 against 11.2 s a step, "
                    "results/h100-rl-speed-rejudge-fastest.md). Screen is kept for a cheaper screen to be measured "
                    "against (bench/rl_speed.py)")
parser.add_argument("--prewarm", type=int, default=1, help="1: each worker judging an answer (training or "
                    "held-out) calls the reference and the output check once before its turn on the GPU "
                    "(evaluate's prewarm), so their first-use costs leave the turn; with --judge full (builds in "
                    "waves) that happens while nothing is timed. 0: off. On by default: 5.7 against 3.8 steps "
                    "per minute with it off (one H100 run each, results/h100-rl-speed-1205-1736.md)")
# ---- held-out evaluation: greedy answers to tasks no training input touches (cudal1.held_out_tasks)
parser.add_argument("--held-out-tasks", type=int, default=-1, help="held-out generated tasks (+ on a GPU the 20 "
                    "held-out KernelBench level-2 tasks) answered greedily before the first step, every "
                    "--held-out-every steps and at the end; 0: none; -1: device default")
parser.add_argument("--held-out-every", type=int, default=10, help="steps between held-out evaluations")
parser.add_argument("--second-try", type=lambda v: v if v == "refine" else int(v), choices=(0, 1, "refine"),
                    default=1, help="1: each held-out "
                    "task also gets a second greedy answer, to the contrastive prompt its bank would give (the "
                    "reference at 1.00x, and the first answer with its measured speedup when it passed): the groups "
                    "'... second try'; refine: instead, where the first answer passed and cudal1.refined_task takes "
                    "it, to the plain prompt of the task rewritten with its forward (a second move on top of the "
                    "first), the groups '... refined'; 0: off")
parser.add_argument("--resample", type=int, default=0, help="K: each held-out task also gets K answers to the plain "
                    "prompt sampled at --temperature (from one random stream at every measurement), the groups "
                    "'... sampled' (their mean: cudal1.sampled_score) and '... resampled' (the better of the first "
                    "of them and the greedy answer): the second try's control, a second answer that saw nothing of "
                    "the first")
# ---- run
parser.add_argument("--out", default="out/rl", help="checkpoint, bank and logs; resumed when it holds a checkpoint")
parser.add_argument("--device", default="", help="cuda or cpu; empty: cuda if present ($CUDAL1_DEVICE overrides)")
parser.add_argument("--dtype", default="", help="compute dtype; empty: bfloat16 on cuda, float32 on cpu")
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--save-every", type=int, default=5, help="steps between checkpoints (the bank: every step)")
args = parser.parse_args()

# Left at -1 / unset, these follow the device. Few tasks on purpose: a task's prompt contrasts the
# policy's own earlier answers only once the bank holds them, so in a short run each task must come
# back often. CPU: 4 fresh generated tasks from the CPU default's curriculum checkpoint (below), else 4
# level-1 tasks with C++ solutions and sub-millisecond references (a GEMM task would spend the step timing
# its reference), 2 per step, 4 answers each, 10 steps (~2 s each from the 1.1M curriculum policy; answers
# are capped at 1024 tokens). GPU: 8 level-1 tasks with
# CUDA solutions, 4 per step, 8 answers each, stopping after 3.5 minutes so that `make train` fits one
# 10-minute call on the H200. For a long run: --rl-tasks all. The learning rates are small because
# the policy is small and has memorised its few solutions: on the CPU, 1e-4 let the parse rate of
# --plain answers drift from ~80% to ~25% within 12 steps (8 answers a step, so a noisy reading).
# On the GPU answers are capped at 3072 tokens (~1.3x the longest solution of these tasks, 40_LayerNorm
# at 8 KB): a step samples in one batch, so one answer that never stops keeps every row decoding to
# the end of the block (the first H200 step spent 111 s of 132 sampling). On the CPU the cap is 1024, what
# stage 1's CPU default trains to (its answers ~470 tokens) and its block of 2048 leaves beside a prompt.
# From a curriculum checkpoint (train_sft.py --generated) the tasks are --rl-task-count fresh generated
# tasks instead (16 on a GPU, 4 on the CPU): the training split's kind of task, drawn from seeds no stage-1
# run reaches, so the policy has no answer by heart (on the tasks it trained on, seeded with the teacher's
# measured solutions, 99% of the correct --plain answers on the H200 were the memorised teacher solution,
# measured again: git history and results/LEARNING.md). Either way the held-out split is measured
# before the first step, every --held-out-every steps and at the end (4 generated tasks on the CPU; 32 and
# the 20 level-2 on a GPU).
CPU_TASKS = ["19_ReLU", "23_Softmax", "47_Sum_reduction_over_a_dimension", "97_CosineSimilarityLoss"]
GPU_TASKS = CPU_TASKS + ["12_Matmul_with_diagonal_matrices_", "26_GELU_", "40_LayerNorm", "88_MinGPTNewGelu"]
DEFAULTS = {
    "cpu": dict(rl_tasks=",".join(f"level1/{t}.py" for t in CPU_TASKS), tasks_per_step=2, num_samples=4,
                steps=10, lr=3e-5, time_limit=0, max_new_tokens=1024, min_answer_tokens=1024, cuda_graphs=0,
                seed_bank="results/cpu.jsonl", held_out_tasks=4, rl_task_count=4),
    "cuda": dict(rl_tasks=",".join(f"level1/{t}.py" for t in GPU_TASKS), tasks_per_step=4, num_samples=8,
                 steps=200, lr=1e-5, time_limit=3.5, max_new_tokens=3072, min_answer_tokens=3072, cuda_graphs=1,
                 seed_bank=cudal1.H200_RECORDS, held_out_tasks=32,
                 rl_task_count=16),
}

# ---- distributed and device
rank, world, device, dtype = cudal1.init_run(args.device or None, args.dtype or None)
ddp, master = "RANK" in os.environ, rank == 0  # ddp: launched by torchrun


def stage1_generated(init):
    """How many generated tasks the checkpoint at `init` trained on (train_sft.py --generated), from
    the settings it keeps: in config.json (our layout) or cudal1.json (Hugging Face's); 0 for none."""
    for name in ("cudal1.json", "config.json"):
        try:
            with open(os.path.join(init, name)) as f:
                settings = json.load(f).get("settings", {})
        except (OSError, ValueError):
            continue
        if "generated" in settings:
            return settings["generated"] or 0
    return 0


if args.rl_tasks is None and (stage1_generated(args.init)
                              or os.path.isdir(os.path.join(args.init, "generated", "solutions"))):
    args.rl_tasks = "fresh"  # a curriculum checkpoint: RL on tasks of its kind that it never saw, not on kernels/
cudal1.fill_defaults(args, DEFAULTS[device.type])
target = cudal1.device_name(device)  # the device named in every prompt
say = tqdm.write if master else (lambda *a, **k: None)
os.makedirs(args.out, exist_ok=True)
G = args.num_samples
if G < 2:
    raise SystemExit("--num-samples must be at least 2: advantages compare answers within a task's group")


read = cudal1.read


# ---- model: resume from --out, else start from --init (stage 2's checkpoint)
resumed = os.path.exists(os.path.join(args.out, "config.json"))
model, tok, meta = cudal1.load_checkpoint(args.out if resumed else args.init, device)
cfg = model.config
if args.update_tokens < 0:
    args.update_tokens = 12288 if device.type == "cuda" and model.num_params() > 2e8 else 0
if resumed and meta.get("stage") != "rl":
    raise SystemExit(f"{args.out} holds a checkpoint that train_rl.py did not write: use another --out")
step = meta["step"] if resumed else 0
start = f"resumed {args.out} at step {step}" if resumed else f"starting from {args.init}"
say(f"{start}: {model.num_params() / 1e6:.2f}M params on {device} ({dtype}), {world} rank(s), "
    f"{'plain' if args.plain else 'contrastive'} prompts")
optimizer = cudal1.adamw(model, args.lr, args.weight_decay, device)
# --kl: the policy RL started from, frozen (on resume the init the run saved, not the last checkpoint)
anchor = None
if args.kl > 0:
    start_weights = cudal1.load_checkpoint(meta.get("init", args.init) if resumed else args.init, device)[0]
    anchor = cudal1.sampling_model(start_weights, dtype).requires_grad_(False)
if resumed and "optimizer" in meta:  # a fresh run starts a fresh optimizer: SFT's moments fit another loss
    optimizer.load_state_dict(meta["optimizer"])
    for g in optimizer.param_groups:
        g["lr"] = args.lr

# ---- tasks: those whose plain prompt leaves room for an answer
# Held-out tasks never enter: not as RL tasks, so not as bank seeds, prompts or exemplars either.


def move_cover(pool, n, k):
    """n of pool's tasks ((name, source, meta), in seed order), each move admitted by at least k of them
    where the pool has k: for each move, rarest first, the first tasks in seed order that admit it, then the
    rest in seed order. k = 0: the first n. The first 16 fresh GPU tasks offer the fused epilogue alone on
    10 and a constant output on none, while 7 of the 32 held-out tasks admit one (the best move on 4 of
    them, 1.8-3.0x on the H100; fusing beats it on the other 3), so RL on them could not learn when it
    beats fusing."""
    picked = []
    counts = Counter(m for _, _, meta in pool for m in meta["moves"])
    for move in sorted(counts, key=lambda m: (counts[m], m)):  # k = 0: none needed, the fill below takes them
        need = k - sum(move in meta["moves"] for _, _, meta in picked)
        admit = [t for t in pool if move in t[2]["moves"] and t not in picked]
        picked += admit[:max(0, min(need, n - len(picked)))]
    picked += [t for t in pool if t not in picked][:n - len(picked)]
    return sorted(picked, key=lambda t: t[2]["seed"])


def fresh_tasks(folder, n):
    """Paths of n generated training-split tasks from cudal1.FRESH_SEED on (the same ones in every run), written
    to `folder` with the NAME.json that cudal1.held_out reads. Stops when --init's generated tasks
    (those beside it, or as many as its settings name: ~6% of seeds are held out) may reach cudal1.FRESH_SEED:
    then stage 1 trained on some of them."""
    from kernelbench import generate as gen
    trained = os.path.join(args.init, "generated", "tasks", "levelG")
    seeds = [int(f.split("_")[0]) for f in os.listdir(trained) if f.endswith(".py")] if os.path.isdir(trained) else []
    reach = max(max(seeds, default=-1), int(1.25 * stage1_generated(args.init)))  # 1.25 N: ~1.07 N and a margin
    if reach >= cudal1.FRESH_SEED:
        raise SystemExit(f"--rl-tasks fresh: {args.init} trained on generated seeds up to ~{reach}, past "
                         f"cudal1.FRESH_SEED = {cudal1.FRESH_SEED}: these tasks would not be fresh")
    size = "gpu" if device.type == "cuda" else "cpu"
    pool = gen.tasks(cudal1.FRESH_SEED, 25 * n if args.rl_cover else n, size, split="train")
    out = []
    for name, source, meta in move_cover(pool, n, args.rl_cover):
        if cudal1.held_out(meta):
            raise SystemExit(f"--rl-tasks fresh: {name} is held out: the split is broken")
        if master:
            gen.write(folder, name, source, meta)
        out.append(os.path.join(folder, name + ".py"))
    if ddp:
        dist.barrier()
    return out

if args.rl_tasks == "all":
    tasks, held = set(), set()
    for path in glob.glob(os.path.join(args.kernels, "level*", "*.py")):
        task = cudal1.task_of(path, args.tasks)
        if os.path.exists(task) and cudal1.held_out(task):
            held.add(task)
        elif os.path.exists(task) and cudal1.runs_on(read(path), device):
            tasks.add(task)
    tasks = sorted(tasks)
    if held:
        say(f"left out {len(held)} held-out task(s) (cudal1.held_out): {', '.join(sorted(held))}")
elif args.rl_tasks == "fresh":
    tasks = fresh_tasks(os.path.join(args.out, "fresh", "levelG"), args.rl_task_count or 16)
else:
    tasks = [os.path.join(args.tasks, t) for t in args.rl_tasks.split(",") if t]
    missing = [t for t in tasks if not os.path.exists(t)]
    if missing:
        raise SystemExit(f"--rl-tasks: no such task file(s): {', '.join(missing)}")
    held = [t for t in tasks if cudal1.held_out(t)]
    if held:
        raise SystemExit(f"--rl-tasks: held-out task(s), never trained on (cudal1.held_out): {', '.join(held)}")
too_long = [t for t in tasks
            if len(tok.encode_prompt(cudal1.plain_prompt(read(t), target))) + args.min_answer_tokens > cfg.block_size]
if too_long:
    say(f"skipping {len(too_long)} task(s) whose prompt leaves < {args.min_answer_tokens} tokens: {', '.join(too_long)}")
tasks = [t for t in tasks if t not in too_long]
if not tasks:
    raise SystemExit("no RL tasks: set --rl-tasks")
bank = cudal1.Bank(os.path.join(args.out, "bank.jsonl"), write=master)
log_path, held_path = os.path.join(args.out, "log.jsonl"), os.path.join(args.out, "held_out.jsonl")
answers_path, held_answers_path = (os.path.join(args.out, n) for n in ("answers.jsonl", "held_out_answers.jsonl"))
# steps past the checkpoint will run again: their lines are forgotten (a held-out line at `step` measured this checkpoint)
for path, keep in ((log_path, step), (answers_path, step), (held_path, step + 1), (held_answers_path, step + 1)):
    if master and os.path.exists(path):
        lines = [line for line in open(path) if line.endswith("\n") and json.loads(line)["step"] < keep]
        with open(path, "w") as f:
            f.writelines(lines)
if master:  # the settings of this run, readable before its first checkpoint (bench/rl_report.py reads them)
    with open(os.path.join(args.out, "settings.json"), "w") as f:
        json.dump(vars(args), f, indent=1)
key = {t: evaluate.task_key(t) for t in tasks}  # 'level1/19_ReLU.py': the bank's and the judge's name


def seed_bank(paths):
    """Adds, as step -1, the RL tasks' solutions that the judge's records in `paths` (--seed-bank,
    comma-separated) measured correct: kernels/ solutions, from records of this kind of device (speedups
    on another mislead). CUDA-L1's RL starts from a pool of verified variants (on the H200,
    an empty bank made the first contrastive step all plain prompts). Every rank adds the same
    entries; only rank 0 writes them."""
    n, path_of = 0, {k: t for t, k in key.items()}
    for path in [p for p in paths.split(",") if os.path.exists(p)]:
        for r in sorted(evaluate.read_records(path), key=lambda r: r["solution"] or ""):  # a file's last record
            sol = r["solution"] and os.path.join(cudal1.ROOT, r["solution"])
            measured_on = r.get("env", {}).get("device", "cpu").split(":")[0]
            if (sol and r["task"] in key.values() and not r["task"].startswith("levelG/") and measured_on == device.type
                    and r.get("correct") and r.get("speedup") and os.path.exists(sol)):
                code = cudal1.inherit_constructor(read(sol), read(path_of[r["task"]]))
                bank.add(r["task"], cudal1.solution_code(code), r, -1)  # as stage 1's exemplars show it
                n += 1
    return n


if not any(bank.entries.values()):
    # A fresh bank holds each task's reference as a variant at 1.00x -- what stage 1's contrastive
    # pairs show, so every prompt has an exemplar from the first step, and a candidate must beat
    # eager -- then the judged solutions of this device.
    for t in tasks:
        bank.add(key[t], read(t), dict(cudal1.REFERENCE), -1)
    if args.seed_bank:
        say(f"bank seeded with {seed_bank(args.seed_bank)} judged solution(s) from {args.seed_bank}")
say(f"{len(tasks)} task(s), {args.tasks_per_step} per step, G={G}; bank holds "
    f"{sum(len(v) for v in bank.entries.values())} solutions (references and seeds included)")


# ---- held-out evaluation: never trained on, never in the bank; the same tasks in every run
held_groups = {}
if args.held_out_tasks > 0:
    try:
        held_groups = cudal1.held_out_tasks(os.path.join(args.out, "held_out"), args.held_out_tasks,
                                            "gpu" if device.type == "cuda" else "cpu",
                                            args.tasks if device.type == "cuda" else None, write=master,
                                            trained=[read(t) for t in tasks])
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if ddp:
        dist.barrier()


def task_sha(task):
    """A held-out task's code, hashed: a reading is kept only for the task it was taken on."""
    return hashlib.sha256(cudal1.same_code(read(task)).encode()).hexdigest()[:12]


held_sha = {cudal1.held_key(t): task_sha(t) for ts in held_groups.values() for t in ts}  # this run's held-out code


# A held-out line given with the run (make rl-ablation's, a carried start's) counts only for the task code it
# was measured on (its answers' task_sha): where the generator has since written a held-out task otherwise, or
# the answers are missing, the split is measured again. Every rank decides alike; rank 0 moves the files.
if held_groups and os.path.exists(held_path):
    given = [json.loads(line) for line in open(held_answers_path)] if os.path.exists(held_answers_path) else []
    stale = sorted({k for k, sha in ((cudal1.held_key(a["task"]), a.get("task_sha")) for a in given)
                    if k in held_sha and sha != held_sha[k]}) if given else ["no held_out_answers.jsonl"]
    if ddp:
        dist.barrier()  # every rank has read the files before rank 0 moves them
    if stale and resumed:  # its later lines are as stale, and step 0 (--init) is not this checkpoint to measure
        raise SystemExit(f"{args.out}: its held-out line was measured on other (or unrecorded) code of held-out "
                         f"task(s) than the generator writes now ({', '.join(stale[:3])}): start a fresh --out")
    if stale:
        say(f"{held_path}: measured on other (or unrecorded) code of {len(stale)} held-out task(s) "
            f"({', '.join(stale[:3])}{', ...' if len(stale) > 3 else ''}): moved aside (*.stale.jsonl), measured again")
        for path in (held_path, held_answers_path) if master else ():
            if os.path.exists(path):
                os.replace(path, path[:-len(".jsonl")] + ".stale.jsonl")
if ddp:
    dist.barrier()


def start_answers():
    """{held-out task: (source, record)} of the first answers in the run's step-0 held-out line
    (held_out_answers.jsonl: measured here, or given with that line by make rl-ablation), keyed by
    level folder and file name (each run writes the generated tasks under its own --out). Empty unless
    that line was measured on this run's device (a carried line from another GPU reads that GPU's
    speeds); an answer counts only for the task code it was judged on."""
    lines = [json.loads(line) for line in open(held_path)] if os.path.exists(held_path) else []
    if not any(l["step"] == 0 and l.get("device") == target for l in lines):
        return {}
    rows = [json.loads(line) for line in open(held_answers_path)] if os.path.exists(held_answers_path) else []
    out = {}
    for a in rows:
        k = cudal1.held_key(a["task"])
        if a["step"] == 0 and a["attempt"] == 1 and k in held_sha and a.get("task_sha") == held_sha[k]:
            rec = evaluate.record(a["status"], a.get("message") or "", a.get("speedup"))
            out[k] = (a["source"], {**rec, "err_vs_tol": a.get("err_vs_tol")})
    return out


def held_out_eval(step):
    """({group: cudal1.split_score}, the answers, how many first answers kept the start's reading, or
    None when none could) of one greedy answer per held-out task to its plain prompt, judged in the
    screen (evaluate.SCREEN), whatever --judge says (a prompt that leaves no room for an answer: a
    failure). After step 0, a first answer that is the step-0 answer's code again keeps that reading
    (start_answers: same device, same task), so the line moves where the policy's answers did, not
    with a second reading's noise.
    With --second-try, also '{group} second try': each task answered again, greedily, to the contrastive prompt a
    stage-3 bank would hold for it after that answer (the reference at 1.00x, and the first answer with its measured
    speedup if it passed), scored by the better of the two answers (correct: the share of second answers that pass).
    That is what contrastive RL trains: using a measured attempt on a task never seen. With --second-try refine,
    '{group} refined' instead: where the first answer passed and cudal1.refined_task takes it, a greedy answer to
    the plain prompt of the task rewritten with its forward (a restatement of that program reads as the first
    answer). With --resample K, K answers sampled to the same plain prompt: '{group} resampled' scores the better of
    the first answer and the first of them, what a second answer earns without seeing the first, and '{group}
    sampled' their mean (cudal1.sampled_score). Nothing of it enters the bank or the loss."""
    mine = [t for ts in held_groups.values() for t in ts][rank::world]
    opts = dict(device=str(device) if ddp else device.type, jobs=args.judge_jobs or None, timeout=args.timeout,
                prewarm=bool(args.prewarm))

    def answer(prompts, known=None, temperature=0.0, draw=0):
        """{task: (source or None, record)} of an answer to each prompt (greedy at temperature 0; else the
        draw-th sample); an answer that is known[task]'s code again keeps its record: not timed twice."""
        known = known or {}
        fits = [t for t in prompts if len(prompts[t]) + (args.max_new_tokens or 1) <= cfg.block_size]
        g = torch.Generator(device).manual_seed(args.seed + 1_000_003 * draw)
        rows = cudal1.generate(cudal1.sampling_model(model, dtype), [prompts[t] for t in fits], 1,
                               args.max_new_tokens or cfg.block_size, temperature, args.top_k if temperature else 0,
                               args.top_p if temperature else 1.0, g, tok.end_id, bool(args.cuda_graphs)) if fits else []
        texts = {t: tok.decode(r[0]) for t, r in zip(fits, rows)}
        parsed = {t: cudal1.parse_answer(text) for t, text in texts.items()}
        sources = {t: src for t, (src, _) in parsed.items()}
        again = {t for t, src in sources.items() if src is not None and t in known and known[t][0] is not None
                 and cudal1.same_code(src) == cudal1.same_code(known[t][0])}
        pairs = [(t, src) for t, src in sources.items() if src is not None and t not in again]
        records = dict(zip([t for t, _ in pairs], evaluate.judge_many(pairs, **opts, **evaluate.SCREEN) if pairs else []))
        records.update({t: evaluate.record("parse_error", why) for t, (src, why) in parsed.items() if src is None})
        records.update({t: evaluate.record("parse_error", "the prompt leaves no room for an answer")
                        for t in prompts if t not in parsed})
        for t in set(records) & set(texts):  # what the answer said it would do, to read beside what it did
            records[t]["analysis"] = cudal1.answer_analysis(texts[t])[:600]
        return {t: known[t] if t in again else (sources.get(t), records.get(t)) for t in prompts}

    plain = {t: tok.encode_prompt(cudal1.plain_prompt(read(t), target)) for t in mine}
    start = start_answers() if step else {}
    known = {t: start[cudal1.held_key(t)] for t in mine if cudal1.held_key(t) in start}
    first = answer(plain, known=known)
    unchanged = sum(first[t] is known[t] for t in known)  # answer() hands back the known pair itself
    second, samples = {}, []
    if args.second_try == "refine":  # the first answer's program as the task to speed up, where it passed
        progs = {t: cudal1.refine(read(t), src) for t, (src, rec) in first.items() if rec and rec.get("correct")}
        progs = {t: p for t, p in progs.items() if p}
        ids = {t: tok.encode_prompt(cudal1.plain_prompt(p, target)) for t, p in progs.items()}
        second = answer({t: i for t, i in ids.items()  # one that leaves no room: no second try
                         if len(i) + (args.max_new_tokens or 1) <= cfg.block_size}, known=first)
        for t, (src, _) in second.items():  # the given program again, however restated: the first answer's reading
            if src and cudal1.restates(read(t), progs[t], src):
                second[t] = first[t]
    elif args.second_try:
        shown = {t: sorted([(read(t), cudal1.REFERENCE["speedup"])] + ([(src, rec["speedup"])] if rec and rec.get("correct")
                           else []), key=lambda e: e[1]) for t, (src, rec) in first.items()}
        second = answer({t: cudal1.fit_prompt(tok, read(t), target, shown[t], args.max_new_tokens or 1,
                                              cfg.block_size)[0] for t in mine}, known=first)
    for i in range(args.resample):
        samples.append(answer(plain, known=first, temperature=args.temperature, draw=i))
    # (task, (source, record), the second try's or None, each sampled answer)
    results = [(t, first[t], second.get(t), *(s[t] for s in samples)) for t in mine]
    if ddp:
        parts = [None] * world
        dist.all_gather_object(parts, results)
        results = [x for p in parts for x in p]
        counts = [None] * world
        dist.all_gather_object(counts, unchanged)
        unchanged = sum(counts)
    answers = []  # every answer with its verdict, for held_out_answers.jsonl
    for t, *tries in results:  # attempt 1: the first answer, 2: the second try, 3 on: the sampled ones
        sha = task_sha(t)
        for attempt, (src, rec) in ((i, a) for i, a in enumerate(tries, 1) if a):
            answers.append(dict(task=t, attempt=attempt, source=src, task_sha=sha,
                                **{k: rec.get(k) for k in ("status", "speedup", "err_vs_tol", "message", "analysis")}))
    return (cudal1.held_out_scores(results, held_groups, "refined" if args.second_try == "refine" else "second try"),
            answers, unchanged if start else None)


def log_held_out(step):
    """Measure the split at `step` (updates so far): a line in held_out.jsonl, and one on screen. A line
    already there for `step` is kept, not measured again: a resumed run's checkpoint, or the policy a fresh
    run starts from when its --out was given that line (make rl-ablation measures --init once for all runs),
    taken on the held-out task code of today's generator (a line on other code is moved aside at start)."""
    kept = [l for l in map(json.loads, open(held_path)) if l["step"] == step] if os.path.exists(held_path) else []
    if kept:
        stats, n = kept[0].get("stats", {}), len(held_groups["generated"])
        k = (stats["generated sampled"]["answers"] // n if "generated sampled" in stats
             else int("generated resampled" in stats))  # a line from before --resample K: one sample, no mean
        said = kept[0].get("second_try") or int("generated second try" in stats)  # a contrastive one is always asked
        say(f"held-out at step {step}: measured already ({held_path})" + (
            f"; WARNING: {k} sampled answer(s) a task there, --resample {args.resample} here: the sampled lines "
            "differ" if args.resample and (k != args.resample or "generated sampled" not in stats) else "") + (
            f"; WARNING: --second-try {said} there, {args.second_try} here: the second tries differ"
            if said != args.second_try else ""))
        return 0.0
    t0 = time.time()
    stats, answers, unchanged = held_out_eval(step)
    if master:
        with open(held_path, "a") as f:
            f.write(json.dumps(dict(step=step, stats=stats, seconds=round(time.time() - t0, 1), device=target,
                                    **({"second_try": "refine"} if args.second_try == "refine" else {}),
                                    **({} if unchanged is None else {"unchanged": unchanged}))) + "\n")
        with open(held_answers_path, "a") as f:  # each answer, to read why it failed
            f.writelines(json.dumps(dict(step=step, **a)) + "\n" for a in answers)
    say(f"held-out at step {step}: " + " | ".join(f"{g} {s['tasks']} tasks: correct {s['correct']:.0%}, geomean "
                                                  f"{s['geomean']:.2f}x" for g, s in stats.items())
        + ("" if unchanged is None else f" | {unchanged} first answers the start's code again, its reading kept")
        + f" ({time.time() - t0:.0f}s)")
    return time.time() - t0


def step_tasks(step):
    """The step's tasks: consecutive slices of seeded shuffles (one per epoch), so a resumed run
    continues the same order and every task comes up equally often."""
    out = []
    for i in range(step * args.tasks_per_step, (step + 1) * args.tasks_per_step):
        epoch, j = divmod(i, len(tasks))
        order = tasks[:]
        random.Random(args.seed + epoch).shuffle(order)
        out.append(order[j])
    return out


def program(task):
    """(the program a prompt asks to speed up, the bank's solution it was made from or None): the task; with
    --refine, where the bank holds a correct solution faster than eager that cudal1.refined_task takes, the
    task rewritten with the fastest one's forward, while its plain prompt leaves --min-answer-tokens."""
    if args.refine:
        for e in sorted(bank.correct(key[task]), key=lambda e: -e["record"]["speedup"]):
            refined = e["record"]["speedup"] > 1.0 and cudal1.refine(read(task), e["source"])
            if refined and (len(tok.encode_prompt(cudal1.plain_prompt(refined, target))) + args.min_answer_tokens
                            <= cfg.block_size):
                return refined, e["source"]
    return read(task), None


def make_prompt(task, rng):
    """(prompt ids, how many exemplars it shows, the program asked, the solution it was made from or None):
    plain, or the program (program()) with up to --exemplars earlier correct solutions drawn from the bank
    (never the one the program was made from: it is shown already); the slowest is dropped first while the
    prompt is too long."""
    asked, given = program(task)
    drawn = [] if args.plain else cudal1.bucket_sample(
        [e for e in bank.correct(key[task]) if not given or cudal1.same_code(e["source"]) != cudal1.same_code(given)],
        args.exemplars, args.buckets, args.bucket_temperature, rng)
    ids, kept = cudal1.fit_prompt(tok, asked, target, [(e["source"], e["record"]["speedup"]) for e in drawn],
                                  args.min_answer_tokens, cfg.block_size)  # an empty bank shows nothing: plain
    return ids, len(kept), asked, given


def judge(groups):
    """Parse every answer and judge each distinct (task, code) once, in one call: in full (--trials,
    --iters) by default, or with --judge screen in the judge's screening mode (evaluate.SCREEN: every
    rule, fewer trials, a short timing), where an answer that would beat the bank's best for its task
    is judged again in full, the fastest of a task first (cudal1.to_rejudge), and that record is the
    one that counts. In either mode an answer above --max-speedup is judged twice. Code the bank has
    measured keeps that verdict.
    Returns the answers (dicts with task, text, source, record) and the re-judgements."""
    answers = []
    for g in groups:
        task_source = read(g["task"])
        for row in g["rows"]:
            text = tok.decode(row)
            source, reason = cudal1.parse_answer(text)
            if source is not None:  # one form for a restated constructor, so a copy of a seed is one
                source = cudal1.inherit_constructor(source, task_source)
            if g["given"] and source and cudal1.restates(task_source, g["asked"], source):
                source = g["given"]  # the program it was asked, restated: that solution's code (known)
            answers.append(dict(task=g["task"], text=text, source=source, stopped=row[-1:] == [tok.end_id],
                                given=g["given"], record=evaluate.record("parse_error", reason)))
    # Code the bank has measured keeps that record: judged once in a run, not once a step. It earns no
    # advantage (known code), and a second noisy reading could only flatter its task's best.
    # (task, same code) -> its first judgement's verdict, without the timings this step's judging did not spend
    measured = {(t, code): evaluate.record(r["status"], r.get("message", ""), r.get("speedup"))
                for t in {a["task"] for a in answers} for code, r in bank.verdicts(key[t]).items()}
    distinct = {}  # (task, same code) -> the first such (task, source): the same code is judged once
    for a in answers:
        k = a["source"] is not None and (a["task"], cudal1.same_code(a["source"]))
        if k and k not in measured:
            distinct.setdefault(k, (a["task"], a["source"]))
    pairs = list(distinct.values())
    opts = dict(device=str(device) if ddp else device.type, jobs=args.judge_jobs or None, timeout=args.timeout,
                prewarm=bool(args.prewarm))
    screen = args.judge == "screen"  # --judge full: every record a full one, only implausible speedups judged again
    mode = {**evaluate.SCREEN, "iters": args.iters} if screen else {"trials": args.trials, "iters": args.iters}
    records = evaluate.judge_many(pairs, **opts, **mode) if pairs else []
    # --judge full: every reading is a full one already, so no best is beaten: only implausible ones are judged again
    best = {t: bank.best_speedup(key[t]) if screen else float("inf") for t, _ in pairs}
    rejudged, done = [], set()
    while again := cudal1.to_rejudge(records, [t for t, _ in pairs], best, args.max_speedup, done):
        full = evaluate.judge_many([pairs[i] for i in again], **opts, trials=args.trials, iters=args.iters)
        for i, r in zip(again, full):
            rejudged.append(dict(step=step, task=key[pairs[i][0]], first=records[i]["speedup"], second=r["speedup"],
                                 status=r["status"], gpu_s=r.get("gpu_s"), first_gpu_s=records[i].get("gpu_s"),
                                 source=pairs[i][1]))
            records[i] = r
            done.add(i)
            if r["correct"] and r["speedup"]:
                best[pairs[i][0]] = max(best[pairs[i][0]], r["speedup"])
    by_key = {**measured, **dict(zip(distinct, records))}
    for a in answers:
        if a["source"] is not None:
            a["record"] = by_key[(a["task"], cudal1.same_code(a["source"]))]
    return answers, rejudged


def policy_step(groups, adv):
    """One optimizer step on this batch; returns (its loss, the KL penalty's token mean before --kl weighs
    it: None when off; both over every rank's answers), or (None, None) when no group on any rank
    had a signal (a nonzero advantage: with --advantage group, rewards not all equal; with gain, a new
    answer faster than eager; with improve, faster than its task's best). Groups without one are
    skipped: their advantages are zero, so they would add only forward passes and count in the mean;
    --kl anchors the answers the update moves."""
    live = [(g, adv[i * G:(i + 1) * G]) for i, g in enumerate(groups) if adv[i * G:(i + 1) * G].abs().sum() > 0]
    n_tok = torch.tensor(float(sum(len(r) for g, _ in live for r in g["rows"])), device=device)
    if ddp:
        dist.all_reduce(n_tok)  # the loss is a mean over the answer tokens of every rank
    if n_tok.item() == 0:
        return None, None
    model.train()
    sampling = (args.temperature, args.top_k, args.top_p)  # the distribution the answers came from
    total, kl_total = 0.0, 0.0
    for g, a in live:
        # --update-tokens: the group's rows in parts of at most that many tokens, one backward each;
        # the loss is a token mean, so the parts' gradients add up to the whole group's
        for j, per in cudal1.row_parts(len(g["prompt"]), [len(r) for r in g["rows"]], args.update_tokens):
            rows = g["rows"][j:j + per]
            if anchor is not None:  # before the policy's forward, whose graph would otherwise sit beside it
                with torch.no_grad(), cudal1.autocast(device, dtype):
                    ref = cudal1.answer_logprobs(anchor, g["prompt"], rows, *sampling, unfiltered=True)[2]
            with cudal1.autocast(device, dtype):
                logp, mask, *raw = cudal1.answer_logprobs(model, g["prompt"], rows, *sampling,
                                                          unfiltered=anchor is not None)  # (rows, L) each
            loss = cudal1.pg_loss(logp, mask, a[j:j + per].to(device))
            if anchor is not None:
                kl = cudal1.kl_penalty(raw[0], ref, mask)
                loss = loss + args.kl * kl
                kl_total += kl.item() * mask.sum().item() / n_tok.item()
            loss = loss * mask.sum() / n_tok  # the part's mean -> its share of the batch's token mean
            loss.backward()
            total += loss.item()
    if ddp:  # gradients summed over ranks; a rank with no live group still takes part
        for p in model.parameters():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            dist.all_reduce(p.grad)
        sums = torch.tensor([total, kl_total], device=device)
        dist.all_reduce(sums)  # the logged loss and KL: the whole batch's, not this rank's share
        total, kl_total = sums.tolist()
    if args.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return total, (kl_total if anchor is not None else None)


def write_candidate(a, step):
    """A task's new best: candidates/levelN/NAME.py (the analysis as its docstring, then the code)
    and NAME.json (the judge's record). Never into kernels/: a person reviews and copies it."""
    level, name = key[a["task"]].split("/")
    path = os.path.join(args.out, "candidates", level, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    h = cudal1.HEADERS
    analysis = a["text"].split(h[0], 1)[1].split(h[1], 1)[0].strip().replace('"""', "'''")
    with open(path, "w") as f:
        f.write(f'"""{analysis}\n"""\n{a["source"]}')
    with open(path[:-3] + ".json", "w") as f:
        json.dump(dict(step=step, task=key[a["task"]], record=a["record"]), f, indent=1)


def save():
    if master:
        cudal1.save_checkpoint(args.out, model, tok, {"settings": vars(args), "step": step, "stage": "rl",
                                                      "init": args.init, "rl_seconds": time.time() - t_start},
                               optimizer)


def sample(step):
    """This rank's share of the step's tasks, G answers to each task's prompt, decoded together in
    one batch: groups (task, prompt ids, rows of answer ids, n_shown: how many exemplars its prompt shows,
    asked and given: the program it asks for and the solution that was made from, --refine)."""
    rng = random.Random(f"{args.seed}-{step}-{rank}")  # exemplar draws
    gen = torch.Generator(device).manual_seed(args.seed * 1_000_003 + step * 1000 + rank)
    mine = step_tasks(step)[rank::world]
    prompts = [make_prompt(task, rng) for task in mine]  # (ids, n_shown, asked, given) per task
    rows = cudal1.generate(cudal1.sampling_model(model, dtype), [ids for ids, *_ in prompts], G,
                           args.max_new_tokens or cfg.block_size, args.temperature, args.top_k, args.top_p,
                           gen, tok.end_id, bool(args.cuda_graphs)) if prompts else []  # a rank may have no task
    return [dict(task=task, prompt=ids, rows=r, n_shown=n, asked=asked, given=given)
            for task, (ids, n, asked, given), r in zip(mine, prompts, rows)]


def share(answers, rejudged, n_shown):
    """Every rank's answers, re-judgements and exemplar counts, on every rank."""
    if not ddp:
        return answers, rejudged, n_shown
    parts = [None] * world
    dist.all_gather_object(parts, (answers, rejudged, n_shown))
    return [a for p in parts for a in p[0]], [s for p in parts for s in p[1]], [n for p in parts for n in p[2]]


def update_bank(answers, step):
    """Every parsed answer into the bank, identically on every rank (checked); a task's new best --
    code the bank had not seen, faster than everything it had; the same code measured again (noise)
    never is -- lands in candidates/."""
    best_before = {t: bank.best(key[t]) for t in set(a["task"] for a in answers)}
    seen = {t: bank.sources(key[t]) for t in best_before}
    for a in answers:
        if a["source"] is not None:
            bank.add(key[a["task"]], a["source"], a["record"], step)
    if ddp:  # every rank must hold the same bank, or their next prompts differ
        digests = [None] * world
        dist.all_gather_object(digests, bank.digest())
        if len(set(digests)) > 1:
            raise SystemExit(f"step {step}: the exemplar bank differs between ranks ({digests})")
    for t, before in best_before.items():
        mine = [a for a in answers if a["task"] == t and a["record"]["correct"] and a["record"]["speedup"]
                and cudal1.same_code(a["source"]) not in seen[t]]
        new = max(mine, key=lambda a: a["record"]["speedup"], default=None)
        if master and new and (before is None or new["record"]["speedup"] > before["record"]["speedup"]):
            write_candidate(new, step)


def log_step(step, answers, rejudged, n_shown, loss, kl, times):
    """One line per step on screen, the same numbers in log.jsonl; every answer in answers.jsonl."""
    t0, t1, t2, t3 = times
    n = len(answers)
    recs = [a["record"] for a in answers]
    rewards = [a["reward"] for a in answers]
    parsed = sum(a["source"] is not None for a in answers) / n
    compiled = sum(r["status"] not in ("parse_error", "compile_error", "skipped") for r in recs) / n
    correct = sum(bool(r["correct"]) for r in recs) / n
    # best found by RL so far: its own code only (a copy of a seeded solution is not counted)
    best = {key[t]: max((e["record"]["speedup"] for e in bank.found(key[t])), default=None) for t in tasks}
    good = [a for a in answers if a["record"]["correct"]]
    given = {t: bank.sources(key[t], given=True) for t in set(a["task"] for a in good)}  # the seeds' code
    copied = sum(cudal1.same_code(a["source"]) in given[a["task"]] for a in good) / max(1, len(good))
    # A group whose answers all earn the same reward (one code G times, at a low temperature) teaches nothing
    groups = [answers[i:i + G] for i in range(0, n, G)]  # G consecutive answers per task, on every rank
    signal = sum(any(a["adv"] for a in g) for g in groups) / len(groups)
    distinct = statistics.mean(len({cudal1.same_code(a["source"]) for a in g if a["source"] is not None}) for g in groups)
    line = dict(step=step, reward_mean=statistics.mean(rewards), reward_max=max(rewards), loss=loss,
                kl=kl,  # --kl: the penalty's token mean over the updated answers, before its weight
                stopped=sum(a["stopped"] for a in answers) / n, parsed=parsed, compiled=compiled, correct=correct,
                copied=copied, known=sum(a["known"] for a in answers) / n,
                composed=sum(len(cudal1.moves_shown(a["source"])) >= 2 for a in good) / max(1, len(good)),
                exemplars=statistics.mean(n_shown) if n_shown else 0, best=best, rejudged=len(rejudged),
                **({"refined": sum(bool(a["given"]) for a in answers) / n} if args.refine else {}),  # asked refined
                signal=signal, distinct=distinct,  # groups with a learning signal; parsed codes per group
                statuses=dict(Counter(r["status"] for r in recs)),
                rejects=dict(Counter(r["message"] for r in recs if r["status"] == "parse_error").most_common(3)),
                sample_s=round(t1 - t0, 1), judge_s=round(t2 - t1, 1), train_s=round(t3 - t2, 1),
                # of judge_s: the GPU held by workers (their turns, summed; answers with the same code share one
                # record, counted once) and the slowest build (evaluate's Slot)
                judge_gpu_s=round(sum(r.get("gpu_s") or 0 for r in {id(r): r for r in recs}.values())
                                  + sum(s.get("first_gpu_s") or 0 for s in rejudged), 1),  # + the first readings they replaced
                judge_build_s=round(max((r.get("build_s") or 0 for r in recs), default=0), 1),
                rejudge_gpu_s=round(sum(s["gpu_s"] or 0 for s in rejudged), 1),  # of judge_gpu_s: the full re-judgements
                elapsed_s=round(time.time() - t_start, 1))
    in_step = sorted({key[t] for t in step_tasks(step)})
    bests = " ".join(f"{k.split('/')[1][:-3][:12]} {'-' if best[k] is None else f'{best[k]:.2f}x'}" for k in in_step)
    say(f"step {step + 1:4d}/{args.steps} | reward mean {line['reward_mean']:+.2f} max {line['reward_max']:+.2f} | "
        f"parse {parsed:.0%} compile {compiled:.0%} correct {correct:.0%} ({copied:.0%} copies) | "
        f"{signal:.0%} of groups with a signal, {distinct:.1f} codes each | "
        + (f"kl {kl:.4f} | " if kl is not None else "") + (f"refined {line['refined']:.0%} | " if args.refine else "")
        + f"best {bests} | "
        f"sample {t1 - t0:.0f}s judge {t2 - t1:.0f}s (GPU {line['judge_gpu_s']:.0f}s, slowest build "
        f"{line['judge_build_s']:.0f}s) train {t3 - t2:.0f}s"
        + (f" | {len(rejudged)} judged twice" if rejudged else ""))
    if master:
        with open(log_path, "a") as f:
            f.write(json.dumps(line) + "\n")
        with open(answers_path, "a") as f:  # every answer, for reading what the policy writes
            f.writelines(json.dumps(dict(step=step, task=key[a["task"]], reward=a["reward"], adv=round(a["adv"], 4),
                                         known=a["known"], status=a["record"]["status"],
                                         message=a["record"].get("message"), stopped=a["stopped"], text=a["text"],
                                         **({"refined": bool(a["given"])} if args.refine else {}))) + "\n"
                         for a in answers)
        if rejudged:
            with open(os.path.join(args.out, "rejudged.jsonl"), "a") as f:
                f.writelines(json.dumps(s) + "\n" for s in rejudged)


# ---- the loop: sample -> judge -> reward -> advantage -> step -> bank
# --time-limit counts a resumed run's earlier steps, as --steps does: one cut off by a machine's time limit
# resumes for what is left, and one that ran to its limit takes no more steps (make rl-ablation run again)
t_start = time.time() - (meta.get("rl_seconds", 0.0) if resumed else 0.0)


def out_of_time():
    """Whether the run has had its --time-limit of RL steps, by rank 0's clock, which decides for everyone."""
    stop = torch.tensor(float(args.time_limit > 0 and time.time() - t_start > 60 * args.time_limit), device=device)
    if ddp:
        dist.broadcast(stop, 0)
    return bool(stop.item())


stop = out_of_time()
if stop:
    say(f"the run has had its {args.time_limit:g} min of RL steps: no more")
held_at = -1  # the step the split was last measured at
while step < args.steps and not stop:
    if held_groups and step % args.held_out_every == 0:
        t_start += log_held_out(step)  # measuring is not training: --time-limit counts the steps alone
        held_at = step
    t0 = time.time()
    groups = sample(step)
    t1 = time.time()
    answers, rejudged = judge(groups)
    t2 = time.time()
    rewards = [cudal1.reward(a["record"]) for a in answers]  # G consecutive answers per group
    known_code = {g["task"]: bank.sources(key[g["task"]]) for g in groups}  # the bank before this step
    known = [a["source"] is not None and cudal1.same_code(a["source"]) in known_code[a["task"]] for a in answers]
    # improve: at a task's later visits --advantage gain pushed up new answers slower than its best, most of
    # them leaving the best's move (results/learning-h100-spell-t64-seeds.md, "pushed up")
    floor = None
    if args.advantage == "improve":  # each task's best in the bank before this step
        task_best = {g["task"]: bank.best(key[g["task"]]) for g in groups}
        floor = [cudal1.reward(task_best[a["task"]]["record"]) if task_best[a["task"]] else 0.0 for a in answers]
    adv = (cudal1.group_advantages(rewards, G, args.adv_clip, args.std_floor, known) if args.advantage == "group"
           else cudal1.gain_advantages(rewards, args.adv_clip, known, floor))  # known code earns none
    loss, kl = policy_step(groups, adv)
    t3 = time.time()
    for a, r, k, v in zip(answers, rewards, known, adv.tolist()):
        a["reward"], a["known"], a["adv"] = r, k, v
    answers, rejudged, n_shown = share(answers, rejudged, [g["n_shown"] for g in groups])
    update_bank(answers, step)
    log_step(step, answers, rejudged, n_shown, loss, kl, (t0, t1, t2, t3))

    # ---- save; stop at the time limit
    step += 1
    stop = out_of_time()
    if step % args.save_every == 0 or step == args.steps or stop:
        save()
    if stop:  # the loop's condition ends it
        say(f"time limit of {args.time_limit:g} min reached at step {step}")

if held_groups and held_at != step:  # the policy this run ends with
    log_held_out(step)
cudal1.end_run()

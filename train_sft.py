"""
Stages 1 and 2 of cudal1: supervised fine-tuning on the verified solutions in kernels/, then rounds
of self-training on the policy's own answers that the judge verified.

Stage 1 trains next-token prediction on (plain prompt -> answer) pairs, one per library file: the
prompt is the task's reference source and the target device, the answer is the solution's docstring
(the performance analysis), a design line and its code; the loss covers answer tokens only. Beside
them, contrastive pairs teach the prompt format of stage 3: for a solution whose speedup the judge
measured (--speedups, evaluate.py's records), prompts show two other variants of its task no
faster than it, with their speedups -- other solutions or the reference itself at 1.00x, never
the answer (cudal1.contrastive_prompt) -- and the answer is that solution (contrastive_pairs). On a
GPU, --reference-pairs more show a generated task's reference alone at 1.00x, the prompt stage 3
opens with on a fresh task, answered by an unmeasured teacher solution of a move measured fast
(reference_pairs); --solution-pairs N show the reference and another unmeasured teacher solution,
labelled "speedup not measured", the prompt of a later stage-3 step (solution_pairs).
Stage 2 (--rounds N) repeats: sample --num-samples answers per task to its plain prompt, and as many
to a contrastive prompt showing the task's measured solutions, judge each parsed answer with
evaluate.judge_many (the judge evaluate.py and the RL reward use), keep the correct ones whose code
is new, fine-tune on solutions + kept answers, at a gentler learning rate than stage 1 and with the
same optimizer state. A last sample-and-judge pass after the final round gives the "after" numbers,
so every run reports parse / compile / correct rates and speedups before and after stage 2, for
plain and for contrastive prompts.

--generated N (the GPU default: 120000, the CPU's 8000) adds N generated training-split
tasks (kernelbench/generate.py) with the teacher solutions that run here (kernelbench/teacher.py),
written to <out>/generated (or --generated-dir, which a later build of the same data reads back
instead of building it again): each task's fastest move makes its plain pair (fastest_plain: the fewest
kernels launched, a tie to the move the judge's records rank faster; --every-move: every move), the
others answer contrastive pairs; each stage-2 round samples --generated-sample of them too. At the
end it judges greedy and sampled answers to --held-out-tasks held-out generated tasks (and, on a GPU,
the 20 held-out KernelBench level-2 tasks), tasks no training input touched (cudal1.held_out), and
prints their correct rates and geomean speedups.

    python train_sft.py                                    # no GPU: 1.1M params on 8000 generated tasks, ~15.5 min on 2 cores (make sft)
    python train_sft.py                                    # one GPU: ~27M params on kernels/ + 120000 generated tasks, 1 round, the held-out line
    torchrun --standalone --nproc_per_node=8 train_sft.py  # 8 GPUs: each rank its own batches and share of stage-2 tasks
    python train_sft.py --device cpu --generated 200 --steps 20 --held-out-tasks 2 --out /tmp/sft  # a quick smoke run anywhere
    python train_sft.py --init ~/models/Qwen2.5-Coder-1.5B-Instruct --lr 1e-5  # a pretrained coder, lr not yet measured (make train INIT=)

Everything goes to --out (out/sft): the checkpoint (model.safetensors, config.json with the
settings, optimizer.safetensors), stage2.jsonl (one line of rates and speedups per round),
selftrain.jsonl (the answers kept), judge/round<r>-rank<k>.jsonl (the judge's records) and
report.md/.json (the summary; --report writes a copy elsewhere, e.g. results/); with --generated also
generated/ (tasks/levelG, solutions/levelG, held_out/levelG) and held_out.json. Run the same command
again to resume: stage 1 from its last save, stage 2 after its last finished round; a finished run
takes more rounds with a larger --rounds.
"""

import argparse
import glob
import hashlib
import itertools
import json
import math
import os
import pickle
import random
import statistics
import sys
import time
from collections import Counter

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import cudal1
import evaluate  # the judge: stage 2's reward, and its table of GPUs
from kernelbench import teacher  # its moves: the plain pair each task is taught, and their ranking

parser = argparse.ArgumentParser(description="cudal1 stages 1-2: SFT on kernels/, then self-training rounds",
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
# ---- data
parser.add_argument("--kernels", default="kernels", help="verified solutions, level*/NAME[.vK].py: the SFT data")
parser.add_argument("--tasks", default="kernelbench", help="KernelBench tasks, level*/NAME.py")
parser.add_argument("--kinds", default=None, help="solution kinds stage 1 trains on, of cuda,cpp,pytorch, in "
                    "the library and the teacher's solutions alike; unset: device default (the CPU's: pytorch, where "
                    "--kinds pytorch,cpp adds the C++ fused epilogue at ~2x the time a step)")
parser.add_argument("--speedups", default=None, help="the judge's records of --kernels and of the teacher's "
                    "solutions (evaluate.py JSONL, comma-separated): the speedups contrastive prompts show; unset: "
                    f"{cudal1.H200_RECORDS} on a GPU, results/cpu.jsonl on the CPU; "
                    "missing: no contrastive pairs")
parser.add_argument("--sample-tasks", default=None, help="stage-2 tasks, comma-separated paths under --tasks "
                    "(level1/19_ReLU.py,...); 'all': every task with a solution that runs here; unset: device default")
# ---- generated tasks (kernelbench/generate.py, solutions by kernelbench/teacher.py)
parser.add_argument("--generated", type=int, default=-1, help="generated training-split tasks (seeds 0, 1, ... "
                    "of the split) whose teacher solutions that run here stage 1 trains on beside --kernels, "
                    "written to <out>/generated; 0: none, and no held-out evaluation; -1: device default")
parser.add_argument("--generated-sample", type=int, default=-1, help="generated training tasks added to each "
                    "stage-2 round's tasks (plain prompts only), drawn afresh per round; -1: device default")
parser.add_argument("--reference-pairs", type=int, default=-1, help="contrastive pairs showing only the reference "
                    "at 1.00x, answered by unmeasured teacher solutions of fast moves (reference_pairs); 0: none; "
                    "-1: device default (GPU 10000, CPU 0)")
parser.add_argument("--solution-pairs", type=int, default=-1, help="contrastive pairs showing the reference and "
                    "any teacher solution of the task labelled 'not measured', answered by another (a fast move "
                    "where one is left, else any) (solution_pairs); 0: none; -1: device default (GPU 10000, CPU 0)")
parser.add_argument("--every-move", action="store_true", help="plain pairs for every teacher move of a generated "
                    "task; default: only its fastest move's (fastest_plain), the others still answer contrastive pairs")
parser.add_argument("--generated-dir", default="", help="where the generated tasks and their teacher solutions "
                    "go, with their examples kept (examples.pkl) so that a run for the same tasks, device and "
                    "code reads them back instead of building them (generated_examples): builds of several seeds "
                    "can share one; empty: <out>/generated, nothing kept")
parser.add_argument("--plain-pick", default="kernels", choices=("kernels", "ranking"), help="a generated task's "
                    "fastest move (fastest_plain): kernels, the fewest kernels launched (teacher.kernel_cost), a tie "
                    "to the ranking; ranking, the best judged geomean over all tasks")
parser.add_argument("--held-out-tasks", type=int, default=-1, help="held-out generated tasks (cudal1.held_out) "
                    "answered greedily and --num-samples times at the end, judged; 0: no held-out evaluation; "
                    "-1: device default")
# ---- model (a fresh run only: a resumed run keeps its checkpoint's; -1: device default)
parser.add_argument("--init", default="", help="start from this checkpoint: a pretrained model's Hugging Face "
                    "folder (Llama, Qwen2, Qwen3) or one of ours, with its tokenizer (the sizes below are then "
                    "unused); empty: a fresh tokenizer and model")
parser.add_argument("--n-layer", type=int, default=-1)
parser.add_argument("--n-head", type=int, default=-1)
parser.add_argument("--n-embd", type=int, default=-1)
parser.add_argument("--block-size", type=int, default=-1, help="longest prompt + answer, tokens; longer pairs are dropped")
parser.add_argument("--vocab-size", type=int, default=-1, help="tokenizer: 256 bytes + merges + 3 specials; 259 = bytes only")
# ---- stage 1
parser.add_argument("--steps", type=int, default=-1, help="optimizer steps of stage 1; -1: device default")
parser.add_argument("--batch-size", type=int, default=-1, help="sequences per step per rank where --fill-tokens is 0 "
                    "(given alone, it sets --fill-tokens 0); -1: device default")
parser.add_argument("--batch-tokens", type=int, default=-1, help="at most this many tokens a batch, rows x the "
                    "longest row (before rounding up to PAD_TO): long rows come fewer to a batch; 0: off; -1: 16384 "
                    "for a policy over 200M parameters on a GPU (Qwen2.5-Coder-1.5B peaked at 94 GiB at 8 x 2048 on "
                    "an H200), else off")
parser.add_argument("--fill-tokens", type=int, default=-1, help="about N tokens a batch per rank: N over its first row's length "
                    "(padded) rows, in place of --batch-size, so short pairs come more to a batch than long ones "
                    "(each pair still weighs the same in expectation); --batch-tokens still caps; 0: off (--batch-size "
                    "rows); -1: device default (90000 on a GPU, off on the CPU)")
parser.add_argument("--lr", type=float, default=-1, help="peak learning rate, linear warmup then cosine to 10%%; "
                    "-1: device default")
parser.add_argument("--warmup", type=int, default=-1, help="warmup steps of stage 1 and of each round "
                    "(a fifth of its steps at most); -1: device default")
parser.add_argument("--weight-decay", type=float, default=0.1)
parser.add_argument("--grad-clip", type=float, default=1.0, help="max gradient norm; 0: off")
parser.add_argument("--compile", type=int, default=-1, help="1: training steps through torch.compile (dynamic "
                    "shapes: one graph for every batch length); 0: eagerly; -1: device default")
# ---- stage 2
parser.add_argument("--rounds", type=int, default=-1, help="self-training rounds; 0: stage 1 only; -1: device default")
parser.add_argument("--num-samples", type=int, default=-1, help="answers sampled per task per round; -1: device default")
parser.add_argument("--max-new-tokens", type=int, default=-1, help="answer length cap; -1: device default; 0: what "
                    "the block size leaves")
parser.add_argument("--min-answer-tokens", type=int, default=-1, help="contrastive prompts drop exemplars until "
                    "this many tokens are left for the answer; -1: device default")
parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
parser.add_argument("--top-k", type=int, default=0, help="0: off")
parser.add_argument("--top-p", type=float, default=0.95, help="1: off")
parser.add_argument("--cuda-graphs", type=int, default=-1, help="1: decode through one replayed CUDA graph per step "
                    "(cudal1.cuda_graph), 0: eagerly; -1: on a GPU (~20x faster there, bench/sample_speed.py)")
parser.add_argument("--round-steps", type=int, default=-1, help="fine-tuning steps per round; -1: device default")
parser.add_argument("--round-lr", type=float, default=-1, help="peak learning rate of each round's fine-tune, "
                    "warmup then cosine to 10%%; -1: 20%% of --lr")
# ---- judge
parser.add_argument("--judge-jobs", type=int, default=0, help="judge workers building at once; 0: judge default")
parser.add_argument("--trials", type=int, default=5, help="correctness trials per answer")
parser.add_argument("--iters", type=int, default=20, help="timed calls per answer, at most")
parser.add_argument("--timeout", type=int, default=120, help="seconds per answer for build, and for run")
# ---- run
parser.add_argument("--out", default="out/sft", help="checkpoint and logs folder; resumed when it holds a checkpoint")
parser.add_argument("--device", default="", help="cuda or cpu; empty: cuda if present ($CUDAL1_DEVICE overrides)")
parser.add_argument("--dtype", default="", help="compute dtype; empty: bfloat16 on cuda, float32 on cpu")
parser.add_argument("--seed", type=int, default=1337)
parser.add_argument("--log-every", type=int, default=10, help="steps between printed log lines")
parser.add_argument("--save-every", type=int, default=100, help="stage-1 steps between checkpoints")
parser.add_argument("--report", default="", help="also write the run's summary to REPORT.md + .json (generated files "
                    "counted, not listed); empty: <out>/report alone")
args = parser.parse_args()

# Settings left at -1 (or unset) take the device's default. CPU: the curriculum in small (issue 14): a
# 1.1M-parameter model on the teacher's PyTorch-level solutions of 8000 generated tasks at CPU sizes (5065
# plain pairs of ~470 answer tokens), 2600 steps of 8 (~4 passes, ~15 min on 2 cores), one round on 2
# generated tasks (~40 s), then the held-out line: in make train it solved 4 of 16 held-out tasks greedily,
# 14 of 80 answers correct, twice (results/train-cpu.md; a run without
# the round, its tokenizer built beside 3 level-1 prompts, 1 of 16: results/curriculum-cpu-g8000-spell.md).
# No contrastive pairs: results/cpu.jsonl measures no teacher move. Fewer steps do not do it: the answers
# name the task's attributes only after ~4 passes (3 -> 18 -> 32 of 80 at 1, 2, 4), and fewer tasks seen as
# often stay ungrounded (4800 tasks, 1600 steps: 1 correct of 80); the 2.2M and 3.7M models solve 3 of 16
# greedily in 25 and 37 minutes. Before it, the CPU default was 3 C++ library files, learnt by heart
# (results/curriculum-cpu-probe.md, curriculum-cpu-g*.md: the steps from there to here).
# GPU: stage 2 on the 8 level-1 tasks of the judge's first slice (plus 8 generated ones per round). Its
# block of 8192 tokens holds a contrastive prompt (the task, the reference and two solutions of up to
# ~2600 tokens each) and still leaves 3072 tokens for the answer (at 4096 only 512 were kept
# free, and the H200's stage 2 parsed 0-12% of its contrastive answers against 56-88% of its plain
# ones). Decoding replays a CUDA graph per token: 2.0-2.8 ms a step against 52-63 ms eagerly, same
# greedy answers (results/h200-sample-speed.md).
# The GPU model is the curriculum's (issue 14): ~27M parameters (a 53 MiB bf16 checkpoint, small
# enough to carry between device calls) on the library and the teacher's solutions of 120000 generated
# tasks (~150k files; 4500 steps through torch.compile, each a batch of ~90k tokens, --fill-tokens, stage 2's
# fine-tune too: batches of 64 rows ran out of an H100's 80 GB at 64 x 8192 tokens; 90k-token batches, with
# the loop waiting for the GPU once every 20 steps, trained at 31.2% MFU there, where on the H200 with a wait
# every step they read 24.0% against 64 rows' 29.8%: card and loop both changed, so which gained is not
# measured, results/curriculum-h100-fill-sync20.md), then stage 2 and the
# held-out line: 32 generated tasks and the 20 KernelBench level-2 ones. On the H200 (held-out
# generated correct, greedy / sampled): 3000 tasks, 1500 x 16 (~5 passes) 12% / 6%; 20000 tasks,
# 1500 x 16 (~1 pass) 19% / 16%; 60000 tasks, 3000 x 64: 69% / 72%, geomean 1.11x / 1.29x
# (results/curriculum-h200*.md): more tasks and ~10x the tokens. Compiled, a batch of 64 trains at
# 1.5M tokens/s (35% MFU) where 16 eagerly trained at 0.67M (results/h200-train-speed.md).
# 120000 tasks and 4500 steps (1.5 times the 3000 before, the same ~90k-token batches): three seeds on an H100 read
# 70-85% correct, 1.30x on 128 held-out tasks, against 63-68%, 1.23-1.28x for four builds at 3000 steps (paired by
# task 1.037x, 95% interval 1.003-1.069x); stage 1 289-330 s (results/curriculum-h100-g120000-s4500-seeds.md).
FIRST_SLICE = ("19_ReLU", "20_LeakyReLU", "21_Sigmoid", "23_Softmax", "40_LayerNorm",
               "47_Sum_reduction_over_a_dimension", "97_CosineSimilarityLoss", "12_Matmul_with_diagonal_matrices_")
DEFAULTS = {
    "cpu": dict(n_layer=4, n_head=4, n_embd=128, block_size=2048, vocab_size=1024, steps=2600, batch_size=8, lr=3e-3,
                rounds=1, num_samples=4, round_steps=20, kinds="pytorch", speedups="results/cpu.jsonl", compile=0,
                warmup=20, max_new_tokens=1024, min_answer_tokens=1024, cuda_graphs=0, generated=8000,
                generated_sample=2, held_out_tasks=16, reference_pairs=0, solution_pairs=0, fill_tokens=0,
                sample_tasks=""),
    "cuda": dict(n_layer=8, n_head=8, n_embd=512, block_size=8192, vocab_size=2048, steps=4500, batch_size=64,
                 lr=1e-3, warmup=100, rounds=1, num_samples=4, round_steps=50, kinds="cuda,cpp,pytorch", compile=1,
                 speedups=cudal1.H200_RECORDS, max_new_tokens=3072, min_answer_tokens=3072,
                 cuda_graphs=1, generated=120000, generated_sample=8, held_out_tasks=32, reference_pairs=10000,
                 solution_pairs=10000, fill_tokens=90000, sample_tasks=",".join(f"level1/{t}.py" for t in FIRST_SLICE)),
}

# ---- distributed and device
rank, world, device, dtype = cudal1.init_run(args.device or None, args.dtype or None)
ddp, master = "RANK" in os.environ, rank == 0  # ddp: launched by torchrun
given = {k for k, v in vars(args).items() if v != parser.get_default(k)}  # set on the command line
if "batch_size" in given and "fill_tokens" not in given:
    args.fill_tokens = 0  # rows a batch, as asked, not the GPU default's packing
cudal1.fill_defaults(args, DEFAULTS[device.type])
if args.round_lr < 0:
    args.round_lr = 0.2 * args.lr
torch.manual_seed(args.seed)
target = cudal1.device_name(device)  # the device named in every prompt
gen_size = "gpu" if device.type == "cuda" else "cpu"  # generated tasks' sizes (kernelbench/generate.py PROFILES)
say = tqdm.write if master else (lambda *a, **k: None)
bars = master and sys.stderr.isatty()  # progress bars for a person watching; logs get the lines
os.makedirs(args.out, exist_ok=True)


read = cudal1.read


def runs_here(source):
    return cudal1.runs_on(source, device)


def example(task, task_source, path, source):
    """The (task, prompt, answer) a solution file teaches, or None (said why) when its answer would
    not parse: the prompt is the task's source and where the solution runs, the answer its
    docstring as the analysis, a design line and its code (cudal1.format_answer), with a constructor
    that restates Model's inherited instead (cudal1.inherit_constructor)."""
    source = cudal1.inherit_constructor(source, task_source)
    try:
        answer = cudal1.format_answer(source)
    except (ValueError, SyntaxError) as e:
        say(f"skip {path}: {e}")
        return None
    code, reason = cudal1.parse_answer(answer)
    if code is None:
        say(f"skip {path}: {reason}")
        return None
    kind = cudal1.solution_kind(source)
    where = target if runs_here(source) else ("CPU" if kind == "cpp" else "NVIDIA GPU")
    return dict(task=task, path=path, where=where, prompt=cudal1.plain_prompt(task_source, where), answer=answer,
                code=code)


def load_examples(kernels_dir, tasks_dir):
    """One (task, prompt, answer) per solution file; its prompt names where the solution runs.
    Solutions of held-out tasks are left out here, so no SFT pair, contrastive exemplar, stage-2
    task or tokenizer text comes from them: everything below is built from these examples."""
    examples, held = [], []
    for path in sorted(glob.glob(os.path.join(kernels_dir, "level*", "*.py"))):
        task = cudal1.task_of(path, tasks_dir)
        if cudal1.held_out(task):
            held.append(path)
            continue
        source = read(path)
        if cudal1.solution_kind(source) not in args.kinds.split(","):
            continue
        if not os.path.exists(task):
            say(f"skip {path}: no task {task}")
            continue
        e = example(task, read(task), path, source)
        examples += [e] if e else []
    if held:
        say(f"left out {len(held)} solution(s) of held-out tasks (cudal1.held_out): {', '.join(held)}")
    return examples


def training_seeds(seeds):
    """The seeds among `seeds` whose task is in the training split and not degenerate, as
    gen.tasks(split="train") keeps them. Runs in a worker process of load_generated."""
    from kernelbench import generate as gen
    return [s for s in seeds if not (m := gen.generate(s, gen_size)[2])["degenerate"] and not m["held_out"]]


def generated_chunk(seeds, out_dir):
    """The task of each seed, as (task path, examples of its teacher solutions that run here); written
    to out_dir by rank 0. A held-out task reaching this point is a bug in the split: stop. Runs in
    a worker process of load_generated."""
    from kernelbench import generate as gen, teacher
    out = []
    for seed in seeds:
        name, source, meta = gen.generate(seed, gen_size)
        if cudal1.held_out(meta):
            raise SystemExit(f"generated training task {name} is held out: the split is broken")
        sols = [(move, sol) for move, sol in teacher.solutions(source, meta)
                if runs_here(sol) and cudal1.solution_kind(sol) in args.kinds.split(",")]
        if master:  # one writer; the other ranks wait at the barrier in load_generated
            teacher.write(out_dir, name, source, meta, sols)
        task = os.path.join(out_dir, "tasks", "levelG", name + ".py")
        counts = teacher.kernel_counts(source, sols) if price_moves and len(sols) > 1 else {}
        out.append((task, [dict(e, cost=teacher.kernel_cost(counts.get(move))) for move, sol in sols
                           if (e := example(task, source, teacher.solution_path(out_dir, name, move), sol))]))
    return out


def pool_map(fn, items, chunk=500):
    """fn over `items` cut into chunks, in forked worker processes (one per core), the results joined
    in order: the generated data costs ~4 ms of Python per task (generator, teacher, answer
    formatting), minutes for 60000 tasks on one core. The workers touch no GPU."""
    import multiprocessing
    chunks = [items[i:i + chunk] for i in range(0, len(items), chunk)]
    with multiprocessing.get_context("fork").Pool(max(1, min(len(chunks), os.cpu_count() or 1))) as pool:
        return [x for part in pool.imap(fn, chunks) for x in part]


def generated_examples(n, out_dir):
    """load_generated's (examples, tasks), read back from out_dir/examples.pkl where an earlier run wrote
    them for the same tasks, sizes, kinds, pricing and prompt device, by the same code (the generator, the
    teacher, the answer format, this file), else built and kept there. Building costs ~9 ms of CPU a task
    (300 GPU-sized tasks on one core here: generator 0.2 ms, teacher 0.6, answers 0.4, pricing the moves
    7.7, teacher.kernel_counts), so ~70 s on 16 cores for --generated 120000 by that count (the log's
    "data ready" line measures it): a build of another seed or training setting need not pay it again.
    Only with --generated-dir: the file holds every example's prompt and answer, ~0.8 GB at that size."""
    code = hashlib.sha256()
    for f in (cudal1.__file__, os.path.join(cudal1.ROOT, "kernelbench", "generate.py"),
              os.path.join(cudal1.ROOT, "kernelbench", "teacher.py"), os.path.abspath(__file__)):
        code.update(open(f, "rb").read())
    key = dict(n=n, sizes=gen_size, kinds=args.kinds, priced=price_moves, target=target, code=code.hexdigest())
    kept = os.path.join(out_dir, "examples.pkl")
    if os.path.exists(kept):
        with open(kept, "rb") as f:  # a file this script wrote
            saved = pickle.load(f)
        if saved["key"] == key:
            say(f"generated data read again from {kept} (same tasks, device and code)")
            return saved["examples"], saved["tasks"]
    examples, tasks = load_generated(n, out_dir)
    if master:  # whole or not at all: a run cut off while writing leaves no file that looks complete
        with open(kept + ".tmp", "wb") as f:
            pickle.dump(dict(key=key, examples=examples, tasks=tasks), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(kept + ".tmp", kept)
    return examples, tasks


def load_generated(n, out_dir):
    """(examples, tasks): the first n generated training-split tasks (seeds 0, 1, ..., sizes for this
    device, the tasks gen.tasks(0, n, split="train") draws) and the teacher's solutions of each that
    run here (on the CPU not its CUDA fuse_epilogue), made examples like kernels/ solutions; tasks:
    those with one at least. Written to out_dir/tasks/levelG (+ NAME.json, which cudal1.held_out
    reads) and out_dir/solutions/levelG, the layout evaluate.py pairs by id."""
    from functools import partial
    seeds, start = [], 0
    while len(seeds) < n:  # ~94% of seeds are training tasks: a few extra, until there are n
        more = n - len(seeds) + 1000
        seeds += pool_map(training_seeds, list(range(start, start + more)))
        start += more
    examples, tasks = [], []
    for task, new in pool_map(partial(generated_chunk, out_dir=out_dir), seeds[:n]):
        examples += new
        tasks += [task] if new else []
    if ddp:
        dist.barrier()
    return examples, tasks


def contrastive_pairs(examples, speedups):
    """(example, exemplars) pairs that teach stage 3's prompt. For each measured solution at least
    as fast as the reference: a prompt for every two of its task's other variants that are no
    faster than it -- the reference at 1.00x and the other solutions, never the solution itself --
    as (code, speedup), slowest first as bucket_sample returns them (one, when only the reference
    is slower); the answer is that solution. An exemplar is never the answer: a prompt that shows
    its own answer teaches copying (it did: every correct stage-3 answer was a copy). Measured before
    this rule: with only slower variants shown, the memorised 88M policy parsed 0-3% of its
    contrastive answers on the H200; data that teaches a skill, not a file, is the cure for that."""
    by_task = {}
    for e in examples:
        s = speedups.get(cudal1.solution_name(e["path"]))
        if s:
            by_task.setdefault(e["task"], []).append((s, e))
    pairs = []
    for task, group in by_task.items():
        group.sort(key=lambda se: se[0])
        variants = sorted([(cudal1.REFERENCE["speedup"], {"code": read(task)})] + group, key=lambda se: se[0])
        for s, e in group:
            if s < 1.0:  # never teach an answer slower than the program it rewrites
                continue
            shown = [(o["code"], so) for so, o in variants if so <= s and o is not e]
            pairs += [(e, list(ab)) for ab in itertools.combinations(shown, 2)] or [(e, shown)]
    return pairs, by_task


FAST_MOVE_SHARE = 0.9  # a teacher move whose judged solutions beat eager at least this often counts as fast


def fast_moves(speedups):
    """The teacher moves whose judged solutions (teacher.judged_moves) beat eager FAST_MOVE_SHARE of the time
    or more: the only ones unmeasured answers are drawn from, so they teach the format, not slow answers."""
    judged = teacher.judged_moves(speedups)
    return sorted(m for m, v in judged.items() if sum(s >= 1.0 for s in v) / len(v) >= FAST_MOVE_SHARE)


def fastest_plain(examples, rank):
    """The examples that make plain pairs: every library solution, and of each generated task the one
    solution whose move is fastest: with --plain-pick kernels the one whose kernels cost least (its
    "cost", teacher.kernel_cost; a task with one unpriced keeps to the ranking), a tie to the faster move
    in `rank` (teacher.move_speed of the judge's records), then to the first; an unpriced task none of whose
    moves is ranked keeps them all. The count may pick a move the records rank slow or not at all: the
    ranking only breaks its ties. By the held-out ceiling run's measurements the kernel pick reads 1.40x
    on the held-out tasks against the ranking's 1.33x (each task's best move 1.43x), where the cases that
    led to counting kernels were seen; on the 543 judged training tasks 1.342x against 1.335x (best 1.351x;
    bench/move_pick.py, results/move-pick-cpu.md). A plain prompt names no speed, so its answer is the
    policy's first choice: with every move taught alike, the H200 checkpoint of one name per op wrote
    a fused epilogue (1.33x over 449 judged teacher solutions) on 10 of 32 held-out tasks although
    ~80% admit one, and folds (1.03-1.20x) on 9. Picking each task's move by this ranking reaches
    1.335x geomean on the 543 judged training tasks, against 1.351x for the best move of each and
    1.244x for a move drawn at random. So taught, two seeds wrote the fused epilogue on 22 and 19
    held-out tasks, and read 84% correct at 1.24x and 69% at 1.26x (greedy), against 62% at 1.12x
    with every move (results/curriculum-h200-fastest-move.md)."""
    speed = lambda e: rank.get(teacher.move_of(cudal1.solution_name(e["path"])), 0.0)  # 0: unranked
    by_task, out = {}, []
    for e in examples:
        if cudal1.solution_name(e["path"]).startswith("levelG/"):
            by_task.setdefault(e["task"], []).append(e)
        else:
            out.append(e)
    for group in by_task.values():
        best = teacher.cheapest(group, lambda e: e.get("cost"), speed)
        out += [best] if all(e.get("cost") is not None for e in group) or speed(best) else group
    return out


def reference_pairs(examples, speedups, n, fast, speed):
    """Up to n (example, [(reference, 1.00x)]) pairs, one per generated task: the
    contrastive prompt stage 3 opens with on a task it never saw (its bank holds the reference alone),
    answered by one of the task's teacher solutions with no measured speedup (a record of a failure
    counts as none: every teacher record so far is ok). No speed of the answer is claimed, and the
    answers come only from `fast` moves (fast_moves), the fastest of them where a task has two by the
    rule its plain pair is picked by (fastest_plain over its fast moves, `speed`: teacher.move_speed).
    Without them, ~400 contrastive pairs beside 75k plain ones, the policy parsed 44-57% of its
    contrastive answers in stage 3 on the H200, against 100% of its plain ones."""
    by_task = {}
    for e in examples:
        name = cudal1.solution_name(e["path"])
        if name.startswith("levelG/") and name not in speedups and teacher.move_of(name) in fast:
            by_task.setdefault(e["task"], []).append(e)
    one = {task: fastest_plain(group, speed)[0] for task, group in by_task.items()}
    tasks = sorted(one)
    tasks = random.Random(args.seed).sample(tasks, min(n, len(tasks)))
    return [(one[t], [(read(t), cudal1.REFERENCE["speedup"])]) for t in sorted(tasks)]


def solution_pairs(examples, speedups, n, fast):
    """Up to n (example, [(reference, 1.00x), (another solution, None)]) pairs, one per generated task
    with two or more teacher solutions: the prompt of a stage-3 step whose bank holds an earlier
    answer beside the reference. Both solutions are unmeasured (measured ones make
    contrastive_pairs), and the prompt says so of the shown one (a number in a prompt is a
    measurement). The shown solution is any of the task's, as a bank shows whatever was found
    first; the answer is another, of a `fast` move where one is left, else any other (~42% of
    pairs at the GPU default).

    They teach reading a solution in the prompt: with ~600 measured pairs that showed one, the
    policy parsed 25-33% of its answers to such prompts on tasks it never saw; with 10000 of
    these, 84-91% (H200, bench/exemplar_probe.py). Each rule so far left a matching failure in
    stage 3. Drawing the answer first showed the fused epilogue (a fast move nearly every task
    has) in 4% of pairs, always answered by a constant output or a folded reduction; in stage 3,
    whose bank shows a fused epilogue most of the time, 24-28% of the contrastive arm's parsed
    answers wrote a constant output, none correct (results/learning-h200-solpairs.md). Drawing
    the shown one first cured that (4-5%), but once a task had a correct answer, 61-81% of the
    contrastive arm's answers used a move none of its correct answers had (25-55% of them
    correct), where plain kept its move 80-88% of the time (96-100% correct;
    results/learning-h200-shownfirst.md). Every pair's answer leaves the shown move, so that is
    what the pairs teach. Answering the pairs with no other fast move by the shown solution itself
    (42% of them, nearly all a fused epilogue kept) swung it the other way: 91-96% of the
    contrastive arm's answers after a correct one kept the move, 4-9% left it, none of those
    correct; the probe's answers copied the shown solution 78% of the time (3-6% before); and the
    checkpoint started lower on held-out tasks (1.08x against 1.16x), contrastive 1.08x and plain
    1.10-1.11x after RL (results/learning-h200-keepshown.md). Neither rule teaches keeping a move and
    adding one: the teacher writes one move per solution, so no pair shows that."""
    by_task = {}  # task -> [(unmeasured solution, its move)]; measured ones make contrastive_pairs
    for e in examples:
        name = cudal1.solution_name(e["path"])
        if name.startswith("levelG/") and name not in speedups:
            by_task.setdefault(e["task"], []).append((e, teacher.move_of(name)))
    rng, pairs = random.Random(args.seed + 1), []
    for task, group in sorted(by_task.items()):
        if len(group) < 2:
            continue
        shown, _ = rng.choice(group)
        rest = [(e, move) for e, move in group if e is not shown]
        answer, _ = rng.choice([(e, move) for e, move in rest if move in fast] or rest)
        pairs.append((answer, [(read(task), cudal1.REFERENCE["speedup"]), (shown["code"], None)]))
    return rng.sample(pairs, min(n, len(pairs)))


def code_key(task, source):
    """Two answers are the same solution when they are the same code for the same task."""
    return task, cudal1.same_code(source)


# ---- data
t_data = time.time()
examples = load_examples(args.kernels, args.tasks)
speedups = evaluate.measured_speedups(args.speedups)
# a generated task's moves are priced (~10 ms a task, in load_generated's workers) only where a ranking of moves
# exists to pick with (fastest_plain): the CPU's records judge no teacher move, so each of its moves makes a pair
price_moves = args.plain_pick == "kernels" and not args.every_move and bool(teacher.move_speed(speedups or {}))
gen_examples, gen_tasks = [], []  # --generated: generated tasks' teacher solutions, and those tasks
gen_dir = args.generated_dir or os.path.join(args.out, "generated")
if args.generated:
    gen_examples, gen_tasks = (generated_examples if args.generated_dir else load_generated)(args.generated, gen_dir)
    say(f"{args.generated} generated training tasks ({gen_size} sizes): {len(gen_tasks)} with a teacher solution that "
        f"runs here, {len(gen_examples)} solutions, in {gen_dir} ({time.time() - t_data:.0f} s)")
if not examples + gen_examples:
    raise SystemExit(f"no solutions with a matching task under {args.kernels} (tasks from {args.tasks})")
if args.sample_tasks == "all":
    sample_tasks = sorted({e["task"] for e in examples if runs_here(e["code"])})
else:
    sample_tasks = [os.path.join(args.tasks, t) for t in args.sample_tasks.split(",") if t]
    missing = [t for t in sample_tasks if not os.path.exists(t)]
    if missing:
        raise SystemExit(f"--sample-tasks: no such task file(s): {', '.join(missing)}")
    held = [t for t in sample_tasks if cudal1.held_out(t)]
    if held:
        raise SystemExit(f"--sample-tasks: held-out task(s), never trained on (cudal1.held_out): {', '.join(held)}")
if args.rounds > 0 and not sample_tasks + gen_tasks:  # before stage 1, not after it
    raise SystemExit("stage 2 has no tasks: set --sample-tasks or --generated, or --rounds 0"
                     + (" (no solution in --kernels runs on this device)" if args.sample_tasks == "all" else ""))
examples += gen_examples  # from here on generated solutions are examples like kernels/ ones
selftrain_path = os.path.join(args.out, "selftrain.jsonl")
kept = [json.loads(line) for line in open(selftrain_path)] if os.path.exists(selftrain_path) else []
cpairs, measured = contrastive_pairs(examples, speedups or {})  # measured: task -> [(speedup, example)]
if speedups is None:
    say(f"no {args.speedups}: no contrastive pairs, plain prompts only (make eval measures kernels/)")
else:
    say(f"{len(cpairs)} contrastive pairs over {len({e['task'] for e, _ in cpairs})} tasks; "
        f"{len(examples) - sum(map(len, measured.values()))} of {len(examples)} solutions have no 'ok' record "
        f"in {args.speedups}, so no prompt shows them and no contrastive pair answers with them")
fast, move_speeds = fast_moves(speedups or {}), teacher.move_speed(speedups or {})
rpairs = reference_pairs(gen_examples, speedups or {}, args.reference_pairs, fast, move_speeds) if args.reference_pairs else []
if rpairs:
    say(f"{len(rpairs)} reference-only contrastive pairs, answered by unmeasured teacher solutions of the moves "
        f"measured faster than eager >= {FAST_MOVE_SHARE:.0%} of the time: {', '.join(fast)}")
spairs = solution_pairs(gen_examples, speedups or {}, args.solution_pairs, fast) if args.solution_pairs else []
if spairs:
    say(f"{len(spairs)} contrastive pairs showing the reference and a teacher solution, not measured, "
        "answered by another, of a fast move where one is left, else any")

TOKENIZER_GENERATED = 10000
# ---- model: resume from --out, else start from --init, else a fresh tokenizer and model
step, start_round = 0, 0
if os.path.exists(os.path.join(args.out, "config.json")):
    try:
        model, tok, meta = cudal1.load_checkpoint(args.out, device)
    except ValueError as e:  # a checkpoint of another format or shape: say so, no traceback
        raise SystemExit(f"cannot resume: {e}") from None
    cfg = model.config
    for k in ("n_layer", "n_head", "n_embd", "block_size", "vocab_size"):
        if k in given and getattr(args, k) != getattr(cfg, k):
            raise SystemExit(f"{args.out} holds a model with {k}={getattr(cfg, k)}, not {getattr(args, k)}: "
                             "use another --out to start afresh")
    step, start_round = meta["step"], meta["round"]
    say(f"resumed {args.out}: stage-1 step {step}, stage-2 round {start_round}")
elif args.init:  # its weights and tokenizer as they are; a fresh optimizer, from step 0
    model, tok, _ = cudal1.load_checkpoint(args.init, device)
    cfg, meta = model.config, {}
    say(f"starting from {args.init}")
else:
    # The tokenizer learns from the texts the policy will see: prompts (all sampled tasks too) and
    # answers, of every kernels/ solution and the first TOKENIZER_GENERATED generated ones (the
    # generator repeats its phrasing, and reading every one of 60000 tasks would take minutes).
    library = examples[:len(examples) - len(gen_examples)]  # examples: kernels/ solutions, then generated ones
    corpus = "".join(e["prompt"] + e["answer"] for e in library + gen_examples[:TOKENIZER_GENERATED])
    corpus += "".join(cudal1.contrastive_prompt(read(e["task"]), e["where"], shown) for e, shown in cpairs)
    corpus += "".join(cudal1.plain_prompt(read(t), target) for t in sample_tasks)
    tok = cudal1.Tokenizer.train(corpus, args.vocab_size)
    cfg = cudal1.Config.scratch(tok.vocab_size, args.block_size, args.n_layer, args.n_head, args.n_embd)
    model = cudal1.Transformer(cfg).to(device)
    meta = {}
raw_model = model
if args.batch_tokens < 0:
    args.batch_tokens = 16384 if device.type == "cuda" and raw_model.num_params() > 2e8 else 0
if ddp:
    model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
train_model = torch.compile(model, dynamic=True) if args.compile else model  # training steps only; sampling runs raw_model


def encode_pairs(pairs):
    """(ids, n_prompt) per (prompt, answer); a worker of encode on a large set."""
    return [((p := tok.encode_prompt(prompt)) + tok.encode_answer(answer), len(p)) for prompt, answer in pairs]


def encode(pairs):
    """(ids, n_prompt) per (prompt, answer) that fits the block; prints what was dropped."""
    rows = pool_map(encode_pairs, pairs, 2000) if len(pairs) > 4000 else encode_pairs(pairs)
    out = [r for r in rows if len(r[0]) <= cfg.block_size]
    if len(out) < len(pairs):
        say(f"dropped {len(pairs) - len(out)} of {len(pairs)} pairs longer than block_size {cfg.block_size}")
    return out


def by_length(pairs):
    """(ids, n_prompt) pairs, shortest first: the order get_batch draws neighbours in."""
    return sorted(pairs, key=lambda r: len(r[0]))


def encode_shown(pairs):
    """(ids, n_prompt) per (example, exemplars) contrastive pair, the slowest exemplars dropped until
    the answer fits (cudal1.fit_prompt); None where none is left: such a pair teaches nothing
    contrastive. A worker of pool_map on a large set."""
    out = []
    for e, shown in pairs:
        answer = tok.encode_answer(e["answer"])
        prompt, left = cudal1.fit_prompt(tok, read(e["task"]), e["where"], shown, len(answer), cfg.block_size)
        out.append((prompt + answer, len(prompt)) if left else None)
    return out


plain = examples if args.every_move else fastest_plain(examples, move_speeds)
names = [cudal1.solution_name(e["path"]) for e in plain]
taught = Counter(teacher.move_of(name) for name in names if name.startswith("levelG/"))
if len(plain) < len(examples):
    ranked = sorted(move_speeds, key=move_speeds.get, reverse=True)
    multi = Counter(e["task"] for e in gen_examples)
    unpriced = {e["task"] for e in gen_examples if multi[e["task"]] > 1 and e.get("cost") is None}
    n_multi = sum(n > 1 for n in multi.values())
    # a task the meta device could not price falls back to the ranking: said here, never silently
    pick = (f"--plain-pick kernels: {n_multi - len(unpriced)} of {n_multi} tasks with two moves or more priced"
            if price_moves else "--plain-pick ranking")
    say(f"plain pairs: {len(plain)} of {len(examples)} solutions, a generated task's fastest move only ({pick}); "
        "tasks per move (its judged geomean): "
        + ", ".join([f"{m} {taught[m]} ({move_speeds[m]:.2f}x)" for m in ranked]
                    + [f"{m} {n} (unranked)" for m, n in sorted(taught.items()) if m not in move_speeds]))
elif gen_examples and not args.every_move and not move_speeds:
    say(f"no judged teacher moves in {args.speedups}: every generated solution makes a plain pair")
data = encode([(e["prompt"], e["answer"]) for e in plain])
n_plain = len(data)
shown_pairs = cpairs + rpairs + spairs
shown_rows = pool_map(encode_shown, shown_pairs, 1000) if len(shown_pairs) > 4000 else encode_shown(shown_pairs)
data += [r for r in shown_rows if r]
if not data:
    raise SystemExit(f"no training pair fits --block-size {cfg.block_size} (prompt + answer tokens): raise it, or "
                     "--vocab-size for shorter tokens")
some = plain[::max(1, len(plain) // 5000)]  # per-solution means over <= ~10000 of them
n_bytes = sum(len(e["answer"].encode()) for e in some) / len(some)
n_tok = sum(len(tok.encode(e["answer"])) for e in some) / len(some)
say(f"{len(plain)} plain pairs ({n_plain} fit) + {len(shown_pairs)} contrastive pairs ({len(data) - n_plain} fit); "
    f"answer tokens per solution {n_tok:.0f} ({n_bytes:.0f} bytes, {n_bytes / n_tok:.2f} bytes/token, vocab {tok.vocab_size}); "
    f"model {raw_model.num_params() / 1e6:.2f}M params on {device} ({dtype}), {world} rank(s)")
data = by_length(data)
data_seconds = round(time.time() - t_data, 1)  # examples, tokenizer, encoding: everything before the first step
say(f"data ready in {data_seconds:.0f} s")

# ---- optimizer
optimizer = cudal1.adamw(raw_model, args.lr, args.weight_decay, device)
if "optimizer" in meta:
    optimizer.load_state_dict(meta["optimizer"])

# MFU: model FLOPs (Transformer.train_flops, PaLM's count) over dense bf16 peak of the GPU (the
# judge's table of GPUs, evaluate.GPUS).
tflops = evaluate.gpu_spec(target)[2] if device.type == "cuda" else None
peak = tflops * 1e12 if tflops else None
gen = random.Random(args.seed + rank)  # batches differ across ranks


PAD_TO = 64  # T rounded up to a multiple of this: a few dozen shapes in all, not one per batch


def pad(rows):
    """(ids, n_prompt) pairs, right-padded on the device: x (B, T) ids, y (B, T) next ids, -1 off the answer.
    T is the longest row rounded up to a multiple of PAD_TO (~5% more tokens at ~1200 a row). With a new T
    at nearly every step, 3000 compiled steps took 342 s on the H200 (0.74M tokens/s over the second half,
    MFU 16%); padded, 238 s (0.91M, 20%), with no recompile either way (TORCH_LOGS=recompiles): the cost
    was per-shape work the guards do not show (kernel plans chosen per length, most likely). The
    padding is causal-masked off the real tokens and carries no loss."""
    T = -(-(max(len(ids) for ids, _ in rows) - 1) // PAD_TO) * PAD_TO
    x = torch.zeros(len(rows), T, dtype=torch.long)
    y = torch.full((len(rows), T), -1, dtype=torch.long)
    for i, (ids, n_prompt) in enumerate(rows):
        x[i, :len(ids) - 1] = torch.tensor(ids[:-1])
        y[i, n_prompt - 1:len(ids) - 1] = torch.tensor(ids[n_prompt:])  # predict the answer, and its end
    if device.type == "cuda":  # a copy from pinned memory leaves the CPU free while the GPU works (train_step)
        x, y = x.pin_memory(), y.pin_memory()
    return x.to(device, non_blocking=True), y.to(device, non_blocking=True)


def get_batch(pool, batch_size):
    """batch_size pairs of about one length, padded: x, y (see pad), their tokens and model FLOPs.
    `pool` is sorted by length (by_length), and the pairs are neighbours from a random start
    (wrapping around, so every pair is drawn equally often), so a batch pads little: uniformly
    random batches of 16 of the GPU default's pairs (~400 to ~2000 tokens) were 38% padding,
    compute that trains nothing; these 3%. With --batch-tokens a batch of long pairs keeps fewer of
    them (the longest go first): long pairs are drawn less often, but each weighs more in its batch's
    token mean, so every token still counts about the same.

    With --fill-tokens a batch holds about that many tokens, its rows that many over its first row's
    length: a pair of length L is drawn ~1/L as often and brings L tokens to a token-mean of a fixed
    size, so each pair weighs as much as with fixed rows, but every step is as big. On the H200 a step
    of 64 rows ran at 16-38% MFU by its length (27.7-29.8% over a run's second half)."""
    start = gen.randrange(len(pool))
    if args.fill_tokens:  # the pool is sorted by length: the first row's stands for the batch's (one B per T)
        T = -(-(len(pool[start][0]) - 1) // PAD_TO) * PAD_TO
        batch_size = max(1, min(len(pool), args.fill_tokens // T))
    rows = [pool[(start + j) % len(pool)] for j in range(batch_size)]
    longest = lambda: max(len(ids) for ids, _ in rows) - 1  # T before padding to PAD_TO
    while args.batch_tokens and len(rows) > 1 and len(rows) * longest() > args.batch_tokens:
        rows.remove(max(rows, key=lambda r: len(r[0])))  # a big model's activations grow with B x T
    flops = raw_model.train_flops([len(ids) for ids, _ in rows])
    return *pad(rows), sum(len(ids) for ids, _ in rows), flops


ahead = None  # (pool, the batch drawn for the next step on it)


def train_step(pool, lr):
    """One optimizer step on a fresh batch; returns (this rank's loss as a 0-dim tensor on the device,
    and the tokens and FLOPs of all ranks' batches, taken as this rank's times the world size). The
    next batch is drawn and padded while the GPU runs this step: the CPU's few ms of work per batch
    would otherwise sit between steps. Nothing here waits for the GPU; the caller does, with .item()."""
    global ahead
    x, y, tokens, flops = ahead[1] if ahead and ahead[0] is pool else get_batch(pool, args.batch_size)
    model.train()
    with cudal1.autocast(device, dtype):
        loss = train_model(x, y)
    loss.backward()
    if args.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(raw_model.parameters(), args.grad_clip)
    for g in optimizer.param_groups:
        g["lr"] = lr
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    ahead = (pool, get_batch(pool, args.batch_size))
    return loss.detach(), tokens * world, flops * world


LOSS_PAIRS = 1024  # the stage-1 pairs a round reads its loss on: all of them took ~2 of make train's 19 CPU minutes


@torch.no_grad()
def data_loss(pool):
    """Mean next-token loss over the answer tokens of every pair in `pool`, in batches."""
    raw_model.eval()
    total, count = 0.0, 0
    for i in range(0, len(pool), args.batch_size):
        x, y = pad(pool[i:i + args.batch_size])
        n = (y != -1).sum().item()
        with cudal1.autocast(device, dtype):
            total += raw_model(x, y).item() * n
        count += n
    return total / count


def save(step, rnd):
    if master:
        cudal1.save_checkpoint(args.out, raw_model, tok, {"settings": vars(args), "step": step, "round": rnd},
                               optimizer)


def lr_at(step, peak, steps):
    """Linear warmup over --warmup steps (a fifth of `steps` at most), then cosine to 10% of peak."""
    warmup = min(args.warmup, steps // 5)
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0))))


# ---- stage 1: SFT on kernels/
# The loop waits for the GPU (loss.item()) once every SYNC_EVERY steps, at a logged step and before a
# save, not after every step: a wait leaves the GPU idle while Python launches the next step's first
# kernels. The bar shows the last window's rate, a log line the rate since the line before (saves left out).
SYNC_EVERY = 20
speeds = []  # (steps, tokens, flops, seconds) of each window of stage-1 steps this process ran


def throughput(windows):
    """Over `windows` (speeds' entries): steps, tokens, seconds, tokens/s and MFU % (None where unknown)."""
    n, tokens, flops, secs = (sum(x) for x in zip(*windows)) if windows else (0, 0, 0, 0)
    return n, tokens, secs, tokens / secs if secs else None, 100 * flops / secs / (peak * world) if secs and peak else None


def speed_text(windows):
    _, _, _, tok_s, mfu = throughput(windows)
    return f"{tok_s:,.0f} tok/s" + (f" mfu {mfu:.1f}%" if mfu else "")


if start_round == 0 and step < args.steps:
    bar = tqdm(range(step, args.steps), desc="stage 1", initial=step, total=args.steps, disable=not bars,
               dynamic_ncols=True)
    t0, window, logged = time.time(), (0, 0, 0), 0  # logged: the windows the last log line covered
    for step in bar:
        loss, tokens, flops = train_step(data, lr_at(step, args.lr, args.steps))
        window = (window[0] + 1, window[1] + tokens, window[2] + flops)
        saving = (step + 1) % args.save_every == 0 or step == args.steps - 1
        if (step + 1) % SYNC_EVERY and step % args.log_every and not saving:
            continue
        loss = loss.item()  # waits for the window's last step
        speeds.append((*window, time.time() - t0))
        bar.set_postfix_str(f"loss {loss:.3f} {speed_text(speeds[-1:])}")
        if step % args.log_every == 0 or step == args.steps - 1:
            n, tokens, secs, *_ = throughput(speeds[logged:])
            say(f"step {step:5d} | loss {loss:.4f} | lr {lr_at(step, args.lr, args.steps):.2e} | {speed_text(speeds[logged:])} | "
                f"{secs * 1000 / n:.0f} ms a step over {n} | {tokens:,} tokens")
            logged = len(speeds)
        if saving:
            save(step + 1, 0)
        t0, window = time.time(), (0, 0, 0)
    step = args.steps


# ---- stage 2: sample -> judge -> keep correct, new solutions -> fine-tune
def sample(jobs, n, temperature, g):
    """n answers to each (task, prompt kind, prompt ids) job: dicts (task, prompt kind, text, stopped).
    One batch of up to 128 rows at a time (the KV cache of a batch grows with its rows)."""
    answers, per = [], max(1, 128 // n)
    for i in range(0, len(jobs), per):
        chunk = jobs[i:i + per]
        groups = cudal1.generate(cudal1.sampling_model(raw_model, dtype), [ids for _, _, ids in chunk], n,
                                 args.max_new_tokens or cfg.block_size, temperature, args.top_k, args.top_p, g,
                                 tok.end_id, bool(args.cuda_graphs))
        answers += [dict(task=task, prompt=kind, text=tok.decode(r), stopped=r[-1:] == [tok.end_id])
                    for (task, kind, _), rows in zip(chunk, groups) for r in rows]
    return answers


def sample_answers(tasks, rnd, plain_only=()):
    """num_samples answers per task to its plain prompt and as many to a contrastive prompt showing
    up to two of its variants -- the reference at 1.00x and its measured kernels/ solutions, drawn as
    stage 3 draws from its bank -- sampled together (tasks in `plain_only`: the plain prompt alone):
    a list of dicts (task, prompt 'plain'/'contrastive', text, stopped)."""
    g = torch.Generator(device).manual_seed(args.seed + 1000 * rnd + rank)
    rng = random.Random(args.seed + 1000 * rnd + rank)  # exemplar draws
    jobs = []  # (task, prompt kind, prompt ids)
    for task in tasks:
        jobs.append((task, "plain", tok.encode_prompt(cudal1.plain_prompt(read(task), target))))
        if task in plain_only:
            continue
        bank = [dict(source=read(task), record=cudal1.REFERENCE)]  # the reference, as stage 3's bank holds it
        bank += [dict(source=e["code"], record=evaluate.record("ok", speedup=s)) for s, e in measured.get(task, [])]
        shown = [(b["source"], b["record"]["speedup"]) for b in cudal1.bucket_sample(bank, 2, rng=rng)]
        ids, left = cudal1.fit_prompt(tok, read(task), target, shown, args.min_answer_tokens, cfg.block_size)
        if left:
            jobs.append((task, "contrastive", ids))
    return sample(jobs, args.num_samples, args.temperature, g)


def judge_answers(answers, name):
    """Parse every answer, judge each distinct parsed code once; fills in source/reason/record.
    The judge's records go to <out>/judge/<name>-rank<k>.jsonl."""
    distinct, task_sources = {}, {t: read(t) for t in {a["task"] for a in answers}}
    for a in answers:
        a["source"], a["reason"] = cudal1.parse_answer(a["text"])
        if a["source"] is not None:  # the form stage 1 trains on: a restated constructor inherited
            a["source"] = cudal1.inherit_constructor(a["source"], task_sources[a["task"]])
            distinct.setdefault(code_key(a["task"], a["source"]), (a["task"], a["source"]))
    keys = list(distinct)
    where = str(device) if ddp else device.type  # under torchrun each rank judges on its own GPU
    records = evaluate.judge_many([distinct[k] for k in keys], device=where, jobs=args.judge_jobs or None,
                                  trials=args.trials, iters=args.iters, timeout=args.timeout,
                                  out=os.path.join(args.out, "judge", f"{name}-rank{rank}"),
                                  progress=bars) if keys else []
    by_key = dict(zip(keys, records))
    for a in answers:
        a["record"] = by_key[code_key(a["task"], a["source"])] if a["source"] is not None else None
    return answers


def rates(answers):
    """Parse / compile / correct rates over `answers`, speedups over the correct ones; None for none."""
    if not answers:
        return None
    n = len(answers)
    recs = [a["record"] for a in answers if a["record"] is not None]
    speedups = [r["speedup"] for r in recs if r["correct"] and r["speedup"]]
    return dict(answers=n, stopped=sum(a["stopped"] for a in answers) / n,
                parsed=len(recs) / n, compiled=sum(r["status"] != "compile_error" for r in recs) / n,
                correct=sum(r["correct"] for r in recs) / n,
                speedup_mean=statistics.mean(speedups) if speedups else None,
                speedup_median=statistics.median(speedups) if speedups else None,
                speedup_max=max(speedups) if speedups else None,
                statuses=dict(Counter(r["status"] for r in recs)),
                rejects=dict(Counter(a["reason"] for a in answers if a["reason"]).most_common(5)))


def round_stats(answers, rnd, final):
    """The round's line: rates of the plain-prompt answers, and of the contrastive ones apart."""
    best = {}
    for a in answers:
        if a["record"] and a["record"]["correct"] and a["record"]["speedup"]:
            best[a["task"]] = max(best.get(a["task"], 0.0), a["record"]["speedup"])
    return dict(round=rnd, final=final, **rates([a for a in answers if a["prompt"] == "plain"]),
                contrastive=rates([a for a in answers if a["prompt"] == "contrastive"]), best_per_task=best)


def new_solutions(answers, rnd):
    """The correct answers whose code is neither a kernels/ solution nor kept before, once each."""
    seen = {code_key(e["task"], e["code"]) for e in examples} | {code_key(k["task"], k["source"]) for k in kept}
    new = []
    for a in answers:
        if a["record"] is not None and a["record"]["correct"] and code_key(a["task"], a["source"]) not in seen:
            seen.add(code_key(a["task"], a["source"]))
            new.append(dict(round=rnd, task=a["task"], text=a["text"], source=a["source"],
                            speedup=a["record"]["speedup"]))
    return new


def gather(answers):
    """Every rank's answers, on every rank (under torchrun each rank samples and judges its share)."""
    if not ddp:
        return answers
    everyone = [None] * world
    dist.all_gather_object(everyone, answers)
    return [a for part in everyone for a in part]


for rnd in range(start_round, args.rounds + 1) if args.rounds > 0 else []:
    final = rnd == args.rounds  # after the last fine-tune: sample and judge once more, the "after" numbers
    # --generated: a fresh draw of generated training tasks joins the round's tasks (the same draw on every rank)
    tasks = sample_tasks + random.Random(args.seed + rnd).sample(gen_tasks, min(args.generated_sample, len(gen_tasks)))
    t0 = time.time()
    answers = sample_answers(tasks[rank::world], rnd, plain_only=set(gen_tasks))
    t1 = time.time()
    answers = judge_answers(answers, f"round{rnd}")
    t2 = time.time()
    answers = gather(answers)
    stats = round_stats(answers, rnd, final)
    if master:  # every answer as sampled, for reading what the model writes
        with open(os.path.join(args.out, f"answers-round{rnd}.jsonl"), "w") as f:
            f.writelines(json.dumps(dict(task=a["task"], prompt=a["prompt"], stopped=a["stopped"], reason=a["reason"],
                                         status=a["record"] and a["record"]["status"], text=a["text"])) + "\n"
                         for a in answers)
    new = [] if final else new_solutions(answers, rnd)
    stats.update(kept=len(new), sample_s=round(t1 - t0, 1), judge_s=round(t2 - t1, 1))
    sp = lambda v: "-" if v is None else f"{v:.2f}x"
    c = stats["contrastive"]
    say(f"round {rnd}{' (final)' if final else ''} | {stats['answers']} answers | parse {stats['parsed']:.0%} "
        f"compile {stats['compiled']:.0%} correct {stats['correct']:.0%} | speedup mean {sp(stats['speedup_mean'])} "
        f"median {sp(stats['speedup_median'])} max {sp(stats['speedup_max'])} | "
        + (f"contrastive: {c['answers']} answers, parse {c['parsed']:.0%} correct {c['correct']:.0%} | " if c else "")
        + f"kept {len(new)} new | sample {t1 - t0:.0f}s judge {t2 - t1:.0f}s")
    for kind, r in (("plain", stats), ("contrastive", c)):
        if r and r["rejects"]:
            say(f"  rejected ({kind}): {r['rejects']}")
    if final:
        if master:
            with open(os.path.join(args.out, "stage2.jsonl"), "a") as f:
                f.write(json.dumps(stats) + "\n")
        save(step, rnd + 1)  # done: running the command again does nothing
        break
    kept += new
    pool = by_length(data + encode([(cudal1.plain_prompt(read(k["task"]), target), k["text"]) for k in kept]))
    # The fine-tune goes on with stage 1's optimizer (its moments fit this model; a fresh AdamW
    # raised the stage-1 loss of the CPU model 10x within 12 steps) at a fifth of stage 1's peak,
    # warmed up and decayed. On the H200 a constant 3e-4 from the first step (half the peak, 5x the
    # rate stage 1 ended at) took the training loss from 0.0025 to 0.045 in 50 steps and the parse
    # rate from 94% to 6%. The loss on the stage-1 pairs (LOSS_PAIRS of them), before and after, says if a
    # round hurt.
    # Its batches are packed as stage 1's (--fill-tokens: the pool holds stage 1's longest pairs, and 64
    # rows of them do not fit an 80 GB card); the rates above were set at 64 rows, not measured packed.
    t3 = time.time()
    probe = [data[i] for i in sorted(random.Random(args.seed).sample(range(len(data)), min(LOSS_PAIRS, len(data))))]
    before = data_loss(probe)
    bar = tqdm(range(args.round_steps), desc=f"round {rnd} fine-tune", disable=not bars, leave=False)
    for i in bar:
        loss, tokens, _ = train_step(pool, lr_at(i, args.round_lr, args.round_steps))
        loss = loss.item()
        bar.set_postfix_str(f"loss {loss:.3f}")
    after = data_loss(probe)
    say(f"round {rnd} fine-tune | {args.round_steps} steps at peak lr {args.round_lr:.2e} on {len(pool)} pairs | "
        f"loss on {len(probe)} of the stage-1 pairs {before:.4f} -> {after:.4f}")
    stats.update(train_s=round(time.time() - t3, 1), pool=len(pool), loss=loss if args.round_steps else None,
                 stage1_loss_before=before, stage1_loss_after=after)
    if master:  # the kept answers first, so a resumed run never loses one the checkpoint trained on
        with open(selftrain_path, "a") as f:
            f.writelines(json.dumps(k) + "\n" for k in new)
        with open(os.path.join(args.out, "stage2.jsonl"), "a") as f:
            f.write(json.dumps(stats) + "\n")
    save(step, rnd + 1)


# ---- held-out evaluation (--generated): tasks no training input touched, plain prompts
def held_out_groups():
    """cudal1.held_out_tasks under <out>/generated/held_out: --held-out-tasks generated tasks, and
    on a GPU the 20 held-out KernelBench level-2 tasks (on the CPU their references are too heavy to
    judge). Each is checked held out and unlike the source of every task trained on."""
    try:
        groups = cudal1.held_out_tasks(os.path.join(args.out, "generated", "held_out"), args.held_out_tasks,
                                       gen_size, args.tasks if device.type == "cuda" else None, write=master,
                                       trained=[read(t) for t in {e["task"] for e in examples}])
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if ddp:
        dist.barrier()
    return groups


def held_out_eval(groups):
    """Per group and for 'greedy' (one answer per task, temperature 0) and 'sampled' (--num-samples
    at --temperature): cudal1.split_score of the answers. A prompt that leaves no room for
    --max-new-tokens in the block gets empty answers: failures."""
    tasks = [t for ts in groups.values() for t in ts]
    jobs, too_long = [], []
    for task in tasks[rank::world]:
        ids = tok.encode_prompt(cudal1.plain_prompt(read(task), target))
        (jobs if len(ids) + (args.max_new_tokens or 1) <= cfg.block_size else too_long).append((task, "plain", ids))
    g = torch.Generator(device).manual_seed(args.seed + rank)
    answers = [dict(a, prompt="greedy") for a in sample(jobs, 1, 0.0, g)]
    answers += [dict(a, prompt="sampled") for a in sample(jobs, args.num_samples, args.temperature, g)]
    answers += [dict(task=t, prompt=mode, text="", stopped=False) for t, _, _ in too_long
                for mode, n in (("greedy", 1), ("sampled", args.num_samples)) for _ in range(n)]
    answers = gather(judge_answers(answers, "held_out"))
    stats = {f"{group}_{mode}": cudal1.split_score([(a["task"], a["record"]) for a in answers
                                                     if a["prompt"] == mode and a["task"] in ts], ts)
             for group, ts in groups.items() for mode in ("greedy", "sampled")}
    return stats, answers


def held_out_lines(held):
    """One line per group: greedy and sampled correct rates, tasks solved, geomean speedup; then per
    group how its answers ended and the commonest failures (held_out_failures)."""
    stats, lines = held["stats"], []
    for group, what in (("generated", "held-out generated"), ("level2", "held-out KernelBench level 2")):
        if f"{group}_greedy" not in stats:
            lines.append(f"{what}: not judged on the CPU (its references are too heavy there)")
            continue
        g, s = stats[f"{group}_greedy"], stats[f"{group}_sampled"]
        lines.append(f"{what}, {g['tasks']} tasks | greedy: correct {g['correct']:.0%} ({g['solved']} tasks), "
                     f"geomean {g['geomean']:.2f}x | sampled ({args.num_samples} per task): correct {s['correct']:.0%} "
                     f"({s['solved']} tasks), geomean {s['geomean']:.2f}x (a task without a correct answer: 1.00x)")
    for group, (ended, why) in held.get("failures", {}).items():
        lines.append(f"  {group} answers: " + ", ".join(f"{k} {v}" for k, v in ended.items())
                     + (" | commonest failures: " + "; ".join(f"{m} (x{n})" for m, n in why) if why else ""))
    return lines


def held_out_failures(answers, groups):
    """{group: (how its answers ended, counted; its three commonest failure messages)}: what to fix
    next, e.g. answers that parse but whose constructor does not take the task's arguments."""
    out = {}
    for group, ts in groups.items():
        mine = [a for a in answers if a["task"] in ts]
        ended = Counter((a["record"] or {}).get("status", "unparsed") for a in mine)
        why = Counter(((a["record"] or {}).get("message") or a.get("reason") or "no answer")[:70] for a in mine
                      if not (a["record"] or {}).get("correct"))
        out[group] = (dict(ended.most_common()), why.most_common(3))
    return out


held = None  # the held-out evaluation's numbers, kept in <out>/held_out.json (a finished run does it once)
held_path = os.path.join(args.out, "held_out.json")
if args.generated and args.held_out_tasks > 0:
    held = json.load(open(held_path)) if os.path.exists(held_path) else None
    if held is None or (held["step"], held["rounds"]) != (step, args.rounds):
        t0 = time.time()
        groups = held_out_groups()
        stats, answers = held_out_eval(groups)
        held = dict(step=step, rounds=args.rounds, tasks=groups, stats=stats, seconds=round(time.time() - t0, 1),
                    failures=held_out_failures(answers, groups))
        if master:
            with open(held_path, "w") as f:
                json.dump(held, f, indent=1)
            with open(os.path.join(args.out, "answers-held_out.jsonl"), "w") as f:
                f.writelines(json.dumps(dict(task=a["task"], prompt=a["prompt"], reason=a["reason"],
                                             status=a["record"] and a["record"]["status"], text=a["text"],
                                             message=a["record"] and a["record"].get("message"))) + "\n"
                             for a in answers)
    for line in held_out_lines(held):
        say(line)


def write_report(path, copy=""):
    """Markdown + JSON at `path`: where and how it ran, stage-1 speed, and every stage-2 round so far,
    the JSON listing every file trained on; the same at `copy` (--report, which results/ keeps) with the
    generated files counted instead, 10 MB of paths that the generator's seeds give back anyway."""
    env = evaluate.environment(device.type)
    rounds_path = os.path.join(args.out, "stage2.jsonl")
    rounds = [json.loads(line) for line in open(rounds_path)] if os.path.exists(rounds_path) else []
    # Totals over the second half (past warm-up and allocator growth), not a median step: step times
    # vary ~8x with the batch's length (30-240 ms on the H200), and the median overstated the rate.
    *_, tok_s, mfu = throughput(speeds[len(speeds) // 2:])
    steps1, _, stage1_s, *_ = throughput(speeds)
    stage1 = dict(steps=steps1, seconds=stage1_s, tokens_per_s=tok_s, mfu_percent=mfu)
    if not speeds and os.path.exists(path + ".json"):  # resumed past stage 1: the run that took its steps said how fast
        stage1 = json.load(open(path + ".json")).get("stage1", stage1)
    steps1, stage1_s, tok_s, mfu = (stage1[key] for key in ("steps", "seconds", "tokens_per_s", "mfu_percent"))
    summary = dict(command="python " + " ".join(sys.argv), env=env, world=world, dtype=str(dtype), settings=vars(args),
                   params=raw_model.num_params(), tokens_per_solution=n_tok, solutions=len(examples), plain_pairs=len(plain),
                   plain_moves=dict(taught.most_common()),  # generated tasks' plain pairs by the move they teach
                   solution_files=[e["path"] for e in examples], sample_tasks=sample_tasks,  # what it trained on
                   generated_tasks=gen_tasks, contrastive_pairs=len(cpairs), reference_pairs=len(rpairs),
                   solution_pairs=len(spairs), data_seconds=data_seconds,
                   stage2=rounds, held_out=held,
                   stage1=stage1)
    sp = lambda v: "-" if v is None else f"{v:.2f}x"
    lines = [f"# train_sft.py on {env['gpu']}", "",
             f"`{summary['command']}`  ", f"commit {env['commit']}, torch {env['torch']}, {world} rank(s), {dtype}, "
             f"{summary['params'] / 1e6:.1f}M params, {len(examples)} solutions, {len(plain)} as plain pairs "
             f"at {n_tok:.0f} tokens each", "",
             "## Stage 1", "", f"{steps1} steps run in {stage1_s:.0f} s; over the last half: "
             + (f"{tok_s:,.0f} tokens/s" if tok_s else "no steps run") + (f", MFU {mfu:.1f}% of dense bf16 peak" if mfu else ""),
             "", "## Stage 2 (rates over the sampled answers; speedups over the correct ones)", "",
             "Plain prompts; the last columns are the answers to contrastive prompts (the stage-3 format, "
             "showing the task's measured kernels/ solutions), and the loss on the stage-1 pairs across the "
             "round's fine-tune.", "",
             "| round | answers | stopped | parse | compile | correct | mean | median | max | kept "
             "| contrastive answers | parse | correct | stage-1 loss |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rounds:
        when = " (after)" if r["final"] else " (before)" if r["round"] == 0 else ""
        c = r.get("contrastive")
        cols = f"{c['answers']} | {c['parsed']:.0%} | {c['correct']:.0%}" if c else "- | - | -"
        loss = f"{r['stage1_loss_before']:.4f} -> {r['stage1_loss_after']:.4f}" if "stage1_loss_after" in r else "-"
        lines.append(f"| {r['round']}{when} | {r['answers']} | {r['stopped']:.0%} | "
                     f"{r['parsed']:.0%} | {r['compiled']:.0%} | {r['correct']:.0%} | {sp(r['speedup_mean'])} | "
                     f"{sp(r['speedup_median'])} | {sp(r['speedup_max'])} | {r['kept']} | {cols} | {loss} |")
    if held:
        lines += ["", "## Held-out evaluation (plain prompts; cudal1.held_out: no training input touches these tasks)",
                  "", *[f"- {line.strip()}" for line in held_out_lines(held)]]
    generated = os.path.join(gen_dir, "")
    library = [f for f in summary["solution_files"] if not f.startswith(generated)]
    short = dict(summary, solution_files=library, generated_solution_files=len(examples) - len(library),
                 generated_tasks=len(gen_tasks))
    for where, what in ((path, summary), (copy, short)):
        if where:
            os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
            with open(where + ".md", "w") as f:
                f.write("\n".join(lines) + "\n")
            with open(where + ".json", "w") as f:
                json.dump(what, f, indent=1)
            say(f"report: {where}.md")


if master:
    write_report(os.path.join(args.out, "report"), args.report)
cudal1.end_run()

"""How fast does cudal1 train and sample a pretrained coder's shapes? Qwen2.5-Coder-0.5B and -1.5B
with random weights, built the way `train_sft.py --init` builds them (cudal1_hf.config_from_hf ->
cudal1.Transformer), measured in three parts of a run:

1. a stage-1 step as train_sft.train_step takes it: bf16 autocast, loss on the answer half of each
   sequence, gradient clipping, cudal1.adamw; tokens/s and MFU (Transformer.train_flops, train_sft's
   count) at --batch-size x --seq-len. cudal1.Transformer has no activation checkpointing, so this is
   without it, and the peak memory says how much room that leaves;
2. greedy decode of --prompts prompts x --samples samples (--prompt-len + --new-tokens, no end token,
   so every row decodes all of them) through cudal1.generate, eagerly and with graph=True. Prefill and
   the graph's capture are timed apart (a 2-token call: prefill, capture, one step; a 1-token call
   takes no step, so it captures nothing), so decode tokens/s is over the other --new-tokens - 2 only;
3. a stage-3-like step as train_rl.py takes it: sample --rl-samples answers to each of --rl-prompts
   prompts (temperature 0.8, top-p 0.95, no end token, so every answer runs to --rl-new-tokens), then
   one policy-gradient update on them (cudal1.answer_logprobs, pg_loss with random advantages).
   Judging is not part of it: on the H200 it is its own cost (bench/judge_throughput.py).

Peak memory is torch.cuda.max_memory_allocated over each part, fp32 weights included (AdamW's
moments too, in training). A part that runs out of memory says OOM in its rows and the rest go on.
The table is written after every part, so a run that dies later keeps the rows measured before it.

    python bench/pretrained_shapes.py           # H200: both models (~2 min estimated, not yet run) -> results/h200-pretrained-shapes.md
    python bench/pretrained_shapes.py --tiny    # CPU: the same code on 2-layer models, ~20 s on 2 busy cores (tests/test_pretrained_shapes.py)
"""
import argparse
import gc
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402

import cudal1  # noqa: E402
import cudal1_hf  # noqa: E402
import evaluate  # noqa: E402  (the environment line and the GPU's peak FLOP/s)

parser = argparse.ArgumentParser(description="train and decode speed of Qwen2.5-Coder shapes in cudal1")
# ---- what
parser.add_argument("--models", default="0.5B,1.5B", help="of QWEN's keys, comma-separated")
parser.add_argument("--tiny", action="store_true", help="2-layer, 64-wide, 512-token-vocab versions of the models "
                    "on the CPU, at tiny sizes: the code path, not a measurement")
# ---- sizes (-1: --tiny's or the full default, SIZES)
parser.add_argument("--batch-size", type=int, default=-1, help="stage 1: sequences per step")
parser.add_argument("--seq-len", type=int, default=-1, help="stage 1: tokens per sequence, half prompt, half answer")
parser.add_argument("--warmup", type=int, default=-1, help="untimed steps before the timed ones")
parser.add_argument("--steps", type=int, default=-1, help="timed stage-1 steps")
parser.add_argument("--prompts", type=int, default=-1, help="decode: distinct prompts")
parser.add_argument("--samples", type=int, default=-1, help="decode: answers per prompt (rows = prompts x samples)")
parser.add_argument("--prompt-len", type=int, default=-1, help="decode and stage 3: tokens per prompt")
parser.add_argument("--new-tokens", type=int, default=-1, help="decode: tokens decoded per row, at least 3")
parser.add_argument("--rl-prompts", type=int, default=-1, help="stage 3: tasks per step")
parser.add_argument("--rl-samples", type=int, default=-1, help="stage 3: G, answers per task")
parser.add_argument("--rl-new-tokens", type=int, default=-1, help="stage 3: answer length cap, tokens")
# ---- output
parser.add_argument("--out", default="", help="markdown file; empty: results/<gpu>-pretrained-shapes[-tiny].md")
args = parser.parse_args()

# The models' config.json as Hugging Face ships them (Qwen/Qwen2.5-Coder-0.5B-Instruct and
# Qwen/Qwen2.5-Coder-1.5B-Instruct; the base models' differ only in token ids), checked against
# copies of those files on huggingface.co and the model cards' parameter counts: 0.49B (0.36B
# without embeddings) and 1.54B (1.31B), which the models built here must match (CARD).
QWEN = {
    "0.5B": dict(architectures=["Qwen2ForCausalLM"], hidden_act="silu", hidden_size=896, intermediate_size=4864,
                 max_position_embeddings=32768, num_attention_heads=14, num_hidden_layers=24, num_key_value_heads=2,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=True,
                 use_sliding_window=False, vocab_size=151936),
    "1.5B": dict(architectures=["Qwen2ForCausalLM"], hidden_act="silu", hidden_size=1536, intermediate_size=8960,
                 max_position_embeddings=32768, num_attention_heads=12, num_hidden_layers=28, num_key_value_heads=2,
                 rms_norm_eps=1e-6, rope_theta=1000000.0, sliding_window=None, tie_word_embeddings=True,
                 use_sliding_window=False, vocab_size=151936),
}
CARD = {"0.5B": (0.49, 0.36), "1.5B": (1.54, 1.31)}  # billions of parameters, all and without embeddings
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=512, max_position_embeddings=1024)
# full: a stage-1 batch of 16k tokens; decode at RL's batch of 64 rows after prompts of RL's size;
# stage 3 at train_rl's GPU default (4 tasks x 8), answers capped below its 3072 to fit the time
SIZES = {
    "full": dict(batch_size=8, seq_len=2048, warmup=3, steps=10, prompts=4, samples=16, prompt_len=1000,
                 new_tokens=128, rl_prompts=4, rl_samples=8, rl_new_tokens=1024),
    "tiny": dict(batch_size=2, seq_len=64, warmup=1, steps=2, prompts=2, samples=2, prompt_len=32,
                 new_tokens=8, rl_prompts=2, rl_samples=2, rl_new_tokens=8),
}
cudal1.fill_defaults(args, SIZES["tiny" if args.tiny else "full"])
if args.new_tokens < 3:
    raise SystemExit(f"--new-tokens {args.new_tokens}: decode is timed past a 2-token call, so it needs at least 3")
device, dtype = cudal1.autodetect("cpu" if args.tiny else None)
cuda = device.type == "cuda"
if not cuda and not args.tiny:
    raise SystemExit("no GPU: the real shapes would take hours on the CPU; --tiny runs the code path there")
env = evaluate.environment(device.type)
gpu, _, tflops = evaluate.gpu_spec(env["gpu"])
peak_flops = tflops * 1e12 if tflops else None  # dense bf16
out = args.out or f"results/{gpu or 'cpu'}-pretrained-shapes{'-tiny' if args.tiny else ''}.md"
torch.manual_seed(0)


def sync():
    if cuda:
        torch.cuda.synchronize()


def timed(fn):
    """(fn(), seconds), the device's work included."""
    sync()
    t0 = time.perf_counter()
    result = fn()
    sync()
    return result, time.perf_counter() - t0


def peak_gib():
    """Peak allocated device memory since the last call, GiB (None on the CPU); starts a new count."""
    if not cuda:
        return None
    p = torch.cuda.max_memory_allocated() / 2**30
    torch.cuda.reset_peak_memory_stats()
    return p


def random_ids(n, length, vocab):
    return torch.randint(vocab, (n, length)).tolist()


def train_rows(model):
    """Stage 1: --steps timed optimizer steps on a random batch, as train_sft.train_step takes them."""
    B, T = args.batch_size, args.seq_len
    ids = torch.randint(model.config.vocab_size, (B, T + 1), device=device)
    x, y = ids[:, :-1], ids[:, 1:].clone()  # (B, T) each, as train_sft.pad lays them out
    y[:, :T // 2] = -1  # the prompt half: no loss
    optimizer = cudal1.adamw(model, 1e-5, 0.1, device)
    model.train()

    def step():
        with cudal1.autocast(device, dtype):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    _, secs = timed(lambda: [step() for _ in range(args.steps)])
    secs /= args.steps
    flops = model.train_flops([T] * B)
    return [row("stage 1 train step", f"{B} x {T}, no activation checkpointing", secs, B * T / secs, flops / secs)]


def decode_rows(model):
    """Greedy decode of prompts x samples rows, eager and graph=True: prefill, capture and the first
    step (a 2-token call) apart."""
    m = cudal1.sampling_model(model, dtype)
    prompts = random_ids(args.prompts, args.prompt_len, model.config.vocab_size)
    n, new = args.prompts * args.samples, args.new_tokens
    rows = []
    for graph in (False, True):
        run = lambda k: cudal1.generate(m, prompts, args.samples, k, temperature=0, graph=graph)
        run(2)  # warm-up
        first = min(timed(lambda: run(2))[1] for _ in range(2))  # prefill, cache join, (graph) capture, a step
        _, secs = timed(lambda: run(new))
        rate = n * (new - 2) / max(secs - first, 1e-9)  # the new - 2 steps after the first
        shape = f"{args.prompts} x {args.samples} rows, {args.prompt_len} + {new} tokens, " \
                f"prefill + capture + 1 step {first:.2f} s"
        rows.append(row(f"decode, graph={graph}", shape, secs, rate, None, peak_gib()))
    return rows


def rl_rows(model):
    """Stage 3 without the judge: sample G answers to each prompt, then the policy-gradient update on
    them as train_rl.policy_step takes it (one group at a time, loss a share of the batch's token
    mean). A first untimed step grows the allocator and warms the kernels."""
    G, sampling = args.rl_samples, (0.8, 0, 0.95)  # train_rl's temperature, top-k, top-p
    prompts = random_ids(args.rl_prompts, args.prompt_len, model.config.vocab_size)
    optimizer = cudal1.adamw(model, 1e-5, 0.0, device)
    g = torch.Generator(device).manual_seed(0)
    for _ in range(2):
        peak_gib()
        groups, sample_s = timed(lambda: cudal1.generate(cudal1.sampling_model(model, dtype), prompts, G,
                                                         args.rl_new_tokens, *sampling, g, None, cuda))
        sample_peak = peak_gib()
        n_tok = sum(len(r) for rows in groups for r in rows)

        def update():
            model.train()
            for p, rows in zip(prompts, groups):
                with cudal1.autocast(device, dtype):
                    logp, mask = cudal1.answer_logprobs(model, p, rows, *sampling)  # (G, L) each
                adv = torch.randn(G, device=device)  # the judge's advantages stand-in
                (cudal1.pg_loss(logp, mask, adv) * mask.sum() / n_tok).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        _, update_s = timed(update)
    shape = f"{len(prompts)} x {G} answers, {args.prompt_len} + {n_tok // len(prompts) // G} tokens"
    lengths = [args.prompt_len + len(r) for rows in groups for r in rows]
    flops = model.train_flops(lengths)  # answer_logprobs' forward + backward over prompt and answer
    return [row("stage 3 sample", shape, sample_s, n_tok / sample_s, None, sample_peak),
            row("stage 3 update", shape, update_s, sum(lengths) / update_s, flops / update_s, peak_gib()),
            row("stage 3 step (no judge)", shape, sample_s + update_s, n_tok / (sample_s + update_s), None, None)]


def row(what, shape, secs, tok_s, flop_s, peak=-1):
    """One table row; peak -1: read it now (the whole measurement's)."""
    return dict(what=what, shape=shape, secs=secs, tok_s=tok_s, mfu=100 * flop_s / peak_flops
                if flop_s and peak_flops else None, peak=peak_gib() if peak == -1 else peak)


def measure(fn, model, whats):
    """fn(model)'s rows, or rows that say OOM (one per name in `whats`) when the device ran out of
    memory; the memory it held is given back either way."""
    peak_gib()
    try:
        rows = fn(model)
    except torch.cuda.OutOfMemoryError:
        rows = [dict(what=w, shape="", oom=True) for w in whats]
    model.zero_grad(set_to_none=True)
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return rows


def cells(r):
    if r.get("oom"):
        return ["OOM"] * 4
    num = lambda v, f: "-" if v is None else format(v, f)
    return [num(r["secs"], ".3f"), num(r["tok_s"], ",.0f"), num(r["mfu"], ".1f"), num(r["peak"], ".1f")]


def write_table(table, done):
    """The markdown table of the rows so far, to `out` (and, once done, to stdout). Rewritten after
    every part: a run that dies later (a device-side assert ends the process) keeps what it measured."""
    lines = [f"# cudal1 on pretrained shapes: Qwen2.5-Coder with random weights, {env['gpu']}", "",
             f"`python {' '.join(sys.argv)}`  ",
             f"commit {env['commit']}, torch {env['torch']} (CUDA {env['cuda']}), {str(dtype)[6:]}; MFU of "
             + (f"{tflops} TFLOP/s dense bf16" if tflops else "- (no peak known for this device)"), "",
             "| model | measurement | shape | seconds | tokens/s | MFU % | peak GiB |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {label} | {r['what']} | {r['shape']} | {' | '.join(cells(r))} |" for label, r in table]
    lines += ["", "Stage 1: seconds per step. Decode: seconds of the whole call, tokens/s over the decoded tokens "
              "after the first two (prefill, graph capture and the first step apart); graph=True replays a CUDA "
              "graph on a GPU. Stage 3: sampling and update apart; the step's tokens/s is answer tokens per second; "
              "judging not included. Peak: torch.cuda.max_memory_allocated over the measurement, fp32 weights "
              "included."]
    if not done:
        lines += ["", "**Incomplete**: the run had not finished when this was written; the rows above are all it measured."]
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    if done:
        print("\n".join(lines))


# ---- the measurements, model by model
os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
table = []
for name in args.models.split(","):
    with torch.device("meta"):  # the real shapes, allocating nothing: their counts must be the model card's
        real = cudal1.Transformer(cudal1_hf.config_from_hf(QWEN[name]))
    counts = (round(real.num_params() / 1e9, 2), round(real.num_params(embedding=False) / 1e9, 2))
    if counts != CARD[name]:
        raise SystemExit(f"Qwen2.5-Coder-{name} builds {counts} billion parameters, its model card says {CARD[name]}")
    hf = dict(QWEN[name], **(TINY if args.tiny else {}))
    cfg = cudal1_hf.config_from_hf(hf)
    with torch.device(device):  # built where it runs: a 1.5B fp32 model is slow to initialise on the CPU
        model = cudal1.Transformer(cfg)
    label = f"Qwen2.5-Coder-{name}{' (tiny)' if args.tiny else ''}, {model.num_params() / 1e6:,.1f}M " \
            f"({model.num_params(embedding=False) / 1e6:,.1f}M without embeddings)"
    for fn, whats in ((train_rows, ["stage 1 train step"]), (decode_rows, ["decode, graph=False", "decode, graph=True"]),
                      (rl_rows, ["stage 3 sample", "stage 3 update", "stage 3 step (no judge)"])):
        for r in measure(fn, model, whats):
            table.append((label, r))
            print(f"{label} | {r['what']} | {' | '.join(cells(r))}", file=sys.stderr, flush=True)
        write_table(table, done=False)
    del model
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
write_table(table, done=True)

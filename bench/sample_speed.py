"""How fast does cudal1.generate decode? ms per decoded token for several batch shapes.

On the H200 a stage-3 step spent 127-133 s sampling 32 answers (4 prompts x 8) of <= ~3000
tokens: ~40-60 ms per decode step where a launch-bound 12-layer forward should take a few ms. Two
shapes, one prompt and 4 ragged prompts x 8 samples (RL's), each decoded eagerly and as one
replayed CUDA graph per step (generate(graph=True)); greedy answers must be equal between them.

    python bench/sample_speed.py            # train_sft.py's GPU default policy on cuda, else a tiny one on cpu

The table in results/h200-sample-speed.md was measured on an earlier default (12 layers, 768 wide,
a 4096 block: 51M parameters); the script now builds the policy train_sft.py builds on a GPU.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch  # noqa: E402
import cudal1  # noqa: E402

cuda = torch.cuda.is_available()
device = "cuda" if cuda else "cpu"


def gpu_policy():
    """The Config train_sft.py builds on a GPU, from its DEFAULTS."""
    d = cudal1.script_defaults("train_sft.py")["DEFAULTS"]["cuda"]
    return cudal1.Config.scratch(d["vocab_size"], d["block_size"], d["n_layer"], d["n_head"], d["n_embd"])


cfg = (gpu_policy() if cuda else
       cudal1.Config(vocab_size=512, block_size=1024, n_layer=2, n_head=4, n_kv_head=2, n_embd=64, n_hidden=128))
torch.manual_seed(0)
model = cudal1.Transformer(cfg).to(device)
new = 128 if cuda else 32
plen = 1500 if cuda else 300
print(f"# Decode speed, eager vs CUDA graph\n\n- command: `python {' '.join(sys.argv)}`\n"
      f"- {torch.cuda.get_device_name() if cuda else 'CPU'}, torch {torch.__version__}\n")
print("| model | dtype | prompts x samples | prompt lengths | decode | ms per decode step | tokens/s |")
print("|---|---|---|---|---|---|---|")
for dtype in ([torch.bfloat16] if cuda else [torch.float32]):
    m = cudal1.sampling_model(model, dtype)
    for n_prompts, samples, ragged in ((1, 1, False), (4, 8, True)):
        prompts = [[1 + (i + j) % 200 for j in range(plen - (plen // 8 * i if ragged else 0))] for i in range(n_prompts)]
        answers = {}
        for graph in (False, True):
            # temperature 0 with no end token: every row decodes exactly `new` tokens
            run = lambda n=new: cudal1.generate(m, prompts, samples, n, temperature=0, graph=graph)
            run(4)  # warm-up
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            answers[graph] = run()
            if cuda:
                torch.cuda.synchronize()
            dt = (time.perf_counter() - t0) / new
            print(f"| {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M | {str(dtype)[6:]} | {n_prompts} x {samples} | "
                  f"{'ragged' if ragged else 'equal'} {plen} | {'CUDA graph' if graph and cuda else 'fixed shapes' if graph else 'eager'} | "
                  f"{dt * 1e3:.1f} | {n_prompts * samples / dt:,.0f} |")
        same = sum(a == b for ga, gb in zip(answers[False], answers[True]) for a, b in zip(ga, gb))
        print(f"|  |  |  |  | greedy answers equal with and without: {same}/{n_prompts * samples} |  |  |")

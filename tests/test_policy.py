"""The policy half of cudal1.py: tokenizer, model, KV-cache sampling, checkpoints, answer format."""
import contextlib
import glob
import json
import os

import pytest
import torch

import cudal1

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = open(os.path.join(ROOT, "kernelbench", "level1", "19_ReLU.py")).read()
SOLUTION = '''"""ReLU as clamp_min: one elementwise pass, the same memory traffic as torch.relu.

Nothing to fuse here; this is the smallest correct answer."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matmuls gain nothing from a second thread, and on a busy 2-core machine OpenMP's
    barrier waits turn 50 us products into 10 ms ones."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny(vocab_size, n_kv_head=2, block_size=128):
    torch.manual_seed(0)
    cfg = cudal1.Config(vocab_size=vocab_size, block_size=block_size, n_layer=2, n_head=4, n_kv_head=n_kv_head,
                        n_embd=32, n_hidden=64)
    return cudal1.Transformer(cfg).eval()


@pytest.fixture(scope="module")
def tok():
    corpus = "".join(open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "kernelbench", "level1", "*.py")))[:20])
    return cudal1.Tokenizer.train(corpus + SOLUTION, 400)


def test_tokenizer_round_trip(tok):
    assert tok.vocab_size == 400 and len(tok.merges) == 400 - 259
    for text in (TASK, SOLUTION, "", "  \n\t x", "unicode: héllo → 🚀 ünïcödé\n", "<|end|> is plain text here"):
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        assert all(i < tok.prompt_id for i in ids)  # text never yields a special id
    assert len(tok.encode(TASK)) < len(TASK.encode()) / 2  # merges learned on code compress code
    # a tokenizer rebuilt from its saved state encodes the same
    again = cudal1.Tokenizer(json.loads(json.dumps(tok.state()))["merges"])
    assert again.encode(SOLUTION) == tok.encode(SOLUTION)
    # the framing: <|prompt|> ... <|answer|> ... <|end|>, and decode drops the markers
    ids = tok.encode_prompt("p") + tok.encode_answer("a")
    assert ids[0] == tok.prompt_id and ids[-1] == tok.end_id and tok.decode(ids) == "pa"
    assert cudal1.Tokenizer.train(TASK, 259).encode("ab") == list(b"ab")  # 259: plain bytes


def test_llama_names():
    names = set(tiny(300).state_dict())
    for n in ("model.embed_tokens.weight", "model.layers.1.self_attn.q_proj.weight",
              "model.layers.0.self_attn.o_proj.weight", "model.layers.0.mlp.gate_proj.weight",
              "model.layers.0.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
              "model.layers.0.post_attention_layernorm.weight", "model.norm.weight", "lm_head.weight"):
        assert n in names
    assert not any("cos" in n or "sin" in n for n in names)  # RoPE tables are recomputed, not saved


def test_checkpoint_round_trip(tmp_path, tok):
    model = tiny(tok.vocab_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.tensor([tok.encode_prompt(TASK)[:100]])
    model(x, torch.roll(x, -1, 1)).backward()
    opt.step()
    cudal1.save_checkpoint(str(tmp_path), model, tok, {"step": 7, "settings": {"lr": 1e-3}}, opt)
    loaded, tok2, meta = cudal1.load_checkpoint(str(tmp_path))
    assert meta["step"] == 7 and meta["settings"] == {"lr": 1e-3} and loaded.config == model.config
    assert tok2.encode(TASK) == tok.encode(TASK)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    opt2 = torch.optim.AdamW(loaded.parameters(), lr=1e-3)
    opt2.load_state_dict(meta["optimizer"])
    want, have = opt.state_dict()["state"], opt2.state_dict()["state"]
    assert want.keys() == have.keys()
    for i in want:
        assert all(torch.equal(want[i][k], have[i][k]) for k in ("step", "exp_avg", "exp_avg_sq"))


def test_checkpoint_errors(tmp_path, tok):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        cudal1.load_checkpoint(str(tmp_path / "nothing"))
    cudal1.save_checkpoint(str(tmp_path), tiny(tok.vocab_size), tok, {})
    info = json.load(open(tmp_path / "config.json"))
    info["config"]["n_layer"] = 3  # weights for 2 layers, config says 3
    json.dump(info, open(tmp_path / "config.json", "w"))
    with pytest.raises(ValueError, match="model.layers.2"):
        cudal1.load_checkpoint(str(tmp_path))
    info["config"]["n_layer"], info["config"]["n_experts"] = 2, 8  # a field this Config lacks
    json.dump(info, open(tmp_path / "config.json", "w"))
    with pytest.raises(ValueError, match="n_experts"):
        cudal1.load_checkpoint(str(tmp_path))


def naive(model, prompt, n, sample):
    """Generation without a cache: the whole sequence through the model for every token."""
    seq = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            seq.append(sample(model(torch.tensor([seq]))[:, -1]).item())
    return seq[len(prompt):]


@pytest.mark.parametrize("n_kv_head", [4, 2])
def test_kv_cache_equals_naive(tok, n_kv_head):
    model = tiny(tok.vocab_size, n_kv_head)
    prompt = tok.encode_prompt("def forward(self, x):")
    greedy = naive(model, prompt, 30, lambda logits: logits.argmax(-1))
    rows = cudal1.generate(model, prompt, num_samples=3, max_new_tokens=30, temperature=0)
    assert rows == [greedy] * 3
    # sampling with one seed: the cached and the naive loop draw the same tokens
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    drawn = naive(model, prompt, 30, lambda l: cudal1.sample_next(l, 1.0, 50, 0.9, g1))
    assert cudal1.generate(model, prompt, 1, 30, 1.0, 50, 0.9, g2) == [drawn]
    # a row stops at the end id, and includes it
    end = greedy[10]
    stopped = cudal1.generate(model, prompt, 2, 30, temperature=0, end_id=end)
    assert stopped == [greedy[:greedy.index(end) + 1]] * 2


@pytest.mark.parametrize("n_kv_head", [4, 2])
def test_batched_prompts_equal_one_at_a_time(tok, n_kv_head):
    # Prompts of different lengths share one batch (right-aligned in the cache, padding masked,
    # each row its own positions); the last one leaves only 20 tokens of the block, so its rows
    # hit their own cap while the others go on. Greedy answers must be what each prompt gets alone.
    model = tiny(tok.vocab_size, n_kv_head)
    with torch.no_grad():  # sharp attention, so that a wrong position or an unmasked pad shows
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight *= 8
            layer.self_attn.k_proj.weight *= 8
    prompts = [tok.encode_prompt(t) for t in ("x", "def forward(self, x):", TASK[:2000])]
    prompts[2] = prompts[2][:model.config.block_size - 20]
    alone = [cudal1.generate(model, p, 2, 30, temperature=0) for p in prompts]
    assert [len(g[0]) for g in alone] == [30, 30, 20]
    assert cudal1.generate(model, prompts, 2, 30, temperature=0) == alone
    # with an end id, rows stop at different steps and keep the end
    end = alone[0][0][5]
    want = [cudal1.generate(model, p, 2, 30, temperature=0, end_id=end) for p in prompts]
    assert cudal1.generate(model, prompts, 2, 30, temperature=0, end_id=end) == want
    assert want[0][0][-1] == end and len(want[0][0]) <= 6
    # the fixed-shape decode that CUDA graphs replay (graph=True; uncaptured on the CPU) is the same
    assert cudal1.generate(model, prompts, 2, 30, temperature=0, graph=True) == alone
    assert cudal1.generate(model, prompts[0], 2, 30, temperature=0, end_id=end, graph=True) == want[0]



class FakeCUDA:
    """torch.cuda's stream and graph calls, as no-ops on the CPU: cudal1.cuda_graph then runs its
    warm-up and its slot bookkeeping there. A fake capture runs the step eagerly (a real one runs
    nothing), so the test steps pos_t back after it, and a fake replay computes nothing."""
    Stream = type("Stream", (), {"wait_stream": lambda self, other: None})
    CUDAGraph = type("CUDAGraph", (), {"replay": lambda self: None})
    current_stream = Stream
    stream = graph = staticmethod(lambda _: contextlib.nullcontext())


def test_graph_decode_stays_inside_the_cache(monkeypatch):
    # On the H200, generate(graph=True) with max_new_tokens=1 (bench/pretrained_shapes.py's prefill
    # timing) built a cache of P + 1 slots, then captured a graph whose warm-up writes slots P and P + 1:
    # index_copy_ past the end, a device-side assert that killed the run. On the CPU the same write is
    # an IndexError; now nothing writes past the end, and what would gets a ValueError first.
    model, prompts = tiny(300), [list(range(10)), list(range(7))]
    for name in ("Stream", "CUDAGraph", "current_stream", "stream", "graph"):
        monkeypatch.setattr(torch.cuda, name, getattr(FakeCUDA, name))

    def static_cache(new):  # the cache generate decodes `new` tokens in: prompts prefilled, joined, static
        caches = [cudal1.KVCache(2, len(p)) for p in prompts]
        with torch.no_grad():
            for p, c in zip(prompts, caches):
                model(torch.tensor([p]), cache=c)
        cache = cudal1.KVCache.join(caches, 10 + new, repeat=2)
        cache.make_static()
        return cache, lambda token: model(token[:, None], cache=cache)[:, -1]

    with torch.no_grad():
        cache, step = static_cache(1)  # one free slot: too few for the warm-up
        with pytest.raises(ValueError, match="KV cache of 11 slots has no room for 1 more at slot 11"):
            cudal1.cuda_graph(step, cache)
        cache, step = static_cache(4)
        replay = cudal1.cuda_graph(step, cache)
        assert cache.pos == 10 and cache.pos_t.item() == 11  # pos back; pos_t one on: the fake ran the capture
        cache.pos_t -= 1
        token = torch.zeros(4, dtype=torch.long)
        for _ in range(4):  # 4 free slots (generate fills new - 1 = 3 of them); a 5th replay has none
            replay(token)
        with pytest.raises(ValueError, match="no room for 1 more at slot 14"):
            replay(token)
        with pytest.raises(ValueError, match="no room"):  # and an eager static step past the end as well
            step(token)
    # generate asks for a graph only where it takes a step: 1 token decodes eagerly, the same answers
    eager = cudal1.generate(model, prompts, 2, 1, temperature=0)
    assert [len(r) for g in eager for r in g] == [1] * 4
    assert cudal1.generate(model, prompts, 2, 1, temperature=0, graph=True) == eager


@pytest.mark.gpu
def test_graph_decode_on_the_gpu_equals_eager():
    """The H200's crash itself: a 1- or 2-token graph=True call (its capture's warm-up writes 2 slots)."""
    model = tiny(300).cuda()
    prompts = [list(range(10)), list(range(7))]
    for new in (1, 2, 3, 20):
        eager = cudal1.generate(model, prompts, 2, new, temperature=0)
        assert cudal1.generate(model, prompts, 2, new, temperature=0, graph=True) == eager
    torch.cuda.synchronize()  # a device-side assert would surface here at the latest


def test_sampling_model():
    model = tiny(300)
    assert cudal1.sampling_model(model, torch.float32) is model  # float32: nothing to copy
    half = cudal1.sampling_model(model, torch.bfloat16)
    assert half.lm_head.weight.dtype == torch.bfloat16 and model.lm_head.weight.dtype == torch.float32
    assert half.cos.dtype == torch.float32 and not half.lm_head.weight.requires_grad  # RoPE tables stay exact
    prompt = list(range(40))
    x = torch.tensor([prompt])
    with torch.no_grad():
        torch.testing.assert_close(half(x).float(), model(x), atol=0.05, rtol=0.05)
    assert len(cudal1.generate(half, prompt, 2, 8, temperature=0)[0]) == 8


def test_sample_next_filters():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0]]).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    assert set(cudal1.sample_next(logits, 1.0, top_k=2, generator=g).tolist()) == {0, 1}
    # probabilities ~.64 .24 .09 .03 .01: top_p .8 keeps the first two only
    assert set(cudal1.sample_next(logits, 1.0, top_p=0.8, generator=g).tolist()) == {0, 1}
    assert len(set(cudal1.sample_next(logits, 1.0, generator=g).tolist())) == 5


def test_answer_logprobs_match_full_forward(tok):
    model = tiny(tok.vocab_size)
    prompt, answers = tok.encode_prompt("task"), [tok.encode_answer("short"), tok.encode_answer("a longer answer")]
    logp, mask = cudal1.answer_logprobs(model, prompt, answers)
    assert logp.shape == mask.shape == (2, len(answers[1])) and mask.sum() == sum(map(len, answers))
    for i, a in enumerate(answers):  # each answer alone, unpadded
        full = torch.log_softmax(model(torch.tensor([prompt + a]))[0, len(prompt) - 1:-1], -1)
        want = full.gather(1, torch.tensor(a)[:, None]).squeeze(1)
        torch.testing.assert_close(logp[i, :len(a)], want, atol=1e-5, rtol=1e-5)
    logp.sum().backward()  # the PG loss differentiates through it
    assert model.lm_head.weight.grad is not None


def test_answer_logprobs_under_the_sampling_distribution(tok):
    """Scored with the sampler's temperature, top_k and top_p: an answer token's log-prob is its
    share of the kept mass of logits/T, checked against a hand computation over the top-k set."""
    torch.manual_seed(0)
    model = tiny(tok.vocab_size)
    prompt, answer = tok.encode_prompt("task"), tok.encode_answer("a longer answer")
    with torch.no_grad():
        logits = model(torch.tensor([prompt + answer]))[0, len(prompt) - 1:-1].float()  # (L, vocab)
        T, k = 0.7, 5
        top = (logits / T).topk(k, dim=-1)
        for j, t in enumerate(answer):  # make every answer token one of the top k: it was sampled
            if t not in top.indices[j]:
                answer[j] = top.indices[j, 0].item()
        logits = model(torch.tensor([prompt + answer]))[0, len(prompt) - 1:-1].float()
        top = (logits / T).topk(k, dim=-1)
        want = torch.stack([top.values[j].log_softmax(-1)[top.indices[j] == t].squeeze()
                            for j, t in enumerate(answer) if t in top.indices[j]])
    logp, _ = cudal1.answer_logprobs(model, prompt, [answer], temperature=T, top_k=k)
    got = torch.stack([logp[0, j] for j, t in enumerate(answer) if t in top.indices[j]])
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    plain, _ = cudal1.answer_logprobs(model, prompt, [answer])  # temperature 1, nothing cut: lower
    assert (plain[0] <= logp[0] + 1e-6).float().mean() > 0.5
    # a token the filter would drop (rounding between sampler and scorer) keeps a finite log-prob
    nucleus, _ = cudal1.answer_logprobs(model, prompt, [answer], temperature=T, top_p=1e-6)
    assert torch.isfinite(nucleus).all()


def test_loss_falls(tok):
    torch.manual_seed(0)
    model = tiny(tok.vocab_size, block_size=256).train()
    ids = (tok.encode_prompt(TASK[:200]) + tok.encode_answer(cudal1.format_answer(SOLUTION)))[:256]
    x, y = torch.tensor([ids[:-1]]), torch.tensor([ids[1:]])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(40):
        loss = model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


def test_prompts():
    p = cudal1.plain_prompt(TASK, "NVIDIA H200")
    assert "NVIDIA H200" in p and "torch.relu(x)" in p and all(h in p for h in cudal1.HEADERS)
    c = cudal1.contrastive_prompt(TASK, "CPU", [("class ModelNew: pass  # one", 0.8), ("class ModelNew: pass  # two", 2.5)])
    assert c.startswith(cudal1.plain_prompt(TASK, "CPU"))
    assert c.index("0.80x") < c.index("# one") < c.index("2.50x") < c.index("# two")
    c = cudal1.contrastive_prompt(TASK, "CPU", [("class ModelNew: pass  # one", 1.0), ("class ModelNew: pass  # two", None)])
    assert "## Solution 2: speedup not measured\n" in c and "None" not in c


def test_format_and_parse_answer():
    answer = cudal1.format_answer(SOLUTION)
    source, reason = cudal1.parse_answer(answer)
    assert reason is None and "class ModelNew" in source and "clamp_min" in source
    assert '"""' not in source  # the docstring moved to the analysis section
    assert answer.index("ReLU as clamp_min") < answer.index(cudal1.HEADERS[1]) < answer.index("PyTorch-level")
    said = cudal1.answer_analysis(answer)  # the analysis alone, also of an answer cut short before its code
    assert said.startswith("ReLU as clamp_min") and cudal1.HEADERS[0] not in said and "PyTorch-level" not in said
    assert cudal1.answer_analysis(answer[:answer.index(cudal1.HEADERS[1])]) == said
    with pytest.raises(ValueError, match="docstring"):
        cudal1.format_answer("import torch\nclass ModelNew: pass\n")
    cuda = 'import cudal1\nsrc = "__global__ void relu_kernel(float* x) {}"\nk = cudal1.load_kernel(src, "cuda")'
    assert cudal1.solution_kind(cuda) == "cuda" and "relu_kernel" in cudal1.format_answer('"""a."""\n' + cuda)
    assert cudal1.solution_kind('m = cudal1.load_kernel(src, "cpp")  # m.def("relu", ...)') == "cpp"


def test_parse_answer_rejects_malformed():
    good = cudal1.format_answer(SOLUTION)
    a, d, c = cudal1.HEADERS
    code = good[good.index("```python"):]
    cases = {
        "missing analysis": (good.replace(a + "\n", ""), "appears 0 times"),
        "twice": (good + "\n" + c + "\n" + code, "appears 2 times"),
        "order": (f"{d}\nx\n\n{a}\ny\n\n{c}\n{code}", "out of order"),
        "empty design": (good.replace("A PyTorch-level rewrite: no native code.", ""), "is empty"),
        "no block": (good.replace("```python", "```"), "0 ```python blocks"),
        "two blocks": (good + "\n```python\nx = 1\n```\n", "2 ```python blocks"),
        "unclosed": (good.rstrip().removesuffix("```"), "never closed"),
        "syntax": (good.replace("def forward(self, x):", "def forward(self, x)"), "does not parse"),
        "no ModelNew": (good.replace("class ModelNew", "class Model"), "no class ModelNew"),
        "cut short": (good[:len(good) // 2], "appears 0 times"),
    }
    for name, (text, why) in cases.items():
        source, reason = cudal1.parse_answer(text)
        assert source is None and why in reason, (name, reason)


def test_fit_prompt_drops_the_slowest_exemplar_first_then_falls_back_to_plain():
    tok = cudal1.Tokenizer()  # bytes only: one token per byte
    task = "class Model:\n    pass\n"
    shown = [("slow = 1\n" * 40, 1.0), ("fast = 2\n", 3.0)]
    both = len(tok.encode_prompt(cudal1.contrastive_prompt(task, "CPU", shown)))
    fast = len(tok.encode_prompt(cudal1.contrastive_prompt(task, "CPU", shown[1:])))
    plain = tok.encode_prompt(cudal1.plain_prompt(task, "CPU"))
    assert cudal1.fit_prompt(tok, task, "CPU", shown, 10, both + 10)[1] == shown
    ids, kept = cudal1.fit_prompt(tok, task, "CPU", shown, 10, both + 9)  # one token short: the slow one goes
    assert kept == shown[1:] and len(ids) == fast
    assert cudal1.fit_prompt(tok, task, "CPU", shown, 10, fast + 9) == (plain, [])
    assert cudal1.fit_prompt(tok, task, "CPU", [], 10, 1) == (plain, [])


def test_a_checkpoint_carried_in_bf16_parts_loads_as_it_was_sampled(tmp_path, monkeypatch):
    import importlib.util
    spec = importlib.util.spec_from_file_location("carry", os.path.join(ROOT, "bench", "carry_checkpoint.py"))
    carry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(carry)
    tok = cudal1.Tokenizer()
    cfg = cudal1.Config(vocab_size=tok.vocab_size, block_size=64, n_layer=2, n_head=2, n_kv_head=2, n_embd=32, n_hidden=64)
    torch.manual_seed(0)
    model = cudal1.Transformer(cfg)
    cudal1.save_checkpoint(str(tmp_path / "ckpt"), model, tok, {"step": 7, "round": 1},
                           torch.optim.AdamW(model.parameters()))
    monkeypatch.setattr(carry, "PART", 10_000)  # several parts from a small model
    assert carry.main(["pack", str(tmp_path / "ckpt"), str(tmp_path / "out")]) == 0
    parts = sorted(os.listdir(tmp_path / "out"))
    assert len([p for p in parts if p.startswith("model.bf16.part")]) > 2 and "optimizer.safetensors" not in parts
    assert (tmp_path / "out" / "model.bf16.part0").read_bytes()[:2] == b"\x1f\x8b"  # gzip: 53 -> 42 MiB at the GPU default
    assert carry.main(["unpack", str(tmp_path / "out"), str(tmp_path / "back")]) == 0
    back, tok2, meta = cudal1.load_checkpoint(str(tmp_path / "back"))
    assert meta["step"] == 7 and tok2.encode("x = 1") == tok.encode("x = 1")
    for (name, a), (_, b) in zip(model.state_dict().items(), back.state_dict().items()):
        assert torch.equal(a.to(torch.bfloat16).float(), b), name

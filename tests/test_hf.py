"""Pretrained checkpoints in Hugging Face's layout, against transformers and tokenizers as oracles
(installed for the tests only; cudal1 never imports them). Tiny random Llama, Qwen2 and Qwen3
models and byte-level BPE tokenizers trained on our tasks and kernels are built here, offline."""
import glob
import json
import os
import sys

import pytest
import safetensors.torch
import torch

import cudal1
import cudal1_hf
import warm

transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors, trainers  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = [open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "kernelbench", "level*", "*.py"))
                                         + glob.glob(os.path.join(ROOT, "kernels", "level*", "*.py")))]
EDGE_CASES = [
    "", " ", "\n", "\n\n\n", "  \t  x\n  \n", "\r\n windows\r\n\r\n", "tab\tsep\t\t\tend", "trailing   ",
    "a" * 300, "    " * 20 + "deep indent", "x = 1234567 + 3.14159e-10 - 0x1F", "don't I'LL we'Re it'S",
    "unicode: héllo → 🚀 ünïcödé 中文字符 ٣٤٥ 一二三 ½ Ⅻ", "e\u0301 vs é (NFC composes the first)",
    "\u00a0nbsp\u2009thin\u3000wide", "zero\u200bwidth \x1c\x1d\x1e\x1f controls \x00\x07", "emoji 👩‍💻🏳️‍🌈 ZWJ",
    "<|im_end|> <|eot_id|> <|endoftext|> specials as text",
    "<|fim_prefix|>def f(x):<|fim_prefix|>", "say xyzzy", "```python\nclass ModelNew(nn.Module):\n    pass\n```\n",
]
SPLIT = {  # the pre-tokenizer regexes of Qwen2 and Llama 3 (Llama 3 groups digits by up to three)
    "qwen": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"""
            r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
    "llama3": r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"""
              r"""| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
}
SPECIALS = {
    "qwen": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "qwen3": ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
    "llama3": ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "gpt2": ["<|endoftext|>"],
}
TEMPLATE = {  # the formats' chat templates, enough for transformers to render one user turn
    "qwen": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
            "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "qwen3": "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n' }}{% endfor %}"
             "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% if enable_thinking is defined and "
             "enable_thinking is false %}{{ '<think>\n\n</think>\n\n' }}{% endif %}{% endif %}",
    "llama3": "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>\n\n'"
              " + m['content'] + '<|eot_id|>' }}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    "gpt2": None,  # a base model: no chat format
}


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls on a busy 2-core machine: see test_policy.py
    yield
    torch.set_num_threads(n)


def build_tokenizer(kind, folder):
    """A byte-level BPE of ~1000 ids trained on CORPUS, laid out as `kind`'s (Qwen2: NFC and its split,
    a non-special added token; Qwen3: Qwen2's, <think> tokens, thinking in its template; Llama 3: its
    split, ignore_merges, BOS by the post-processor; GPT-2 style: digits isolated, ByteLevel's own regex,
    no chat template), saved to folder/tokenizer.json and tokenizer_config.json. Returns the
    tokenizers.Tokenizer, special tokens encoded as text."""
    tok = tokenizers.Tokenizer(models.BPE(ignore_merges=kind == "llama3"))
    if kind == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])
    else:
        split = SPLIT["llama3" if kind == "llama3" else "qwen"]
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if kind.startswith("qwen"):
        tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    if kind == "llama3":  # a token no merge builds, as some of Llama 3's: only ignore_merges finds it
        spec = json.loads(tok.to_str())
        spec["model"]["vocab"]["\u0120xyzzy"] = len(spec["model"]["vocab"])  # " xyzzy", as byte-level BPE spells it
        tok = tokenizers.Tokenizer.from_str(json.dumps(spec))
    tok.add_special_tokens(SPECIALS[kind])  # after training: ids past the BPE vocab, as Qwen's and Llama 3's
    plain = ["<|fim_prefix|>"] + (["<think>", "</think>"] if kind == "qwen3" else [])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain])
    if kind == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                           special_tokens=[("<|begin_of_text|>", bos)])
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": SPECIALS[kind][0],
              "eos_token": {"llama3": "<|eot_id|>", "gpt2": "<|endoftext|>"}.get(kind, "<|im_end|>")}
    if TEMPLATE[kind]:
        config["chat_template"] = TEMPLATE[kind]
    json.dump(config, open(os.path.join(folder, "tokenizer_config.json"), "w"))
    tok.encode_special_tokens = True
    return tok


def ours(folder):
    files = {n: json.load(open(os.path.join(folder, n))) for n in ("tokenizer.json", "tokenizer_config.json")}
    return cudal1_hf.HFTokenizer(files)


@pytest.mark.parametrize("kind", ["qwen", "qwen3", "llama3", "gpt2"])
def test_tokenizer_matches_tokenizers(tmp_path, kind):
    theirs = build_tokenizer(kind, tmp_path)
    tok = ours(tmp_path)
    assert tok.vocab_size == theirs.get_vocab_size()
    for text in CORPUS + EDGE_CASES:
        ids = tok.encode(text)
        assert ids == theirs.encode(text, add_special_tokens=False).ids, repr(text[:200])
        assert tok.decode(ids) == theirs.decode(ids, skip_special_tokens=True)
    assert len(tok.encode(CORPUS[0])) < len(CORPUS[0]) / 2  # the merges are used: code compresses
    assert not set(tok.encode(" ".join(EDGE_CASES))) & tok.special  # text never yields a special token
    assert tok.encode("<|fim_prefix|>") == [theirs.token_to_id("<|fim_prefix|>")]  # a non-special added one does
    # the chat format: our prompt is what transformers renders from the template and tokenizes
    prompt = cudal1.plain_prompt(CORPUS[0], "CPU")
    answer = tok.encode_answer("## Performance Analysis\nfast")
    if TEMPLATE[kind]:
        hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
        want = hf.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                      enable_thinking=False, tokenize=True, return_dict=True)["input_ids"]
        assert tok.encode_prompt(prompt) == list(want)
        assert answer[-1] == tok.end_id == theirs.token_to_id("<|eot_id|>" if kind == "llama3" else "<|im_end|>")
    else:  # a base model: the prompt as text, the answer ending with end of text
        assert tok.encode_prompt(prompt) == theirs.encode(prompt).ids
        assert answer[-1] == tok.end_id == theirs.token_to_id("<|endoftext|>")
    assert tok.decode(answer) == "## Performance Analysis\nfast"


def test_tokenizer_refuses_what_it_cannot_read(tmp_path):
    build_tokenizer("qwen", tmp_path)
    spec = json.load(open(tmp_path / "tokenizer.json"))
    config = json.load(open(tmp_path / "tokenizer_config.json"))
    for edit, named in ((lambda s, c: s["model"].update(byte_fallback=True), "byte_fallback"),
                        (lambda s, c: s.update(normalizer={"type": "NFKC"}), "normalizer NFKC"),
                        (lambda s, c: s.update(pre_tokenizer={"type": "Metaspace"}), "does not end with ByteLevel"),
                        (lambda s, c: c.update(chat_template="{{ '<start_of_turn>' }}"), "neither ChatML"),
                        (lambda s, c: c.update(chat_template=None, eos_token="</s>"), "answer's end '</s>'")):
        s, c = json.loads(json.dumps(spec)), dict(config)
        edit(s, c)
        with pytest.raises(ValueError, match=named):
            cudal1_hf.HFTokenizer({"tokenizer.json": s, "tokenizer_config.json": c})


# ---- models

def hf_config(arch, vocab_size, positions=256):
    """Tiny configs that between them use every feature: grouped-query attention everywhere; Llama:
    untied, Llama 3.1 rope scaling; Qwen2: tied, q/k/v biases; Qwen3: tied, q/k norms, head_dim != n_embd / n_head."""
    common = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=positions)
    if arch == "llama":
        return transformers.LlamaConfig(**common, rms_norm_eps=1e-5, tie_word_embeddings=False, rope_theta=500000.0,
                                        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                          high_freq_factor=4.0, original_max_position_embeddings=64))
    if arch == "qwen2":
        return transformers.Qwen2Config(**common, rms_norm_eps=1e-6, tie_word_embeddings=True, rope_theta=1e6)
    return transformers.Qwen3Config(**common, rms_norm_eps=1e-6, tie_word_embeddings=True, head_dim=24)


TOKENIZER_OF = {"llama": "llama3", "qwen2": "qwen", "qwen3": "qwen"}


def build_model(arch, folder, positions=256, **save):
    """A random transformers model of `arch` saved to folder with its tokenizer; every weight random
    (norm gains near 1, biases too), so a weight we failed to load shows in the logits."""
    build_tokenizer(TOKENIZER_OF[arch], folder)
    vocab = ours(folder).vocab_size + 12  # embedding rows past the tokenizer's ids, as Qwen2.5 has
    torch.manual_seed(0)
    hf = transformers.AutoModelForCausalLM.from_config(hf_config(arch, vocab, positions))
    with torch.no_grad():
        for name, p in hf.named_parameters():
            p.copy_(torch.randn_like(p) * (0.1 if p.dim() == 2 else 0.2) + (1.0 if "norm" in name else 0.0))
    hf.save_pretrained(str(folder), **save)
    return hf.eval()


def ids_of(folder, n=48):
    tok = ours(folder)
    return tok, torch.tensor([tok.encode(CORPUS[1])[:n], tok.encode(CORPUS[2])[:n]])


@pytest.mark.parametrize("arch,save", [("llama", dict(max_shard_size="100KB")),  # sharded: an index and 5 files
                                       ("qwen2", {}), ("qwen3", {})])
def test_logits_and_greedy_match_transformers(tmp_path, arch, save):
    hf = build_model(arch, tmp_path, **save)
    assert os.path.exists(tmp_path / "model.safetensors.index.json") == bool(save)
    model, tok, meta = cudal1.load_checkpoint(str(tmp_path))
    assert meta == {} and model.config.architecture == hf.config.architectures[0]
    tok, x = ids_of(tmp_path)
    with torch.no_grad():
        want, have = hf(x).logits, model.eval()(x)
    assert (have - want).abs().max() < 1e-5
    # greedy decoding with our KV cache, token for token, both stopping at the end of turn
    prompt = tok.encode_prompt("def forward(self, x):")
    mine = cudal1.generate(model, prompt, 1, 24, temperature=0, end_id=tok.end_id)[0]
    out = hf.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False, eos_token_id=tok.end_id,
                      pad_token_id=tok.end_id)
    assert mine == out[0, len(prompt):].tolist()


def test_bf16_checkpoint(tmp_path):
    """A bf16 checkpoint (how pretrained ones ship) loads into our fp32 weights exactly."""
    build_model("qwen2", tmp_path).to(torch.bfloat16).save_pretrained(str(tmp_path))
    model, _, _ = cudal1.load_checkpoint(str(tmp_path))
    hf = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path), dtype=torch.float32).eval()
    stored = safetensors.torch.load_file(str(tmp_path / "model.safetensors"))
    assert stored["model.norm.weight"].dtype == torch.bfloat16
    assert model.model.norm.weight.dtype == torch.float32
    assert torch.equal(model.model.norm.weight, stored["model.norm.weight"].float())
    _, x = ids_of(tmp_path)
    with torch.no_grad():
        assert (model.eval()(x) - hf(x).logits).abs().max() < 1e-5


def test_strict_loading_names_the_problem(tmp_path):
    build_model("qwen3", tmp_path)
    weights = safetensors.torch.load_file(str(tmp_path / "model.safetensors"))
    config = json.load(open(tmp_path / "config.json"))

    def fails(named, state=weights, **changes):
        safetensors.torch.save_file(state, str(tmp_path / "model.safetensors"))
        json.dump({**config, **changes}, open(tmp_path / "config.json", "w"))
        with pytest.raises(ValueError, match=named) as e:
            cudal1.load_checkpoint(str(tmp_path))
        assert "\n" not in str(e.value)

    gone = {k: v for k, v in weights.items() if k != "model.layers.1.self_attn.k_norm.weight"}
    fails(r"model\.layers\.1\.self_attn\.k_norm\.weight missing", gone)
    extra = {**weights, "model.layers.0.self_attn.rotary_emb.inv_freq": torch.ones(12)}
    fails(r"model\.layers\.0\.self_attn\.rotary_emb\.inv_freq unexpected", extra)
    fails(r"lm_head\.weight unexpected", {**weights, "lm_head.weight": weights["model.embed_tokens.weight"].clone()})
    fails(r"12 tensor\(s\): model\.layers\.0\.self_attn\.k_norm\.weight is \(24,\), the config says \(32,\)",
          head_dim=32)
    fails("architecture MistralForCausalLM", architectures=["MistralForCausalLM"])
    fails("rope_type yarn", rope_parameters={"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0})
    fails("use_sliding_window", use_sliding_window=True)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_saved_policy_loads_in_transformers_and_resumes(tmp_path, arch):
    build_model(arch, tmp_path / "pretrained")
    model, tok, _ = cudal1.load_checkpoint(str(tmp_path / "pretrained"))
    _, x = ids_of(tmp_path / "pretrained")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()(x, torch.roll(x, -1, 1)).backward()
    opt.step()  # every weight moves: a saved copy of the pretrained one would fail below
    out = str(tmp_path / "finetuned")
    cudal1.save_checkpoint(out, model, tok, {"step": 3, "settings": {"lr": 1e-2}}, opt)
    with torch.no_grad():
        mine = model.eval()(x)
        hf = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
        assert (hf(x).logits - mine).abs().max() < 1e-5
    theirs = transformers.AutoTokenizer.from_pretrained(out)(CORPUS[3], add_special_tokens=False)["input_ids"]
    assert theirs == tok.encode(CORPUS[3])
    loaded, tok2, meta = cudal1.load_checkpoint(out)
    assert loaded.config == model.config and meta["step"] == 3 and meta["settings"] == {"lr": 1e-2}
    assert all(torch.equal(a, b) for a, b in zip(loaded.state_dict().values(), model.state_dict().values()))
    assert tok2.encode_prompt(CORPUS[3]) == tok.encode_prompt(CORPUS[3])
    opt2 = torch.optim.AdamW(loaded.parameters(), lr=1e-2)
    opt2.load_state_dict(meta["optimizer"])
    assert all(torch.equal(opt.state_dict()["state"][i]["exp_avg"], s["exp_avg"])
               for i, s in opt2.state_dict()["state"].items())


RELU = '''"""ReLU as clamp_min: one elementwise pass over x, the same memory traffic as torch.relu."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0)
'''


def test_stages_start_from_a_pretrained_checkpoint(tmp_path):
    """train_sft.py --init and train_rl.py --init on a tiny Qwen2 folder (make train INIT=, make rl INIT=):
    both run, save in its layout, and resume from what they saved."""
    build_model("qwen2", tmp_path / "qwen", positions=2048)
    (tmp_path / "kernels" / "level1").mkdir(parents=True)
    (tmp_path / "kernels" / "level1" / "19_ReLU.py").write_text(RELU)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    sft = [sys.executable, os.path.join(ROOT, "train_sft.py"),
           "--generated", "0", "--init", str(tmp_path / "qwen"), "--device", "cpu",
           "--kernels", str(tmp_path / "kernels"), "--tasks", os.path.join(ROOT, "kernelbench"), "--kinds", "pytorch",
           "--speedups", "none.jsonl", "--batch-size", "1", "--rounds", "0", "--out", str(tmp_path / "sft")]
    for steps, said in (("2", "starting from"), ("3", "resumed")):
        p = warm.run(sft + ["--steps", steps], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and said in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    assert json.load(open(tmp_path / "sft" / "config.json"))["architectures"] == ["Qwen2ForCausalLM"]
    assert json.load(open(tmp_path / "sft" / "cudal1.json"))["step"] == 3
    rl = [sys.executable, os.path.join(ROOT, "train_rl.py"), "--init", str(tmp_path / "sft"), "--device", "cpu",
          "--tasks", os.path.join(ROOT, "kernelbench"), "--rl-tasks", "level1/19_ReLU.py", "--tasks-per-step", "1",
          "--num-samples", "2", "--max-new-tokens", "8", "--min-answer-tokens", "8", "--seed-bank", "",
          "--out", str(tmp_path / "rl")]
    for steps, said in (("1", "starting from"), ("2", "resumed")):
        p = warm.run(rl + ["--steps", steps], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0 and said in p.stdout, p.stdout[-3000:] + p.stderr[-3000:]
    model, tok, meta = cudal1.load_checkpoint(str(tmp_path / "rl"))
    assert meta["stage"] == "rl" and meta["step"] == 2 and tok.end_id == tok.added["<|im_end|>"]

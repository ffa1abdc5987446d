"""
cudal1_hf: a pretrained model's checkpoint, as Hugging Face lays it out, for cudal1's policy.

The core (cudal1.py) trains its own tokenizer and Transformer; a researcher who starts from a
pretrained coder (`make train INIT=~/models/Qwen2.5-Coder-1.5B-Instruct`) brings a folder with
config.json, safetensors weights and tokenizer.json instead. This file reads and writes the parts of
that layout that are not ours: config.json <-> cudal1.Config for Llama, Qwen2 and Qwen3
(config_from_hf, hf_config), and tokenizer.json's byte-level BPE with the checkpoint's chat format
(HFTokenizer, behind cudal1.Tokenizer's interface). cudal1.load_checkpoint and save_checkpoint call
it when a folder is in that layout; nothing else does. No tokenizers or transformers import:
tests/test_hf.py uses them as oracles only.
"""

import json
import math
import unicodedata

from cudal1 import Config, _merge

# -----------------------------------------------------------------------------
# config.json

HF_ARCHITECTURES = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")  # the last: carried
LLAMA3_ROPE = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


def config_from_hf(d):
    """Our Config of a Hugging Face config.json (parsed); what our Transformer does not run raises, named."""
    arch = (d.get("architectures") or ["none"])[0]
    if arch not in HF_ARCHITECTURES:
        raise ValueError(f"architecture {arch} is not one cudal1 runs ({', '.join(HF_ARCHITECTURES)})")
    rope = d.get("rope_scaling") or d.get("rope_parameters") or {}  # transformers 4's spelling, then 5's
    kind = rope.get("rope_type", rope.get("type", "default"))
    for what, bad in ((f"rope_type {kind}", kind not in ("default", "llama3")),
                      (f"hidden_act {d.get('hidden_act')}", d.get("hidden_act", "silu") != "silu"),
                      ("attention_bias", d.get("attention_bias")), ("mlp_bias", d.get("mlp_bias")),
                      ("use_sliding_window", d.get("use_sliding_window"))):
        if bad:
            raise ValueError(f"{arch} with {what} is not supported")
    n_embd, n_head = d["hidden_size"], d["num_attention_heads"]
    return Config(vocab_size=d["vocab_size"], block_size=d["max_position_embeddings"],
                  n_layer=d["num_hidden_layers"], n_head=n_head, n_kv_head=d.get("num_key_value_heads") or n_head,
                  n_embd=n_embd, n_hidden=d["intermediate_size"],
                  rope_theta=d.get("rope_theta", rope.get("rope_theta", 10000.0)),
                  norm_eps=d["rms_norm_eps"], head_dim=d.get("head_dim") or n_embd // n_head,
                  qkv_bias=arch == "Qwen2ForCausalLM", qk_norm=arch == "Qwen3ForCausalLM",
                  tie_embeddings=d.get("tie_word_embeddings", False),
                  rope_scaling={k: rope[k] for k in LLAMA3_ROPE} if kind == "llama3" else None, architecture=arch)


def hf_config(cfg):
    """The config.json of a Config that came from one (config_from_hf's inverse), in transformers 4's
    spelling, which 5 reads too. Weights are saved in float32, as the model trains."""
    return dict(architectures=[cfg.architecture], model_type=HF_ARCHITECTURES[cfg.architecture],
                vocab_size=cfg.vocab_size, hidden_size=cfg.n_embd, intermediate_size=cfg.n_hidden,
                num_hidden_layers=cfg.n_layer, num_attention_heads=cfg.n_head, num_key_value_heads=cfg.n_kv_head,
                head_dim=cfg.head_dim, max_position_embeddings=cfg.block_size, rope_theta=cfg.rope_theta,
                rope_scaling=dict(rope_type="llama3", **cfg.rope_scaling) if cfg.rope_scaling else None,
                rms_norm_eps=cfg.norm_eps, tie_word_embeddings=cfg.tie_embeddings, hidden_act="silu",
                torch_dtype="float32")


# -----------------------------------------------------------------------------
# tokenizer.json's byte-level BPE, read by hand
#
# Qwen2/2.5/3, Llama 3 and SmolLM ship GPT-2's byte-level BPE. Encoding: cut the text at added
# tokens (each is one id), normalize the rest (Unicode NFC, or not at all), split it into pieces with
# the pre-tokenizer's regexes, then merge each piece's UTF-8 bytes as Tokenizer does, the earliest
# listed merge first. tokenizer.json spells each byte as a printable character (GPT-2's
# bytes_to_unicode), so its vocab and merges are turned back into bytes once, on load.
# As with our own specials, special tokens (<|im_end|>, <|eot_id|>, ...) come from the chat format
# only, never from text: a task holding "<|im_end|>" cannot end an answer (tokenizers does the same
# with encode_special_tokens=True; tests/test_hf.py holds us to it).

# ByteLevel's own split (use_regex), GPT-2's
GPT2_SPLIT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
CHAT_FORMATS = {  # the first key a chat template holds names its format: (prompt, answer), each around its {}
    "enable_thinking": ("<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
                        "{}<|im_end|>"),  # Qwen3: ChatML with thinking off, as its template has it
    "<|im_start|>": ("<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n", "{}<|im_end|>"),  # ChatML (Qwen2.5)
    "<|start_header_id|>": ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n{}<|eot_id|>"
                            "<|start_header_id|>assistant<|end_header_id|>\n\n", "{}<|eot_id|>"),  # Llama 3
}


def byte_chars():
    """{byte: the character tokenizer.json spells it with}: printable Latin-1 bytes stand for
    themselves, the other 68 (controls, space, ...) for chr(256), chr(257), ... in byte order."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    moved = [b for b in range(256) if b not in keep]
    return {**{b: chr(b) for b in keep}, **{b: chr(256 + i) for i, b in enumerate(moved)}}


def _isolate(pattern, text):
    """text cut into the matches of `pattern` and the stretches between them (a Split that isolates)."""
    out, pos = [], 0
    for m in pattern.finditer(text):
        out += [text[pos:m.start()], m[0]]
        pos = m.end()
    return [p for p in out + [text[pos:]] if p]


def _pre_tokenizer(spec, regex):
    """The regexes tokenizer.json's pre-tokenizer splits text with, in turn; raises, naming each part
    of the tokenizer that is not byte-level BPE as Qwen and Llama 3 ship it."""
    model, norm = spec["model"], (spec.get("normalizer") or {}).get("type")
    pre = spec.get("pre_tokenizer") or {}
    steps = (pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]) or [{}]
    problems = [what for what, bad in (
        (f"model {model.get('type')}", model.get("type") != "BPE"),
        ("byte_fallback (SentencePiece-style, as Llama 2's)", model.get("byte_fallback")),
        ("dropout, subword prefix or suffix", any(model.get(k) for k in
                                                  ("dropout", "continuing_subword_prefix", "end_of_word_suffix"))),
        (f"normalizer {norm}", norm not in (None, "NFC")),
        ("a pre-tokenizer that does not end with ByteLevel", steps[-1].get("type") != "ByteLevel"),
        ("ByteLevel with add_prefix_space", steps[-1].get("add_prefix_space")),
        ("added tokens with lstrip, rstrip or single_word", any(t.get(k) for t in spec.get("added_tokens", [])
                                                             for k in ("lstrip", "rstrip", "single_word"))))
        if bad]
    splits = []
    for p in steps[:-1]:
        if p.get("type") == "Split" and p.get("behavior") == "Isolated" and not p.get("invert"):
            splits.append(regex.compile(p["pattern"].get("Regex") or regex.escape(p["pattern"]["String"])))
        elif p.get("type") == "Digits":
            splits.append(regex.compile(r"\p{N}" if p.get("individual_digits") else r"\p{N}+"))
        else:
            problems.append(f"pre-tokenizer {json.dumps(p)[:60]}")
    if steps[-1].get("use_regex", True):
        splits.append(regex.compile(GPT2_SPLIT))
    if problems:
        raise ValueError(f"tokenizer.json is not byte-level BPE as cudal1 reads it: {'; '.join(problems)}")
    return splits


def _chat_format(spec, config):
    """(prompt, answer) format strings: an instruct model's chat format (CHAT_FORMATS); a base model's
    prompt as it is (BOS first where tokenizer.json's post-processor puts one), answer and end of text."""
    template = config.get("chat_template")
    if isinstance(template, list):  # several named templates
        template = next((t["template"] for t in template if t["name"] == "default"), None)
    if template:
        fmt = next((f for key, f in CHAT_FORMATS.items() if key in template), None)
        if fmt is None:
            raise ValueError("tokenizer_config.json: a chat template that is neither ChatML nor Llama 3's")
        return fmt
    eos = config.get("eos_token")
    post = spec.get("post_processor") or {}
    first = [p["single"][0] for p in post.get("processors", [post]) if p.get("type") == "TemplateProcessing"]
    bos = first[0]["SpecialToken"]["id"] if first and "SpecialToken" in first[0] else ""
    return bos + "{}", "{}" + (eos.get("content") if isinstance(eos, dict) else eos or "")


class HFTokenizer:
    """A tokenizer.json's byte-level BPE behind Tokenizer's interface (encode, decode, encode_prompt,
    encode_answer, end_id, vocab_size), with prompts and answers in the checkpoint's chat format.
    files: tokenizer.json and, where present, tokenizer_config.json and generation_config.json, parsed;
    save_checkpoint writes them back as they are."""

    def __init__(self, files):
        import regex  # \p{L} and \p{N}, which re lacks; only pretrained tokenizers need it
        self.files = files
        spec, model = files["tokenizer.json"], files["tokenizer.json"]["model"]
        self.splits = _pre_tokenizer(spec, regex)  # applied in turn, each cutting the pieces of the last
        self.nfc = (spec.get("normalizer") or {}).get("type") == "NFC"
        self.ignore_merges = model.get("ignore_merges", False)
        vocab, char_byte = model["vocab"], {c: b for b, c in byte_chars().items()}
        missing = [b for b, c in byte_chars().items() if c not in vocab]
        if missing:
            raise ValueError(f"tokenizer.json: the vocab lacks byte(s) {missing[:8]}: not byte-level BPE")
        self.byte_ids = [vocab[c] for _, c in sorted(byte_chars().items())]
        self.vocab = {i: bytes(char_byte[c] for c in s) for s, i in vocab.items() if all(c in char_byte for c in s)}
        self.ids = {b: i for i, b in self.vocab.items()}  # bytes -> id, of the BPE vocab alone
        self.merges = {}  # (left id, right id) -> (rank, merged id): the lowest rank merges first
        for rank, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m  # "a b" (older files) or ["a", "b"]
            self.merges[vocab[a], vocab[b]] = (rank, vocab[a + b])
        added = spec.get("added_tokens", [])
        self.added = {t["content"]: t["id"] for t in added}
        self.special = {t["id"] for t in added if t["special"]}  # markers: never from text, decode to nothing
        self.vocab.update({t["id"]: t["content"].encode() for t in added})
        self.vocab_size = max(self.vocab) + 1
        alternation = lambda words: regex.compile(  # longest first: the leftmost-longest added token wins
            "(" + ("|".join(regex.escape(w) for w in sorted(words, key=len, reverse=True)) or "(?!)") + ")")
        self.text_added = alternation([t["content"] for t in added if not t["special"]])
        self.all_added = alternation(self.added)
        self._cache = {}
        self.prompt_format, self.answer_format = _chat_format(spec, files.get("tokenizer_config.json", {}))
        end = self.answer_format.replace("{}", "")
        if end not in self.added:
            raise ValueError(f"tokenizer.json: the answer's end {end!r} is not one of its added tokens")
        self.end_id = self.added[end]  # the end of turn (or of text): stops sampling
        unknown = [m for m in regex.findall(r"<\|\w+\|>", self.prompt_format) if m not in self.added]
        if unknown:
            raise ValueError(f"tokenizer.json: the chat format's {unknown[0]} is not one of its added tokens")

    def _bpe(self, data):
        if self.ignore_merges and data in self.ids:  # Llama 3: a piece that is a whole token is that token
            return [self.ids[data]]
        ids = [self.byte_ids[b] for b in data]
        while len(ids) > 1:
            pair = min(zip(ids, ids[1:]), key=lambda p: self.merges.get(p, (math.inf,))[0])
            if pair not in self.merges:
                break
            ids = _merge(ids, pair, self.merges[pair][1])
        return ids

    def encode(self, text):
        """ids of `text`; an added token in it is its id, unless it is special (then it is text)."""
        ids = []
        for i, part in enumerate(self.text_added.split(text)):  # odd parts: the added tokens
            if i % 2:
                ids.append(self.added[part])
                continue
            pieces = [unicodedata.normalize("NFC", part) if self.nfc else part]
            for pattern in self.splits:
                pieces = [q for p in pieces for q in _isolate(pattern, p)]
            for p in pieces:
                if p not in self._cache:
                    self._cache[p] = self._bpe(p.encode())
                ids.extend(self._cache[p])
        return ids

    def decode(self, ids):
        """Text of `ids`; special tokens are markers and decode to nothing, as our own specials do."""
        data = b"".join(self.vocab.get(i, b"") for i in ids if i not in self.special)
        return data.decode("utf-8", errors="replace")

    def _wrap(self, fmt, text):
        """ids of the format string `fmt` with `text` in place of its {}: the format's special tokens
        are ids, and `text` is encoded with the format's text beside it, as one stretch."""
        ids = []
        for i, part in enumerate(self.all_added.split(fmt)):
            ids += [self.added[part]] if i % 2 else self.encode(part.replace("{}", text))
        return ids

    def encode_prompt(self, prompt):
        """A prompt as the model sees it: the user's turn, and the opening of the assistant's."""
        return self._wrap(self.prompt_format, prompt)

    def encode_answer(self, answer):
        return self._wrap(self.answer_format, answer)

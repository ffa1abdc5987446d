"""
cudal1: the core of a from-scratch CUDA-L1.

CUDA-L1 (DeepReinforce, 2025) teaches a language model to rewrite PyTorch programs
(KernelBench tasks) into faster CUDA in three stages: SFT on verified fast kernels,
self-training on the model's own verified outputs, and contrastive RL whose prompt shows
earlier variants with their measured speedups. This file holds every piece those stages
share, and no loops of its own: importing it parses no arguments and touches no GPU.

Sections, top to bottom:
    native build   load_kernel(source, lang): nvcc / c++ through pybind11, cached by hash;
                   load_cuda(source): device code only (a cubin), launched by launcher.cu;
                   load_c(source): host C++ functions (g++ -fopenmp), called through ctypes;
                   CudaGraph(fn): a whole forward replayed from one CUDA graph;
                   conv_3xtf32(conv, x, w): a convolution at fp32's accuracy on TF32 tensor cores
    device         autodetect(): the run's device and compute dtype, decided once; autocast(),
                   sampling_model()
    tokenizer      Tokenizer: byte-level BPE trained on our corpus, three special ids (a
                   pretrained model's tokenizer.json: cudal1_hf.HFTokenizer)
    model          Config, Transformer: Llama-style decoder (RMSNorm, RoPE, SwiGLU, SDPA), KVCache;
                   Qwen2's q/k/v biases, Qwen3's q/k norms, Llama 3.1's RoPE scaling
    sampling       generate(): several prompts, many samples each, one batch with a KV cache;
                   answer_logprobs() for the RL loss
    checkpoints    save_checkpoint / load_checkpoint: safetensors weights + config.json, in our
                   layout or Hugging Face's (Llama, Qwen2, Qwen3; config and tokenizer read by
                   cudal1_hf.py), which transformers loads
    held-out split held_out(task): the one definition of what no training input may touch
    prompts        plain_prompt, contrastive_prompt, format_answer, parse_answer
"""

import ast
import contextlib
import copy
import ctypes
import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import math
import os
import random
import re
import subprocess
import sys
import types
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass

import safetensors.torch
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.abspath(__file__))
# The judge's H200 records (evaluate.py JSONL) of the library (all three levels in results/h200.jsonl) and
# of the teacher's solutions: the measured speedups stage 1's contrastive pairs show and stage 3's bank is
# seeded with, on a GPU.
H200_RECORDS = ",".join(f"results/{name}.jsonl" for name in ("h200", "teacher-h200", "teacher-h200-screen"))

# -----------------------------------------------------------------------------
# native build
#
# A solution's CUDA or C++ source is a plain pybind11 module: no torch headers, kernels take
# raw pointers (tensor.data_ptr()), sizes and the stream (torch.cuda.current_stream().cuda_stream).
# That keeps a build at seconds (nvcc on one .cu) where torch's load_inline takes a minute.
# The source must declare its module as PYBIND11_MODULE(MODULE_NAME, m): the Makefile defines
# MODULE_NAME as k<hash>, the name we import it under.

BUILD_DIR = os.path.join(ROOT, "build", "kernels")
_loaded = {}  # hash -> module, so a source is imported once per process


class BuildError(RuntimeError):
    """A native source failed to compile; the message is the compiler's output."""


def load_kernel(source, lang="cuda"):
    """Compile `source` (lang 'cuda' or 'cpp') into a pybind11 module and import it."""
    ext = {"cuda": "cu", "cpp": "cpp"}.get(lang)
    if ext is None:
        raise ValueError(f"load_kernel: lang must be 'cuda' or 'cpp', not {lang!r}")
    if "MODULE_NAME" not in source:
        raise BuildError("native source must declare PYBIND11_MODULE(MODULE_NAME, m)")
    h = hashlib.sha256(f"{lang}\0{source}".encode()).hexdigest()[:16]
    if h in _loaded:
        return _loaded[h]
    so = _build(h, source, ext, "so")
    name = f"k{h}"
    loader = importlib.machinery.ExtensionFileLoader(name, so)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(module)
    _loaded[h] = module
    return module


def _build(h, source, ext, out_ext):
    """build/kernels/<h>.<out_ext>, made by `make` from source written to <h>.<ext>; returns its path."""
    os.makedirs(BUILD_DIR, exist_ok=True)
    src, out = os.path.join(BUILD_DIR, f"{h}.{ext}"), os.path.join(BUILD_DIR, f"{h}.{out_ext}")
    # One lock per hash: several processes asking for the same kernel build it once.
    with open(os.path.join(BUILD_DIR, f"{h}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(out):
            with open(src + ".tmp", "w") as f:
                f.write(source)
            os.replace(src + ".tmp", src)
            target = os.path.relpath(out, ROOT)
            p = subprocess.run(["make", "-s", "-C", ROOT, target, f"PYTHON={sys.executable}"],
                               capture_output=True, text=True)
            if p.returncode != 0 or not os.path.exists(out):
                raise BuildError(f"build of {target} failed:\n{p.stdout}{p.stderr}".strip())
    return out


# ---- the fast path: device code only, launched by one prebuilt launcher
#
# load_cuda(source) compiles nothing but device code (nvcc -cubin: ~0.5 s where a pybind11 module
# takes ~11 s on 2 cores) and launches it through launcher.cu, a module built once per machine.
# Python sees each `extern "C" __global__` kernel as a callable that packs its arguments by the
# kernel's own C signature: k.relu(grid, block, x.data_ptr(), y.data_ptr(), n).

LAUNCHER = os.path.join(ROOT, "launcher.cu")
# C type of a kernel parameter -> how the launcher passes it (every pointer is 'p', 64 bits)
CUDA_TYPES = {
    "int": "i", "signed": "i", "signed int": "i", "int32_t": "i",
    "unsigned": "I", "unsigned int": "I", "uint32_t": "I",
    "long": "q", "long int": "q", "long long": "q", "long long int": "q", "int64_t": "q", "ptrdiff_t": "q",
    "unsigned long": "Q", "unsigned long long": "Q", "uint64_t": "Q", "size_t": "Q",
    "float": "f", "double": "d",
}
_LITERAL = r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\''  # a string or char literal, kept as is


def normalise_cuda(source):
    """The source with comments dropped and whitespace made canonical: the cache key of load_cuda,
    so the same kernels reformatted or recommented build once. Only whitespace that cannot change a
    token goes: runs become one space, spaces beside ( ) [ ] { } ; , go, and each preprocessor
    directive keeps its own line (a newline ends it). Literals are kept byte for byte."""
    text = source.replace("\\\n", "")  # line splices first, as the preprocessor does
    text = re.sub(rf"({_LITERAL})|//[^\n]*|/\*.*?\*/", lambda m: m[1] or " ", text, flags=re.S)

    def squeeze(s, punct):
        s = re.sub(rf"({_LITERAL})|\s+", lambda m: m[1] or " ", s).strip()
        return re.sub(rf"({_LITERAL})| ?([(){{}}\[\];,]) ?", lambda m: m[1] or m[2], s) if punct else s

    out, code = [], []
    for line in text.split("\n") + ["#"]:  # a last empty directive flushes the code before it
        if line.lstrip().startswith("#"):
            out += [squeeze(" ".join(code), True), squeeze(line, False)]
            code = []
        else:
            code.append(line)
    return "\n".join(s for s in out[:-1] if s)


def cuda_kernels(source, host=False):
    """{name: [(parameter as declared, launcher code), ...]} of each `extern "C" __global__` kernel
    (host: each `extern "C" void` function, load_c's). A parameter of any type outside CUDA_TYPES
    (and pointers) is a BuildError naming it."""
    kernels = {}
    bounds = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    head = r'extern\s*"C"\s*void\s+' if host else rf'extern\s*"C"\s*__global__\s+{bounds}void\s+{bounds}'
    for m in re.finditer(rf'{head}(\w+)\s*\(([^)]*)\)', normalise_cuda(source)):
        name, params = m[1], [p.strip() for p in m[2].split(",") if p.strip() not in ("", "void")]
        kernels[name] = []
        for p in params:
            words = re.sub(r"\b(const|volatile|__restrict__|__restrict)\b", " ", p).split()
            if "*" in p or "[" in p:
                code = "p"
            else:  # unnamed, or named by its last word
                code = CUDA_TYPES.get(" ".join(words)) or CUDA_TYPES.get(" ".join(words[:-1]))
            if code is None:
                raise BuildError(f"load_{'c' if host else 'cuda'}: kernel {name}: parameter '{p}' has a type the "
                                 f"launcher cannot pass (use a pointer or one of: {', '.join(CUDA_TYPES)})")
            kernels[name].append((p, code))
    if not kernels:
        raise BuildError('load_c: the source declares no extern "C" void function' if host else
                         'load_cuda: the source declares no extern "C" __global__ kernel')
    return kernels


def load_cuda(source):
    """Build `source` (CUDA device code, no host code) into a cubin and return an object whose
    attributes are its `extern "C" __global__` kernels, each called as
    k.name(grid, block, *args, shared=0, stream=None): grid and block an int or a tuple of up to 3,
    args as the kernel's C signature takes them (pointers as data_ptr() ints), shared the bytes of
    dynamic shared memory, stream None for torch's current stream. A grid with no blocks runs
    nothing. The driver handles are looked up on the first launch and kept."""
    h = hashlib.sha256(f"cubin\0{normalise_cuda(source)}".encode()).hexdigest()[:16]
    if h in _loaded:
        return _loaded[h]
    kernels = cuda_kernels(source)  # before nvcc: a bad signature costs no build
    with open(_build(h, source, "cu", "cubin"), "rb") as f:
        image = f.read()
    stream_fn = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # absent from a CPU-only torch
    _loaded[h] = types.SimpleNamespace(**{
        name: launcher().kernel(image, name, "".join(c for _, c in ps), tuple(p for p, _ in ps), stream_fn)
        for name, ps in kernels.items()})
    return _loaded[h]


# ---- the CPU's fast path: host C++ with no pybind11 (load_c), called through ctypes
#
# The same shape as load_cuda, for the CPU: `extern "C" void` functions compiled with g++ -O3 -fopenmp
# into a shared library (~0.3 s on 2 cores, where a pybind11 module takes ~11 s) and called as
# k.name(*args), each argument packed by the function's own C signature.

C_TYPES = {"p": ctypes.c_void_p, "i": ctypes.c_int, "I": ctypes.c_uint, "q": ctypes.c_longlong,
           "Q": ctypes.c_ulonglong, "f": ctypes.c_float, "d": ctypes.c_double}


def load_c(source):
    """Build `source` (host C++: `extern "C" void` functions taking pointers as data_ptr() ints and
    sizes) into a shared library and return an object whose attributes are those functions, called
    as k.name(*args) in the order their C signatures declare. Runs on the CPU; OpenMP may split a loop
    over the cores (#pragma omp parallel for)."""
    h = hashlib.sha256(f"c\0{normalise_cuda(source)}".encode()).hexdigest()[:16]
    if h in _loaded:
        return _loaded[h]
    functions = cuda_kernels(source, host=True)  # before the compiler: a bad signature costs no build
    lib = ctypes.CDLL(_build(h, source, "cc", "lib.so"))
    out = {}
    for name, ps in functions.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [C_TYPES[code] for _, code in ps], None
        out[name] = _checked(fn, name, len(ps))
    _loaded[h] = types.SimpleNamespace(**out)
    return _loaded[h]


def _checked(fn, name, n):
    """fn, refusing a call with other than its n arguments (ctypes passes extra ones on unchecked)."""
    def call(*args):
        if len(args) != n:
            raise TypeError(f"{name} takes {n} arguments, got {len(args)}")
        fn(*args)
    return call


def launcher():
    """The module launcher.cu builds: once per machine (~11 s with nvcc on 2 cores), imported once per
    process. Call it ahead of time to keep that build out of a measurement."""
    with open(LAUNCHER) as f:
        return load_kernel(f.read(), "cuda")


def capture(fn, rewind=lambda: None):
    """(graph, output) of fn() captured as a CUDA graph, after two warm-up calls on a side stream (lazy
    init, cuDNN's and cuBLAS's plans: CUDA wants them off the capture); rewind() then undoes what the
    warm-ups changed. The capture itself runs nothing on the device."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    rewind()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


class CudaGraph:
    """fn(*inputs) replayed from one CUDA graph per input signature (shapes, dtypes, device), captured
    at its first call: a forward of hundreds of small kernels costs one graph launch instead of one
    launch per op, the win for a whole network at a small batch. Inputs are copied into the graph's
    own buffers and the output is cloned, so every call returns a fresh tensor. What fn reads besides
    its inputs (weights, BatchNorm's running statistics) is read where it lives at each replay, and
    updated there as eagerly; fn must be the same ops for every input of its signature (no branch on
    values). Runs without autograd, the way a custom kernel does; off the GPU fn runs as it is. Two
    warm-up calls before the capture (lazy init, cuDNN's plans) run on a side stream, as CUDA requires;
    with `module` given, its buffers (BatchNorm's running statistics and counts) are put back after
    them, so its state after each call is eager's, and a graph is kept per train/eval mode too."""

    def __init__(self, fn, module=None):
        self.fn, self.module, self.graphs = fn, module, {}

    @torch.no_grad()
    def __call__(self, *xs):
        tensor = [isinstance(x, torch.Tensor) for x in xs]
        if not any(x.is_cuda for x, t in zip(xs, tensor) if t):
            return self.fn(*xs)
        key = tuple((x.shape, x.dtype, x.device) if t else x for x, t in zip(xs, tensor))
        key += (self.module.training,) if self.module is not None else ()
        if key not in self.graphs:
            static = [x.clone() if t else x for x, t in zip(xs, tensor)]
            saved = [(b, b.clone()) for b in self.module.buffers()] if self.module is not None else []
            graph, out = capture(lambda: self.fn(*static), lambda: [b.copy_(v) for b, v in saved])
            self.graphs[key] = graph, static, out
        graph, static, out = self.graphs[key]
        for buf, x, t in zip(static, xs, tensor):
            if t:
                buf.copy_(x)
        graph.replay()
        return out.clone()


def tf32_split(t):
    """(hi, lo): hi is t with the low 13 mantissa bits cleared, exactly a TF32 number, and lo = t - hi,
    exact in fp32 and at most 2^-10 of |t|."""
    hi = (t.contiguous().view(torch.int32) & -8192).view(torch.float32)
    return hi, t - hi


def tf32_stack(x):
    """(N, 3C, ...) holding [hi, hi, lo] of x (N, C, ...) (tf32_split), each part written in place:
    7 passes of x's size where splitting and then concatenating takes 11."""
    C = x.shape[1]
    out = x.new_empty((x.shape[0], 3 * C) + tuple(x.shape[2:]))
    hi = out[:, :C]
    torch.bitwise_and(x.contiguous().view(torch.int32), -8192, out=hi.view(torch.int32))
    out[:, C:2 * C].copy_(hi)
    torch.sub(x, hi, out=out[:, 2 * C:])
    return out


def conv_3xtf32(conv, x, weight, bias=None, **kw):
    """conv(x, weight, bias, **kw), a torch.nn.functional convolution with groups=1, at about fp32's
    accuracy on TF32 tensor cores: with x = xh + xl and weight = wh + wl split by tf32_split, the sum
    xh*wh + xh*wl + xl*wh misses only xl*wl (~2^-20 relative), where one TF32 product is off by ~2^-11.
    The three products run as one convolution over 3x the input channels (tf32_stack). Eager's cuDNN
    convolutions use TF32 and miss a strict fp32 check (by 2-90x on level 2's transposed ones); a
    true fp32 one runs on the CUDA cores, ~8x slower at peak than TF32. Level 3's 26 and 27 use it
    and read 0.75x and 0.57x of eager: against TF32 it costs three times the work. Splitting off the
    cross terms into one bf16 convolution instead (about two TF32 convolutions' work, ~2^-19 error)
    was slower still on the H200: 0.56-0.98x of this on 11 of level 2's 12 transposed-conv heads."""
    if kw.get("groups", 1) != 1:
        raise ValueError("conv_3xtf32: groups=1 only (the three products are stacked as input channels)")
    wh, wl = tf32_split(weight)
    cin = 0 if conv in (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d) else 1  # weight's input-channel dim
    with cudnn_tf32():
        return conv(tf32_stack(x), torch.cat([wh, wl, wh], cin), bias, **kw)


@contextlib.contextmanager
def cudnn_tf32(on=True):
    """cuDNN's TF32 switch set to `on` for a with-block, restored after it."""
    was = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = on
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = was


# -----------------------------------------------------------------------------
# device and precision
#
# Decided once per run, here: scripts call autodetect() and pass its answer around. Weights stay
# in fp32 (the optimizer needs the precision); training matmuls run in the compute dtype under
# autocast, and sampling runs on a copy whose weights are already in it (sampling_model).

def end_run():
    """Leave the process group init_run joined, every rank together: a rank that tore gloo down while
    rank 0 still wrote its report aborted 1 two-rank run in 4."""
    import torch.distributed as dist
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def autodetect(device=None, dtype=None):
    """(device, dtype) of this run: arguments, else $CUDAL1_DEVICE / $CUDAL1_DTYPE, else
    cuda + bfloat16 when a GPU is present and cpu + float32 otherwise."""
    device = device or os.environ.get("CUDAL1_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    dtype = dtype or os.environ.get("CUDAL1_DTYPE") or ("bfloat16" if device.type == "cuda" else "float32")
    if dtype not in ("float32", "bfloat16", "float16"):
        raise ValueError(f"compute dtype must be float32, bfloat16 or float16, not {dtype!r}")
    return device, getattr(torch, dtype)


def init_run(device=None, dtype=None):
    """(rank, world, device, dtype) of this process: under torchrun, join the process group
    (nccl on GPUs, gloo on the CPU) and take this rank's GPU; alone, rank 0 of 1."""
    import torch.distributed as dist
    rank, world = 0, 1
    if "RANK" in os.environ:  # launched by torchrun
        gpu = torch.cuda.is_available() and device != "cpu"
        dist.init_process_group("nccl" if gpu else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        if gpu:
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    device, dtype = autodetect(device, dtype)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return rank, world, device, dtype


def autocast(device, dtype):
    """The context every forward pass runs in: autocast to `dtype`, or nothing for float32."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def sampling_model(model, dtype):
    """The model to sample from: `model` itself for float32, else a frozen copy with its weights
    cast to `dtype` once. Under autocast every Linear casts its fp32 weight again on every decoded
    token; a copy made once per sampling phase pays that once. The RoPE tables stay float32.
    It is a snapshot: make a new one after the weights change."""
    if dtype == torch.float32:
        return model.eval()
    half = copy.deepcopy(model).to(dtype)
    half.cos, half.sin = model.cos, model.sin
    return half.eval().requires_grad_(False)


def device_name(device):
    """The target named in prompts: the GPU's marketing name, or 'CPU'."""
    device = torch.device(device)
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"


def fill_defaults(args, defaults):
    """Every setting of `args` left at -1 or None takes the device's default from `defaults`."""
    for k, v in defaults.items():
        if getattr(args, k) in (-1, None):
            setattr(args, k, v)


def write_markdown(lines, path=""):
    """A bench script's report: `lines` printed, and written to `path` (its folder made) where one is given."""
    text = "\n".join(lines) + "\n"
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    print(text, end="")


def script_defaults(script, names=("FIRST_SLICE", "CPU_TASKS", "GPU_TASKS", "DEFAULTS")):
    """The module-level assignments `names` of a training script (a path under ROOT), evaluated without
    running it (train_sft.py and train_rl.py train on import): what a bench script or a test reads of
    their device defaults."""
    env = {"cudal1": sys.modules[__name__]}  # the defaults may name this module's constants
    for node in ast.parse(open(os.path.join(ROOT, script)).read()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) in names for t in node.targets):
            exec(compile(ast.Module([node], []), script, "exec"), env)
    return env


def adamw(model, lr, weight_decay, device):
    """AdamW with weight decay on matrices only (embeddings included), never on norm gains or biases."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), fused=torch.device(device).type == "cuda")


def read(path):
    with open(path) as f:
        return f.read()

# -----------------------------------------------------------------------------
# tokenizer
#
# Byte-level BPE trained on our own corpus. Ids 0..255 are raw bytes, so any text encodes and
# decodes exactly; each learned merge adds one id; three special ids follow and are never produced
# from text (a task that contains "<|end|>" cannot end an answer). Text is first cut into chunks
# (words, numbers, punctuation runs, whitespace) and merges never cross a chunk boundary.
# Measured when the corpus was the library's first 54 answers: 4655 bytes each on average; 1814 tokens
# with 1024 ids, 1460 with 2048 (4096 gains only 6% more), 2.6-3.2x fewer sampling steps than raw
# bytes. On the curriculum's generated solutions 2048 ids give ~3.7 bytes a token (train_sft.py prints
# its corpus's ratio on every run).

CHUNK = re.compile(r" ?[A-Za-z_]+| ?[0-9]+| ?[^\sA-Za-z_0-9]+|\s+(?!\S)|\s+")
SPECIALS = ("<|prompt|>", "<|answer|>", "<|end|>")


def _merge(ids, pair, new):
    """ids with every non-overlapping occurrence of `pair` (left to right) replaced by `new`."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class Tokenizer:
    """Byte-level BPE; `merges` is the list of (left id, right id) pairs in the order learned."""

    def __init__(self, merges=()):
        self.merges = [tuple(m) for m in merges]
        self.rank = {pair: 256 + i for i, pair in enumerate(self.merges)}  # pair -> its new id
        self.vocab = [bytes([b]) for b in range(256)]
        for a, b in self.merges:
            self.vocab.append(self.vocab[a] + self.vocab[b])
        n = len(self.vocab)
        self.prompt_id, self.answer_id, self.end_id = n, n + 1, n + 2
        self.vocab_size = n + len(SPECIALS)
        self._cache = {}  # chunk -> ids; code repeats its words a lot

    @classmethod
    def train(cls, text, vocab_size):
        """Learn vocab_size - 259 merges from `text` (vocab_size <= 259 gives plain bytes)."""
        counts = Counter(CHUNK.findall(text))
        words = [list(w.encode()) for w in counts]
        freq = list(counts.values())
        pairs, where = Counter(), defaultdict(set)  # pair -> count; pair -> words holding it
        for i, w in enumerate(words):
            for p in zip(w, w[1:]):
                pairs[p] += freq[i]
                where[p].add(i)
        merges = []
        while len(merges) < vocab_size - 256 - len(SPECIALS) and pairs:
            best = max(pairs, key=pairs.get)
            if pairs[best] < 2:
                break  # merging a pair seen once compresses nothing
            new = 256 + len(merges)
            merges.append(best)
            # Only the words holding `best` change: take their pairs out, merge, put them back.
            for i in where.pop(best):
                w = words[i]
                for p in zip(w, w[1:]):
                    pairs[p] -= freq[i]
                w[:] = _merge(w, best, new)
                for p in zip(w, w[1:]):
                    pairs[p] += freq[i]
                    where[p].add(i)
            del pairs[best]
        return cls(merges)

    def _encode_chunk(self, chunk):
        ids = list(chunk.encode())
        while len(ids) > 1:
            # apply the earliest-learned merge present, as training did
            pair = min(zip(ids, ids[1:]), key=lambda p: self.rank.get(p, math.inf))
            if pair not in self.rank:
                break
            ids = _merge(ids, pair, self.rank[pair])
        return ids

    def encode(self, text):
        ids = []
        for chunk in CHUNK.findall(text):
            if chunk not in self._cache:
                self._cache[chunk] = self._encode_chunk(chunk)
            ids.extend(self._cache[chunk])
        return ids

    def decode(self, ids):
        """Text of `ids`; special ids are markers, not text, and decode to nothing."""
        data = b"".join(self.vocab[i] for i in ids if i < len(self.vocab))
        return data.decode("utf-8", errors="replace")  # a sample may stop mid-character

    def encode_prompt(self, prompt):
        """A prompt as the model sees it: <|prompt|> text <|answer|>; the answer follows."""
        return [self.prompt_id] + self.encode(prompt) + [self.answer_id]

    def encode_answer(self, answer):
        return self.encode(answer) + [self.end_id]

    def state(self):
        return {"merges": [list(m) for m in self.merges]}


# -----------------------------------------------------------------------------
# model
#
# A Llama-style decoder: pre-norm blocks of RMSNorm -> causal self-attention with rotary
# positions (RoPE) -> RMSNorm -> SwiGLU MLP. Parameter names follow the common Llama layout
# (model.layers.N.self_attn.q_proj.weight, ...), and RoPE rotates halves (not interleaved pairs)
# as that layout's checkpoints expect, so a compatible checkpoint loads with no renaming.

@dataclass
class Config:
    vocab_size: int = 1024
    block_size: int = 2048  # longest sequence, prompt + answer, in tokens
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int = 4  # < n_head: grouped-query attention
    n_embd: int = 256
    n_hidden: int = 704  # SwiGLU width, ~8/3 n_embd as in Llama
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    # what pretrained checkpoints add (load_checkpoint reads them from a Hugging Face config.json);
    # the defaults are our own model's
    head_dim: int = 0  # 0: n_embd // n_head (Qwen3 sets its own)
    qkv_bias: bool = False  # Qwen2: biases on q, k and v
    qk_norm: bool = False  # Qwen3: RMSNorm over each head's q and k before RoPE
    tie_embeddings: bool = False  # lm_head reuses embed_tokens' weight
    rope_scaling: dict = None  # Llama 3.1's: cudal1_hf.LLAMA3_ROPE's four numbers
    architecture: str = ""  # "": our own checkpoint layout; else the Hugging Face class, saved as that

    @property
    def head_size(self):
        return self.head_dim or self.n_embd // self.n_head

    @classmethod
    def scratch(cls, vocab_size, block_size, n_layer, n_head, n_embd):
        """Our from-scratch policy's shape: every head its own keys and values, and a SwiGLU width of
        ~8/3 n_embd rounded up to a multiple of 64 (as Llama)."""
        return cls(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer, n_head=n_head, n_kv_head=n_head,
                   n_embd=n_embd, n_hidden=64 * math.ceil(8 * n_embd / 3 / 64))


def rope_tables(cfg):
    """cos and sin of every (position, channel) angle: two (block_size, head_dim) tables."""
    hd = cfg.head_size
    inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd)
    if cfg.rope_scaling:
        # Llama 3.1: wavelengths longer than the training context / low_freq_factor are stretched by
        # `factor`, those shorter than it / high_freq_factor kept, the band between blended linearly
        s = cfg.rope_scaling
        old, lo, hi = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
        wavelen = 2 * math.pi / inv_freq
        smooth = ((old / wavelen - lo) / (hi - lo)).clamp(0, 1)  # 0: stretch, 1: keep
        inv_freq = (1 - smooth) * inv_freq / s["factor"] + smooth * inv_freq
    angles = torch.outer(torch.arange(cfg.block_size, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)  # channel i and i + hd/2 share an angle
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """Rotate each (x[i], x[i + hd/2]) channel pair of x (B, H, T, hd) by its position's angle."""
    x1, x2 = x.chunk(2, dim=-1)
    return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).type_as(x)  # fp32 tables, x's dtype out


class KVCache:
    """Keys and values of every position seen so far, for each layer: (B, n_kv_head, T, head_dim).
    Filled by the model as it runs; `pos` is how many slots are filled. Rows may hold sequences
    of different lengths (join): each is right-aligned to end at slot `pos`, so all rows continue
    at the same slot, and `start` (B,) is the slot where each row's own sequence begins (None: 0
    for every row). Attention skips the slots before it; a row's position is its slot - start."""

    def __init__(self, n_layer, length):
        self.n_layer, self.length, self.pos, self.start = n_layer, length, 0, None
        self.k = self.v = None  # allocated on first use, in the dtype of the model's k and v
        self.pos_t = None  # static mode (make_static): the next slot as a device tensor

    def make_static(self):
        """From here on one token per row per call, written at slot `pos_t` (a tensor the forward
        advances itself), attending over all `length` slots under a mask: every shape stays the
        same from step to step, so a decode step can be captured as a CUDA graph and replayed."""
        self.pos_t = torch.tensor([self.pos], device=self.k.device)
        if self.start is None:
            self.start = torch.zeros(self.k.size(1), dtype=torch.long, device=self.k.device)

    def claim(self, t):
        """Refuse, before anything is written, t more slots than the cache has left. TRAP: on a GPU an
        index_copy_ past the end is no exception but a device-side assert that kills the process."""
        if self.pos + t > self.length:
            raise ValueError(f"KV cache of {self.length} slots has no room for {t} more at slot {self.pos}")

    def update(self, i, k, v):
        self.claim(k.size(2))
        if self.pos_t is not None:
            self.k[i].index_copy_(2, self.pos_t, k)
            self.v[i].index_copy_(2, self.pos_t, v)
            return self.k[i], self.v[i]
        if self.k is None:
            self.k = k.new_zeros((self.n_layer, k.size(0), k.size(1), self.length, k.size(3)))
            self.v = torch.zeros_like(self.k)
        t = k.size(2)
        self.k[i, :, :, self.pos:self.pos + t] = k
        self.v[i, :, :, self.pos:self.pos + t] = v
        return self.k[i, :, :, :self.pos + t], self.v[i, :, :, :self.pos + t]

    @classmethod
    def join(cls, caches, length, repeat=1):
        """One cache of `length` slots from one-row caches (one prefilled prompt each), each row
        repeated `repeat` times: prompts are prefilled alone, then all their samples decode together."""
        k = caches[0].k  # (n_layer, 1, Hkv, P, hd)
        out = cls(k.size(0), length)
        out.pos = max(c.pos for c in caches)
        out.k = k.new_zeros(k.size(0), len(caches) * repeat, k.size(2), length, k.size(4))
        out.v = torch.zeros_like(out.k)
        for i, c in enumerate(caches):  # right-aligned: row block i holds slots [pos - P_i, pos)
            rows = slice(i * repeat, (i + 1) * repeat)
            out.k[:, rows, :, out.pos - c.pos:out.pos] = c.k[:, :, :, :c.pos]
            out.v[:, rows, :, out.pos - c.pos:out.pos] = c.v[:, :, :, :c.pos]
        if any(c.pos < out.pos for c in caches):  # equal lengths need neither masks nor offsets
            out.start = torch.tensor([out.pos - c.pos for c in caches], device=k.device).repeat_interleave(repeat)
        return out


class Attention(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        assert (cfg.head_dim or cfg.n_embd % cfg.n_head == 0) and cfg.n_head % cfg.n_kv_head == 0
        self.index = index
        self.n_head, self.n_kv_head, self.hd = cfg.n_head, cfg.n_kv_head, cfg.head_size
        self.q_proj = nn.Linear(cfg.n_embd, cfg.n_head * self.hd, bias=cfg.qkv_bias)
        self.k_proj = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.hd, bias=cfg.qkv_bias)
        self.v_proj = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.hd, bias=cfg.qkv_bias)
        self.o_proj = nn.Linear(cfg.n_head * self.hd, cfg.n_embd, bias=False)
        if cfg.qk_norm:
            self.q_norm = nn.RMSNorm(self.hd, eps=cfg.norm_eps)
            self.k_norm = nn.RMSNorm(self.hd, eps=cfg.norm_eps)

    def forward(self, x, cos, sin, cache=None, mask=None):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.hd)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.hd)
        if hasattr(self, "q_norm"):  # Qwen3
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, hd), (B, Hkv, T, hd)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.hd).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.index, k, v)  # now every position so far: (B, Hkv, Tk, hd)
        # mask None: plain causal for a chunk from position 0, everything cached for one new token
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None and T > 1,
                                           enable_gqa=self.n_kv_head != self.n_head)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.n_embd, cfg.n_hidden, bias=False)
        self.up_proj = nn.Linear(cfg.n_embd, cfg.n_hidden, bias=False)
        self.down_proj = nn.Linear(cfg.n_hidden, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # SwiGLU


class Block(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        self.input_layernorm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.self_attn = Attention(cfg, index)
        self.post_attention_layernorm = nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, cache=None, mask=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Transformer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.config = cfg
        self.model = nn.ModuleDict(dict(
            embed_tokens=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            layers=nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer)),
            norm=nn.RMSNorm(cfg.n_embd, eps=cfg.norm_eps),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight  # one tensor; state_dict names it twice
        cos, sin = rope_tables(cfg)
        self.register_buffer("cos", cos, persistent=False)  # recomputed, never saved
        self.register_buffer("sin", sin, persistent=False)
        # Every matrix starts ~N(0, 0.02); the two that write into the residual stream are scaled by
        # 1/sqrt(2 n_layer) so the sum of all 2 n_layer branches starts ~unit-sized (GPT-2). Norms start at 1.
        for name, p in self.named_parameters():
            if p.dim() == 2:
                residual = name.endswith(("o_proj.weight", "down_proj.weight"))
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer) if residual else 0.02)

    def num_params(self, embedding=True):
        n = sum(p.numel() for p in self.parameters())
        return n if embedding else n - self.model.embed_tokens.weight.numel()

    def train_flops(self, lengths):
        """Model FLOPs of a training step on sequences of these lengths, forward + backward (PaLM's
        count): 6 per matmul weight per token, plus attention's 12 * n_layer * (n_head * head_size) * t
        per token of a t-token sequence. The embedding table is a lookup, not a matmul -- unless
        lm_head shares it (tie_embeddings, as Qwen2.5-0.5B/1.5B do), and then it counts: leaving it
        out undercounts a 0.5B Qwen's work by ~27%."""
        cfg = self.config
        matmul = self.num_params(embedding=False) + (cfg.vocab_size * cfg.n_embd if cfg.tie_embeddings else 0)
        return sum(6 * matmul * t + 12 * cfg.n_layer * cfg.n_head * cfg.head_size * t * t for t in lengths)

    def forward(self, idx, targets=None, cache=None):
        """idx (B, T) token ids -> logits (B, T, vocab); with targets (B, T), the mean
        cross-entropy over targets that are not -1 instead. With a cache, idx continues it."""
        T = idx.size(1)
        pos, start = (cache.pos, cache.start) if cache is not None else (0, None)
        mask = None  # (.., T, keys) True where a query may attend; None: SDPA's own causal rule
        if cache is not None and cache.pos_t is not None:  # one token per row at slot pos_t, over
            slots = torch.arange(cache.length, device=idx.device)  # every slot: shapes never change
            at = (cache.pos_t - start).clamp(max=self.config.block_size - 1)  # (B,): see the TRAP below
            cos, sin = self.cos[at][:, None, None], self.sin[at][:, None, None]  # (B, 1, 1, hd)
            mask = ((slots <= cache.pos_t) & (slots >= start[:, None]))[:, None, None, :]  # (B, 1, 1, slots)
        elif start is None:
            if pos + T > self.config.block_size:
                raise ValueError(f"sequence of {pos + T} tokens exceeds block_size {self.config.block_size}")
            cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]  # (T, hd)
            if T > 1 and pos > 0:  # a chunk after a cached prefix: causal, shifted
                mask = torch.ones(T, pos + T, dtype=torch.bool, device=idx.device).tril(pos)
        else:  # rows right-aligned in the cache (KVCache.join): own positions, padding never seen
            at = pos + torch.arange(T, device=idx.device) - start[:, None]  # (B, T)
            # TRAP: a row past its own length cap still runs (generate cuts its tokens off later);
            # clamping keeps its position inside the tables instead of raising for the whole batch
            at = at.clamp(max=self.config.block_size - 1)
            cos, sin = self.cos[at][:, None], self.sin[at][:, None]  # (B, 1, T, hd)
            causal = torch.ones(T, pos + T, dtype=torch.bool, device=idx.device).tril(pos)
            keep = torch.arange(pos + T, device=idx.device) >= start[:, None]  # (B, pos + T)
            mask = causal & keep[:, None, None, :]  # (B, 1, T, pos + T)
        x = self.model.embed_tokens(idx)  # (B, T, C)
        for layer in self.model.layers:
            x = layer(x, cos, sin, cache, mask)
        if cache is not None:
            cache.pos += T
            if cache.pos_t is not None:
                cache.pos_t.add_(1)  # on the device: a replayed CUDA graph advances it too
        logits = self.lm_head(self.model.norm(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=-1)

# -----------------------------------------------------------------------------
# sampling and log-probs

def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """The distribution sampling draws from, as logits (B, vocab): scaled by 1/temperature, -inf
    outside the top_k and outside the nucleus of mass top_p. Sampling and the RL log-probs both use
    it, so the gradient is taken for the distribution the answers were drawn from."""
    logits = logits.float() / temperature
    if 0 < top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p < 1.0:
        # nucleus: keep the most likely tokens until their mass reaches top_p (at least one)
        sorted_logits, order = logits.sort(-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = probs.cumsum(-1) - probs > top_p
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, -math.inf))
    return logits


def sample_next(logits, temperature=1.0, top_k=0, top_p=1.0, generator=None):
    """One token id per row of logits (B, vocab); temperature 0 is greedy."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = filter_logits(logits, temperature, top_k, top_p).softmax(-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def cuda_graph(step, cache):
    """`step` (token (N,) -> logits (N, vocab), over a cache made static) captured once as a CUDA
    graph and replayed: one launch per token instead of a few thousand dispatched ops (a 12-layer
    forward is ~2800 aten calls)."""
    tok = torch.zeros(cache.k.size(1), dtype=torch.long, device=cache.k.device)  # the graph's input
    pos, pos_t = cache.pos, cache.pos_t.clone()

    def rewind():  # the warm-ups wrote slots pos and pos + 1 (2 must be free, claim checks): back to pos
        cache.pos = pos
        cache.pos_t.copy_(pos_t)
    graph, logits = capture(lambda: step(tok), rewind)  # logits: its output buffer, refilled by every replay
    cache.pos = pos  # the capture ran nothing on the device: pos_t is still at pos

    def replay(token):
        cache.claim(1)  # a replay runs no Python forward, so update() cannot check it
        tok.copy_(token)
        graph.replay()
        cache.pos += 1  # as the forward would: pos follows pos_t
        return logits
    return replay


@torch.no_grad()
def generate(model, prompts, num_samples=1, max_new_tokens=512, temperature=1.0, top_k=0,
             top_p=1.0, generator=None, end_id=None, graph=False):
    """Sample num_samples answers to each of several prompts (lists of ids), all in one batch with
    a KV cache. Returns one list of answers (id lists) per prompt; given a single prompt (a list of
    ints), just its list. An answer ends with end_id when it stopped by itself, and is cut at
    max_new_tokens (or what the block leaves after its prompt) otherwise.

    Each prompt is prefilled alone (no padding to compute), then the caches are joined right-aligned
    (KVCache.join) and every row decodes together: one forward per token for the whole batch,
    which runs as long as its longest answer. Sample from sampling_model(model, dtype).
    graph=True decodes with fixed shapes (KVCache.make_static), replayed as a CUDA graph on a GPU."""
    single = isinstance(prompts[0], int)
    prompts = [prompts] if single else prompts
    device, block = model.lm_head.weight.device, model.config.block_size
    caps = [min(max_new_tokens, block - len(p)) for p in prompts]  # each prompt's answer budget
    if min(caps) <= 0:
        raise ValueError(f"a prompt of {max(map(len, prompts))} tokens leaves no room in block_size {block}")
    caches, logits = [], []
    for p in prompts:
        caches.append(KVCache(model.config.n_layer, len(p)))
        logits.append(model(torch.tensor([p], device=device), cache=caches[-1])[:, -1])  # (1, vocab)
    cache = KVCache.join(caches, max(map(len, prompts)) + max(caps), repeat=num_samples)
    logits = torch.cat(logits).repeat_interleave(num_samples, 0)  # (N, vocab): the samples diverge from here
    step = lambda token: model(token[:, None], cache=cache)[:, -1]  # (N,) -> (N, vocab)
    if graph and max(caps) > 1:  # one token takes no step: nothing to replay, so nothing to capture
        cache.make_static()
        if device.type == "cuda":
            step = cuda_graph(step, cache)
    cap = torch.tensor(caps, device=device).repeat_interleave(num_samples)  # (N,)
    done = torch.zeros(len(cap), dtype=torch.bool, device=device)
    out = []
    for t in range(max(caps)):
        token = sample_next(logits, temperature, top_k, top_p, generator)  # (N,)
        if end_id is not None:
            token = token.masked_fill(done, end_id)  # finished rows keep emitting the end
            done |= token == end_id
        done |= cap == t + 1  # a row at its cap is finished too; what it emits later is cut off below
        out.append(token)
        # done.all() waits for the device, so it is asked only every 16 tokens
        if t == max(caps) - 1 or ((t + 1) % 16 == 0 and done.all()):
            break
        logits = step(token)
    rows = [row[:c] for row, c in zip(torch.stack(out, 1).tolist(), cap.tolist())]  # (N, <= cap)
    rows = [row[:row.index(end_id) + 1] if end_id in row else row for row in rows]
    groups = [rows[i * num_samples:(i + 1) * num_samples] for i in range(len(prompts))]
    return groups[0] if single else groups


def answer_logprobs(model, prompt, answers, temperature=1.0, top_k=0, top_p=1.0, unfiltered=False):
    """Log-probability of every answer token given the prompt, for G answers to one prompt, under
    the distribution they were sampled from (filter_logits with the sampler's settings; temperature
    0, greedy, has none: scored at 1): returns (logp, mask), both (G, L) with L the longest answer,
    mask 1.0 on real tokens (logp is 0 elsewhere). Differentiable: the policy-gradient loss is built
    on it. unfiltered=True: (logp, mask, the log-probs at the temperature before top-k/top-p) from the
    same forward, what kl_penalty compares (under a top-p cut a token the policy is sure of has log-prob
    0 whatever the weights, so no pull back could reach it)."""
    device = model.lm_head.weight.device
    G, P, L = len(answers), len(prompt), max(len(a) for a in answers)
    x = torch.zeros(G, P + L, dtype=torch.long)
    targets = torch.full((G, L), -1, dtype=torch.long)
    for i, a in enumerate(answers):
        x[i, :P] = torch.tensor(prompt)
        x[i, P:P + len(a)] = torch.tensor(a, dtype=torch.long)
        targets[i, :len(a)] = torch.tensor(a, dtype=torch.long)
    x, targets = x.to(device), targets.to(device)
    logits = model(x[:, :-1])[:, P - 1:].float().flatten(0, 1)  # row P-1+j predicts token j: (G*L, vocab)
    t = targets.flatten().clamp(min=0)[:, None]  # (G*L, 1)
    temperature = temperature or 1.0
    kept = filter_logits(logits, temperature, top_k, top_p)
    scaled = logits / temperature  # (G*L, vocab): the tempered logits, before any cut
    # a sampled token is in the kept set, up to rounding between the bf16 sampler and this pass: keep it
    kept = kept.scatter(-1, t, scaled.gather(-1, t))
    logp = kept.log_softmax(-1).gather(-1, t).view(G, L)
    mask = (targets != -1).float()
    if unfiltered:
        return logp * mask, mask, scaled.log_softmax(-1).gather(-1, t).view(G, L) * mask
    return logp * mask, mask

# -----------------------------------------------------------------------------
# checkpoints
#
# A checkpoint is a folder, in one of two layouts; load_checkpoint reads both, save_checkpoint writes
# the one the model came from.
#   ours (a policy trained from scratch): model.safetensors (names as in the model) and config.json
#     (model config, tokenizer merges, and whatever the run adds: settings, step, ...)
#   Hugging Face's (a pretrained policy): config.json naming LlamaForCausalLM, Qwen2ForCausalLM or
#     Qwen3ForCausalLM, model.safetensors (or the shards model.safetensors.index.json lists),
#     tokenizer.json (+ tokenizer_config.json, generation_config.json); our run's settings go to
#     cudal1.json. A pretrained coder on disk loads as it is, and transformers loads what we trained.
# To resume training, optimizer.safetensors holds the optimizer's tensors (its hyperparameters go
# with the settings). Our module names are the Llama layout's tensor names, so loading either layout
# is a strict name-for-name copy: every tensor used, none missing.

FORMAT = "cudal1-v1"
def _write(path, data):
    """Write a dict as JSON, or tensors as safetensors, to `path` at once: a kill leaves the old file."""
    if path.endswith(".json"):
        with open(path + ".tmp", "w") as f:
            json.dump(data, f, indent=1, ensure_ascii=False)
    else:  # transformers reads only safetensors files marked as torch's
        safetensors.torch.save_file(data, path + ".tmp", metadata={"format": "pt"})
    os.replace(path + ".tmp", path)


def save_checkpoint(path, model, tok, meta, optimizer=None):
    """Write model, tokenizer, meta (the run's settings, step, ...) and the optimizer's state to the
    folder `path`, in the layout the model came from (Config.architecture: Hugging Face's)."""
    os.makedirs(path, exist_ok=True)
    cfg = model.config
    weights = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()
               if not (cfg.tie_embeddings and k == "lm_head.weight")}  # a tied head is the embedding: saved once
    _write(os.path.join(path, "model.safetensors"), weights)
    info = dict(meta)
    if optimizer is not None:
        state = optimizer.state_dict()  # {"state": {param index: {name: tensor}}, "param_groups": [...]}
        tensors = {f"{i}.{k}": v.contiguous().cpu() for i, s in state["state"].items() for k, v in s.items()}
        _write(os.path.join(path, "optimizer.safetensors"), tensors)
        info["optimizer_groups"] = state["param_groups"]
    if cfg.architecture:
        for name, data in tok.files.items():
            _write(os.path.join(path, name), data)
        _write(os.path.join(path, "cudal1.json"), info)
        import cudal1_hf  # Hugging Face's layout: read and written there (it imports this file)
        info = cudal1_hf.hf_config(cfg)
    else:
        info = {"format": FORMAT, "config": asdict(cfg), "tokenizer": tok.state(), **info}
    _write(os.path.join(path, "config.json"), info)  # last: a folder with config.json is a whole checkpoint


def load_checkpoint(path, device="cpu"):
    """(model, tokenizer, meta) from a folder in either layout; strict: every tensor name and shape
    must match the config. meta holds what the run saved (settings, step, ...; {} for a checkpoint
    cudal1 did not write), and meta["optimizer"] the optimizer's state_dict when one was saved."""
    if not os.path.exists(os.path.join(path, "config.json")):
        raise FileNotFoundError(f"no checkpoint at {path}: expected config.json there (train one with "
                                "train_sft.py, or give a Hugging Face model's folder)")
    with open(os.path.join(path, "config.json")) as f:
        info = json.load(f)
    if "architectures" in info:  # Hugging Face's layout
        import cudal1_hf as hf  # Hugging Face's layout: read and written there (it imports this file)
        cfg = hf.config_from_hf(info)
        files = {}
        for name in hf.HF_TOKENIZER_FILES:
            if os.path.exists(os.path.join(path, name)):
                with open(os.path.join(path, name)) as f:
                    files[name] = json.load(f)
        if "tokenizer.json" not in files:
            raise FileNotFoundError(f"{path}: no tokenizer.json (cudal1 reads byte-level BPE tokenizers only)")
        tok = hf.HFTokenizer(files)
        info = {}
        if os.path.exists(os.path.join(path, "cudal1.json")):
            with open(os.path.join(path, "cudal1.json")) as f:
                info = json.load(f)
    elif info.get("format") != FORMAT:
        raise ValueError(f"{path}: neither a {FORMAT} checkpoint nor a Hugging Face one "
                         f"(format {info.get('format')!r})")
    else:
        try:
            cfg = Config(**info.pop("config"))
        except TypeError as e:
            raise ValueError(f"{path}: config does not fit cudal1.Config: {e}") from None
        tok = Tokenizer(info.pop("tokenizer")["merges"])
        info.pop("format")
    # a pretrained model may have more embedding rows than its tokenizer ids (Qwen2.5: 151936 for 151665)
    if tok.vocab_size > cfg.vocab_size or (not cfg.architecture and tok.vocab_size != cfg.vocab_size):
        raise ValueError(f"{path}: tokenizer has {tok.vocab_size} ids but the model {cfg.vocab_size}")
    model = Transformer(cfg)
    _load_weights(model, _read_weights(path), path)
    model.to(device)
    groups = info.pop("optimizer_groups", None)
    opt_file = os.path.join(path, "optimizer.safetensors")
    if groups is not None and os.path.exists(opt_file):
        state = {}
        for name, t in safetensors.torch.load_file(opt_file).items():
            i, k = name.split(".", 1)
            state.setdefault(int(i), {})[k] = t
        info["optimizer"] = {"state": state, "param_groups": groups}
    return model, tok, info


def _read_weights(path):
    """{name: tensor} of model.safetensors, or of every shard model.safetensors.index.json names."""
    single, index = os.path.join(path, "model.safetensors"), os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(single):
        return safetensors.torch.load_file(single)
    if not os.path.exists(index):
        raise FileNotFoundError(f"{path}: no model.safetensors nor model.safetensors.index.json")
    with open(index) as f:
        shards = sorted(set(json.load(f)["weight_map"].values()))
    state = {}
    for shard in shards:
        state.update(safetensors.torch.load_file(os.path.join(path, shard)))
    return state


def _load_weights(model, state, path):
    """Copy `state` into `model` (any dtype: bf16 checkpoints become the model's fp32); strict, and a
    mismatch is one line naming the first tensors that are missing, unexpected or of another shape."""
    tied = model.config.tie_embeddings
    want = {k: tuple(v.shape) for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    have = {k: tuple(v.shape) for k, v in state.items()}
    bad = sorted(k for k in want.keys() | have.keys() if want.get(k) != have.get(k))
    if bad:
        why = lambda k: (f"{k} missing" if k not in have else f"{k} unexpected" if k not in want else
                         f"{k} is {have[k]}, the config says {want[k]}")
        raise ValueError(f"{path}: weights do not match the config at {len(bad)} tensor(s): "
                         + ", ".join(map(why, bad[:3])))
    if tied:
        state = {**state, "lm_head.weight": state["model.embed_tokens.weight"]}
    model.load_state_dict(state, strict=True)

# -----------------------------------------------------------------------------
# the held-out split
#
# One split, defined here and nowhere else, that no training input touches: not as a task, a
# solution, an exemplar, a bank seed or tokenizer text. Every learning claim is measured on it.
# Training scripts ask held_out() wherever they gather tasks or solutions; tests/test_split.py
# fails if any training input holds a held-out task.

# 20 KernelBench level-2 tasks: one id from each block of five (1-5, 6-10, ..., 96-100), drawn by
# [5 * b + 1 + random.Random(14).randrange(5) for b in range(20)] (14: the issue that asked for the
# split), so they spread over the level and nobody picked them. Each has a solution in kernels/level2,
# like every level-2 task: training leaves those out, and the held-out line judges the policy's own.
HELD_OUT_LEVEL2 = (1, 10, 15, 17, 23, 28, 33, 36, 44, 48, 54, 59, 64, 66, 73, 77, 83, 88, 93, 98)

# Generated tasks (kernelbench/generate.py) are held out by their combination of moves: a task
# whose set of moves is one of these. Each move of each set also occurs in training tasks, in
# other company; the combination never does, so a held-out task asks for a composition.
# Six sets, each two moves or more besides fuse_epilogue, ~5% of generated tasks in all (~1 in 18
# seeds, either size profile); tests/test_split.py checks each move of them occurs in training.
HELD_OUT_MOVES = frozenset(map(frozenset, [
    ("fold_scale_into_weights", "fold_bias", "merge_affine", "fuse_epilogue"),  # Gemm, *, + bias, ...
    ("fold_scale_into_weights", "reduce_first", "fuse_epilogue"),
    ("fold_reduction", "drop_noop", "fuse_epilogue"),
    ("merge_affine", "reduce_first", "fuse_epilogue"),
    ("reduce_first", "drop_noop", "fuse_epilogue"),
    ("constant_output", "drop_noop", "fuse_epilogue"),
]))

# Generated tasks that stage 3 may train on (train_rl.py --rl-tasks fresh) start at this seed: stage 1's
# --generated N draws seeds up to ~1.07 N, so no answer to them was learnt by heart.
FRESH_SEED = 10 ** 6


def held_out(task):
    """True when `task` is in the held-out split. `task`: a generated task's metadata (a dict with
    "moves"), or the path or key of a task ('level2/83_X.py', 'kernelbench/level2/83_X.py') or of a
    solution ('kernels/level2/83_X.v2.py'). A generated task file is judged by the NAME.json the
    generator writes beside it; a file in no levelN folder and without one cannot be placed, and
    raises rather than slip into training. A teacher solution (DIR/solutions/levelG/7_Y.fold_bias.py)
    is judged by its task's metadata (DIR/tasks/levelG/7_Y.json)."""
    if isinstance(task, dict):
        return frozenset(task["moves"]) in HELD_OUT_MOVES
    path = re.sub(r"\.\w+\.py$", ".py", str(task))  # a solution names its task: 83_X.v2.py, 7_Y.fold_bias.py
    teacher = re.sub(r"([/\\])solutions([/\\]level\w+[/\\][^/\\]+)\.py$", r"\1tasks\2.json", path)
    for meta in (path[:-3] + ".json", teacher):
        if meta.endswith(".json") and os.path.exists(meta):
            with open(meta) as f:
                return held_out(json.load(f))
    level, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
    if not re.fullmatch(r"level\d+", level):
        raise ValueError(f"held_out: {task} is in no levelN folder and has no generator metadata beside it")
    m = re.match(r"(\d+)_", name)
    return level == "level2" and m is not None and int(m.group(1)) in HELD_OUT_LEVEL2


def solution_name(path):
    """The name a solution's measured speedup is filed under: its path from the repository root, as
    the judge names it ('kernels/level1/19_ReLU.v2.py'), or for a generated task's solution 'levelG/'
    and its file name, which the task's seed fixes wherever the teacher wrote it."""
    if os.path.basename(os.path.dirname(path)) == "levelG":
        return "levelG/" + os.path.basename(path)
    return os.path.relpath(os.path.abspath(path), ROOT)


def held_key(task):
    """levelG/NAME.py or level2/NAME.py: a held-out task by its folder and name, whichever run's folder
    holds it (each run writes the generated tasks under its own --out)."""
    return "/".join(task.split(os.sep)[-2:])


def held_out_tasks(folder, n, size, tasks_dir=None, write=True, trained=()):
    """{group: task paths} to measure on: 'generated', the first n tasks of the held-out split at
    `size` (kernelbench/generate.py; the same tasks in every run), written to folder/levelG when
    `write` (one writer under torchrun); with tasks_dir, 'level2': the 20 held-out KernelBench
    level-2 tasks under it. Raises ValueError when one is not held out or is the code of one of
    `trained` (the sources of the tasks a run trains on)."""
    from kernelbench import generate as gen
    seen = {same_code(source) for source in trained}
    groups, checks = {"generated": []}, []
    for name, source, meta in gen.tasks(0, n, size, split="held_out"):
        if write:
            gen.write(os.path.join(folder, "levelG"), name, source, meta)
        groups["generated"].append(os.path.join(folder, "levelG", name + ".py"))
        checks.append((groups["generated"][-1], meta, source))
    if tasks_dir:
        files = {int(f.split("_")[0]): f for f in os.listdir(os.path.join(tasks_dir, "level2")) if re.match(r"\d+_.*\.py$", f)}
        groups["level2"] = [os.path.join(tasks_dir, "level2", files[i]) for i in HELD_OUT_LEVEL2]
        checks += [(path, path, read(path)) for path in groups["level2"]]
    for path, what, source in checks:
        if not held_out(what) or same_code(source) in seen:
            raise ValueError(f"held-out evaluation: {path} is not held out, or is the code of a task trained on")
    return groups


def split_score(records, tasks):
    """How a policy did on `tasks` from the judge's `records` of its answers (None for an answer that
    did not parse): the share of answers correct, the tasks with a correct one, and the geomean over
    `tasks` of each one's best correct speedup, a task without one counting 1.0x."""
    best = {}
    for task, r in records:
        if r and r.get("correct") and r.get("speedup"):
            best[task] = max(best.get(task, 0.0), r["speedup"])
    geomean = math.exp(sum(math.log(best.get(t, 1.0)) for t in tasks) / max(1, len(tasks)))
    return dict(tasks=len(tasks), answers=len(records), correct=sum(bool(r and r.get("correct")) for _, r in records)
                / max(1, len(records)), solved=len(best), geomean=geomean)


def held_out_scores(results, groups, second="second try"):
    """{group: split_score} of held-out answers: results holds (task, first, second try, sampled...), each
    answer a (source, record) or None when not asked. '{group} second try' (or `second`: 'refined', train_rl
    --second-try refine) and '{group} resampled' (the first sampled answer) score each task by the better
    of its first answer and that one; their correct is the second answers' share (answers: how many were
    asked). '{group} sampled': every sampled answer, averaged (sampled_score)."""
    stats = {}
    for group, ts in groups.items():
        rows = [r for r in results if r[0] in ts]
        ones = [(r[0], r[1][1]) for r in rows]
        stats[group] = split_score(ones, ts)
        for i, name in ((2, second), (3, "resampled")):
            twos = [(r[0], r[i][1]) for r in rows if len(r) > i and r[i]]
            if twos:
                stats[f"{group} {name}"] = {**split_score(ones + twos, ts), "answers": len(twos),
                                            "correct": split_score(twos, ts)["correct"]}
        samples = [(r[0], a[1]) for r in rows for a in r[3:] if a]
        if samples:
            stats[f"{group} sampled"] = sampled_score(samples, ts)
    return stats


def sampled_score(records, tasks):
    """split_score's numbers for several sampled answers per task, averaged instead of the best taken: the
    share of answers correct, and the geomean over `tasks` of each one's mean log speedup over its answers
    (a failure, or a task without answers, at 1.0x; a slow pass at its speed): what the policy writes on
    average, where the greedy line reads one answer a task and the resampled one the better of two."""
    logs, solved = {}, set()
    for task, r in records:
        ok = bool(r and r.get("correct") and r.get("speedup"))
        logs.setdefault(task, []).append(math.log(r["speedup"]) if ok else 0.0)
        solved |= {task} if ok else set()
    geomean = math.exp(sum(sum(logs[t]) / len(logs[t]) for t in tasks if t in logs) / max(1, len(tasks)))
    return dict(tasks=len(tasks), answers=len(records), correct=sum(bool(r and r.get("correct")) for _, r in records)
                / max(1, len(records)), solved=len(solved), geomean=geomean)

# -----------------------------------------------------------------------------
# prompts and answers
#
# The prompt gives the reference program and the target device; the contrastive prompt adds
# earlier solutions with their measured speedups (stage 3). The answer is three sections: a
# performance analysis, the algorithm design, and one python block holding the ModelNew module.
# Training answers are built from solution files: the docstring is the analysis.

HEADERS = ("## Performance Analysis", "## Algorithm Design", "## Code Implementation")
ANSWER_FORMAT = (f"Answer in three sections: {HEADERS[0]} (what limits the speed), "
                 f"{HEADERS[1]} (what the new version does instead), and {HEADERS[2]} "
                 "(one ```python block defining class ModelNew with Model's constructor arguments and "
                 "forward semantics; it runs after the program above, so ModelNew may subclass Model "
                 "and keep its constructor).")


def fit_prompt(tok, task_source, device_name, shown, room, block_size):
    """(prompt ids, exemplars kept): the contrastive prompt showing `shown` ((code, speedup) pairs,
    slowest first), the slowest dropped while fewer than `room` tokens of the block would be left
    after it; with none left (or none given), the plain prompt."""
    while shown:
        ids = tok.encode_prompt(contrastive_prompt(task_source, device_name, shown))
        if len(ids) + room <= block_size:
            return ids, shown
        shown = shown[1:]
    return tok.encode_prompt(plain_prompt(task_source, device_name)), []


def plain_prompt(task_source, device_name):
    return (f"# Task\nTarget device: {device_name}\n"
            "Rewrite this PyTorch program (KernelBench format) as a faster ModelNew.\n"
            f"{ANSWER_FORMAT}\n\n```python\n{task_source.strip()}\n```\n")


def contrastive_prompt(task_source, device_name, exemplars):
    """exemplars: (solution source, measured speedup) pairs, shown in the order given; a speedup of
    None reads 'not measured' (stage 1's solution_pairs: a number in a prompt is a measurement)."""
    parts = [plain_prompt(task_source, device_name),
             "# Earlier solutions and their measured speedups over the reference\n"
             "Analyse why the faster ones are faster, then write a variant faster than all of them.\n"]
    for i, (source, speedup) in enumerate(exemplars, 1):
        said = "not measured" if speedup is None else f"{speedup:.2f}x"
        parts.append(f"## Solution {i}: speedup {said}\n```python\n{source.strip()}\n```\n")
    return "\n".join(parts)


def solution_kind(source):
    """'cuda', 'cpp' or 'pytorch': what native code a solution runs, judged from its text (the judge
    builds its device rule, evaluate.needs_gpu, on this)."""
    if ("__global__" in source or re.search(r"load_kernel\([^)]*['\"]cuda['\"]", source) or "cuda_sources" in source
            or "load_cuda(" in source):
        return "cuda"
    if "load_kernel(" in source or "load_inline(" in source or "load_c(" in source:
        return "cpp"
    return "pytorch"


def runs_on(source, device):
    """Whether a solution runs on `device` ('cuda' or 'cpu'): CUDA needs a GPU and C++ takes CPU
    pointers; PyTorch-level solutions run anywhere."""
    kind = solution_kind(source)
    return kind == "pytorch" or (kind == "cuda") == (torch.device(device).type == "cuda")


def task_of(solution, tasks_dir):
    """The task a library solution solves: kernels/level1/19_ReLU.v2.py -> TASKS_DIR/level1/19_ReLU.py."""
    level, stem = os.path.basename(os.path.dirname(solution)), os.path.basename(solution)[:-3]
    return os.path.join(tasks_dir, level, re.sub(r"\.v\d+$", "", stem) + ".py")


def _init_of(tree, name):
    """(class node, its __init__ node or None, the __init__ as a docstring-free dump) of class `name`."""
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    init = cls and next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return cls, None, None
    body = [b for b in init.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
    return cls, init, ast.dump(ast.FunctionDef(init.name, init.args, body, init.decorator_list, init.returns))


def inherit_constructor(solution_source, task_source):
    """The solution with `class ModelNew(Model)` in place of a constructor it restates: when ModelNew's
    __init__ is Model's (the same code, docstrings aside) and reads no name the solution defines for
    itself, it is dropped and ModelNew inherits it (the judge runs a solution after its task's
    program). The teacher writes its solutions so, and the library's files teach the same form
    (train_sft.example, and the bank's seeds in train_rl), so a level-2 prompt is not answered by
    restating its constructor, where the policy used to fail most. Anything else, or anything these
    line edits cannot make safely, comes back unchanged."""
    try:
        sol, task = ast.parse(solution_source), ast.parse(task_source)
    except SyntaxError:
        return solution_source
    cls, init, mine = _init_of(sol, "ModelNew")
    if init is None or "\r" in solution_source or mine != _init_of(task, "Model")[2]:
        return solution_source
    ours = {n.name for n in sol.body if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    ours |= {t.id for n in sol.body if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
             for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    base = cls.bases[0] if len(cls.bases) == 1 and not cls.keywords else None
    if (base is None or ast.unparse(base) not in ("nn.Module", "torch.nn.Module") or base.lineno != cls.lineno
            or base.end_lineno != cls.lineno or cls.decorator_list or init.decorator_list
            or ours & {n.id for n in ast.walk(init) if isinstance(n, ast.Name)}):  # e.g. its own helper module class
        return solution_source
    lines = solution_source.split("\n")  # ast's line numbers count "\n" alone ("\r" was refused above)
    header = lines[cls.lineno - 1]
    lines[cls.lineno - 1] = header[:base.col_offset] + "Model" + header[base.end_col_offset:]
    indent = lines[init.lineno - 1][:init.col_offset]
    end = init.end_lineno + (init.end_lineno < len(lines) - 1 and not lines[init.end_lineno].strip())  # + one blank
    lines[init.lineno - 1:end] = [indent + "pass"] if len(cls.body) == 1 else []
    return "\n".join(lines)


@functools.lru_cache(maxsize=1 << 12)  # train_rl --refine asks for the same pairs every step
def refined_task(task_source, solution_source):
    """The task with Model.forward replaced by a solution's, when the solution is a PyTorch-level `class
    ModelNew(Model)` that overrides forward alone (the teacher's drop, reorder and constant moves are
    written so), imports nothing the task does not, and names neither Model nor super() in it; else
    None. The result is a program in the task's own format, so a policy taught to make one move on a
    task can make a second move on it: composing by rewriting twice. Its docstring still names the
    task's ops; the judge runs an answer after the original task and compares it with that, never with
    this (so the program imports only what the task does: what it promises an answer is what it gets)."""
    if solution_kind(solution_source) != "pytorch" or "\r" in solution_source + task_source:
        return None
    try:
        sol, task = ast.parse(solution_source), ast.parse(task_source)
    except SyntaxError:
        return None
    have = {ast.unparse(n) for n in task.body if isinstance(n, (ast.Import, ast.ImportFrom))}
    classes = [n for n in sol.body if isinstance(n, ast.ClassDef)]
    if any(not (isinstance(n, (ast.Import, ast.ImportFrom)) and ast.unparse(n) in have or n in classes
                or isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)) for n in sol.body):
        return None  # an import the task lacks, or a name of its own the forward might read
    cls = classes[0] if len(classes) == 1 else None
    if (cls is None or cls.name != "ModelNew" or [ast.unparse(b) for b in cls.bases] != ["Model"] or cls.keywords
            or cls.decorator_list):
        return None
    new = [n for n in cls.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(new) != 1 or not isinstance(new[0], ast.FunctionDef) or new[0].name != "forward" or new[0].decorator_list:
        return None
    if {n.id for n in ast.walk(new[0]) if isinstance(n, ast.Name)} & {"super", "Model", "ModelNew", "__class__"}:
        return None  # moved into Model it would call itself, nn.Module's forward, or a name no longer there
    model = [n for n in task.body if isinstance(n, ast.ClassDef) and n.name == "Model"]
    old = [n for n in (model[0].body if len(model) == 1 else [])
           if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    if len(old) != 1 or old[0].decorator_list:
        return None
    mine, lines = solution_source.split("\n"), task_source.split("\n")
    pad = lines[old[0].lineno - 1][:old[0].col_offset]
    lines[old[0].lineno - 1:old[0].end_lineno] = [pad + line[new[0].col_offset:] if line.strip() else ""
                                                   for line in mine[new[0].lineno - 1:new[0].end_lineno]]
    out = "\n".join(lines)
    try:  # line edits cannot see inside a string literal's lines: the result must hold the same forward
        moved = [n for n in ast.parse(out).body if isinstance(n, ast.ClassDef) and n.name == "Model"][0].body
    except SyntaxError:
        return None
    same = [n for n in moved if isinstance(n, ast.FunctionDef) and n.name == "forward"]
    return out if len(same) == 1 and ast.dump(same[0]) == ast.dump(new[0]) else None


def refine(task_source, solution_source):
    """refined_task of a solution in the form the bank keeps (inherit_constructor: a restated constructor
    dropped), or None."""
    return refined_task(task_source, inherit_constructor(solution_source, task_source))


def restates(task_source, program, solution_source):
    """Whether a solution is `program` (a refined_task of the task) again, however restated: the same code
    once refined. Such an answer to that program is the solution it was made from, not new code."""
    again = refine(task_source, solution_source)
    return again is not None and same_code(again) == same_code(program)


def solution_code(solution_source):
    """A solution file without its docstring: the code an answer's code block holds, and so what
    the exemplar bank holds and contrastive prompts show."""
    tree = ast.parse(solution_source)
    if not ast.get_docstring(tree):
        return solution_source.strip()
    return "\n".join(solution_source.splitlines()[tree.body[0].end_lineno:]).strip()


def format_answer(solution_source):
    """The answer a solution file teaches: its first docstring is the performance analysis, a
    summary of its kind the design, and its code (without the docstring) the implementation."""
    analysis = ast.get_docstring(ast.parse(solution_source))
    if not analysis:
        raise ValueError("solution has no module docstring to serve as its performance analysis")
    code = solution_code(solution_source)
    kind = solution_kind(solution_source)
    if kind == "cuda":
        names = re.findall(r"__global__\s+void\s+(\w+)", solution_source)
        design = f"Custom CUDA kernels ({', '.join(names) or 'inline'}) launched on the current stream."
    elif kind == "cpp":
        names = re.findall(r"m\.def\(\s*\"(\w+)\"", solution_source) or \
            re.findall(r'extern\s+"C"\s+void\s+(\w+)', solution_source)  # pybind11's names, or load_c's
        design = f"C++ with OpenMP ({', '.join(names) or 'inline'}) on raw CPU pointers."
    else:
        design = "A PyTorch-level rewrite: no native code."
    return f"{HEADERS[0]}\n{analysis}\n\n{HEADERS[1]}\n{design}\n\n{HEADERS[2]}\n```python\n{code}\n```\n"


@functools.lru_cache(maxsize=1 << 14)  # the bank asks for the same sources every step
def same_code(source):
    """What two programs have in common when they are the same code: the source with comments,
    docstrings and layout gone (an ast round trip), so an answer that differs from a known one only
    in its analysis or a blank line is that known one. Text that does not parse: its non-blank lines.
    The one notion of "the same code": the judge judges it once, the bank and the copy metric match
    on it, and generated tasks are told apart by it."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "\n".join(line.rstrip() for line in source.splitlines() if line.strip())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def answer_analysis(text):
    """An answer's performance analysis: the text before its design section, without its heading (what the
    answer said it would do, whether or not the answer parses)."""
    return text.split(HEADERS[1])[0].replace(HEADERS[0], "", 1).strip()


def parse_answer(text):
    """(ModelNew source, None) for a well-formed answer, else (None, the reason it is rejected)."""
    starts = []
    for h in HEADERS:
        found = list(re.finditer(rf"^{re.escape(h)}[ \t]*$", text, re.M))
        if len(found) != 1:
            return None, f"section {h!r} appears {len(found)} times, not once"
        starts.append(found[0])
    if not starts[0].start() < starts[1].start() < starts[2].start():
        return None, "sections out of order"
    for a, b in zip(starts, starts[1:]):
        if not text[a.end():b.start()].strip():
            return None, f"section {a.group().strip()!r} is empty"
    code = text[starts[2].end():]
    n = len(re.findall(r"^```python[ \t]*$", code, re.M))
    if n != 1:
        return None, f"{HEADERS[2]} holds {n} ```python blocks, not one"
    block = re.search(r"^```python[ \t]*\n(.*?)^```[ \t]*$", code, re.M | re.S)
    if block is None:
        return None, "the ```python block is never closed"
    source = block.group(1)
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return None, f"code does not parse: line {e.lineno}: {e.msg}"
    if not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return None, "code defines no class ModelNew"
    return source, None


# ---- contrastive RL
#
# Stage 3 turns judge records into a gradient. The pieces, in the order train_rl.py uses them:
#   Bank             every judged solution per task with its record, appended to a JSONL file
#   bucket_sample    CUDA-L1's exemplar choice: earlier correct solutions from distinct score buckets
#   reward           f(record): log2 speedup for correct answers, a fixed floor for everything else
#   group_advantages rewards normalised within each task's group of G samples, clipped to +-k
#   gain_advantages  (--advantage gain) the log2 speedup of a correct answer faster than eager, else 0;
#                    (improve) the same measured from the task's best so far
#   pg_loss          -mean(advantage * log-prob of answer tokens): REINFORCE, no clip
#   kl_penalty       (--kl) KL to the policy RL started from, on the sampled tokens
#   implausible      a speedup big enough that it must be judged again before it is believed


REWARD_FAIL = -2.0       # any answer that is not a correct ModelNew: parse, build, run, check or cheat
# The teacher's moves as they show in an answer's code (kernelbench/teacher.py writes each with its
# own idiom), to count answers that compose two or more: a fused CUDA epilogue, a folded() weight or
# bias (any fold), an addcmul for merged affine ops, torch.full for a constant output. Dropping a
# no-op or moving an op before a reduction leaves no mark of its own, so those are not counted: the
# share undercounts composition.
MOVE_MARKS = {"fuse_epilogue": ("load_cuda(", "__global__", "load_c("), "fold": ("def folded(",),
              "merge_affine": ("torch.addcmul(",), "constant_output": ("torch.full(",)}


def moves_shown(code):
    """The moves (MOVE_MARKS) whose marks an answer's code holds."""
    return {m for m, marks in MOVE_MARKS.items() if any(k in code for k in marks)}


REWARD_MIN, REWARD_MAX = -1.0, 3.0  # log2 speedup is clipped to [0.5x, 8x] for correct answers


def reward(record):
    """The RL reward, a function of the judge's record alone (the record evaluate.py prints).

    Correct: clip(log2(speedup), -1, 3). Speedups compose by multiplication, so 1x -> 2x is worth
    as much as 2x -> 4x; the clip keeps one lucky (or mismeasured) 50x from flattening every
    other answer in its group once rewards are normalised. Failures get -2, below the worst
    correct answer: a correct-but-slow rewrite must always beat a broken one, or the policy learns
    that breaking code is as good as writing slow code. A cheat is a failure like any other.
    """
    s = record.get("speedup")
    if not record.get("correct") or not s or s <= 0:
        return REWARD_FAIL
    return min(max(math.log2(s), REWARD_MIN), REWARD_MAX)


def implausible(record, max_speedup):
    """True for a correct record whose speedup exceeds `max_speedup` (0 disables the check).

    A fixed bound rather than a roofline: it does not reject, it only asks the judge to measure
    again, so a real 60x (KernelBench has tasks like diag(A) @ B) survives the second look.
    """
    s = record.get("speedup")
    return bool(max_speedup > 0 and record.get("correct") and s and s > max_speedup)


def to_rejudge(records, tasks, best, max_speedup, done=()):
    """Which records stage 3 judges again in full (indices, none in `done`): every implausible one, and
    of each task's correct records above best[task] (its bank's best), only the fastest (--judge full
    passes an infinite best: only the implausible).
    Call again with the full readings folded into records and best: a slower screen reading that
    now beats its task's best gets its turn, so nothing counts as a new best unchecked, and a step
    whose answers all beat a weak best (the reference at 1.00x, early in a run) pays for one full
    judgement per task instead of one per answer."""
    again, fastest = set(), {}
    for i, (r, t) in enumerate(zip(records, tasks)):
        if i in done:
            continue
        if implausible(r, max_speedup):
            again.add(i)
        elif r["correct"] and r.get("speedup") and r["speedup"] > best[t]:
            if t not in fastest or r["speedup"] > records[fastest[t]]["speedup"]:
                fastest[t] = i
    return sorted(again | set(fastest.values()))


# The reference program as a variant of its own task: correct, at 1.00x by definition. Every
# contrastive prompt may show it (stage 1's pairs, stage 2's prompts, stage 3's fresh bank), and a
# candidate must beat it to count as faster.
REFERENCE = {"status": "reference", "correct": True, "speedup": 1.0}


class Bank:
    """Every judged solution, per task: {"step", "task", "source", "record"} lines in a JSONL file.

    Append-only, so a killed run loses at most the line being written, and a resumed run reads back
    everything measured so far (entries newer than the checkpoint are real measurements too, so
    they are kept). Unparseable answers are not judged and never enter the bank.
    """

    def __init__(self, path=None, write=True):
        self.path, self.write, self.entries = path, write, {}  # task -> [entry, ...] in judged order
        if path and os.path.exists(path):  # write=False: read it, never touch it (ranks > 0)
            with open(path, "rb") as f:
                data = f.read()
            if not data.endswith(b"\n"):  # a kill mid-write left a torn last line: cut it off
                data = data[:data.rfind(b"\n") + 1]
                if write:
                    with open(path, "r+b") as f:
                        f.truncate(len(data))
            for line in data.decode().splitlines():
                e = json.loads(line)
                self.entries.setdefault(e["task"], []).append(e)

    def add(self, task, source, record, step):
        e = {"step": step, "task": task, "source": source, "record": record}
        self.entries.setdefault(task, []).append(e)
        if self.path and self.write:
            with open(self.path, "a") as f:
                f.write(json.dumps(e) + "\n")
        return e

    def digest(self):
        """A short hash of everything the bank holds, in order: under torchrun every rank must hold
        the same bank, or the ranks' next prompts differ."""
        h = hashlib.sha256()
        for task in sorted(self.entries):
            for e in self.entries[task]:
                h.update(json.dumps([task, e["step"], e["source"], e["record"].get("speedup")]).encode())
        return h.hexdigest()[:16]

    def correct(self, task):
        """Distinct correct solutions of `task`, in first-judged order. A source judged several
        times keeps its fastest measurement, so a task's best never goes down; noise can flatter
        it a little, which is why big numbers are judged twice and `make eval` measures again."""
        best = {}
        for e in self.entries.get(task, []):
            if e["record"].get("correct") and e["record"].get("speedup"):
                have = best.get(e["source"])
                if have is None or e["record"]["speedup"] > have["record"]["speedup"]:
                    best[e["source"]] = e
        return list(best.values())

    def sources(self, task, given=False):
        """The code the bank holds for `task`, as same_code() keys; given=True: only what it started
        with, the reference and the seeds (step < 0)."""
        return {same_code(e["source"]) for e in self.entries.get(task, []) if not given or e["step"] < 0}

    def verdicts(self, task):
        """{same_code key: the record of its first judgement} for the code the bank holds for `task`,
        references excepted (they were timed, not judged as answers)."""
        out = {}
        for e in self.entries.get(task, []):
            if e["record"].get("status") != "reference":
                out.setdefault(same_code(e["source"]), e["record"])
        return out

    def found(self, task):
        """The distinct correct solutions RL itself wrote: code unlike the reference's and every
        seed's. A policy that reproduces a seed is measured again, and the faster of two noisy
        measurements of the same code is no discovery."""
        given = self.sources(task, given=True)
        return [e for e in self.correct(task) if same_code(e["source"]) not in given]

    def best(self, task):
        """The correct entry with the highest speedup, or None."""
        good = self.correct(task)
        return max(good, key=lambda e: e["record"]["speedup"]) if good else None

    def best_speedup(self, task):
        """best()'s speedup; 0.0 where the task has no correct entry."""
        return (self.best(task) or {}).get("record", {}).get("speedup") or 0.0


def bucket_sample(entries, k=2, n_buckets=4, temperature=1.0, rng=random):
    """Pick up to k entries from k distinct score buckets (CUDA-L1's exemplar selection).

    Scores are the rewards (log2 speedup). The score range is cut into n_buckets equal-width
    buckets; a bucket is drawn with probability softmax(mean score / temperature) over the
    non-empty ones, then one entry uniformly inside it, then the next bucket without replacement.
    Distinct buckets make the prompt contrast a faster variant with a slower one, which is what
    the analysis is asked to explain; the softmax leans toward fast ones without starving the rest.
    Fewer than k come back when fewer buckets are filled. Sorted slowest first, fastest last.
    """
    if not entries:
        return []
    scores = [reward(e["record"]) for e in entries]
    lo, hi = min(scores), max(scores)
    width = (hi - lo) / n_buckets or 1.0  # all equal: one bucket
    buckets = {}
    for e, s in zip(entries, scores):
        buckets.setdefault(min(int((s - lo) / width), n_buckets - 1), []).append((s, e))
    picked = []
    while buckets and len(picked) < k:
        keys = list(buckets)
        means = torch.tensor([sum(s for s, _ in buckets[b]) / len(buckets[b]) for b in keys])
        probs = torch.softmax(means / temperature, 0).tolist()
        b = rng.choices(keys, weights=probs)[0]
        picked.append(rng.choice(buckets.pop(b)))
    return [e for _, e in sorted(picked, key=lambda p: p[0])]


def group_advantages(rewards, group_size, clip=1.5, std_floor=0.1, known=None):
    """(B*G,) rewards, G consecutive per task -> (B*G,) advantages, clipped to +-clip.

    GRPO's group baseline: a = (r - mean_group) / max(std_group, std_floor). The floor (in log2
    units, ~7% speed) keeps timing noise between equally fast correct answers from being blown up
    to full-size advantages; a group whose rewards are all equal gets zeros and no gradient.
    CUDA-L1 clips at 1.5 so that one outlier cannot dominate a step.
    known: (B*G,) bools, answers whose code the bank already held (same_code): they earn no
    advantage, so re-emitting a seed is never what the policy learns; they still count in the
    group's mean, the bar a new answer must clear.
    """
    r = torch.as_tensor(rewards, dtype=torch.float32).view(-1, group_size)  # (B, G)
    std = r.std(1, unbiased=False, keepdim=True).clamp(min=std_floor)
    adv = ((r - r.mean(1, keepdim=True)) / std).clamp(-clip, clip).view(-1)
    return adv if known is None else adv.masked_fill(torch.as_tensor(known, dtype=torch.bool), 0.0)


def gain_advantages(rewards, clip=1.5, known=None, floor=None):
    """(N,) rewards -> (N,) advantages measured from eager speed, not from the group's mean: a correct
    answer faster than the reference earns its log2 speedup (clipped to `clip`), everything else 0.
    floor: (N,) rewards each answer must beat instead of eager's 0 (--advantage improve: its task's
    best before the step), so an answer earns the log2 of how much faster it is than that.

    Against the group baseline, a slow pass (0.9x) among failures earns a full positive advantage
    and a fast answer among faster ones a negative one: on the H100 at lr 1e-4 that moved the policy
    towards moves that pass at any speed and away from the fastest (results/learning-h100-lr1e-4.md).
    Here only answers that beat eager are pushed up, by how much they beat it, and nothing is pushed
    down; it is advantage-weighted imitation of the policy's own wins. `clip` caps the gain: at 1.5, a
    13x answer is pushed as hard as a 2.83x one. known: as group_advantages. Measured at lr 1e-4 on
    the H100 it degraded the held-out line less (-8% against -11%, one seed) and spread the constant
    output onto tasks it does not hold for instead (results/learning-h100-gain.md).
    """
    adv = torch.as_tensor(rewards, dtype=torch.float32)
    if floor is not None:
        adv = adv - torch.as_tensor(floor, dtype=torch.float32).clamp(min=0.0)  # never below eager's bar
    adv = adv.clamp(0.0, clip)
    return adv if known is None else adv.masked_fill(torch.as_tensor(known, dtype=torch.bool), 0.0)


def row_parts(prompt_len, lengths, max_tokens):
    """(start, count) slices of a group's answers (`lengths` tokens each, after a prompt_len prompt)
    whose padded rows hold at most max_tokens tokens together, one row at least; 0: one slice. A
    big policy's update takes a group in parts: pg_loss is a token mean, so the parts' losses, each
    weighted by its share of the tokens, have the whole group's gradient."""
    n = len(lengths)
    per = max(1, max_tokens // (prompt_len + max(lengths))) if max_tokens and n else max(1, n)
    return [(j, min(per, n - j)) for j in range(0, n, per)]


def pg_loss(logp, mask, adv):
    """Policy-gradient loss: -mean over answer tokens of (advantage * log-prob).

    logp: (N, T) log-probs of the sampled answer tokens under the current policy (with grad);
    mask: (N, T) 1 on answer tokens, 0 on padding; adv: (N,) one advantage per answer.
    The mean is over all answer tokens of the batch (every token counts once, so a long answer
    does not have its per-token signal diluted by its own length).

    How this departs from CUDA-L1: the paper trains with GRPO, whose objective clips the token
    ratio between the current and the sampling policy (PPO-style). Here one optimizer step follows
    each batch of samples, so the weights that sampled are the weights updated (the ratio is 1 up to
    numerics) and the clip would never act: the objective is REINFORCE with a group-normalised
    baseline, the same gradient in its simplest form. Sampling and judging cost far more than a
    gradient step, so reusing a batch for several steps buys little. A KL term to the stage-2 policy
    is kl_penalty, off by default (train_rl.py --kl).
    """
    mask = mask.to(logp.dtype)
    return -(adv[:, None].to(logp.dtype) * logp * mask).sum() / mask.sum().clamp(min=1)


def kl_penalty(logp, ref_logp, mask):
    """Mean over answer tokens of KL(policy || reference), estimated on the sampled tokens as GRPO does:
    exp(d) - d - 1 with d = ref_logp - logp, which is never negative, 0 where the two agree, and whose
    gradient pulls logp towards ref_logp (d clipped to +-20 and each token's term to 10, so one token
    the reference finds far likelier cannot set a step's direction alone). logp: (N, T) with grad, and
    ref_logp: (N, T) under the frozen policy RL started from, both unfiltered (answer_logprobs' third
    output); mask as pg_loss's. Added to pg_loss times --kl, it keeps the update from rewriting what
    stages 1-2 taught where the reward does not ask it to: on the H100, 5 minutes of RL without it
    changed 16-21 of the 52 held-out greedy answers, 6-10 of them for the worse and 1-3 for the better,
    in both arms (of the 22 generated-task answers that broke over five runs, 27 with level 2, 10 were
    fused kernels that no longer build: parameters named twice, or used and never declared;
    results/learning-h100-spell-t64-seeds.md)."""
    mask = mask.to(logp.dtype)
    d = ((ref_logp.to(logp.dtype) - logp) * mask).clamp(-20.0, 20.0)
    return ((d.exp() - d - 1).clamp(max=10.0) * mask).sum() / mask.sum().clamp(min=1)

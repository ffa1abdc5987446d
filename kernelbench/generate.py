"""
Generated tasks in KernelBench's level-2 format: a head op followed by a short chain of epilogue
ops, with random shapes and constants, deterministic from a seed.

    python kernelbench/generate.py --seed 7 --n 5 --out /tmp/gen                 # seeds 7..11, GPU sizes
    python kernelbench/generate.py --seed 0 --n 20 --size cpu --out /tmp/gen     # sizes a CPU runs in ms
    python kernelbench/generate.py --seed 0 --n 20 --split held_out --out /tmp/held  # 20 held-out tasks

A task is the head (Linear, Matmul with a weight, BMM of two inputs, Conv2d/3d, ConvTranspose2d/3d,
or none) and 1-6 ops: bias add, add/subtract/multiply/divide by a constant or a per-channel
parameter, residual add of the head's output, ReLU, LeakyReLU, GELU, Sigmoid, Tanh, Swish, Mish,
HardSwish, Hardtanh, clamp, min/max with a constant, softmax, logsumexp, sum/mean/max over dims,
global average pool, max/avg pool, Batch/Group/Layer/InstanceNorm, dropout. The shape is tracked
through the chain so every op is valid, and so is a range [lo, hi] holding every value the tensor
can take, which is what lets us say exactly when an op is a no-op or the output a constant.

Each task comes with the optimisation moves it admits: named rewrites a teacher can apply, each
exact for every input and every parameter value the task can produce, in training mode as
KernelBench runs it (BatchNorm uses batch statistics; dropout with p > 0 is live and random):
    fuse_epilogue            >= 2 ops after the head and no live dropout: one kernel does them all
    fold_scale_into_weights  the ops right after a weighted head (Linear, Matmul, Conv, ConvTranspose)
    fold_bias                are per-channel affine (x * a + b, constants or per-channel parameters):
                             a multiply/divide among them folds into the weight, an add/subtract into
                             the bias (for Matmul, which has none, the bias of an addmm). Not when a
                             residual add reuses the head's output.
    fold_reduction           a sum or mean over the channel dim after a weighted head (and only
                             per-channel affine ops between): the reduction folds into the weight, so
                             the head computes one output channel instead of C
    merge_affine             two or more affine ops in a row are one multiply-add
    reduce_first             an elementwise op right before a reduction commutes with it (a monotone
                             op before a max, an affine op before a mean, a multiply before a sum, an
                             add before a logsumexp), so it can run on the smaller reduced tensor
    drop_noop                an op is the identity on every value it can see: dropout p=0, multiply
                             by 1, add 0, ReLU of non-negatives, a clamp that cannot bite, a
                             reduction with keepdim over dims of size 1
    constant_output          the output does not depend on the inputs, only on parameters if at all
                             (softmax over a size-1 dim, a min/max/clamp that pins every value,
                             LayerNorm over one element), nor on dropout's randomness
meta["sites"] says where each applies (indices into meta["ops"]). The moves are not in the task
file: the file is the prompt, and naming its moves would hand the policy the answer.

How many distinct tasks (distinct = distinct cudal1.same_code(source)), counted, not estimated: seeds
0..99,999 give 99,255 distinct tasks at cpu sizes (93,836 training, 5,419 held out) and 99,308 at
gpu sizes (93,903 training, 5,405 held out), over ~68,740 distinct op chains
(head and op kinds alone); 97,566 and 97,728 before reductions were spelt several ways (_spell). The
~1% that repeat are short chains on the same head and sizes (Gemm + BiasAdd at the same features).
tests/test_generate.py checks that 3,000 seeds give >= 2,985 distinct tasks.

The held-out split is cudal1.held_out: a task whose set of moves is one of cudal1.HELD_OUT_MOVES.

    generate(seed, size) -> (name, source, meta)   one task; meta: ops, moves, sites, held_out, ...
    tasks(start, n, size, split) -> [(name, source, meta)]   n tasks of 'train', 'held_out' or 'all'
    write(out_dir, name, source, meta)             NAME.py and NAME.json
    draw(seed, size) -> spec; render(spec) -> source; trace(spec) -> states; moves(spec) -> sites
"""

import argparse
import json
import math
import os
import random
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)
import cudal1  # noqa: E402  (the held-out split)

# Sizes to draw from, a few times smaller than KernelBench's level 2 for "gpu" (one CPU thread runs
# those references in 4 ms median, 0.8 s at most over 60 seeds: micro- to milliseconds on a GPU);
# "cpu" references take 0.1 ms median, 11 ms at most on one thread. The lists have equal lengths and
# a seed draws indices into them, so a seed draws the same chain in both profiles 99% of the time
# (validity depends on the sizes) and the same held-out status 5,000 times in 5,000.
PROFILES = {
    "gpu": dict(batch=(64, 128, 128, 256), features=(256, 512, 1024, 2048), conv_batch=(16, 32, 32, 64),
                channels=(3, 8, 16, 32), out_channels=(16, 32, 32, 64), hw=(16, 24, 32, 48),
                batch3d=(4, 8, 8, 16), depth=(8, 8, 16, 16), hw3d=(16, 16, 24, 32), bmm=(64, 128, 128, 256)),
    "cpu": dict(batch=(4, 8, 8, 16), features=(32, 64, 96, 128), conv_batch=(2, 4, 4, 8),
                channels=(3, 4, 8, 8), out_channels=(8, 16, 16, 32), hw=(12, 16, 16, 24),
                batch3d=(2, 2, 4, 4), depth=(4, 6, 6, 8), hw3d=(8, 8, 12, 12), bmm=(16, 32, 32, 64)),
}
HEADS = {"gemm": 24, "matmul": 10, "bmm": 8, "conv2d": 16, "conv3d": 10, "conv_transpose2d": 10,
         "conv_transpose3d": 8, "none": 14}  # draw weights
WEIGHTED = ("gemm", "matmul", "conv2d", "conv3d", "conv_transpose2d", "conv_transpose3d")  # heads with weights
N_OPS = {1: 2, 2: 4, 3: 4, 4: 3, 5: 2, 6: 1}  # chain length -> draw weight
OPS = {  # kind -> (draw weight, filename token)
    "bias": (6, "BiasAdd"), "mul_const": (6, "Scaling"), "div_const": (4, "Divide"), "add_const": (3, "Add"),
    "sub_const": (3, "Subtract"), "add_param": (2, "Add"), "sub_param": (2, "Subtract"), "mul_param": (3, "Multiply"),
    "div_param": (1, "Divide"), "residual": (3, "ResidualAdd"), "relu": (5, "ReLU"), "leaky_relu": (3, "LeakyReLU"),
    "gelu": (4, "GELU"), "sigmoid": (4, "Sigmoid"), "tanh": (4, "Tanh"), "swish": (3, "Swish"), "mish": (3, "Mish"),
    "hardswish": (3, "HardSwish"), "hardtanh": (3, "Hardtanh"), "clamp": (4, "Clamp"), "min_const": (4, "Min"),
    "max_const": (4, "Max"), "softmax": (4, "Softmax"), "logsumexp": (3, "LogSumExp"), "sum": (3, "Sum"),
    "mean": (3, "Mean"), "max": (3, "Max"), "global_avg_pool": (3, "GlobalAvgPool"), "max_pool": (3, "MaxPool"),
    "avg_pool": (3, "AvgPool"), "batch_norm": (3, "BatchNorm"), "group_norm": (3, "GroupNorm"),
    "layer_norm": (2, "LayerNorm"), "instance_norm": (2, "InstanceNorm"), "dropout": (3, "Dropout"),
}
AFFINE = {"bias", "mul_const", "div_const", "add_const", "sub_const", "add_param", "sub_param", "mul_param", "div_param"}
PARAMS = {"bias", "add_param", "sub_param", "mul_param", "div_param"}  # per-channel nn.Parameter
REDUCTIONS = {"logsumexp", "sum", "mean", "max", "global_avg_pool", "max_pool", "avg_pool"}
NORMS = {"batch_norm", "group_norm", "layer_norm", "instance_norm"}
MOVES = ("fuse_epilogue", "fold_scale_into_weights", "fold_bias", "fold_reduction", "merge_affine",
         "reduce_first", "drop_noop", "constant_output")
INF = math.inf

# Lower bounds of the activations that dip below zero (GELU -0.170, Swish -0.2785, Mish -0.3088,
# HardSwish -0.375), rounded outwards so that rounding in float32 cannot break them.
DIP = {"gelu": -0.171, "swish": -0.279, "mish": -0.309, "hardswish": -0.376}


# -----------------------------------------------------------------------------
# value ranges: [lo, hi] holds every value a tensor can take (for every input and parameter)

def _out(v, down):
    """A bound computed in double for a float32 op: pushed outwards by a little (0 and inf stay)."""
    if v == 0 or math.isinf(v):
        return v
    return v - 1e-6 * (1 + abs(v)) if down else v + 1e-6 * (1 + abs(v))


def _sigmoid(v):
    return 1.0 / (1.0 + math.exp(-v)) if v > -700 else 0.0  # exp(700+) overflows


def _scale(lo, hi, c):
    """[lo, hi] * c."""
    if c == 0:
        return 0.0, 0.0
    a, b = (lo * c, hi * c) if c > 0 else (hi * c, lo * c)
    return _out(a, True), _out(b, False)


def _elementwise(kind, op, lo, hi):
    """The range of an elementwise op's output for an input in [lo, hi]."""
    if kind in ("mul_const", "div_const"):
        c = op["value"] if kind == "mul_const" else 1.0 / op["value"]
        return (lo, hi) if c == 1 else _scale(lo, hi, c)
    if kind in ("add_const", "sub_const"):
        c = op["value"] if kind == "add_const" else -op["value"]
        return (lo, hi) if c == 0 else (_out(lo + c, True), _out(hi + c, False))
    if kind in ("mul_param", "div_param"):  # a parameter of unknown sign (div: never 0)
        return (0.0, 0.0) if lo == hi == 0 else (-INF, INF)
    if kind in ("bias", "add_param", "sub_param"):
        return -INF, INF
    if kind == "relu":
        return max(lo, 0.0), max(hi, 0.0)
    if kind == "leaky_relu":
        s = op["value"]  # > 0: monotone
        return lo if lo >= 0 else _out(s * lo, True), hi if hi >= 0 else _out(s * hi, False)
    if kind in DIP:  # x * something in [0, 1] for x >= 0; a bounded dip below zero for x < 0
        return DIP[kind] if lo < 0 else 0.0, _out(max(hi, 0.0), False)
    if kind == "sigmoid":
        return max(0.0, _out(_sigmoid(lo), True)), min(1.0, _out(_sigmoid(hi), False))
    if kind == "tanh":
        return max(-1.0, _out(math.tanh(lo), True)), min(1.0, _out(math.tanh(hi), False))
    if kind in ("hardtanh", "clamp", "min_const", "max_const"):
        a, b = op.get("min", -INF), op.get("max", INF)
        return min(max(lo, a), b), min(max(hi, a), b)
    if kind == "dropout":  # zeros, or x / (1 - p)
        if op["value"] == 0 or lo == hi == 0:
            return lo, hi
        return min(0.0, _out(lo / (1 - op["value"]), True)), max(0.0, _out(hi / (1 - op["value"]), False))
    raise ValueError(kind)


def step(state, op):
    """The state after `op`: dict(shape, lo, hi, const, rand), or None when `op` is not valid here.
    const: the value does not depend on the inputs (nor on dropout's randomness); rand: it depends
    on dropout's randomness. state["head"] is the head's output shape (what a residual adds)."""
    kind, shape = op["kind"], list(state["shape"])
    lo, hi, const, rand = state["lo"], state["hi"], state["const"], state["rand"]
    rank, spatial = len(shape), shape[2:]
    if kind == "residual":
        if shape != list(state["head"]):
            return None
        lo, hi, const = -INF, INF, False
    elif kind == "softmax":
        if shape[op["dim"]] == 1:
            lo = hi = 1.0  # exp(0) / exp(0)
        else:
            lo, hi = 0.0, 1.0
    elif kind in REDUCTIONS:
        if kind in ("global_avg_pool", "max_pool", "avg_pool") and rank < 3:
            return None
        if kind in ("max_pool", "avg_pool"):
            if min(spatial) < op["k"]:
                return None
            shape = shape[:2] + [s // op["k"] for s in spatial]
            n = op["k"] ** len(spatial)
        else:
            dims = tuple(range(2, rank)) if kind == "global_avg_pool" else op["dims"]
            n = math.prod(shape[d] for d in dims)
            if op.get("keepdim", True):
                shape = [1 if d in dims else s for d, s in enumerate(shape)]
            else:
                shape = [s for d, s in enumerate(shape) if d not in dims]
        if n > 1 and kind in ("sum", "logsumexp"):
            top = hi * n if kind == "sum" else hi + math.log(n)
            lo, hi = (_out(lo * n, True) if kind == "sum" else lo), _out(top, False)
        elif n > 1 and kind in ("mean", "global_avg_pool", "avg_pool"):
            lo, hi = _out(lo, True), _out(hi, False)
    elif kind in NORMS:
        group = {"batch_norm": shape[0] * math.prod(spatial), "layer_norm": shape[-1],
                 "instance_norm": math.prod(spatial) if rank >= 3 else 0,
                 "group_norm": shape[1] // op.get("groups", 1) * math.prod(spatial)}[kind]
        # training-mode norms refuse one element per channel (batch, instance); a one-element
        # GroupNorm group gives input-dependent rounding noise, so we never draw one
        if group < 2 and kind != "layer_norm":
            return None
        if kind == "group_norm" and shape[1] % op["groups"]:
            return None
        lo, hi = -INF, INF
        if group == 1:  # LayerNorm over one element: (x - x) * rstd * weight + bias = bias
            const, rand = True, False
    else:
        lo, hi = _elementwise(kind, op, lo, hi)
        if kind == "dropout" and op["value"] > 0 and not state["lo"] == state["hi"] == 0:
            const, rand = False, True
    if lo == hi:  # every element is exactly this value
        const, rand = True, False
    return dict(shape=tuple(shape), lo=lo, hi=hi, const=const, rand=rand, head=state["head"])


def trace(spec):
    """The state before the first op and after each op: len(ops) + 1 states."""
    states = [dict(shape=spec["out"], lo=-INF, hi=INF, const=False, rand=False, head=spec["out"])]
    for op in spec["ops"]:
        states.append(step(states[-1], op))
        if states[-1] is None:
            raise ValueError(f"op {op['kind']} is not valid on shape {states[-2]['shape']}")
    return states


# -----------------------------------------------------------------------------
# moves: which rewrites are exact for this task, and where

def _is_noop(op, s):
    """Is `op` the identity on every value of state `s`?"""
    kind, lo, hi = op["kind"], s["lo"], s["hi"]
    if kind in ("mul_const", "div_const"):
        return op["value"] == 1
    if kind in ("add_const", "sub_const"):
        return op["value"] == 0
    if kind == "dropout":
        return op["value"] == 0
    if kind in ("relu", "leaky_relu"):
        return lo >= 0
    if kind in ("hardtanh", "clamp", "min_const", "max_const"):
        return op.get("min", -INF) <= lo and hi <= op.get("max", INF)
    if kind in ("logsumexp", "sum", "mean", "max", "global_avg_pool"):
        dims = tuple(range(2, len(s["shape"]))) if kind == "global_avg_pool" else op["dims"]
        return op.get("keepdim", True) and all(s["shape"][d] == 1 for d in dims)
    return False


def _reduced_dims(op, rank):
    if op["kind"] in ("global_avg_pool", "max_pool", "avg_pool"):
        return tuple(range(2, rank))
    return op["dims"]


def _commutes(e, r, rank):
    """Does elementwise op `e`, applied right before reduction `r`, commute with it exactly?"""
    k = e["kind"]
    channel = 1 in _reduced_dims(r, rank)  # per-channel parameters are uniform only off the channel dim
    if k in PARAMS and channel:
        return False
    if r["kind"] in ("max", "max_pool"):  # max(f(x)) = f(max(x)) for nondecreasing f
        monotone = k in ("relu", "leaky_relu", "sigmoid", "tanh", "hardtanh", "clamp", "min_const", "max_const",
                         "add_const", "sub_const", "bias", "add_param", "sub_param")
        return monotone or (k in ("mul_const", "div_const") and e["value"] > 0)
    if r["kind"] in ("mean", "avg_pool", "global_avg_pool"):  # mean(a x + b) = a mean(x) + b
        return k in AFFINE
    if r["kind"] == "sum":  # sum(a x) = a sum(x)
        return k in ("mul_const", "div_const", "mul_param", "div_param")
    if r["kind"] == "logsumexp":  # lse(x + b) = lse(x) + b
        return k in ("add_const", "sub_const", "bias", "add_param", "sub_param")
    return False


def moves(spec, states=None):
    """{move: [op indices where it applies]} for every move the task admits (see the docstring)."""
    states = states or trace(spec)
    ops, head = spec["ops"], spec["head"]["kind"]
    sites = {m: [] for m in MOVES}
    live_dropout = any(op["kind"] == "dropout" and op["value"] > 0 for op in ops)
    if len(ops) >= 2 and not live_dropout:
        sites["fuse_epilogue"] = list(range(len(ops)))
    run = 0  # the per-channel affine ops right after the head
    while run < len(ops) and ops[run]["kind"] in AFFINE:
        run += 1
    if head in WEIGHTED and not any(op["kind"] == "residual" for op in ops):
        lead = range(run)
        sites["fold_scale_into_weights"] = [i for i in lead if ops[i]["kind"] in ("mul_const", "div_const", "mul_param", "div_param")]
        sites["fold_bias"] = [i for i in lead if ops[i]["kind"] in ("bias", "add_const", "sub_const", "add_param", "sub_param")]
        if run < len(ops) and ops[run]["kind"] in ("sum", "mean") and ops[run]["dims"] == (1,):
            sites["fold_reduction"] = [run]
    for i, op in enumerate(ops):
        if i + 1 < len(ops) and op["kind"] in AFFINE and ops[i + 1]["kind"] in AFFINE:
            sites["merge_affine"] += [i, i + 1]
        if op["kind"] in REDUCTIONS and i > 0 and _commutes(ops[i - 1], op, len(states[i]["shape"])):
            sites["reduce_first"].append(i)
        if _is_noop(op, states[i]):
            sites["drop_noop"].append(i)
    if states[-1]["const"]:
        sites["constant_output"] = [len(ops) - 1]
    return {m: sorted(set(v)) for m, v in sites.items() if v}


# -----------------------------------------------------------------------------
# drawing a task: the head, then ops one by one, each valid on the shape it gets

def _pick(rng, weights):
    keys = list(weights)
    return rng.choices(keys, weights=[weights[k] for k in keys])[0]


def _head(rng, p):
    """(head dict, input shapes, output shape) with the profile's sizes."""
    kind = _pick(rng, HEADS)
    i = lambda key: rng.randrange(len(p[key]))  # noqa: E731  an index, so profiles draw alike
    if kind in ("gemm", "matmul"):
        b, fin, fout = p["batch"][i("batch")], p["features"][i("features")], p["features"][i("features")]
        return dict(kind=kind, fin=fin, fout=fout), [(b, fin)], (b, fout)
    if kind == "bmm":
        b, m, k, n = p["batch"][i("batch")] // 2 or 1, p["bmm"][i("bmm")], p["bmm"][i("bmm")], p["bmm"][i("bmm")]
        return dict(kind=kind), [(b, m, k), (b, k, n)], (b, m, n)
    if kind == "none":
        rank = rng.choice((2, 3, 4, 5))
        if rank == 2:
            shape = (p["batch"][i("batch")], p["features"][i("features")])
        elif rank == 3:
            shape = (p["conv_batch"][i("conv_batch")], p["out_channels"][i("out_channels")], p["features"][i("features")])
        elif rank == 4:
            shape = (p["conv_batch"][i("conv_batch")], p["out_channels"][i("out_channels")]) + (p["hw"][i("hw")],) * 2
        else:
            shape = (p["batch3d"][i("batch3d")], p["out_channels"][i("out_channels")], p["depth"][i("depth")]) \
                + (p["hw3d"][i("hw3d")],) * 2
        return dict(kind=kind), [shape], shape
    d3 = kind.endswith("3d")
    b = p["batch3d"][i("batch3d")] if d3 else p["conv_batch"][i("conv_batch")]
    cin, cout = p["channels"][i("channels")], p["out_channels"][i("out_channels")]
    sp = (p["depth"][i("depth")],) + (p["hw3d"][i("hw3d")],) * 2 if d3 else (p["hw"][i("hw")],) * 2
    if kind.startswith("conv_transpose"):
        k, stride = rng.choice((3, 4)), rng.choice((1, 2, 2))
        pad, opad = rng.choice((0, 1)), rng.choice((0, 1)) if stride == 2 else 0
        out = tuple((s - 1) * stride - 2 * pad + k + opad for s in sp)
    else:
        k, stride = rng.choice((3, 3, 5)) if not d3 else 3, rng.choice((1, 1, 2))
        pad, opad = rng.choice((0, k // 2)), 0
        out = tuple((s + 2 * pad - k) // stride + 1 for s in sp)
    head = dict(kind=kind, cin=cin, cout=cout, k=k, stride=stride, pad=pad, opad=opad)
    return head, [(b, cin) + sp], (b, cout) + out


# Names, each drawn from a few (the first is the one every task used before): a policy trained on one
# name per op recalled it instead of reading the task (H200 and CPU runs: held-out answers calling
# self.gemm where KernelBench's task says self.matmul, self.scale for self.multiplier). Attribute names
# of the ops that own parameters or modules; never a constant's name, never a template's variable.
ATTRS = {"bias": ("bias", "bias_term", "extra_bias"), "add_param": ("shift", "add_term", "offset_add"),
         "sub_param": ("offset", "sub_term", "subtrahend"), "mul_param": ("scale", "gain", "scale_param"),
         "div_param": ("denominator", "div_term", "divisor_param"), "batch_norm": ("batch_norm", "bn", "norm"),
         "group_norm": ("group_norm", "gn", "norm"), "layer_norm": ("layer_norm", "ln", "norm"),
         "instance_norm": ("instance_norm", "inorm", "norm"), "dropout": ("dropout", "drop", "dropout_layer"),
         "max_pool": ("max_pool", "pool", "maxpool"), "avg_pool": ("avg_pool", "pool", "avgpool")}
HEAD_ATTRS = {"gemm": ("gemm", "linear", "fc", "matmul", "dense"), "matmul": ("weight", "proj", "weight_matrix"),
              "conv2d": ("conv", "conv2d", "conv_layer"), "conv3d": ("conv", "conv3d", "conv_layer"),
              "conv_transpose2d": ("conv_transpose", "conv_transpose2d", "deconv", "conv_t"),
              "conv_transpose3d": ("conv_transpose", "conv_transpose3d", "deconv", "conv_t")}
CONST_NAMES = {  # the constants' names (module constants, __init__ arguments and attributes)
    "Scaling": (("scaling_factor",), ("scale_factor",), ("factor",)), "Multiply": (("multiplier",), ("multiply_value",)),
    "div_const": (("divisor",), ("divide_by",)), "add_const": (("add_value",), ("add_constant",)),
    "sub_const": (("subtract_value",), ("sub_value",)), "leaky_relu": (("negative_slope",), ("leaky_slope",)),
    "hardtanh": (("hardtanh_min", "hardtanh_max"), ("min_val", "max_val")),
    "clamp": (("clamp_min", "clamp_max"), ("lower", "upper")), "min_const": (("min_value",), ("min_bound",)),
    "max_const": (("max_value",), ("max_bound",)),
}
CONSTS = {  # value choices: a few that make an op a no-op (1.0, 0.0) on purpose
    "mul_const": (0.5, 2.0, 1.5, 0.25, 3.0, 10.0, 0.1, -1.0, 1.0),
    "div_const": (2.0, 4.0, 3.0, 0.5, 10.0, 1.5, 1.0),
    "add_const": (0.5, 1.0, 0.1, 2.0, -0.5, 0.2, 3.0, 0.0),
    "sub_const": (0.5, 1.0, 0.1, 2.0, -0.5, 0.2, 3.0, 0.0),
    "leaky_relu": (0.01, 0.1, 0.2, 0.05),
    "dropout": (0.0, 0.0, 0.1, 0.2, 0.5),
    "bound": (-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0, 6.0),
}


def _bounds(rng, kind, s):
    """min/max of a clamp-like op. Now and then chosen from the input's range so that the op
    cannot bite (a no-op) or pins every value (a constant): the cases moves are about."""
    lo, hi, pool = s["lo"], s["hi"], CONSTS["bound"]
    mode = rng.choice(("any", "any", "any", "noop", "pin"))
    below = [v for v in pool if v <= lo]  # every value is >= these
    above = [v for v in pool if v >= hi]
    if kind == "min_const":  # min(x, c)
        c = rng.choice(above if mode == "noop" and above else below if mode == "pin" and below else pool)
        return dict(max=c)
    if kind == "max_const":
        c = rng.choice(below if mode == "noop" and below else above if mode == "pin" and above else pool)
        return dict(min=c)
    if mode == "noop" and below and above and kind == "clamp":
        return dict(min=rng.choice(below), max=rng.choice(above))
    a, b = sorted(rng.sample(pool, 2))
    if kind == "hardtanh" and rng.random() < 0.5:
        a, b = -1.0, 1.0  # Hardtanh's defaults
    return dict(min=a, max=b)


def _draw_op(rng, kind, s):
    """An op of `kind` with its constants, dims and sizes drawn for state `s` (may be invalid there)."""
    op, rank = dict(kind=kind), len(s["shape"])
    if kind in ("mul_const", "div_const", "add_const", "sub_const", "leaky_relu", "dropout"):
        op["value"] = rng.choice(CONSTS[kind])
    elif kind in ("hardtanh", "clamp", "min_const", "max_const"):
        op.update(_bounds(rng, kind, s))
    elif kind in ("softmax", "logsumexp", "sum", "mean", "max"):
        choices = [(d,) for d in range(1, rank)] + ([tuple(range(2, rank))] if rank >= 4 else [])
        op["dims"] = rng.choice(choices)
        if kind == "softmax":
            op["dim"] = op.pop("dims")[0]
        else:  # dropping dims must leave (batch, something)
            op["keepdim"] = rank - len(op["dims"]) < 2 or rng.random() < 0.5
    elif kind in ("max_pool", "avg_pool"):
        op["k"] = 2
    elif kind == "group_norm":
        c = s["shape"][1]
        op["groups"] = rng.choice([g for g in range(1, c + 1) if c % g == 0 and g < c] or [1])
    return op


def draw(seed, size="gpu"):
    """The task of `seed` as a spec: dict(seed, size, head, inputs, out, ops). render() writes it."""
    rng, p = random.Random(seed), PROFILES[size]
    head, inputs, out = _head(rng, p)
    spec = dict(seed=seed, size=size, head=head, inputs=inputs, out=out, ops=[])
    state = trace(spec)[0]
    n = _pick(rng, N_OPS)
    weights = {k: w for k, (w, _) in OPS.items()}
    while len(spec["ops"]) < n:
        for _ in range(20):  # elementwise ops are valid anywhere: a few tries find a valid op
            op = _draw_op(rng, _pick(rng, weights), state)
            new = step(state, op)
            if new is not None and not (op["kind"] == "residual" and not spec["ops"]):
                break
        else:
            break
        if op["kind"] == "mul_const":
            op["token"] = rng.choice(("Scaling", "Multiply"))
        spec["ops"].append(op)
        state = new
    _name(spec)
    _spell(spec)
    return spec


def _name(spec):
    """Every attribute and constant name of the spec, drawn from its own generator: the ops, shapes and
    moves a seed drew before names varied are the ones it draws now. Named once, here: a parameter
    keeps its name when a test removes another op."""
    rng, taken = random.Random(f"names {spec['seed']}"), set()
    if spec["head"]["kind"] in HEAD_ATTRS:
        spec["head"]["attr"] = rng.choice(HEAD_ATTRS[spec["head"]["kind"]])
        taken.add(spec["head"]["attr"])
    for op in spec["ops"]:
        if op["kind"] in ATTRS:
            base = rng.choice(ATTRS[op["kind"]])
            op["attr"] = base if base not in taken else next(f"{base}{i}" for i in range(2, 99) if f"{base}{i}" not in taken)
            taken.add(op["attr"])
        names = CONST_NAMES.get(op.get("token") if op["kind"] == "mul_const" else op["kind"])
        if names:
            op["names"] = rng.choice(names)


def _spell(spec):
    """How some ops' lines are spelt, drawn from a generator of their own as names are (a seed's ops,
    shapes, moves and names stay): the same ATen kernels, written the ways KernelBench's tasks write
    them: a method or a function, dims as a tuple or a list, `.values` or `[0]`. With one spelling per
    op the H100 policy met level-2 lines spelt otherwise (task 44's `torch.mean(x, dim=[2, 3], ...)`,
    task 98's `torch.max(x, dim=1).values`, task 23's `x.mean(dim=[...])`): 7 of its 16 level-2 failures
    were on the 9 tasks with a line the generator never wrote (some of those are ops it does not draw:
    a min over a dim, a mean over channels and space at once, a subtracted mean). The first spelling
    is the one every task had before. Not drawn for min/max against a constant: level 2's
    `torch.min(x, torch.tensor(c))` runs another kernel than the clamp, so the teacher's measured
    speedups would no longer be its task's."""
    rng = random.Random(f"spellings {spec['seed']}")
    for op in spec["ops"]:
        if op["kind"] in ("logsumexp", "sum", "mean", "max", "global_avg_pool"):
            op["spell"] = dict(method=rng.random() < 0.5, list_dims=rng.random() < 0.5, values=rng.random() < 0.5)


def unspelt(spec):
    """The spec with every op in its first spelling: the task as generated before _spell."""
    return dict(spec, ops=[{k: v for k, v in op.items() if k != "spell"} for op in spec["ops"]])


# -----------------------------------------------------------------------------
# rendering a spec as a KernelBench task file

HEAD_TEXT = {"gemm": "Linear layer", "matmul": "matmul with a weight matrix", "bmm": "batched matmul of two inputs",
             "conv2d": "Conv2d", "conv3d": "Conv3d", "conv_transpose2d": "ConvTranspose2d",
             "conv_transpose3d": "ConvTranspose3d"}


def _fmt(shape, batch="B"):
    return "(" + ", ".join([batch] + [str(s) for s in shape[1:]]) + ")"


def _wrap(line, width=110):
    """A long call or list cut after commas and continued under its first argument, as in KernelBench."""
    if len(line) <= width:
        return [line]
    start = min(i for i in (line.find("("), line.find("[")) if i >= 0) + 1
    out, cur = [], line[:start]
    for part in line[start:].split(", "):
        if len(cur) + len(part) + 2 > width and cur.strip() and not cur.endswith(("(", "[")):
            out.append(cur.rstrip() + ",")
            cur = " " * start
        elif not cur.endswith(("(", "[")) and cur.strip():
            cur += ", "
        cur += part
    return out + [cur]


def render(spec):
    """The task file's source: docstring, imports, Model, module constants, get_inputs, get_init_inputs.
    The head and each op give lines of Model.__init__ and forward, a phrase of the docstring, and the
    module constants they need (_render_head, _render_elementwise, _render_reduction)."""
    consts, args = {"batch_size": spec["inputs"][0][0]}, []  # module constants, in order; __init__'s args

    def const(name, value, arg=True):  # a module constant (an __init__ arg unless arg=False); a fresh name when taken
        name = name if name not in consts else next(f"{name}_{i}" for i in range(2, 99) if f"{name}_{i}" not in consts)
        consts[name] = value
        if arg:
            args.append(name)
        return name

    init, fwd, words, inputs_src = _render_head(spec, const)
    if any(op["kind"] == "residual" for op in spec["ops"]):
        fwd.append("residual = x  # the head's output, added back below")
    states = trace(spec)
    for op, s, after in zip(spec["ops"], states, states[1:]):
        op_init, line, word = _render_elementwise(op, s, const) or _render_reduction(op, s, after, const)
        init += op_init
        fwd.append(line)
        words.append(word)

    xs = ["x", "y"] if spec["head"]["kind"] == "bmm" else ["x"]
    lines = [f'"""{_docstring(words, spec["inputs"], states[-1]["shape"])}"""', "import torch", "import torch.nn as nn"]
    if any("= F." in line for line in fwd):  # forward calls torch.nn.functional
        lines.append("import torch.nn.functional as F")
    lines += ["", "", "class Model(nn.Module):", *_wrap(f"    def __init__(self{''.join(', ' + a for a in args)}):"),
              "        super().__init__()"]
    lines += [w for line in init for w in _wrap("        " + line)]
    lines += ["", f"    def forward(self, {', '.join(xs)}):"] + ["        " + line for line in fwd] + ["        return x", "", ""]
    lines += [f"{name} = {value!r}" for name, value in consts.items()]
    lines += ["", "", "def get_inputs():", f"    return [{', '.join(inputs_src)}]", "", "",
              "def get_init_inputs():", *_wrap(f"    return [{', '.join(args)}]"), ""]
    return "\n".join(lines)


def _docstring(words, inputs, out_shape):
    """Model's docstring: the head's and ops' phrases, then the shapes in and out."""
    ins = " and ".join(_fmt(s, "batch") for s in inputs)
    text = ", ".join(words) or "identity"  # no ops: only a test's variant has none
    text = text[0].upper() + text[1:]
    doc = f"{text}: {ins} -> {_fmt(out_shape, 'batch')}."
    if len(doc) > 100:  # KernelBench's long form: what it computes, a blank line, the shapes
        doc = f"{textwrap.fill(text + '.', 100)}\n\n{ins} -> {_fmt(out_shape, 'batch')}.\n"
    return doc


def _render_head(spec, const):
    """The head as (__init__ lines, forward lines, docstring phrases, get_inputs' tensors); its sizes
    become module constants through const(name, value, arg)."""
    head, inputs = spec["head"], spec["inputs"]
    kind = head["kind"]
    init, fwd, words = [], [], []
    if kind in ("gemm", "matmul"):
        const("in_features", head["fin"])
        const("out_features", head["fout"])
        attr = head["attr"]
        if kind == "gemm":
            init.append(f"self.{attr} = nn.Linear(in_features, out_features)")
            fwd.append(f"x = self.{attr}(x)  # {_fmt(spec['out'])}")
        else:
            init.append(f"self.{attr} = nn.Parameter(torch.randn(in_features, out_features) / in_features ** 0.5)")
            fwd.append(f"x = torch.matmul(x, self.{attr})  # {_fmt(spec['out'])}")
        inputs_src = ["torch.randn(batch_size, in_features)"]
    elif kind == "bmm":
        for name, value in (("m", inputs[0][1]), ("k", inputs[0][2]), ("n", inputs[1][2])):
            const(name, value, arg=False)
        fwd.append(f"x = torch.bmm(x, y)  # {_fmt(spec['out'])}")
        inputs_src = ["torch.randn(batch_size, m, k)", "torch.randn(batch_size, k, n)"]
    elif kind == "none":
        names = {2: ("features",), 3: ("channels", "length"), 4: ("channels", "height", "width"),
                 5: ("channels", "depth", "height", "width")}[len(inputs[0])]
        for name, value in zip(names, inputs[0][1:]):
            const(name, value, arg=False)
        inputs_src = [f"torch.randn(batch_size, {', '.join(names)})"]
    else:
        d = kind[-2:]
        sp = ("depth", "height", "width") if d == "3d" else ("height", "width")
        const("in_channels", head["cin"])
        const("out_channels", head["cout"])
        for name, value in zip(sp, inputs[0][2:]):
            const(name, value, arg=False)
        const("kernel_size", head["k"])
        extra = ""
        for key, name in (("stride", "stride"), ("pad", "padding"), ("opad", "output_padding")):
            if head[key] != (1 if key == "stride" else 0):
                const(name, head[key])
                extra += f", {name}={name}"
        module, attr = "ConvTranspose" if "transpose" in kind else "Conv", head["attr"]
        init.append(f"self.{attr} = nn.{module}{d}(in_channels, out_channels, kernel_size{extra})")
        fwd.append(f"x = self.{attr}(x)  # {_fmt(spec['out'])}")
        inputs_src = [f"torch.randn(batch_size, in_channels, {', '.join(sp)})"]
        words.append(HEAD_TEXT[kind] + (f" (stride {head['stride']}, padding {head['pad']}"
                                        + (f", output_padding {head['opad']})" if head["opad"] else ")")
                                        if head["stride"] != 1 or head["pad"] else ""))
    if kind in ("gemm", "matmul", "bmm"):
        words.append(HEAD_TEXT[kind])
    return init, fwd, words, inputs_src


def _render_elementwise(op, s, const):
    """An elementwise op (affine with a constant or a per-channel parameter, the residual add, an
    activation, a clamp) on state s as (__init__ lines, forward line, docstring phrase); None for an
    op that is not one."""
    k, c, rank = op["kind"], s["shape"][1], len(s["shape"])
    if k in PARAMS:
        shape = const(f"{op['attr']}_shape", (c,) + (1,) * (rank - 2))
        init_value = f"torch.rand({shape}) + 0.5" if k == "div_param" else f"torch.randn({shape})"
        sym = {"bias": "+", "add_param": "+", "sub_param": "-", "mul_param": "*", "div_param": "/"}[k]
        what = {"bias": "add a learned per-channel bias", "add_param": "add a learned per-channel shift",
                "sub_param": "subtract a learned per-channel offset", "mul_param": "multiply by a learned per-channel scale",
                "div_param": "divide by a learned per-channel divisor"}[k]
        return [f"self.{op['attr']} = nn.Parameter({init_value})"], f"x = x {sym} self.{op['attr']}", what
    if k in ("mul_const", "div_const", "add_const", "sub_const"):
        name = const(op["names"][0], op["value"])
        sym = {"mul_const": "*", "div_const": "/", "add_const": "+", "sub_const": "-"}[k]
        what = {"mul_const": "multiply by", "div_const": "divide by", "add_const": "add", "sub_const": "subtract"}[k]
        return [f"self.{name} = {name}"], f"x = x {sym} self.{name}", f"{what} {op['value']}"
    if k == "residual":
        return [], "x = x + residual", "add the head's output back"
    if k in ("relu", "sigmoid", "tanh"):
        return [], f"x = torch.{k}(x)", {"relu": "ReLU", "sigmoid": "Sigmoid", "tanh": "Tanh"}[k]
    if k in ("gelu", "mish", "hardswish"):
        return [], f"x = F.{k}(x)", {"gelu": "GELU", "mish": "Mish", "hardswish": "HardSwish"}[k]
    if k == "swish":
        return [], "x = x * torch.sigmoid(x)  # Swish", "Swish"
    if k == "leaky_relu":
        name = const(op["names"][0], op["value"])
        return ([f"self.{name} = {name}"], f"x = F.leaky_relu(x, negative_slope=self.{name})",
                f"LeakyReLU({op['value']})")
    if k in ("hardtanh", "clamp"):
        a, b = const(op["names"][0], op["min"]), const(op["names"][1], op["max"])
        init = [f"self.{a} = {a}", f"self.{b} = {b}"]
        if k == "hardtanh":
            return init, f"x = F.hardtanh(x, min_val=self.{a}, max_val=self.{b})", f"Hardtanh({op['min']}, {op['max']})"
        return init, f"x = torch.clamp(x, min=self.{a}, max=self.{b})", f"clamp to [{op['min']}, {op['max']}]"
    if k in ("min_const", "max_const"):
        bound = "max" if k == "min_const" else "min"  # min(x, v) clamps from above
        name = const(op["names"][0], op[bound])
        return ([f"self.{name} = {name}"], f"x = torch.clamp(x, {bound}=self.{name})  # {k[:3]}(x, {name})",
                f"{k[:3]} with {op[bound]}")
    return None


def _render_reduction(op, s, after, const):
    """An op that reads more than one element (softmax, a reduction, a pool, a norm) or dropout, on
    state s giving state `after`, as (__init__ lines, forward line, docstring phrase)."""
    k, c, rank = op["kind"], s["shape"][1], len(s["shape"])
    shape_note = f"  # {_fmt(after['shape'])}" if after["shape"] != s["shape"] else ""
    if k == "softmax":
        return [], f"x = torch.softmax(x, dim={op['dim']})", f"softmax over dim {op['dim']}"
    spell = op.get("spell", {})  # _spell's draw; a spec without one (a test's) spells as before

    def call(fn, dims, keepdim, one=True):  # torch.fn(x, dim=...) or x.fn(dim=...), dims as a tuple or a list
        dims = dims[0] if one and len(dims) == 1 else list(dims) if spell.get("list_dims") else tuple(dims)
        args = f"dim={dims}, keepdim={keepdim}"
        return f"x.{fn}({args})" if spell.get("method") else f"torch.{fn}(x, {args})"
    if k in ("logsumexp", "sum", "mean", "max"):
        if k == "max" and len(op["dims"]) == 1:  # max over one dim gives (values, indices)
            line = f"x = {call('max', op['dims'], op['keepdim'])}{'.values' if spell.get('values') else '[0]'}"
        else:
            line = f"x = {call('amax' if k == 'max' else k, op['dims'], op['keepdim'])}"
        dims = op["dims"][0]
        return [], line + shape_note, f"{k} over {f'dim {dims}' if len(op['dims']) == 1 else 'the spatial dims'}"
    if k == "global_avg_pool":
        return ([], f"x = {call('mean', range(2, rank), True, one=False)}{shape_note}  # global average pool",
                "global average pool")
    if k in ("max_pool", "avg_pool"):
        name = const("pool_kernel_size", op["k"])
        mod = {"max_pool": "MaxPool", "avg_pool": "AvgPool"}[k]
        return ([f"self.{op['attr']} = nn.{mod}{rank - 2}d(kernel_size={name})"],
                f"x = self.{op['attr']}(x){shape_note}", f"{mod}{rank - 2}d({op['k']})")
    if k == "dropout":
        name = const("dropout_p", op["value"])
        return [f"self.{op['attr']} = nn.Dropout({name})"], f"x = self.{op['attr']}(x)", f"dropout(p={op['value']})"
    if k == "batch_norm":
        layer, what = f"nn.BatchNorm{max(rank - 2, 1)}d({c})", "BatchNorm (batch statistics)"
    elif k == "group_norm":
        layer, what = f"nn.GroupNorm({const('num_groups', op['groups'])}, {c})", f"GroupNorm({op['groups']} groups)"
    elif k == "layer_norm":
        layer, what = f"nn.LayerNorm({s['shape'][-1]})", "LayerNorm over the last dim"
    elif k == "instance_norm":
        layer, what = f"nn.InstanceNorm{rank - 2}d({c})", "InstanceNorm"
    else:
        raise ValueError(k)
    return [f"self.{op['attr']} = {layer}"], f"x = self.{op['attr']}(x)", what


def name_of(spec):
    """The file name's stem, KernelBench style: '7_Conv2d_ReLU_BiasAdd'."""
    head = {"gemm": "Gemm", "matmul": "Matmul", "bmm": "BMM", "conv2d": "Conv2d", "conv3d": "Conv3d",
            "conv_transpose2d": "ConvTranspose2d", "conv_transpose3d": "ConvTranspose3d", "none": ""}[spec["head"]["kind"]]
    tokens = [head] + [op.get("token") or OPS[op["kind"]][1] for op in spec["ops"]]
    return f"{spec['seed']}_" + "_".join(t for t in tokens if t)


def generate(seed, size="gpu"):
    """(name, source, meta) of the task of `seed`. meta: seed, size, head, ops (kinds), moves (sorted
    names), sites ({move: op indices}), stochastic (live dropout reaches the output), held_out, and
    degenerate: a norm of a constant, whose variance is rounding noise that the norm divides by
    sqrt(eps), so the reference is noise too (~0.4% of seeds; tasks() skips them)."""
    spec = draw(seed, size)
    states = trace(spec)
    sites = moves(spec, states)
    meta = dict(seed=seed, size=size, head=spec["head"]["kind"], ops=[op["kind"] for op in spec["ops"]],
                moves=sorted(sites), sites=sites, stochastic=states[-1]["rand"],
                inputs=[list(s) for s in spec["inputs"]], output=list(states[-1]["shape"]),
                degenerate=any(op["kind"] in NORMS and states[i]["const"] for i, op in enumerate(spec["ops"])))
    meta["held_out"] = cudal1.held_out(meta)
    return name_of(spec), render(spec), meta


def tasks(start, n, size="gpu", split="train"):
    """n tasks (name, source, meta) from seeds start, start+1, ..., keeping those of `split`:
    'train' (not held out), 'held_out', or 'all'; never a degenerate one."""
    out, seed = [], start
    while len(out) < n:
        task = generate(seed, size)
        if not task[2]["degenerate"] and (split == "all" or task[2]["held_out"] == (split == "held_out")):
            out.append(task)
        seed += 1
    return out


def write(out_dir, name, source, meta):
    """out_dir/NAME.py, the task, and NAME.json beside it, its metadata (cudal1.held_out reads it)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".py"), "w") as f:
        f.write(source)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(meta, f, indent=1)


def read_meta(task_path):
    """The metadata write() put beside a task file (NAME.json for NAME.py)."""
    with open(os.path.splitext(task_path)[0] + ".json") as f:
        return json.load(f)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write generated KernelBench-style tasks")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--n", type=int, default=10, help="tasks to write")
    parser.add_argument("--size", default="gpu", choices=sorted(PROFILES), help="size profile")
    parser.add_argument("--split", default="train", choices=("train", "held_out", "all"),
                        help="which tasks to keep (cudal1.held_out); seeds of the other split are skipped")
    parser.add_argument("--out", required=True, help="folder for NAME.py + NAME.json")
    args = parser.parse_args()
    for name, source, meta in tasks(args.seed, args.n, args.size, args.split):
        write(args.out, name, source, meta)
        print(f"{name}.py  moves: {', '.join(meta['moves']) or '-'}")

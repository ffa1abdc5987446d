"""
The teacher: for a generated task (kernelbench/generate.py), one solution per optimisation move the
task admits, each applying exactly one move, each a KernelBench solution file whose first docstring
is the performance analysis the policy learns to write.

    python kernelbench/teacher.py --seeds 0:500 --out build/teacher                    # GPU sizes, training split
    python kernelbench/teacher.py --seeds 0:50 --size cpu --out /tmp/teacher           # sizes a CPU runs in ms
    python kernelbench/teacher.py --seeds 0:500 --split held_out --out build/held      # the held-out tasks only

writes OUT/tasks/levelG/N_Name.py (+ N_Name.json, the generator's metadata) and
OUT/solutions/levelG/N_Name.<move>.py, the layout evaluate.py pairs by id:

    python evaluate.py --tasks build/teacher/tasks/levelG --solutions build/teacher/solutions/levelG \\
        --gpu h200 --out results/teacher-h200

A task often admits several moves, and the best program composes them; the teacher's solutions never
do: finding the composition is what search and RL are for (composed(), below, is a measuring oracle).
How each move is written:
    drop_noop                the ops that are the identity on every value they can see are left out
    constant_output          the ops up to the point where every value is pinned (a clamp, a min, a
                             softmax over one element, LayerNorm over one element) are skipped: the
                             tensor there is made by torch.full, and the ops after it run as before
    reduce_first             the elementwise op right before a reduction runs right after it instead
    merge_affine             each run of per-channel affine ops is one torch.addcmul(b, x, a)
    fold_scale_into_weights  the multiplies after a weighted head go into its weight and bias (adds
                             that came before a multiply are scaled by it and stay where they are)
    fold_bias                the adds after a weighted head go into its bias (moved in front of the
                             constant multiplies before them; adds behind a learned per-channel scale
                             stay, since moving them would divide by a scale that may be zero)
    fold_reduction           a sum or mean over the channels after a weighted head (and the affine ops
                             before it) goes into the weight: the head computes one output channel
    fuse_epilogue            the head stays torch (cuBLAS / cuDNN), every op after it runs in one CUDA
                             kernel (cudal1.load_cuda) generated from the op chain: an elementwise
                             template, a row template (one reduction, softmax or norm, with the
                             elementwise ops before and after it) or a window template (a max or
                             average pool). Chains with two or more reductions, norms or pools get
                             no fused solution. A CPU-sized task's is a C++ loop instead
                             (cudal1.load_c, OpenMP over elements, channel runs, rows or outputs).
Folds are computed in forward from the live parameters and cached until one changes (an in-place
update bumps a tensor's _version, a new tensor has a new data_ptr); the judge loads the reference's
state into ModelNew after constructing it, so nothing may be precomputed in __init__. Every
solution is `class ModelNew(Model)`: it inherits Model's constructor, parameters and parameter names
(the judge runs a solution after its task's program) and overrides forward. A conv head runs with
TF32 off: the judge checks against true fp32, and eager lets cuDNN use TF32.

    solutions(task_source, meta) -> [(move, solution_source)]   one per move the teacher can write
    composed(task_source, meta) -> [('drop_noop+MOVE', source)]  the no-ops dropped, then one more move:
        bench/held_out_ceiling.py's oracle for what two moves reach, never training data
"""

import argparse
import copy
import math
import os
import random
import re
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, ROOT)
from kernelbench import generate as gen  # noqa: E402

HEAD_NAME = {"gemm": "Linear", "matmul": "matmul", "bmm": "bmm", "conv2d": "Conv2d", "conv3d": "Conv3d",
             "conv_transpose2d": "ConvTranspose2d", "conv_transpose3d": "ConvTranspose3d"}
HEAD_LIB = {"gemm": "cuBLAS", "matmul": "cuBLAS", "bmm": "cuBLAS", "conv2d": "cuDNN", "conv3d": "cuDNN",
            "conv_transpose2d": "cuDNN", "conv_transpose3d": "cuDNN"}
MUL = {"mul_const", "div_const", "mul_param", "div_param"}  # the affine ops that scale
ADD = gen.AFFINE - MUL                                      # the affine ops that shift
ELEMENTWISE = gen.AFFINE | {"residual", "relu", "leaky_relu", "gelu", "sigmoid", "tanh", "swish", "mish",
                            "hardswish", "hardtanh", "clamp", "min_const", "max_const", "dropout"}
POOLS = {"max_pool", "avg_pool"}


# -----------------------------------------------------------------------------
# reading a task: its spec, and the lines of its source that a solution keeps

class Task:
    """A generated task as the teacher sees it: spec, states (gen.trace), sites (gen.moves) and the
    lines of its Model's forward (head, residual, one per op)."""

    def __init__(self, task_source, meta, cpu=None):
        self.spec = gen.draw(meta["seed"], meta["size"])
        if gen.render(self.spec) != task_source:  # a task written before gen._spell (a kept run's) spells as then
            self.spec = gen.unspelt(self.spec)
            if gen.render(self.spec) != task_source:
                raise ValueError(f"task {meta['seed']} ({meta['size']}): the source is not what the generator draws")
        self.seed, self.ops, self.head = meta["seed"], self.spec["ops"], self.spec["head"]["kind"]
        # its fused epilogue a C++ loop (cudal1.load_c) rather than a CUDA kernel: by default, a CPU-sized task's
        self.cpu = meta["size"] == "cpu" if cpu is None else cpu
        self.states = gen.trace(self.spec)
        self.sites = gen.moves(self.spec, self.states)
        lines = task_source.split("\n")
        start = lines.index("class Model(nn.Module):") + 1
        fwd = next(i for i in range(start, len(lines)) if lines[i].startswith("    def forward("))
        self.args = lines[fwd][len("    def forward(self, "):-2]  # "x" or "x, y"
        body = lines[fwd + 1:lines.index("        return x", fwd)]
        body = [line[8:] for line in body]
        self.head_line = body.pop(0) if self.head != "none" else None
        self.residual_line = body.pop(0) if any(op["kind"] == "residual" for op in self.ops) else None
        self.op_lines = body
        assert len(body) == len(self.ops), (meta["seed"], body)
        self.conv = self.head.startswith("conv")
        # the head's module or weight, as the task names it ('self.fc', 'self.weight', 'self.deconv'); None for
        # bmm, whose line reads no attribute, and for no head
        named = re.search(r"self\.\w+", self.head_line or "")
        self.attr = named and named.group(0)

    # ---- small views of the task

    def expr(self, i):
        """The right-hand side of op i's line: 'x * self.scaling_factor'."""
        return self.op_lines[i].split(" = ", 1)[1].split("  #")[0]

    def names(self, i):
        """The attributes op i's line reads: ['scaling_factor'], ['clamp_min', 'clamp_max']."""
        return re.findall(r"self\.(\w+)", self.op_lines[i])

    def shape(self, i):
        """The shape op i sees (i = len(ops): the output)."""
        return tuple(self.states[i]["shape"])

    def head_lines(self, line=None):
        """The head's line(s); a conv runs with TF32 off, as the judge's strict fp32 check needs."""
        line = line or self.head_line
        if not self.conv:
            return [line]
        return ["tf32 = torch.backends.cudnn.allow_tf32",
                "torch.backends.cudnn.allow_tf32 = False  # true fp32: eager lets cuDNN use TF32, the check does not",
                line, "torch.backends.cudnn.allow_tf32 = tf32"]

    def head_call(self, w, b):
        """The head computed with weight w and bias b (expressions; b None: no bias)."""
        h, a = self.head, self.attr
        if h == "gemm":
            return f"F.linear(x, {w}, {b})"
        if h == "matmul":
            return f"torch.addmm({b}, x, {w})" if b else f"torch.matmul(x, {w})"
        extra = f", {a}.output_padding" if "transpose" in h else ""
        return f"F.{h}(x, {w}, {b}, {a}.stride, {a}.padding{extra})"

    def out_dim_view(self):
        """How a (C,) vector lines up with the head weight's output-channel dim: Linear (out, in),
        Conv (out, in, k..), ConvTranspose (in, out, k..), the matmul weight (in, out)."""
        return {"gemm": ".view(-1, 1)", "matmul": "", "conv2d": ".view(-1, 1, 1, 1)", "conv3d": ".view(-1, 1, 1, 1, 1)",
                "conv_transpose2d": ".view(1, -1, 1, 1)", "conv_transpose3d": ".view(1, -1, 1, 1, 1)"}[self.head]

    def weight(self):
        return self.attr if self.head == "matmul" else f"{self.attr}.weight"

    def head_bias(self):
        """The head's bias as an expression; the matmul head has none: zeros, one per output feature."""
        return f"{self.attr}.new_zeros({self.attr}.shape[1])" if self.head == "matmul" else f"{self.attr}.bias"


def _fmt(shape):
    return "(" + ", ".join(map(str, shape)) + ")"


def _size(shape):
    """fp32 bytes of a tensor, as a reader would say it."""
    n = 4 * math.prod(shape)
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.0f} KB" if n >= 2**10 else f"{n} B"


def _vec(t, i):
    """Op i's per-channel parameter as a (C,) vector: 'self.scale' or 'self.scale.view(-1)'."""
    attr = f"self.{t.ops[i]['attr']}"
    return attr if len(t.shape(i)) == 2 else f"{attr}.view(-1)"


def _factor(t, i, vec=True):
    """Op i (a multiply or divide) as ('*' or '/', operand)."""
    k = t.ops[i]["kind"]
    operand = _vec(t, i) if k in gen.PARAMS and vec else f"self.{t.ops[i]['attr']}" if k in gen.PARAMS \
        else f"self.{t.names(i)[0]}"
    return ("*" if k in ("mul_const", "mul_param") else "/"), operand


def _product(t, idx, vec=True):
    """The product of the multiplies and divides at op indices idx, as an expression (None: empty)."""
    out = None
    for i in idx:
        sym, operand = _factor(t, i, vec)
        out = (f"{out} {sym} {operand}" if out else operand if sym == "*" else f"1 / {operand}")
    return out


def _shift(t, i, vec=False):
    """Op i (an add or subtract) as a signed term: '+ self.bias', '- self.subtract_value'."""
    k = t.ops[i]["kind"]
    operand = (_vec(t, i) if vec else f"self.{t.ops[i]['attr']}") if k in gen.PARAMS else f"self.{t.names(i)[0]}"
    return ("-" if k in ("sub_const", "sub_param") else "+"), operand


def _leading_run(t):
    n = 0
    while n < len(t.ops) and t.ops[n]["kind"] in gen.AFFINE:
        n += 1
    return n


CACHE_DOC = ("Recomputed from the live parameters when one changes (an in-place update bumps its _version, a "
             "new tensor has a new data_ptr) and on every call while autograd records, so gradients still reach "
             "the parameters; otherwise the last result is reused.")


def _cached(t, name, what, lines, result, consts=(), device=False):
    """A method computing `result` by `lines`, cached as CACHE_DOC says. The key holds the version
    and address of each parameter the lines read, the constants they read, and (device=True) the
    input's device."""
    params = list(dict.fromkeys(m[0] for m in re.finditer(r"self\.\w+(?:\.(?:weight|bias))?", "\n".join(lines))
                                if _is_param(t, m[0])))
    extra = list(dict.fromkeys(consts)) + (["x.device"] if device else [])
    key = f"[(p._version, p.data_ptr()) for p in ({', '.join(params)}{',' if len(params) == 1 else ''})]" \
        if params else ""
    if extra:
        key += (" + " if key else "") + "[" + ", ".join(extra) + "]"
    out = [f"def {name}(self{', x' if device else ''}):"] + _docstring(f"{what} {CACHE_DOC}", 4)
    out += [f"    key = {key}", "    if torch.is_grad_enabled() or key != self._key:"]
    out += ["        " + line for line in lines]
    out += [f"        self._key, self._cached = key, ({result})", "    return self._cached"]
    return out


def _is_param(t, expr):
    """Is `expr` ('self.gemm.weight', 'self.scale', 'self.scaling_factor') one of the task's parameters?"""
    if expr in (f"{t.attr}.weight", f"{t.attr}.bias") or (t.head == "matmul" and expr == t.attr):
        return True
    return any(op["kind"] in gen.PARAMS and expr == f"self.{op['attr']}" for op in t.ops)


def _docstring(text, indent):
    """text as a docstring wrapped at 100 columns; paragraphs split on blank lines."""
    lines = []
    for n, para in enumerate(text.strip().split("\n\n")):
        lines += ([""] if n else []) + textwrap.wrap(para, 100 - indent)
    lines[0] = '"""' + lines[0]
    if len(lines) == 1 and len(lines[0]) + 3 <= 100 - indent:
        lines[0] += '"""'
    else:
        lines.append('"""')
    return [(" " * indent + line).rstrip() for line in lines]


def _head(t, call):
    """The head's line computing `call`, with the reference line's shape comment."""
    note = t.head_line.split("  # ", 1)[1] if "  # " in t.head_line else None
    return f"x = {call}" + (f"  # {note}" if note else "")


def _consts(t, i):
    """self.<name> of the constants (not parameters) op i reads."""
    return [] if t.ops[i]["kind"] in gen.PARAMS else [f"self.{n}" for n in t.names(i)]


# -----------------------------------------------------------------------------
# the PyTorch-level moves: each returns dict(forward=lines, methods=lines, init=lines, ...facts for the
# docstring), or None when the teacher cannot write the move for this task

def _forward(t, skip=(), replace=None, head=None, pre=()):
    """Forward lines: `pre`, the head (its reference line, or `head`), the residual line, then every
    op's line except those in skip, with replace[i] (a list of lines) in place of op i's."""
    replace = replace or {}
    out = list(pre) + (t.head_lines(head) if t.head_line else [])
    if t.residual_line:
        out.append(t.residual_line)
    for i, line in enumerate(t.op_lines):
        if i in replace:
            out += replace[i]
        elif i not in skip:
            out.append(line)
    return out


def drop_noop(t):
    fwd = _forward(t, skip=set(t.sites["drop_noop"]))
    if not fwd:  # no head and nothing left: the input itself, but an output may not alias an input
        fwd = ["return x.clone()  # every op was the identity"]
    return dict(forward=fwd)


def _const_from(t):
    """The first state from which every state is constant: op j-1 pins the values."""
    j = len(t.ops)
    while t.states[j - 1]["const"]:
        j -= 1
    return j


def _pinned(t, j):
    """The value every element holds after op j-1, as an expression."""
    op, s, names = t.ops[j - 1], t.states[j - 1], t.names(j - 1)
    k = op["kind"]
    if k == "layer_norm":  # x - mean(x) over one element is exactly 0: the output is the bias
        return f"self.{op['attr']}.bias"
    if k in ("min_const", "max_const"):
        return f"self.{names[0]}"
    if k in ("clamp", "hardtanh"):  # min(max(x, lo), hi) with every x >= hi, or every x <= lo
        return f"self.{names[1]}" if s["lo"] >= op["max"] else f"self.{names[0]}"
    return repr(t.states[j]["lo"])  # softmax over one element: 1.0; ReLU of values <= 0: 0.0


def constant_output(t):
    j = _const_from(t)
    value, shape = _pinned(t, j), t.shape(j)
    dims = ", ".join(["x.shape[0]"] + [str(d) for d in shape[1:]])
    note = f"  # {_fmt(('B',) + shape[1:])}, every element the same"
    if value.endswith(".bias"):  # LayerNorm's bias (one element), the same for every row
        line = f"x = {value}.expand({dims}).contiguous()" + note
    else:
        line = f"x = torch.full(({dims}), {value}, device=x.device, dtype=x.dtype)" + note
    return dict(forward=[line] + t.op_lines[j:], j=j, value=value)


def reduce_first(t):
    swap = {}
    for i in t.sites["reduce_first"]:
        e = t.op_lines[i - 1]
        r0, r1 = len(t.shape(i - 1)), len(t.shape(i + 1))
        if t.ops[i - 1]["kind"] in gen.PARAMS and r1 != r0:  # (C, 1, 1) lined up with the reduced rank
            attr = f"self.{t.ops[i - 1]['attr']}"
            e = e.replace(attr, f"{attr}.view({', '.join(['-1'] + ['1'] * (r1 - 2))})")
        swap[i - 1], swap[i] = [], [t.op_lines[i], e + "  # after the reduction now"]
    return dict(forward=_forward(t, replace=swap))


def _runs(idx):
    """Maximal runs of consecutive indices: [1, 2, 4, 5, 6] -> [[1, 2], [4, 5, 6]]."""
    runs = []
    for i in idx:
        if runs and runs[-1][-1] == i - 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def merge_affine(t):
    runs = _runs(t.sites["merge_affine"])
    lines, pairs, replace, consts = [], [], {}, []
    for n, run in enumerate(runs):
        a, b = ("a", "b") if len(runs) == 1 else (f"a{n}", f"b{n}")
        lines.append(f"{a}, {b} = 1.0, 0.0  # x -> x * {a} + {b}, composed op by op")
        for i in run:
            if t.ops[i]["kind"] in MUL:
                sym, operand = _factor(t, i, vec=False)
                lines.append(f"{a}, {b} = {a} {sym} {operand}, {b} {sym} {operand}  # {t.expr(i)}")
            else:
                sym, operand = _shift(t, i)
                lines.append(f"{b} = {b} {sym} {operand}  # {t.expr(i)}")
            consts += _consts(t, i)
        lines.append(f"{a}, {b} = torch.as_tensor({a}, device=x.device), torch.as_tensor({b}, device=x.device)")
        pairs.append((a, b))
        replace[run[0]] = [f"x = torch.addcmul({b}, x, {a})  # x * {a} + {b}: " + "; ".join(t.expr(i) for i in run)]
        replace.update({i: [] for i in run[1:]})
    result = ", ".join(f"({a}, {b})" for a, b in pairs) if len(runs) > 1 else "a, b"
    method = _cached(t, "merged", "Each run of affine ops as one x * a + b (a, b per channel, or scalars).",
                     lines, result, consts, device=True)
    return dict(forward=_forward(t, replace=replace, pre=[f"{result} = self.merged(x)"]), methods=method,
                init=["_key = None  # merged()'s cache"], runs=runs)


def fold_scale_into_weights(t):
    run = _leading_run(t)
    muls = [i for i in range(run) if t.ops[i]["kind"] in MUL]
    vec = any(t.ops[i]["kind"] in gen.PARAMS for i in muls)
    lines = [f"s = {_product(t, muls)}  # every multiply after the {HEAD_NAME[t.head]}"
             + (", per output channel" if vec else ""),
             f"w = {t.weight()} * s{t.out_dim_view() if vec else ''}"]
    result, bias = ["w"], None
    if t.head != "matmul":
        lines.append(f"b = {t.attr}.bias * s")
        result, bias = ["w", "b"], "b"
    replace = {i: [] for i in muls}
    consts = [c for i in muls for c in _consts(t, i)]
    moved = []
    for i in range(run):
        later = [m for m in muls if m > i]
        if i in muls or not later:
            continue  # an add after every multiply stays as it is
        sym, operand = _shift(t, i)
        lines.append(f"shift{i} = {operand} * ({_product(t, later, vec=False)})  # {t.expr(i)} moved past "
                     + ", ".join(t.expr(m) for m in later))
        result.append(f"shift{i}")
        replace[i] = [f"x = x {sym} shift{i}  # {t.expr(i)}, scaled by the multiplies it came before"]
        consts += _consts(t, i) + [c for m in later for c in _consts(t, m)]
        moved.append(i)
    method = _cached(t, "folded", f"The {HEAD_NAME[t.head]}'s weight and bias with the multiplies after it folded in.",
                     lines, ", ".join(result), consts)
    fwd = _forward(t, replace=replace, head=_head(t, t.head_call("w", bias)),
                   pre=[f"{', '.join(result)} = self.folded()"])
    return dict(forward=fwd, methods=method, init=["_key = None  # folded()'s cache"], muls=muls, moved=moved)


def fold_bias(t):
    run = _leading_run(t)
    stop = next((i for i in range(run) if t.ops[i]["kind"] == "mul_param"), run)  # adds behind it stay
    adds = [i for i in range(stop) if t.ops[i]["kind"] in ADD]
    if not adds:
        return None
    lines, consts = [f"b = {t.head_bias()}"], []
    for i in adds:
        sym, term = _shift(t, i, vec=True)
        before = [m for m in range(i) if t.ops[m]["kind"] in MUL]
        for m in before:  # x * s + c = (x + c / s) * s: moved in front of the multiply, c is divided by it
            msym, operand = _factor(t, m)
            term = f"{term} {'/' if msym == '*' else '*'} {operand}"
            consts += _consts(t, m)
        note = f", moved in front of {', '.join(t.expr(m) for m in before)}" if before else ""
        lines.append(f"b = b {sym} {term}  # {t.expr(i)}{note}")
        consts += _consts(t, i)
    what = (f"The {HEAD_NAME[t.head]}'s bias with the adds after it folded in." if t.head != "matmul" else
            "A bias for the matmul (it has none) holding the adds after it.")
    method = _cached(t, "folded", what, lines, "b", consts)
    fwd = _forward(t, replace={i: [] for i in adds}, head=_head(t, t.head_call(t.weight(), "self.folded()")))
    return dict(forward=fwd, methods=method, init=["_key = None  # folded()'s cache"], adds=adds, stop=stop)


def fold_reduction(t):
    n = t.sites["fold_reduction"][0]
    red = t.ops[n]
    lines = [f"w, b = {t.weight()}, {t.head_bias()}  # the ops before the {red['kind']}, run on the weight and bias"]
    consts = []
    for i in range(n):
        k = t.ops[i]["kind"]
        if k in MUL:
            sym, operand = _factor(t, i)
            wop = f"self.{t.ops[i]['attr']}{t.out_dim_view()}" if k in gen.PARAMS else operand
            lines.append(f"w, b = w {sym} {wop}, b {sym} {operand}  # {t.expr(i)}")
        else:
            sym, operand = _shift(t, i, vec=True)
            lines.append(f"b = b {sym} {operand}  # {t.expr(i)}")
        consts += _consts(t, i)
    d = 1 if t.head == "matmul" or "transpose" in t.head else 0  # the weight's output-channel dim
    fn = red["kind"]
    lines.append(f"w, b = w.{fn}({d}, keepdim=True), b.{fn}(0, keepdim=True)  # {t.expr(n)}: one output channel")
    method = _cached(t, "folded", f"The {HEAD_NAME[t.head]}'s weight and bias for a single output channel: the {fn} "
                     "over its channels, and the ops before it, folded in.", lines, "w, b", consts)
    one = _fmt(("B", 1) + t.shape(n)[2:])
    fwd = ["w, b = self.folded()"] + t.head_lines(f"x = {t.head_call('w', 'b')}  # {one}")
    if not red["keepdim"]:
        fwd.append(f"x = x.squeeze(1)  # {_fmt(('B',) + t.shape(n + 1)[1:])}")
    fwd += t.op_lines[n + 1:]
    return dict(forward=fwd, methods=method, init=["_key = None  # folded()'s cache"], n=n)


# -----------------------------------------------------------------------------
# fuse_epilogue: every op after the head in one CUDA kernel (a C++ loop for a CPU-sized task: _cpu_loop),
# generated from the op chain.
# Three templates: elementwise (a thread per element), row (a reduction, softmax or norm over rows
# of R elements, a team of TEAM threads per row), window (a max or average pool, a thread per output).
# The elementwise ops before the row or window op run on each element as it is loaded, those after it
# on each result as it is stored. fp32 throughout, with the formulas torch uses.

ACT = {  # v -> f(v)
    "relu": "v = fmaxf(v, 0.f);",
    "sigmoid": "v = 1.f / (1.f + expf(-v));",
    "tanh": "v = tanhf(v);",
    "gelu": "v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));  // the erf form, F.gelu's default",
    "swish": "v = v / (1.f + expf(-v));  // x * sigmoid(x)",
    "mish": "v = v * tanhf(log1pf(expf(v)));  // x * tanh(softplus(x)), as torch writes it",
    "hardswish": "v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;",
}
C_OP = {"mul_const": "*", "div_const": "/", "add_const": "+", "sub_const": "-", "bias": "+", "add_param": "+",
        "sub_param": "-", "mul_param": "*", "div_param": "/"}


class Kernel:
    """A kernel's arguments in order, each (C declaration, Python expression), named once."""

    def __init__(self):
        self.ptrs, self.floats, self.sizes = {}, {}, {}

    def ptr(self, name, py):
        self.ptrs[name] = (f"const float* __restrict__ {name}", py)
        return name

    def float(self, name, py):
        self.floats[name] = (f"float {name}", py)
        return name

    def size(self, name, py, ctype="long long"):
        self.sizes[name] = (f"{ctype} {name}", py)
        return name

    def args(self):
        return [("const float* __restrict__ x", "x.data_ptr()"), ("float* __restrict__ y", "y.data_ptr()")] + \
            list(self.ptrs.values()) + list(self.floats.values()) + list(self.sizes.values())


def _c_op(t, i, k, out):
    """C lines applying elementwise op i to v (element index i_, channel c). out: after the row op."""
    op, kind = t.ops[i], t.ops[i]["kind"]
    comment = f"  // {t.expr(i)}"
    if kind in gen.PARAMS:
        name = k.ptr(op["attr"], f"self.{op['attr']}.data_ptr()")
        return [f"v = v {C_OP[kind]} {name}[c];{comment}"]
    if kind in C_OP:
        name = t.names(i)[0]
        return [f"v = v {C_OP[kind]} {k.float(name, f'self.{name}')};{comment}"]
    if kind == "residual":
        return ["v = v + x[i];  // x = x + residual: the head's output, the kernel's input"]
    if kind in ACT:
        return [ACT[kind] + ("" if "//" in ACT[kind] else comment)]
    if kind == "leaky_relu":
        name = t.names(i)[0]
        return [f"v = v > 0.f ? v : v * {k.float(name, f'self.{name}')};{comment}"]
    if kind in ("hardtanh", "clamp"):
        lo, hi = t.names(i)
        return [f"v = fminf(fmaxf(v, {k.float(lo, f'self.{lo}')}), {k.float(hi, f'self.{hi}')});{comment}"]
    if kind in ("min_const", "max_const"):
        name = t.names(i)[0]
        fn = "fminf" if kind == "min_const" else "fmaxf"
        return [f"v = {fn}(v, {k.float(name, f'self.{name}')});{comment}"]
    if kind == "dropout":
        return [f"// {t.expr(i)}: p = {op['value']}, the identity"]
    raise ValueError(kind)


def _chain(t, idx, k, out=False):
    """C lines for the elementwise ops idx, and whether they need the channel c of element i."""
    lines = [line for i in idx for line in _c_op(t, i, k, out)]
    need_c = any(t.ops[i]["kind"] in gen.PARAMS for i in idx)
    if need_c:
        C, inner = ("C_out", "inner_out") if out else ("C", "inner")
        src = "y" if out else "x"
        k.size(C, f"{src}.shape[1]")
        k.size(inner, f"math.prod({src}.shape[2:])")
        lines.insert(0, f"const long long c = i / {inner} % {C};  // the channel of element i")
    return lines


REDUCE_HELPER = r"""
// v summed (MAX: maxed) over the TEAM threads of a row; every one of them gets the result
template <bool MAX>
__device__ __forceinline__ float team_reduce(float v) {
    #pragma unroll
    for (int o = (TEAM < 32 ? TEAM : 32) / 2; o > 0; o /= 2) {
        const float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = MAX ? fmaxf(v, w) : v + w;
    }
    if (TEAM > 32) {  // a row per block: the warps' results meet in shared memory
        __shared__ float part[32];
        __syncthreads();  // every warp has read part[] of the previous reduction
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
        __syncthreads();
        v = part[0];
        for (int w = 1; w < TEAM / 32; ++w) v = MAX ? fmaxf(v, part[w]) : v + part[w];
    }
    return v;
}
"""

LOOP = "for (long long r = lane; live && r < R; r += TEAM)"
CPU_LOOP = "for (long long r = 0; r < R; ++r)"


def _row_body(t, i, k):
    """The C body of the row template for op i (a reduction over dims, softmax or norm). On the CPU
    (t.cpu) a row is one loop iteration: no team, so no team_reduce and no lane test; and sums are
    kept in double, as torch's CPU kernels keep a float's (its acc_type)."""
    kind, op = t.ops[i]["kind"], t.ops[i]
    loop, one = (CPU_LOOP, "") if t.cpu else (LOOP, "if (live && lane == 0) ")
    acc = "double s = 0.0;" if t.cpu else "float s = 0.f;"

    def reduce(v, m):  # the team's reduction of v, as a statement
        return [] if t.cpu else [f"{v} = team_reduce<{'true' if m else 'false'}>({v});"]
    if kind in ("sum", "mean", "global_avg_pool"):
        div = "" if kind == "sum" else " / (float)R"
        return [acc, f"{loop} s += load(at(r));"] + reduce("s", False) + [f"{one}store(row, s{div});"]
    if kind == "max":
        return ["float m = -INFINITY;", f"{loop} m = fmaxf(m, load(at(r)));"] + reduce("m", True) + \
            [f"{one}store(row, m);"]
    softmax = ["float m = -INFINITY;", f"{loop} m = fmaxf(m, load(at(r)));"] + reduce("m", True) + \
        [acc, f"{loop} s += expf(load(at(r)) - m);"] + reduce("s", False)
    if kind == "logsumexp":
        return softmax + [f"{one}store(row, logf(s) + m);  // max + log(sum(exp(x - max)))"]
    if kind == "softmax":
        return softmax + [f"{loop} {{", "    const long long i = at(r);", "    store(i, expf(load(i) - m) / s);", "}"]
    # the norms: mean and biased variance over the row (two passes), then (x - mean) * rstd [* w + b]
    # The mean is summed from x - x[0]: exact where a clamp before the norm made a row (nearly) constant,
    # and there rstd is ~1/sqrt(eps), so an error in the mean would be amplified ~300x.
    eps = k.float("eps", f"self.{op['attr']}.eps")
    if t.cpu:  # in double, a (nearly) constant row's mean is exact enough without the x - x[0] shift
        body = ["double s = 0.0, q = 0.0;", f"{loop} s += load(at(r));", "const double mean = s / R;",
                f"{loop} {{", "    const double d = load(at(r)) - mean;", "    q += d * d;", "}",
                f"const double rstd = 1.0 / sqrt(q / R + {eps});  // biased variance"]
    else:
        body = ["const float v0 = live ? load(at(0)) : 0.f;  // the row's first element",
                "float s = 0.f;", f"{loop} s += load(at(r)) - v0;",
                "const float mean = v0 + team_reduce<false>(s) / (float)R;",
                "float q = 0.f;", f"{loop} {{", "    const float d = load(at(r)) - mean;", "    q += d * d;", "}",
                f"const float rstd = rsqrtf(team_reduce<false>(q) / (float)R + {eps});  // biased variance"]
    body += [f"{loop} {{", "    const long long i = at(r);"]
    if kind == "instance_norm":  # InstanceNorm's default has no affine parameters
        return body + ["    store(i, (load(i) - mean) * rstd);", "}"]
    w = k.ptr(f"{op['attr']}_weight", f"self.{op['attr']}.weight.data_ptr()")
    b = k.ptr(f"{op['attr']}_bias", f"self.{op['attr']}.bias.data_ptr()")
    if kind == "layer_norm":
        body.append(f"    store(i, (load(i) - mean) * rstd * {w}[r] + {b}[r]);  // weight, bias per element of a row")
    elif kind == "batch_norm":
        body.append(f"    store(i, (load(i) - mean) * rstd * {w}[row] + {b}[row]);  // a row is a channel")
    else:
        k.size("C", "x.shape[1]")
        k.size("inner", "math.prod(x.shape[2:])")
        body.append("    const long long c = i / inner % C;")
        if len(t.shape(i)) == 2:
            body.append(f"    store(i, (load(i) - mean) * rstd * {w}[c] + {b}[c]);")
        else:  # torch's CUDA GroupNorm: x * a + b, a = rstd * weight, b = beta - a * mean; the same roundings
            body += [f"    const float a = rstd * {w}[c];", f"    store(i, fmaf(a, load(i), fmaf(-a, mean, {b}[c])));"]
    return body + ["}"]


def _row_sizes(t, i):
    """Python lines setting rows, R (elements per row) and I (their stride) for op i, and a C
    expression for the index of element r of a row; also (rows, R, I) for this task's shapes."""
    op, shape = t.ops[i], t.shape(i)
    kind, n = op["kind"], math.prod(shape)
    if kind == "batch_norm":  # a row is a channel: (N, C, S) -> element r at (r / S, row, r % S)
        return (["rows, I = x.shape[1], math.prod(x.shape[2:])  # a row per channel; I: its run length",
                 "R = x.numel() // rows"],
                "(r / I) * rows * I + row * I + r % I", (shape[1], n // shape[1], math.prod(shape[2:])))
    at = "base + r * I"
    if kind == "layer_norm":
        lines, R, I = ["R, I = x.shape[-1], 1  # a row: the last dim"], shape[-1], 1
    elif kind == "group_norm":
        g = op["groups"]
        lines = [f"rows = x.shape[0] * self.{op['attr']}.num_groups",
                 "R, I = x.numel() // rows, 1  # a row: one group's channels, contiguous"]
        return lines, at, (shape[0] * g, n // (shape[0] * g), 1)
    elif kind in ("instance_norm", "global_avg_pool") or (kind != "softmax" and len(op["dims"]) > 1):
        lines, R, I = ["R, I = math.prod(x.shape[2:]), 1  # a row: one channel's spatial dims"], math.prod(shape[2:]), 1
    else:
        d = op["dim"] if kind == "softmax" else op["dims"][0]
        lines = [f"R, I = x.shape[{d}], math.prod(x.shape[{d + 1}:])  # a row: dim {d}; I: its elements' stride"]
        R, I = shape[d], math.prod(shape[d + 1:])
    return lines + ["rows = x.numel() // R"], at, (n // R, R, I)


def _pool_k(t, i):
    """The pool's kernel size as an int expression: AvgPool1d keeps it as a 1-tuple, the others as given."""
    op = t.ops[i]
    one = op["kind"] == "avg_pool" and len(t.shape(i)) == 3
    return f"self.{op['attr']}.kernel_size" + ("[0]" if one else "")


def _out_shape(t, i):
    """Python expression of the row or window op's output shape, from x's."""
    op, rank = t.ops[i], len(t.shape(i))
    if op["kind"] in POOLS:
        k = _pool_k(t, i)
        return ", ".join(["x.shape[0]", "x.shape[1]"] + [f"x.shape[{d}] // {k}" for d in range(2, rank)])
    dims = tuple(range(2, rank)) if op["kind"] == "global_avg_pool" else op["dims"]
    keep = op.get("keepdim", True)
    return ", ".join("1" if d in dims else f"x.shape[{d}]" for d in range(rank) if keep or d not in dims)


def _team(rows, R, I):
    """Threads per row: one when a row's elements are I apart (a thread per row keeps the loads of a
    warp contiguous), a warp for rows up to 1024, else a block (1024 threads when rows are few)."""
    if I > 1:
        return 1
    if R <= 1024:
        return 32
    return 256 if rows >= 1024 else 1024


def _window_body(t, i, k):
    """The C body of the window template for op i (a max or average pool, kernel = stride = k)."""
    op, rank = t.ops[i], len(t.shape(i))
    dims = ["D", "H", "W"][3 - (rank - 2):]
    for d, name in zip(range(2, rank), dims):
        k.size(name, f"x.shape[{d}]")
    k.size("k", _pool_k(t, i), "int")
    outs = ["o" + d.lower() for d in dims]
    lines = [f"const long long {', '.join(f'O{d} = {d} / k' for d in dims)};  // floor, as the pool does"]
    lines.append("long long q = j;  // peel the output coordinates off j")
    for d, o in zip(reversed(dims), reversed(outs)):
        lines.append(f"const long long {o} = q % O{d}; q /= O{d};")
    lines.append("const long long nc = q;  // batch * channels + channel")
    maxp = op["kind"] == "max_pool"
    lines.append("float acc = -INFINITY;" if maxp else "float acc = 0.f;")
    idx = "nc"
    for d, o, a in zip(dims, outs, "abe"):
        idx = f"({idx} * {d} + {o} * k + {a})"
    indent = ""
    for a in "abe"[:len(dims)]:
        lines.append(f"{indent}for (int {a} = 0; {a} < k; ++{a})")
        indent += "    "
    lines.append(f"{indent}" + (f"acc = fmaxf(acc, load({idx[1:-1]}));" if maxp else f"acc += load({idx[1:-1]});"))
    window = " * ".join(["k"] * len(dims))
    lines.append("store(j, acc);" if maxp else f"store(j, acc / (float)({window}));")
    return lines


def fuse_epilogue(t):
    special = [i for i, op in enumerate(t.ops) if op["kind"] not in ELEMENTWISE]
    if len(special) > 1:
        return None  # two reductions, norms or pools: not one kernel with these templates
    k = Kernel()
    py = ["x = x.contiguous()"]
    if not special:  # ---- elementwise: a thread per element
        body = _chain(t, range(len(t.ops)), k)
        k.size("n", "n")
        if t.cpu and "C" in k.sizes:  # a channel per run of `inner` elements, not a division per element
            src = _cpu_loop("j", "n / inner", "the runs", ["const long long c = j % C;",
                            "for (long long i = j * inner; i < (j + 1) * inner; ++i) {", "    float v = x[i];"]
                            + ["    " + s for s in body[1:]] + ["    y[i] = v;", "}"], work="n",  # body[0]: c of i
                            note="  // one channel's run of inner elements")
        elif t.cpu:
            src = _cpu_loop("i", "n", "the elements", ["float v = x[i];"] + body + ["y[i] = v;"])
        else:
            src = ["extern \"C\" __global__ void epilogue({args}) {",
                   "    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;",
                   "    if (i >= n) return;", "    float v = x[i];"] + ["    " + s for s in body] + \
                ["    y[i] = v;", "}"]
        py += ["y = torch.empty_like(x)", "n = x.numel()"]
        launch, template, facts = "(n + 255) // 256, 256", "elementwise", {}
    else:
        i = special[0]
        pre, post = _chain(t, range(i), k), None
        kind = t.ops[i]["kind"]
        same = kind == "softmax" or kind in gen.NORMS
        py.append("y = torch.empty_like(x)" if same else f"y = x.new_empty({_out_shape(t, i)})")
        post = _chain(t, range(i + 1, len(t.ops)), k, out=True)
        head = ["auto load = [&](long long i) {  // element i of the head's output, through the ops before " + kind,
                "    float v = x[i];"] + ["    " + s for s in pre] + ["    return v;", "};",
                "auto store = [&](long long i, float v) {  // element i of the result, through the ops after "
                + kind] + \
            ["    " + s for s in post] + ["    y[i] = v;", "};"]
        if kind in POOLS:  # ---- window: a thread per output element
            k.size("n", "y.numel()")
            body = _window_body(t, i, k)
            if t.cpu:
                src = _cpu_loop("j", "n", "the output elements", head + body)
            else:
                src = ["extern \"C\" __global__ void epilogue({args}) {",
                       "    const long long j = blockIdx.x * (long long)blockDim.x + threadIdx.x;"
                       "  // one output element",
                       "    if (j >= n) return;"] + ["    " + s for s in head + body] + ["}"]
            py.append("n = y.numel()")
            launch, template, facts = "(n + 255) // 256, 256", "window", {}
        else:  # ---- row: a team of threads per row
            lines, at, (rows, R, I) = _row_sizes(t, i)
            for name in ("rows", "R", "I"):
                k.size(name, name)
            body = _row_body(t, i, k)
            base = [] if kind == "batch_norm" else ["const long long base = (row / I) * R * I + row % I;"]
            template, facts = "row", dict(rows=rows, R=R, I=I)
            if t.cpu:  # no team: a row is one loop iteration
                src = _cpu_loop("row", "rows", "the rows", base + [f"auto at = [&](long long r) {{ return {at}; }};"]
                                + head + body, work="rows * R")
            else:
                team = _team(rows, R, 1 if kind == "batch_norm" else I)  # BatchNorm's I is a run length, not a stride
                block = max(256, team)
                src = [f"constexpr int TEAM = {team};  // threads per row", REDUCE_HELPER,
                       f"extern \"C\" __global__ void __launch_bounds__({block}) epilogue({{args}}) {{",
                       "    const long long row = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / TEAM;",
                       "    const int lane = threadIdx.x % TEAM;",
                       "    const bool live = row < rows;"
                       "  // spare teams of the last block still join the reductions"] + \
                    ["    " + s for s in base] + \
                    [f"    auto at = [&](long long r) {{ return {at}; }};  // the index of element r of this row"] + \
                    ["    " + s for s in head + body] + ["}"]
                launch = f"(rows * {team} + {block - 1}) // {block}, {block}" if team < block else f"rows, {block}"
                facts["team"] = team
            py += lines
    args = k.args()
    decl = [args[0][0] + ", " + args[1][0]]
    for a, _ in args[2:]:  # packed into lines of at most ~100 columns
        if len(decl[-1]) + len(a) + 2 > 92 - 40 * (len(decl) == 1):
            decl[-1] += ","
            decl.append(a)
        else:
            decl[-1] += ", " + a
    decl = "\n        ".join(decl)
    source = "\n".join(src).replace("{args}", decl)
    call = "_k.epilogue(" + ("" if t.cpu else f"{launch}, ") + ", ".join(p for _, p in args) + ")"
    py += [call, "return y"]
    fwd = (t.head_lines() if t.head_line else []) + py
    return dict(forward=fwd, template=template, special=special, kernel=source, **facts)


CPU_GRAIN = 32768  # elements of work under which waking the other cores costs more than it saves


def _cpu_loop(i, n, what, body, work=None, note=""):
    """The CPU's fused epilogue: `extern "C" void epilogue` with one loop of `body` over i < n, its
    iterations split over the cores by OpenMP (cudal1.load_c builds it with g++ -fopenmp) when the
    loop's `work` (elements touched; default n) is CPU_GRAIN or more."""
    return ["#include <math.h>", "", 'extern "C" void epilogue({args}) {',
            f"    #pragma omp parallel for if ({work or n} >= {CPU_GRAIN})  // {what} split over the cores",
            f"    for (long long {i} = 0; {i} < {n}; ++{i}) {{{note}"] + ["        " + s for s in body] + ["    }", "}"]


MOVES = dict(drop_noop=drop_noop, constant_output=constant_output, reduce_first=reduce_first,
             merge_affine=merge_affine, fold_scale_into_weights=fold_scale_into_weights, fold_bias=fold_bias,
             fold_reduction=fold_reduction, fuse_epilogue=fuse_epilogue)


# -----------------------------------------------------------------------------
# the analysis: the solution's first docstring, from templates filled with the task's ops and shapes.
# It says what the move is and why it removes work here; never a speedup (nothing is measured yet).

def _range(lo, hi):
    f = lambda v: "-inf" if v == -math.inf else "inf" if v == math.inf else f"{v:.4g}"  # noqa: E731
    return f"[{f(lo)}, {f(hi)}]"


def _head_text(t):
    """'the Linear layer (96 -> 32 features)', 'the Conv2d (3 -> 16 channels, 3x3 kernel)', ..."""
    h, s = t.head, t.spec["head"]
    if h == "gemm":
        return f"the Linear layer ({s['fin']} -> {s['fout']} features)"
    if h == "matmul":
        return f"the matmul with the ({s['fin']}, {s['fout']}) weight"
    if h == "bmm":
        return "the batched matmul"
    if h == "none":
        return "the input"
    k = "x".join([str(s["k"])] * (3 if h.endswith("3d") else 2))
    return f"the {HEAD_NAME[h]} ({s['cin']} -> {s['cout']} channels, {k} kernel)"


def _pick(rng, *options):
    return rng.choice(options)


# The first sentence of each move's analysis, in every phrasing _pick chooses among (below): how a reader of
# an answer tells which move it says it makes (stated_move). A phrasing changed below must change here too;
# tests/test_teacher.py holds every solution's docstring to its own move.
HEAD = r"[\w ]+"  # a HEAD_NAME
OPENINGS = {
    "drop_noop": r"Leave out (an op|\d+ ops) that cannot change any value\.|Drop the no-ops? of the chain: ",
    "constant_output": r"The output does not depend on the input: |Everything up to `.+?` is dead work: ",
    "reduce_first": r"Reduce first, then apply |Swap an elementwise op and the reduction after it",
    "merge_affine": r"Merge consecutive affine ops |Compose the chain's affine ops ",
    "fold_scale_into_weights": rf"Fold .+? into the {HEAD}'s weight( and bias)?\.|Scale the {HEAD}'s weight instead ",
    "fold_bias": rf"Fold .+? into the {HEAD}'s bias\.|Let the {HEAD}'s bias do the adds ",
    "fold_reduction": rf"Fold `.+?` into the {HEAD}: compute one output channel"
                      rf"|Sum the {HEAD}'s weight over its output",
    "fuse_epilogue": rf"Fuse the \d+ ops( after the {HEAD})? into one (CUDA kernel|C\+\+ loop)\."
                     r"|One generated (kernel|C\+\+ loop) for the whole ",
}


def stated_move(analysis):
    """The move whose opening sentence (OPENINGS) begins `analysis` (an answer's, or a solution's
    docstring), or None: what an answer says it will do, whatever its code then does."""
    text = " ".join(analysis.split())
    return next((move for move, opening in OPENINGS.items() if re.match(opening, text)), None)


def _passes(n):
    return {1: "one full pass", 2: "two full passes", 3: "three full passes"}.get(n, f"{n} full passes")


def _tf32_note(t, rng):
    if not t.conv:
        return ""
    return _pick(rng, f" The {HEAD_NAME[t.head]} runs with TF32 off: the check is against true fp32, and eager lets "
                      "cuDNN use TF32, so this head can be slower than eager's and the saving has to pay for it.",
                 f" One cost goes the other way: the {HEAD_NAME[t.head]} runs in true fp32 (TF32 off), as the strict "
                 "check needs, where eager lets cuDNN use TF32.")


def _why_noop(t, i):
    op, s, e = t.ops[i], t.states[i], t.expr(i)
    k = op["kind"]
    if k in ("mul_const", "div_const"):
        return f"`{e}` {'multiplies' if k == 'mul_const' else 'divides'} by {op['value']}"
    if k in ("add_const", "sub_const"):
        return f"`{e}` {'adds' if k == 'add_const' else 'subtracts'} {op['value']}"
    if k == "dropout":
        return f"`{e}` is dropout with p = {op['value']}, which returns its input even in training mode"
    if k in ("relu", "leaky_relu"):
        return f"`{e}` only changes negative values, and every value reaching it lies in {_range(s['lo'], s['hi'])}"
    if k in ("hardtanh", "clamp", "min_const", "max_const"):
        return (f"`{e}` bounds values to {_range(op.get('min', -math.inf), op.get('max', math.inf))}, and every "
                f"value reaching it already lies in {_range(s['lo'], s['hi'])}")
    return f"`{e}` reduces over dims of size 1 with keepdim=True: every output element is its one input"


def _doc_drop_noop(t, sol, rng):
    sites = t.sites["drop_noop"]
    one = len(sites) == 1
    first = _pick(rng, f"Leave out {'an op' if one else f'{len(sites)} ops'} that cannot change any value.",
                  f"Drop {'the no-op' if one else 'the no-ops'} of the chain: {', '.join(t.expr(i) for i in sites)}.")
    why = " ".join(_why_noop(t, i)[0].upper() + _why_noop(t, i)[1:] + "." for i in sites)
    shapes = ", ".join(f"{_fmt(t.shape(i))} ({_size(t.shape(i))})" for i in sites)
    cost = _pick(rng, f"Each is a kernel launch that reads and writes its whole tensor: {shapes}. Without "
                      f"{'it' if one else 'them'} the output is the same, bit for bit, with "
                      f"{_passes(len(sites))} over memory fewer.",
                 f"Eager still launches {'a kernel' if one else 'a kernel for each'} and streams the tensor through "
                 f"it ({shapes}); forward now skips {'it' if one else 'them'}, every other op as before.")
    return f"{first}\n\n{why}\n\n{cost}{_tf32_note(t, rng)}"


def _doc_constant_output(t, sol, rng):
    j, value = sol["j"], sol["value"]
    op, s, e = t.ops[j - 1], t.states[j - 1], t.expr(j - 1)
    k = op["kind"]
    if k == "softmax":
        why = f"`{e}` is a softmax over a dim of size 1: exp(x - x) / exp(x - x) = 1 for every element"
    elif k == "layer_norm":
        why = f"`{e}` normalises over a last dim of size 1: x - mean(x) is exactly 0, so it returns its bias"
    elif k == "relu":
        why = f"every value reaching `{e}` lies in {_range(s['lo'], s['hi'])}, so it gives 0 everywhere"
    else:
        why = (f"every value reaching `{e}` lies in {_range(s['lo'], s['hi'])}, so it pins them all to one "
               f"bound ({value} = {t.states[j]['lo']:g})" if not value.endswith("bias") else "")
    skipped = ([f"the {HEAD_NAME[t.head]}"] if t.head != "none" else []) + [f"`{t.expr(i)}`" for i in range(j)]
    rest = len(t.ops) - j
    first = _pick(rng, "The output does not depend on the input: make it without reading it.",
                  f"Everything up to `{e}` is dead work: from there on the values are a constant.")
    after = (f"The {rest} op{'s' if rest > 1 else ''} after it run{'' if rest > 1 else 's'} on that constant "
             "exactly as in the reference." if rest else "It is the last op, so the constant is the output.")
    body = (f"{why[0].upper() + why[1:]}. So forward writes the {_fmt(t.shape(j))} tensor of that value "
            f"({_size(t.shape(j))}) with one fill and skips " + (", ".join(skipped) or "nothing else")
            + f": {_passes(j + (t.head != 'none'))} over memory"
            + (" and the head's arithmetic" if t.head != "none" else "") + f" gone. {after}")
    caveat = _pick(rng, "An input holding inf or NaN would make the reference NaN and this not; the task's inputs "
                        "are finite. The skipped modules stay in __init__ so the parameters match.",
                   "The parameters of the skipped ops are still created, in the same order, so the state dict "
                   "matches; only an inf or NaN input would tell the two apart.")
    return f"{first}\n\n{body}\n\n{caveat}"


LAWS = {"max": "max(f(x)) = f(max(x)) for a nondecreasing f", "max_pool": "max(f(x)) = f(max(x)) for a nondecreasing f",
        "mean": "mean(a x + b) = a mean(x) + b", "avg_pool": "mean(a x + b) = a mean(x) + b",
        "global_avg_pool": "mean(a x + b) = a mean(x) + b", "sum": "sum(c x) = c sum(x)",
        "logsumexp": "logsumexp(x + b) = logsumexp(x) + b"}


def _doc_reduce_first(t, sol, rng):
    parts = []
    for i in t.sites["reduce_first"]:
        big, small = t.shape(i - 1), t.shape(i + 1)
        ratio = math.prod(big) // max(1, math.prod(small))
        param = " (its parameter is constant over the reduced dims, so it passes through too)" \
            if t.ops[i - 1]["kind"] in gen.PARAMS else ""
        parts.append(_pick(rng, f"`{t.expr(i - 1)}` commutes with `{t.expr(i)}`: {LAWS[t.ops[i]['kind']]}{param}. "
                                f"Applied after the reduction it touches the {_fmt(small)} result instead of the "
                                f"{_fmt(big)} tensor before it, {ratio}x fewer elements ({_size(small)} read and "
                                f"written where it was {_size(big)}).",
                           f"Since {LAWS[t.ops[i]['kind']]}, `{t.expr(i - 1)}` can wait until after `{t.expr(i)}`"
                           f"{param}. Its pass then covers {_fmt(small)} ({_size(small)}) instead of {_fmt(big)} "
                           f"({_size(big)}): {ratio}x less data through that kernel."))
    first = _pick(rng, "Reduce first, then apply the elementwise op to the smaller result.",
                  "Swap an elementwise op and the reduction after it, so the op runs on the reduced tensor.")
    return f"{first}\n\n" + "\n\n".join(parts) + _tf32_note(t, rng)


def _doc_merge_affine(t, sol, rng):
    parts = []
    for run in sol["runs"]:
        shape = t.shape(run[0])
        ops = ", ".join(f"`{t.expr(i)}`" for i in run)
        per = any(t.ops[i]["kind"] in gen.PARAMS for i in run)
        parts.append(_pick(rng, f"{ops} are {len(run)} elementwise kernels over the {_fmt(shape)} tensor "
                                f"({_size(shape)}), each reading and writing all of it. Composed they are one map "
                                f"x * a + b with {'a, b per channel' if per else 'scalar a, b'}: one torch.addcmul, "
                                f"one pass.",
                           f"The {len(run)} affine ops {ops} compose into x * a + b "
                           f"({'per channel' if per else 'two scalars'}); torch.addcmul applies it in one pass over "
                           f"the {_fmt(shape)} tensor where eager makes {len(run)} "
                           f"({_size(shape)} each way per pass)."))
    first = _pick(rng, "Merge consecutive affine ops into one multiply-add.",
                  "Compose the chain's affine ops into a single x * a + b.")
    tail = ("a and b are computed in forward from the live parameters and constants, and cached until one of them "
            "changes, so a call pays for the merged op alone.")
    return f"{first}\n\n" + "\n\n".join(parts) + f"\n\n{tail}{_tf32_note(t, rng)}"


def _doc_fold_scale(t, sol, rng):
    muls, shape = sol["muls"], t.shape(0)
    ops = ", ".join(f"`{t.expr(i)}`" for i in muls)
    first = _pick(rng, f"Fold {ops} into the {HEAD_NAME[t.head]}'s weight{' and bias' if t.head != 'matmul' else ''}.",
                  f"Scale the {HEAD_NAME[t.head]}'s weight instead of its output.")
    law = ("(W x + b) * s = (W s) x + b s" if t.head != "matmul" else "(x W) * s = x (W s)")
    per = any(t.ops[i]["kind"] in gen.PARAMS for i in muls)
    body = _pick(rng, f"{ops} scale{'s' if len(muls) == 1 else ''} the output of {_head_text(t)} "
                      f"{'per channel' if per else 'by a constant'}, and {law}: the factor goes into the weight, "
                      f"one elementwise pass over the {_fmt(shape)} output ({_size(shape)}) fewer for each multiply.",
                 f"Right after {_head_text(t)} the output is multiplied ({ops}). Since {law}, the product can be "
                 f"computed with a scaled weight, and the {len(muls)} elementwise kernel{'s' if len(muls) > 1 else ''} "
                 f"that read and write the {_fmt(shape)} output ({_size(shape)}) go away.")
    moved = ""
    if sol["moved"]:
        adds = ", ".join(f"`{t.expr(i)}`" for i in sol["moved"])
        moved = (f" {adds} came before a multiply, so {'it is' if len(sol['moved']) == 1 else 'they are'} scaled by "
                 "it and stay separate ops (folding them too is another move).")
    cache = _pick(rng, "The folded weight is computed from the live parameters in forward and cached until a "
                       "parameter changes, so a call does not pay for it.",
                  "Scaling the weight costs a pass over it, so it is done once and cached, recomputed only when a "
                  "parameter changes.")
    return f"{first}\n\n{body}{moved}\n\n{cache}{_tf32_note(t, rng)}"


def _doc_fold_bias(t, sol, rng):
    adds, shape = sol["adds"], t.shape(0)
    ops = ", ".join(f"`{t.expr(i)}`" for i in adds)
    lib = HEAD_LIB[t.head]
    where = ("torch.addmm adds a bias inside the GEMM" if t.head == "matmul" else
             f"the {HEAD_NAME[t.head]} adds its bias as part of the {lib} call")
    first = _pick(rng, f"Fold {ops} into the {HEAD_NAME[t.head]}'s bias.",
                  f"Let the {HEAD_NAME[t.head]}'s bias do the adds that follow it.")
    body = _pick(rng, f"{ops} shift{'s' if len(adds) == 1 else ''} the output of {_head_text(t)} by a constant or a "
                      f"per-channel value, and {where}. Folded into that bias, "
                      f"{'the elementwise pass' if len(adds) == 1 else f'{len(adds)} elementwise passes'} over the "
                      f"{_fmt(shape)} output ({_size(shape)}) {'disappears' if len(adds) == 1 else 'disappear'}.",
                 f"Since {where}, a shift right after it costs nothing once it is part of that bias; as "
                 f"{'a separate op' if len(adds) == 1 else 'separate ops'}, {ops} "
                 f"{'reads and writes' if len(adds) == 1 else 'read and write'} the whole {_fmt(shape)} output "
                 f"({_size(shape)}).")
    extra = ""
    if any(t.ops[m]["kind"] in MUL for i in adds for m in range(i)):
        extra += " An add behind a multiply moves in front of it divided by the factor: x * s + c = (x + c / s) * s."
    if sol["stop"] < _leading_run(t):
        extra += (" The adds behind the learned per-channel scale stay where they are: moving them in front of it "
                  "would divide by a scale that may be zero.")
    cache = "The folded bias is computed in forward from the live parameters and cached until one changes."
    return f"{first}\n\n{body}{extra}\n\n{cache}{_tf32_note(t, rng)}"


def _doc_fold_reduction(t, sol, rng):
    n = sol["n"]
    red, shape, C = t.ops[n], t.shape(0), t.shape(0)[1]
    law = "sum_c (W_c x + b_c) = (sum_c W_c) x + sum_c b_c"
    first = _pick(rng, f"Fold `{t.expr(n)}` into the {HEAD_NAME[t.head]}: compute one output channel, not {C}.",
                  f"Sum the {HEAD_NAME[t.head]}'s weight over its output channels instead of summing its output.")
    before = (f" The affine ops before it ({', '.join(f'`{t.expr(i)}`' for i in range(n))}) are per channel, so they "
              "fold into the weight and bias first." if n else "")
    law += " (divided by C for the mean)" if red["kind"] == "mean" else ""
    body = _pick(rng, f"`{t.expr(n)}` {'adds up' if red['kind'] == 'sum' else 'averages'} the {C} output channels "
                      f"of {_head_text(t)}, and the head is linear: {law}. "
                      f"With the weight reduced first, the head does 1/{C} of its multiply-adds and writes a "
                      f"{_fmt(shape[:1] + (1,) + shape[2:])} tensor instead of {_fmt(shape)} ({_size(shape)}), and "
                      f"the reduction kernel is gone.",
                 f"The head is linear, so {law}. {_head_text(t)[0].upper() + _head_text(t)[1:]} computes {C} "
                 f"channels only for `{t.expr(n)}` to collapse them; with a one-channel weight it computes the "
                 f"collapsed channel directly: {C}x fewer multiply-adds, and no {_fmt(shape)} intermediate "
                 f"({_size(shape)}) to write and read back.")
    cache = "The one-channel weight is computed from the live parameters and cached until one changes."
    return f"{first}\n\n{body}{before}\n\n{cache}{_tf32_note(t, rng)}"


def _doc_fuse(t, sol, rng):
    n, shape = len(t.ops), t.shape(0)
    ops = ", ".join(f"`{t.expr(i)}`" for i in range(n))
    lib, none = HEAD_LIB.get(t.head), t.head == "none"
    first = _pick(rng, f"Fuse the {n} ops{'' if none else ' after the ' + HEAD_NAME[t.head]} into one "
                       f"{'C++ loop' if t.cpu else 'CUDA kernel'}.",
                  f"One generated {'C++ loop' if t.cpu else 'kernel'} for the whole {'chain' if none else 'epilogue'}: "
                  f"{n} ops, one pass.")
    head = "" if none else f"{_head_text(t)[0].upper() + _head_text(t)[1:]} stays on {lib}; "
    body = _pick(rng, f"{head}{'the ops after it' if head else 'The ops'} ({ops}) run in one kernel. Eager launches "
                      f"a kernel per op, each reading and writing a tensor the size of the {_fmt(shape)} "
                      f"{'input' if none else 'head output'} ({_size(shape)}) or what is left of it; the fused kernel "
                      f"reads {'it' if none else 'the head output'} once and writes the result once.",
                 f"{head}{'eager then runs' if head else 'Eager runs'} {ops} as separate kernels, each a round trip "
                 f"through memory for a {_fmt(shape)} tensor ({_size(shape)}) or its reduced form; in one kernel the "
                 "intermediates stay in registers.")
    if t.cpu:
        one = {"elementwise": "element", "window": "output element, which reads its window",
               "row": "row"}[sol["template"]]
        how = (f"Each iteration of one loop over the {one}s applies the whole chain in registers, and OpenMP splits "
               f"the loop over the cores" + (f" ({sol['rows']} rows of {sol['R']} elements)." if "rows" in sol else ".")
               + (" The ops before the " + ("pool" if sol["template"] == "window" else "reduction")
                  + " run on each element as it is loaded, those after it on each result as it is stored."
                  if sol["template"] != "elementwise" else ""))
    elif sol["template"] == "elementwise":
        how = "A thread per element applies the whole chain in registers."
    elif sol["template"] == "window":
        how = (f"`{t.expr(sol['special'][0])}` is a window: a thread per output element reads its window, applying "
               "the ops before the pool to each element as it loads it and those after it to the result.")
    else:
        i, team = sol["special"][0], sol["team"]
        who = {1: "one thread, walking a row whose elements are " + str(sol["I"]) + " apart (consecutive threads take "
                  "consecutive rows, so loads stay contiguous)", 32: "one warp", 256: "a block of 256 threads",
               1024: "a block of 1024 threads (few rows, long ones)"}[team]
        how = (f"`{t.expr(i)}` works on {sol['rows']} rows of {sol['R']} elements; each row belongs to {who}. The ops "
               f"before it run on each element as it is loaded, those after it as each result is stored"
               + (", and every pass over the row recomputes them rather than storing an intermediate."
                  if t.ops[i]["kind"] in gen.NORMS or t.ops[i]["kind"] in ("softmax", "logsumexp") else "."))
        if t.ops[i]["kind"] == "batch_norm":
            how += (" The batch statistics normalise exactly as in training mode; the running statistics are not "
                    "updated (the output does not read them).")
    fns = [f for f in ("expf", "logf", "log1pf", "tanhf", "erff", "rsqrtf", "sqrtf")
           if re.search(rf"\b{f}\(", sol["kernel"])]
    numerics = _pick(rng, "Everything is fp32" + (f", with torch's formulas ({', '.join(fns)})" if fns else "")
                     + (", so the result matches to rounding." if sol["template"] != "row" else
                        "; only the order of the sums differs."),
                     "The arithmetic is fp32 and follows torch's definition of each op"
                     + ("; only the order of the sums differs." if sol["template"] == "row" else "."))
    return f"{first}\n\n{body}\n\n{how} {numerics}{_tf32_note(t, rng)}"


DOCS = dict(drop_noop=_doc_drop_noop, constant_output=_doc_constant_output, reduce_first=_doc_reduce_first,
            merge_affine=_doc_merge_affine, fold_scale_into_weights=_doc_fold_scale, fold_bias=_doc_fold_bias,
            fold_reduction=_doc_fold_reduction, fuse_epilogue=_doc_fuse)


# -----------------------------------------------------------------------------
# a solution file

def _wrap(line, indent, width=110):
    """A long call cut after commas, continued under its first argument (comments are left whole)."""
    code, _, comment = line.partition("  # ")
    if len(indent + line) <= width or "(" not in code:
        return [indent + line]
    start = len(indent) + code.index("(") + 1
    out, cur = [], indent + code[:code.index("(") + 1]
    for part in code[code.index("(") + 1:].split(", "):
        if len(cur) + len(part) + 2 > width and not cur.endswith("("):
            out.append(cur + ",")
            cur = " " * start + part
        else:
            cur += ("" if cur.endswith("(") else ", ") + part
    out.append(cur + (f"  # {comment}" if comment else ""))
    return out


def _source(t, move, sol, doc=None):
    rng = random.Random(f"teacher:{t.seed}:{move}")
    methods = sol.get("methods", [])
    fwd = sol["forward"] + ([] if sol["forward"][-1].startswith("return") else ["return x"])  # never empty
    code = "\n".join(methods + fwd)
    lines = _docstring(doc or DOCS[move](t, sol, rng), 0)
    lines += ["import math"] if "math." in code else []
    lines += ["import torch"]
    lines += ["import torch.nn.functional as F"] if "F." in code else []
    if "kernel" in sol:  # the fused epilogue: C++ for the CPU (t.cpu), else CUDA
        name, load = ("C_SRC", "load_c") if t.cpu else ("CUDA_SRC", "load_cuda")
        lines += ["", "import cudal1", "", f'{name} = r"""', sol["kernel"], '"""', "", f"_k = cudal1.{load}({name})"]
    # Model's constructor, parameters and names are kept by inheriting them: the judge runs a
    # solution after its task's program (evaluate.load_module's scope), so the answer never restates
    # the constructor (restating it was what small policies got wrong, results/curriculum-cpu-g8000.md)
    lines += ["", "", "class ModelNew(Model):"] + ["    " + s for s in sol.get("init", [])]
    for m in [methods] if methods else []:
        lines += [""] + ["    " + s if s else "" for s in m]
    lines += [""] if lines[-1] != "class ModelNew(Model):" else []
    lines += [f"    def forward(self, {t.args}):"]
    lines += [w for s in fwd for w in _wrap(s, "        ")]
    return "\n".join(lines) + "\n"


def solutions(task_source, meta, cpu=None):
    """[(move, solution_source)]: one solution per move the task admits and the teacher can write,
    each applying that move alone, in gen.MOVES order. Deterministic. The fused epilogue is C++ for the
    CPU (cpu=True; by default for a CPU-sized task) or else CUDA."""
    t = Task(task_source, meta, cpu)
    out = []
    for move in gen.MOVES:
        if move in t.sites:
            sol = MOVES[move](t)
            if sol is not None:
                out.append((move, _source(t, move, sol)))
    return out


def without_noops(t):
    """Task t as drop_noop leaves it: its no-op ops and their lines gone, the states and the sites of the
    other moves read again from what is left (a no-op can hide a move: two reductions, one of them over
    a dim of size 1, get no fused kernel until it goes)."""
    drop = set(t.sites.get("drop_noop", ()))
    u = copy.copy(t)
    u.ops = [op for i, op in enumerate(t.ops) if i not in drop]
    u.spec = dict(t.spec, ops=u.ops)
    u.states = gen.trace(u.spec)
    u.sites = gen.moves(u.spec, u.states)
    u.op_lines = [line for i, line in enumerate(t.op_lines) if i not in drop]
    return u


def composed(task_source, meta, cpu=None):
    """[('drop_noop+MOVE', solution_source)]: the task's no-ops dropped, then each other move the rest
    admits, for a task that admits drop_noop; left out where that is the move's one-move program again (a
    constant output that skips the no-ops anyway). An oracle for bench/held_out_ceiling.py, never training
    data: the teacher writes one move per solution, and finding a composition is left to search and RL.
    cpu: as solutions'."""
    t = Task(task_source, meta, cpu)
    if "drop_noop" not in t.sites:
        return []
    u, out = without_noops(t), []
    code = lambda sol: (sol["forward"], sol.get("methods"), sol.get("kernel"))  # noqa: E731
    sites = t.sites["drop_noop"]
    first = (f"First drop the {'no-op' if len(sites) == 1 else f'{len(sites)} no-ops'}. "
             + " ".join(_why_noop(t, i)[0].upper() + _why_noop(t, i)[1:] + "." for i in sites))
    for move in gen.MOVES:
        if move != "drop_noop" and move in u.sites:
            sol = MOVES[move](u)
            alone = MOVES[move](t) if move in t.sites else None
            if sol is None or (alone is not None and code(alone) == code(sol)):
                continue
            rng = random.Random(f"teacher:{t.seed}:{move}")
            doc = f"{first}\n\nThen, with {'it' if len(sites) == 1 else 'them'} gone:\n\n{DOCS[move](u, sol, rng)}"
            out.append((f"drop_noop+{move}", _source(u, move, sol, doc)))
    return out


# -----------------------------------------------------------------------------
# what each move costs: kernels launched per call, priced without a GPU

HEAD_COST = 3  # a head (GEMM / convolution) priced as this many other kernels (kernel_cost)
# ATen ops are counted as the meta device dispatches them, which is not always how CUDA runs them: live
# dropout dispatches bernoulli_, div_, mul (CUDA: one fused kernel); logsumexp one op, priced here as eager
# CUDA's max, subtract-exp, sum, log-add (not profiled). Neither changed a pick among the 1073 multi-move
# tasks of the first 3000 training tasks, nor (logsumexp at 9) more than one held-out pick.
KERNELS = {"logsumexp": 4}
VIEWS = {"view", "_unsafe_view", "reshape", "t", "transpose", "expand", "permute", "unsqueeze", "squeeze",
         "detach", "alias", "as_strided", "select", "slice", "lift_fresh", "split", "unbind", "empty",
         "empty_like"}
HEAD_OPS = {"addmm", "mm", "bmm", "convolution"}


def _kernels(task_source, solution=None):
    """(head kernels, other kernels) one call of the task's Model (or, with `solution`, its ModelNew)
    launches: its ATen ops but views, counted on the meta device (shapes only, no data, ~ms), in train
    mode as the judge runs it (live dropout, BatchNorm's batch statistics), after a warm-up call that
    fills a fold's cache."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.head = self.other = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__.split(".")[0]
            if name in HEAD_OPS:
                self.head += 1
            elif name not in VIEWS:
                self.other += KERNELS.get(name, 1)
            return func(*args, **(kwargs or {}))

    ns = {}
    exec(compile(task_source, "task", "exec"), ns)
    if solution:
        exec(compile(solution, "solution", "exec"), ns)
    with torch.device("meta"):
        model = ns["ModelNew" if solution else "Model"](*ns["get_init_inputs"]())  # train mode, as the judge runs it
        x = [a.to("meta") if isinstance(a, torch.Tensor) else a for a in ns["get_inputs"]()]
    with torch.no_grad():
        model(*x)
        with Count() as c:
            model(*x)
    return c.head, c.other


def kernel_counts(task_source, sols):
    """{move: (head kernels, other kernels)} one call of each (move, solution) in sols launches (_kernels);
    None where a solution does not run on the meta device. The fused epilogue's CUDA kernel does not
    run there: it launches the task's head and one kernel."""
    try:
        head, _ = _kernels(task_source)
    except Exception:  # noqa: BLE001 -- a task the meta device cannot run: every move unpriced
        return {move: None for move, _ in sols}
    out = {}
    for move, sol in sols:
        try:
            out[move] = (head, 1) if move == "fuse_epilogue" else _kernels(task_source, sol)
        except Exception:  # noqa: BLE001 -- one the meta device cannot run is priced by the ranking alone
            out[move] = None
    return out


def kernel_cost(counts, head_cost=HEAD_COST):
    """A move's price from its kernel_counts: the kernels one call launches, a head counted as head_cost.

    The point is the choice among a task's moves. A ranking of moves by their judged geomean over all
    tasks picks within ~1% of each training task's best move, but where moves meet it picks a fold of
    a sum (~1.1x) over dropping a LogSumExp over one element (~1.6x), or a constant output that still
    runs four ops after it over a fused epilogue. Counting kernels sees both. A head priced as one
    kernel also prefers a fused epilogue that keeps an fp32 ConvTranspose3d head (~0.5x) to a constant
    output that skips it (~3x). On the 543 judged training tasks a head price from 2 to under 5 picks
    best (bench/move_pick.py; 1.342x against 1.341x, two tasks decide it), and 3 is taken. The cases
    above were seen on held-out tasks, so their 1.40x against the ranking's 1.33x is not an unseen test."""
    return None if counts is None else head_cost * counts[0] + counts[1]


def move_of(name):
    """The move a generated solution applies, from its name: levelG/NAME.<move>.py (solution_path)."""
    return name.rsplit(".", 2)[-2]


def judged_moves(speedups):
    """{move: the speedups of its judged solutions in `speedups` ({solution name: speedup})}, for moves with 5
    or more."""
    by_move = {}
    for name, s in speedups.items():
        if name.startswith("levelG/"):
            by_move.setdefault(move_of(name), []).append(s)
    return {m: v for m, v in by_move.items() if len(v) >= 5}


def move_speed(speedups):
    """{move: geomean speedup of its judged solutions (judged_moves)}: the ranking that breaks stage 1's ties."""
    return {m: math.exp(sum(map(math.log, v)) / len(v)) for m, v in judged_moves(speedups).items()}


def cheapest(items, cost, speed):
    """Stage 1's pick among a task's moves (train_sft.fastest_plain, taught_move, bench/move_pick.py): the item
    of least cost(item) where every item is priced (cost not None; else cost is left out), a tie to the
    greatest speed(item), then to the first."""
    priced = all(cost(i) is not None for i in items)
    return max(items, key=lambda i: (-cost(i) if priced else 0, speed(i)))


def taught_move(task_source, sols, rank):
    """The move stage 1 teaches a task with `sols` [(move, source)] as its plain pair: the cheapest by
    kernel_cost, a tie to the faster move in `rank` (move_speed)."""
    counts = kernel_counts(task_source, sols)
    return cheapest([m for m, _ in sols], lambda m: kernel_cost(counts[m]), lambda m: rank.get(m, 0.0))


# -----------------------------------------------------------------------------
# on disk: tasks and their teacher solutions, in the layout evaluate.py pairs by id and
# cudal1.held_out reads (a solution is placed by its task's NAME.json)

def solution_path(out_dir, name, move):
    """out_dir/solutions/levelG/NAME.<move>.py: where the teacher's solution of a task lives."""
    return os.path.join(out_dir, "solutions", "levelG", f"{name}.{move}.py")


def write(out_dir, name, source, meta, sols):
    """The task as out_dir/tasks/levelG/NAME.py (+ NAME.json) and each (move, solution) of sols at
    solution_path()."""
    gen.write(os.path.join(out_dir, "tasks", "levelG"), name, source, meta)
    for move, sol in sols:
        path = solution_path(out_dir, name, move)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(sol)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="write generated tasks and one teacher solution per move")
    parser.add_argument("--seeds", default="0:500", help="seed range START:STOP (STOP excluded)")
    parser.add_argument("--size", default="gpu", choices=sorted(gen.PROFILES), help="size profile")
    parser.add_argument("--split", default="train", choices=("train", "held_out"),
                        help="which tasks to write (cudal1.held_out); held-out tasks only when asked for")
    parser.add_argument("--out", required=True, help="folder for tasks/levelG and solutions/levelG")
    args = parser.parse_args()
    start, stop = map(int, args.seeds.split(":"))
    counts, n_tasks = {m: 0 for m in gen.MOVES}, 0
    for seed in range(start, stop):
        name, source, meta = gen.generate(seed, args.size)
        if meta["held_out"] != (args.split == "held_out") or meta["degenerate"]:
            continue
        sols = solutions(source, meta)
        if not sols:
            continue
        write(args.out, name, source, meta, sols)
        for move, _ in sols:
            counts[move] += 1
        n_tasks += 1
    print(f"{n_tasks} tasks, {sum(counts.values())} solutions in {args.out}: "
          + ", ".join(f"{m} {c}" for m, c in counts.items()))

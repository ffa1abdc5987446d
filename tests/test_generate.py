"""kernelbench/generate.py: deterministic, mostly distinct, every task runs, and every move it
declares holds, checked by applying the move on the CPU and comparing outputs."""
import hashlib

import pytest
import torch
import torch.nn.functional as F

import cudal1
import evaluate
from kernelbench import generate as gen

SAMPLE = 30  # seeds 0..29, plus the first few tasks that admit each move


def sample_seeds(per_move=3, size="cpu"):
    seeds, found = list(range(SAMPLE)), {m: 0 for m in gen.MOVES}
    seed = SAMPLE
    while min(found.values()) < per_move:
        moves = gen.generate(seed, size)[2]["moves"]
        if any(found[m] < per_move for m in moves):
            seeds.append(seed)
            for m in moves:
                found[m] += 1
        seed += 1
    return seeds


SEEDS = sample_seeds()


def load(spec, tmp_path, tag=""):
    path = tmp_path / f"{spec['seed']}{tag}.py"
    path.write_text(gen.render(spec))
    return evaluate.load_module(str(path), f"gen_{spec['seed']}{tag}")


def build(mod, like=None, seed=0):
    """Model(*get_init_inputs()) built under `seed`; with `like`, its parameters and buffers copied
    in by name (reshaped where a test moved a per-channel parameter past a reduction)."""
    torch.manual_seed(seed)
    model = mod.Model(*mod.get_init_inputs())
    if like is not None:
        theirs = like.state_dict()
        with torch.no_grad():
            for name, t in model.state_dict().items():
                if name in theirs and theirs[name].numel() == t.numel():
                    t.copy_(theirs[name].reshape(t.shape))
    return model


def run(model, xs, seed=0):
    torch.manual_seed(seed)  # dropout draws its mask from here
    with torch.no_grad():
        return model(*xs)


def inputs(mod, seed):
    torch.manual_seed(1000 + seed)
    return mod.get_inputs()


def close(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = max(1.0, b.abs().max().item())
    assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * scale), (a - b).abs().max().item()


def test_deterministic_and_seeds_differ():
    for seed in (0, 7, 12345):
        assert gen.generate(seed, "gpu") == gen.generate(seed, "gpu")
        assert gen.generate(seed, "cpu") == gen.generate(seed, "cpu")
    assert gen.generate(1, "cpu")[1] != gen.generate(2, "cpu")[1]


def test_distinct():
    # 3,000 seeds give 2,99x distinct sources (100,000 give 97,566: the docstring's count)
    sources = {cudal1.same_code(gen.generate(seed, "cpu")[1]) for seed in range(3000)}
    assert len(sources) >= 2985, len(sources)


def test_file_format_is_kernelbench(tmp_path):
    name, source, meta = gen.generate(3, "gpu")
    gen.write(str(tmp_path), name, source, meta)
    mod = evaluate.load_module(str(tmp_path / f"{name}.py"), "gen_format")
    assert all(hasattr(mod, k) for k in ("Model", "get_inputs", "get_init_inputs"))
    assert name.startswith("3_") and source.startswith('"""') and "class Model(nn.Module):" in source
    for move in gen.MOVES:  # the task file is the prompt: it never names its moves
        assert move not in source


@pytest.mark.parametrize("seed", SEEDS)
def test_task_runs_and_its_moves_hold(seed, tmp_path):
    spec = gen.draw(seed, "cpu")
    states = gen.trace(spec)
    sites = gen.moves(spec, states)
    mod = load(spec, tmp_path)
    model = build(mod)
    xs, ys = inputs(mod, 0), inputs(mod, 1)
    out = run(model, xs)
    assert isinstance(out, torch.Tensor) and torch.isfinite(out).all()
    assert tuple(out.shape) == states[-1]["shape"]
    lo, hi = states[-1]["lo"], states[-1]["hi"]  # the tracked range holds every value
    assert lo <= out.min().item() and out.max().item() <= hi, (lo, hi, out.min(), out.max())
    again = run(model, xs, seed=1)  # another dropout mask
    if not states[-1]["rand"]:
        assert torch.equal(out, again)

    if "constant_output" in sites:
        assert torch.equal(out, run(model, ys, seed=2))
    if "fuse_epilogue" in sites:  # no randomness left to reproduce in a fused kernel
        assert torch.equal(out, again)
    for i in sites.get("drop_noop", []):
        variant = dict(spec, ops=spec["ops"][:i] + spec["ops"][i + 1:])
        close(run(build(load(variant, tmp_path, f"_noop{i}"), model), xs), out)
    for i in sites.get("reduce_first", []):
        ops = list(spec["ops"])
        ops[i - 1], ops[i] = ops[i], ops[i - 1]
        variant = dict(spec, ops=ops)
        close(run(build(load(variant, tmp_path, f"_swap{i}"), model), xs), out)
    for i in sites.get("merge_affine", []):
        check_affine(spec, states, i, model, tmp_path)
    if "fold_scale_into_weights" in sites or "fold_bias" in sites:
        check_fold(spec, sites, model, xs[0], tmp_path)
    if "fold_reduction" in sites:
        check_fold_reduction(spec, sites, model, xs[0], tmp_path)


def tail(spec, ops, shape, model, tmp_path, tag):
    """The ops alone, as a model on an input of `shape`, with `model`'s parameters."""
    part = dict(spec, head=dict(kind="none"), inputs=[shape], out=shape, ops=ops)
    return build(load(part, tmp_path, tag), model)


def per_channel(v):
    """The (C,) values of v (B, C, ...), asserting v holds one value per channel."""
    v = v.reshape(v.shape[0], v.shape[1], -1)
    assert torch.equal(v, v[:1, :, :1].expand_as(v))
    return v[0, :, 0]


def affine_of(t, shape):
    """(a, b), (C,) each, with t(h) = a * h + b per channel: read from t(0) and t(1)."""
    zero, one = t(torch.zeros(shape)), t(torch.ones(shape))
    return per_channel(one - zero), per_channel(zero)


def check_affine(spec, states, i, model, tmp_path):
    shape = states[i]["shape"]
    t = tail(spec, [spec["ops"][i]], shape, model, tmp_path, f"_aff{i}")
    a, b = affine_of(lambda h: run(t, [h]), shape)
    h = torch.randn(shape)
    view = (1, -1) + (1,) * (len(shape) - 2)
    close(run(t, [h]), a.view(view) * h + b.view(view))


def head_out(spec, model, x, weight=None, bias=None):
    """The head on x, with its weight and bias replaced when given."""
    kind = spec["head"]["kind"]
    with torch.no_grad():
        if kind == "matmul":
            return x @ (getattr(model, spec["head"]["attr"]) if weight is None else weight) + (0 if bias is None else bias)
        m = getattr(model, spec["head"]["attr"])
        if weight is None:
            return m(x)
        if kind == "gemm":
            return F.linear(x, weight, bias)
        kw = dict(stride=m.stride, padding=m.padding)
        if "transpose" in kind:
            kw["output_padding"] = m.output_padding
        return getattr(F, kind)(x, weight, bias, **kw)  # F.conv2d, F.conv_transpose3d, ...


def fold_dim(kind):
    """The output-channel dim of the head's weight: Linear (out, in), Conv (out, in, k..),
    ConvTranspose (in, out, k..), Matmul's (in, out)."""
    return 1 if kind == "matmul" or "transpose" in kind else 0


def folded(spec, model, a, b):
    """The head's weight and bias with the per-channel map a * h + b folded in."""
    kind = spec["head"]["kind"]
    if kind == "matmul":
        w, bias = getattr(model, spec["head"]["attr"]).detach(), torch.zeros(len(a))
    else:
        m = getattr(model, spec["head"]["attr"])
        w, bias = m.weight.detach(), m.bias.detach()
    view = [1] * w.dim()
    view[fold_dim(kind)] = -1
    return w * a.view(view), a * bias + b


def leading_run(spec):
    n = 0
    while n < len(spec["ops"]) and spec["ops"][n]["kind"] in gen.AFFINE:
        n += 1
    return n


def check_fold(spec, sites, model, x, tmp_path):
    """The affine ops right after the head, folded into its weight and bias, give the same values."""
    n = leading_run(spec)
    t = tail(spec, spec["ops"][:n], spec["out"], model, tmp_path, "_fold")
    a, b = affine_of(lambda h: run(t, [h]), spec["out"])
    if "fold_scale_into_weights" not in sites:
        close(a, torch.ones_like(a))
    if "fold_bias" not in sites:
        close(b, torch.zeros_like(b))
    w, bias = folded(spec, model, a, b)
    close(head_out(spec, model, x, w, bias), run(t, [head_out(spec, model, x)]))


def check_fold_reduction(spec, sites, model, x, tmp_path):
    """A sum or mean over channels after the head: one output channel with summed weights."""
    n = sites["fold_reduction"][0]
    t = tail(spec, spec["ops"][:n], spec["out"], model, tmp_path, "_red")
    a, b = affine_of(lambda h: run(t, [h]), spec["out"]) if n else (torch.ones(spec["out"][1]), torch.zeros(spec["out"][1]))
    w, bias = folded(spec, model, a, b)
    kind, red = spec["head"]["kind"], spec["ops"][n]
    d = fold_dim(kind)
    w1, b1 = w.sum(d, keepdim=True), bias.sum(0, keepdim=True)
    if red["kind"] == "mean":
        w1, b1 = w1 / len(a), b1 / len(a)
    want = tail(spec, spec["ops"][:n + 1], spec["out"], model, tmp_path, "_red1")
    got = head_out(spec, model, x, w1, b1)
    if not red["keepdim"]:
        got = got.squeeze(1)
    close(got, run(want, [head_out(spec, model, x)]))


def test_a_norm_of_a_constant_is_degenerate_and_never_drawn_into_a_task_list(tmp_path):
    # seed 305: a norm after an op that pins every value; its variance is rounding noise, divided
    # by sqrt(eps), so two runs of the reference on different inputs differ beyond any tolerance
    name, source, meta = gen.generate(305, "cpu")
    assert meta["degenerate"] and not gen.generate(0, "cpu")[2]["degenerate"]
    spec = gen.draw(305, "cpu")
    states = gen.trace(spec)
    assert any(op["kind"] in gen.NORMS and states[i]["const"] for i, op in enumerate(spec["ops"]))
    kept = gen.tasks(300, 10, "cpu", split="all")
    assert 305 not in [m["seed"] for _, _, m in kept] and len(kept) == 10


def test_spellings_vary_and_compute_the_same(tmp_path):
    """_spell draws a method or a function, dims as a list or a tuple, and .values or [0], from a generator
    of its own: every spelling occurs, a seed's ops, names and moves are those its first spelling gives,
    and a spelt task computes what its first spelling does."""
    seen, checked = set(), 0
    for seed in range(400):
        spec = gen.draw(seed, "cpu")
        spelt = [op for op in spec["ops"] if op.get("spell")]
        if not spelt:
            continue
        plain = gen.unspelt(spec)
        src, first = gen.render(spec), gen.render(plain)
        for needle in ("= x.sum(", "= x.mean(", "= torch.sum(", "= torch.mean(", ".values", ")[0]", "dim=[", "dim=("):
            seen.update({needle} if needle in src else set())
        if src != first and checked < 6:  # a few run: the spelt and the first spelling, same parameters and input
            a, b = load(spec, tmp_path, "_spelt"), load(plain, tmp_path, "_first")
            xs = inputs(a, seed)
            close(run(build(a), xs), run(build(b, like=build(a)), xs))
            checked += 1
    assert seen == {"= x.sum(", "= x.mean(", "= torch.sum(", "= torch.mean(", ".values", ")[0]", "dim=[", "dim=("}, seen
    assert checked == 6
    # without the spellings, seeds 0-199 render byte for byte as before _spell (the generator of 76b1329)
    digest = hashlib.sha256()
    for seed in range(200):
        for size in ("cpu", "gpu"):
            spec = gen.draw(seed, size)
            digest.update(gen.render(gen.unspelt(spec)).encode())
    assert digest.hexdigest()[:16] == "dea775c182d37d95"

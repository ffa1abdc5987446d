"""Every KernelBench task imports, constructs and runs its forward on the CPU.

Full sizes would take far too long on 2 cores, so tests/task_sizes/level{N}.json gives, per task
file, module constants to override before get_init_inputs()/get_inputs() are called (they read
the module's globals at call time). A task with no entry runs at full size.
"""
import glob
import importlib.util
import json
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = sorted(glob.glob(os.path.join(ROOT, "kernelbench", "level*", "*.py")))
SIZES = {}
for level_file in glob.glob(os.path.join(ROOT, "tests", "task_sizes", "level*.json")):
    level = os.path.basename(level_file)[: -len(".json")]
    for name, consts in json.load(open(level_file)).items():
        SIZES[f"{level}/{name}"] = consts


def small_task(path):
    """Import a task file and shrink its constants as tests/task_sizes says."""
    spec = importlib.util.spec_from_file_location("task_" + os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    key = os.path.relpath(path, os.path.join(ROOT, "kernelbench"))
    for name, value in SIZES.get(key, {}).items():
        assert hasattr(mod, name), f"{key}: task_sizes names unknown constant {name}"
        setattr(mod, name, value)
    return mod


def test_size_table_names_real_files():
    names = {os.path.relpath(p, os.path.join(ROOT, "kernelbench")) for p in TASKS}
    assert set(SIZES) <= names, sorted(set(SIZES) - names)


@pytest.mark.parametrize("path", TASKS, ids=lambda p: os.path.relpath(p, ROOT))
def test_task_runs_on_cpu(path):
    mod = small_task(path)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    inputs = mod.get_inputs()
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (tuple, list)) else [out]
    for o in outs:
        assert isinstance(o, torch.Tensor)
        if o.is_floating_point():
            assert torch.isfinite(o).all(), "non-finite output at reduced size"

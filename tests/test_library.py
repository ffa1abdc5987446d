"""Every kernels/ solution reads as a solution of its task (README: Writing a solution): a first
docstring (the analysis), a ModelNew whose constructor takes the task's arguments, and no lab notes
(results/ paths, commits) in the text the policy learns to write. Read as source, not imported:
importing would build every kernel."""
import ast
import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "kernels", "level*", "*.py")))


def init_args(tree, name):
    """The constructor's parameter names of class `name` in a module's syntax tree."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    return [a.arg for a in init.args.args[1:]] if init else []


@pytest.mark.parametrize("path", FILES, ids=[os.path.relpath(p, ROOT) for p in FILES])
def test_a_solution_reads_as_a_solution_of_its_task(path):
    level, name = os.path.basename(os.path.dirname(path)), os.path.basename(path)
    task = os.path.join(ROOT, "kernelbench", level, name.split(".")[0] + ".py")
    assert os.path.exists(task), f"no task {task}"
    tree = ast.parse(open(path).read())
    doc = ast.get_docstring(tree)
    assert doc and len(doc.split()) >= 20, "the first docstring is the analysis"
    assert "results/" not in doc and "commit" not in doc.lower(), "lab notes belong in results/"
    assert init_args(tree, "ModelNew") == init_args(ast.parse(open(task).read()), "Model")

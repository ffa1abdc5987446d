"""bench/grounding.py: which attributes an answer reads that its task does not define."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import grounding  # noqa: E402

TASK = '''import torch.nn as nn


class Model(nn.Module):
    def __init__(self, multiplier):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.multiplier = multiplier

    def forward(self, x):
        return self.fc(x) * self.multiplier
'''


def test_names_the_task_lacks_are_reported_and_the_answers_own_are_not():
    recalled = "class ModelNew(Model):\n    def forward(self, x):\n        return self.gemm(x) * self.scale\n"
    assert grounding.unknown(TASK, recalled) == ["gemm", "scale"]
    own = ("class ModelNew(Model):\n    _key = None\n\n    def folded(self):\n        self._cached = self.fc.weight * self.multiplier\n"
           "        return self._cached\n\n    def forward(self, x):\n        return x @ self.folded().t() + self._key\n")
    assert grounding.unknown(TASK, own) == []
    assert grounding.unknown(TASK, "class ModelNew(Model:\n") is None


def test_a_task_is_read_from_the_run_that_holds_the_answers(tmp_path, monkeypatch):
    # the run's out/ unpacked elsewhere: its task, not one of the same path under the working folder
    run, here = tmp_path / "run", tmp_path / "here"
    for root, text in ((run, TASK), (here, "stale")):
        (root / "out" / "held_out").mkdir(parents=True)
        (root / "out" / "held_out" / "1_X.py").write_text(text)
    answers = run / "out" / "answers.jsonl"
    monkeypatch.chdir(here)
    assert open(grounding.task_file(str(answers), "out/held_out/1_X.py")).read() == TASK
    assert grounding.task_file(str(answers), "kernelbench/none.py") == "kernelbench/none.py"

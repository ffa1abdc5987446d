"""warm.run, the tests' way to run a script, gives what subprocess.run gives a fresh interpreter."""
import os
import subprocess
import sys

import pytest

import warm

SCRIPT = """import atexit, os, sys, torch
atexit.register(lambda: print("at exit"))
print(os.path.basename(os.getcwd()), os.environ.get("X"), sys.argv[1:], __name__, torch.get_num_threads())
sys.stderr.write("to stderr\\n")
if sys.argv[1] == "fail":
    raise ValueError("boom")
sys.exit(int(sys.argv[1]))
"""


@pytest.mark.parametrize("arg", ["0", "3", "fail"])
def test_a_run_matches_a_fresh_interpreters(tmp_path, arg):
    (tmp_path / "s.py").write_text(SCRIPT)
    cmd, env = [sys.executable, "s.py", arg], {**os.environ, "X": "y", "OMP_NUM_THREADS": "1"}
    fresh = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    forked = warm.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)
    assert forked.stdout.startswith(f"{tmp_path.name} y ['{arg}'] __main__ 1\n") and "at exit" in forked.stdout
    assert forked.stderr.splitlines()[0] == "to stderr"
    assert forked.stderr.splitlines()[-1] == fresh.stderr.splitlines()[-1]  # the exception's line, or stderr's only


def test_a_run_past_its_timeout_is_killed_and_the_next_one_runs(tmp_path):
    (tmp_path / "s.py").write_text("import time\nprint('started', flush=True)\ntime.sleep(60)\n")
    with pytest.raises(subprocess.TimeoutExpired) as e:
        warm.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=2)
    assert e.value.output == "started\n"
    (tmp_path / "s.py").write_text("print('next')\n")
    p = warm.run([sys.executable, "s.py"], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert (p.returncode, p.stdout) == (0, "next\n")

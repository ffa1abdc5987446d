"""run(): subprocess.run([sys.executable, "script.py", *args], capture_output=True, text=True, ...) for the tests,
as a fork of one waiting process that has already imported torch. A fresh interpreter on a 2-core machine spends
~3 s importing torch and ~3 s more on torch._dynamo (an optimizer's construction imports it), and the tests run
this repository's scripts (train_sft.py, train_rl.py, evaluate.py, bench/) many times (57 in test_rl.py alone), most
of them for well under a second of work of their own.

The waiting process (this file run as a script) imports both and computes nothing with them, so no thread pool
exists yet and a fork is safe. Each request forks a child that takes the caller's working directory, environment
and arguments, writes its stdout and stderr to files, runs the script as __main__ (runpy) and exits as that
script's own process would: its exit code, its atexit handlers, an uncaught exception's traceback on stderr. One
past its timeout is killed with what it started, and run() raises subprocess.TimeoutExpired, as subprocess.run does.
Anything else (python -m, -c, another program) goes to subprocess.run unchanged."""
import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading

_server, _lock = None, threading.Lock()


def run(cmd, cwd=None, env=None, capture_output=False, text=False, timeout=None):
    if not (capture_output and text and len(cmd) > 1 and cmd[0] == sys.executable and cmd[1].endswith(".py")
            and hasattr(os, "pidfd_open")):  # Linux's: how the server waits for a child with a timeout
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=capture_output, text=text, timeout=timeout)
    global _server
    with _lock, tempfile.TemporaryDirectory() as tmp:
        if _server is None or _server.poll() is not None:
            _server = subprocess.Popen([sys.executable, os.path.abspath(__file__)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, text=True)
            atexit.register(_server.stdin.close)  # the server ends on end of input
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        request = dict(argv=[str(c) for c in cmd[1:]], cwd=os.path.abspath(cwd or os.getcwd()),
                       env=dict(os.environ if env is None else env), out=out, err=err, timeout=timeout)
        _server.stdin.write(json.dumps(request) + "\n")
        _server.stdin.flush()
        code, timed_out = json.loads(_server.stdout.readline())
        stdout, stderr = open(out).read(), open(err).read()
        if timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout, stdout, stderr)
        return subprocess.CompletedProcess(cmd, code, stdout, stderr)


def _serve():
    import runpy
    import torch
    import torch._dynamo  # noqa: F401  (torch.optim imports it on an optimizer's first construction: ~3 s more)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            os.setpgid(0, 0)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY | os.O_CREAT),
                                    (2, request["err"], os.O_WRONLY | os.O_CREAT)):
                os.dup2(os.open(path, flags, 0o644), fd)
            if os.environ.get("OMP_NUM_THREADS"):  # read by torch's thread pool when it starts: started here
                torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
            sys.argv = request["argv"]
            sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
            runpy.run_path(sys.argv[0], run_name="__main__")
            sys.exit(0)  # the script ran to its end; an exception or sys.exit inside it left before this
        pidfd = os.pidfd_open(pid)
        ended = select.select([pidfd], [], [], request["timeout"])[0]
        os.close(pidfd)
        if not ended:  # not yet reaped, so its pid is still its own
            os.killpg(pid, signal.SIGKILL)  # the child and whatever it started (judge workers)
        print(json.dumps([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), not ended]), flush=True)


if __name__ == "__main__":
    _serve()

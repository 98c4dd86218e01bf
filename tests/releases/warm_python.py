"""A ``python`` for the tests that run one real release per interpreter: ``run(args, env, cwd)``
answers as ``subprocess.run([sys.executable, *args], capture_output=True, text=True)`` would,
but the interpreter is forked from one that has imported torch already.

Why: those tests start an interpreter per release (its import of megatron-core must be fresh,
from that release's own files), and most of each one's CPU is torch's import and the torch
modules megatron-core pulls in, the same every time (each release is installed without its
dependencies, so torch comes from this environment either way). With them preloaded, as the
suite's warm ranks have them (``patchlane.sweep.warm_server.PRELOAD``), megatron-core's own
import takes 0.2-0.3 s instead of 2-3 s.

What a child has, as the fresh interpreter it stands for would: the request's environment (read
by everything imported after the fork: patchlane, megatron-core, the releases), ``sys.path``
with the request's ``PYTHONPATH`` where Python puts it, its working directory, ``sys.argv``,
a new ``__main__``, stdout and stderr of its own, stdin empty, and its exit status (a signal:
negative). What it cannot have: torch imported under the request's environment. The server
starts with this process's environment less ``PATCHLANE_*``, and a request whose environment
differs from that in anything torch reads at import (anything but ``PYTHONPATH`` and
``PATCHLANE_*``) is refused, not served wrongly. patchlane, megatron-core and liger-kernel are
never imported by the server (``warm_server.NEVER``): each child imports them itself.
``test_warm_python.py`` holds a child to a fresh interpreter's ``sys.path``, argv, working
directory and environment.

One server per pytest worker, started by the first request and stopped when the session ends
(or when this process dies: its stdin closes).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from patchlane.sweep.warm_server import NEVER, PRELOAD

__all__ = ["WarmPython"]

_SERVER = r"""
import importlib, json, os, runpy, signal, sys, time, traceback, types
preload, never = json.loads(sys.argv[1])
import torch  # noqa: F401
for name in preload[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
leaked = [n for n in never if n in sys.modules]
if leaked:
    raise SystemExit(f"imported {leaked} while preloading torch")
# sys.path as Python built it here: [''] + this environment's PYTHONPATH + the rest
mine = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
rest = sys.path[1 + len(mine):]


def child(request):
    code = 1
    try:
        os.setsid()
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        sys.stdin = open(0, closefd=False)  # not the server's, with its requests read ahead
        for fd, name in ((1, "stdout"), (2, "stderr")):
            os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        theirs = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        args = request["args"]
        if args[0] == "-c":  # python -c CODE ARGS
            sys.path[:] = ["", *theirs, *rest]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            sys.argv = ["-c", *args[2:]]
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        else:  # python SCRIPT ARGS
            script = os.path.abspath(args[0])
            sys.path[:] = [os.path.dirname(script), *theirs, *rest]
            sys.argv = [args[0], *args[1:]]
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(request)
    deadline, timed_out = time.monotonic() + request["timeout"], False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if not timed_out and time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)  # as subprocess.run's timeout kills the child
            timed_out = True
        time.sleep(0.02)
    print(json.dumps({"status": os.waitstatus_to_exitcode(status), "timed_out": timed_out}),
          flush=True)
"""

_SERVED = ("PYTHONPATH", "PYTEST_CURRENT_TEST")
"""What a request's environment may change from the server's (besides ``PATCHLANE_*``): read
after the fork, never by torch's import (pytest sets the second per test)."""


def _base_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("PATCHLANE_") and k not in _SERVED}


class WarmPython:
    """The server above, started by the first :meth:`run` (a worker that asks nothing of it
    starts none)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
        self._folder = tempfile.TemporaryDirectory(prefix="warm-python-")
        self._count = 0

    def _start(self) -> subprocess.Popen[str]:
        log = open(os.path.join(self._folder.name, "server.log"), "w")  # noqa: SIM115
        with log:
            proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, json.dumps([list(PRELOAD), list(NEVER)])],
                env=self.env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=log, cwd=self._folder.name)
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if not ready:
            proc.wait()
            raise RuntimeError("the warm python ended before it was ready: "
                               + Path(log.name).read_text()[-3000:])
        return proc

    def run(self, args: Sequence[str], env: Mapping[str, str], cwd: str | Path,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` (``-c CODE ...`` or ``SCRIPT ...``) in ``env`` and ``cwd``, its output
        captured; :class:`subprocess.TimeoutExpired` after ``timeout`` seconds, the child
        killed, as ``subprocess.run`` does."""
        differs = sorted(k for k in set(_base_env(env)) ^ set(_base_env(self.env))
                         | {k for k in _base_env(env) if env[k] != self.env.get(k)})
        assert not differs, (f"{differs}: a forked child cannot have torch imported under "
                             "another environment; run a fresh interpreter for this")
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self._count += 1
        out = Path(self._folder.name, f"{self._count}.out")
        err = Path(self._folder.name, f"{self._count}.err")
        request = {"args": list(args), "env": dict(env), "cwd": str(cwd), "timeout": timeout,
                   "stdout": str(out), "stderr": str(err)}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        # one line answers each request; the server itself kills a child past its timeout
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout + 120)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            raise RuntimeError(f"the warm python gave no answer for {list(args)[:1]} (exit "
                               f"code {self.proc.wait()}); its log: "
                               + Path(self._folder.name, "server.log").read_text()[-3000:])
        answer = json.loads(line)
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout,
                                            out.read_text(), err.read_text())
        return subprocess.CompletedProcess([sys.executable, *args], answer["status"],
                                           out.read_text(), err.read_text())

    def close(self) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        self._folder.cleanup()

"""A ``python`` for the tests that run one real release per interpreter: ``run(args, env, cwd)``
answers as ``subprocess.run([sys.executable, *args], capture_output=True, text=True)`` would,
but the interpreter is forked from one that has imported torch already.

Why: those tests start an interpreter per release (its import of megatron-core must be fresh,
from that release's own files), and most of each one's CPU is torch's import and the torch
modules megatron-core pulls in, the same every time (each release is installed without its
dependencies, so torch comes from this environment either way). With them preloaded, as the
suite's warm ranks have them, megatron-core's own import takes 0.2-0.3 s instead of 2-3 s.

The server is the warm-rank server's own preload and path rules
(``patchlane/sweep/warm_server.py``, loaded from its file: it never imports patchlane), so what
a child has is what a warm rank has, as a fresh interpreter would: the request's environment
(read by everything imported after the fork: patchlane, megatron-core, the releases),
``sys.path`` rebuilt from the request's ``PYTHONPATH`` (``rebuild_path``), its working
directory, ``sys.argv``, a new ``__main__``, stdout and stderr of its own, stdin empty, its
threads joined and its exit functions run at the end, and its exit status (a signal:
negative). What it cannot have is torch imported under the request's environment, so a
request is refused, not served wrongly, when its environment differs from the server's in
anything but ``PYTHONPATH`` and ``PATCHLANE_*``, or when a folder its ``PYTHONPATH`` adds or
drops holds something the server imported (``rank_start.shadowing``). ``test_warm_python.py``
holds a child to a fresh interpreter.

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

from patchlane.sweep import warm_server
from patchlane.sweep.rank_start import shadowing

__all__ = ["WarmPython"]

_SERVER = r"""
import json, os, runpy, signal, sys, time, traceback, types
rules = runpy.run_path(sys.argv[1])  # the warm-rank server's functions; its main does not run
# answers go out on a descriptor of their own: whatever the preload prints goes to the log
answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
try:
    rules["preload"]()
    base = rules["base_path"]()
except BaseException as exc:
    answers.write(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}) + "\n")
    answers.flush()
    raise SystemExit(1)
# what the preload itself put on the path stays (after this -c program's own first entry)
started = rules["rebuild_path"](base, os.environ.get("PYTHONPATH", ""))
base += [p for p in sys.path[1:] if p not in started]


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
        path = rules["rebuild_path"](base, request["env"].get("PYTHONPATH", ""))
        args = request["args"]
        if args[0] == "-c":  # python -c CODE ARGS
            sys.path[:] = ["", *path]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            sys.argv = ["-c", *args[2:]]
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        else:  # python SCRIPT ARGS: its folder first, symbolic links resolved, as Python does
            sys.path[:] = [os.path.dirname(os.path.realpath(args[0])), *path]
            sys.argv = list(args)
            runpy.run_path(args[0], run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = rules["exit_status"](exc)
    except BaseException:
        traceback.print_exc()
    try:
        rules["end_as_an_interpreter_does"]()
    finally:
        os._exit(code)


answers.write(json.dumps({"ready": True, "modules": rules["imported"]()}) + "\n")
answers.flush()
for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        answers.close()
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
    answers.write(json.dumps({"status": os.waitstatus_to_exitcode(status),
                              "timed_out": timed_out}) + "\n")
    answers.flush()
"""

_SERVED = ("PYTHONPATH", "PYTEST_CURRENT_TEST")
"""What a request's environment may change from the server's (besides ``PATCHLANE_*``): read
after the fork, never by torch's import (pytest sets the second per test); the folders a
different ``PYTHONPATH`` adds or drops are checked one by one."""


def _base_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith("PATCHLANE_") and k not in _SERVED}


class WarmPython:
    """The server above, started by the first :meth:`run` (a worker that asks nothing of it
    starts none), in ``env`` (this process's environment by default) less ``PATCHLANE_*``."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = {k: v for k, v in (os.environ if env is None else env).items()
                    if not k.startswith("PATCHLANE_")}
        self.modules: frozenset[str] = frozenset()
        self._folder = tempfile.TemporaryDirectory(prefix="warm-python-")
        self._log = Path(self._folder.name, "server.log")
        self._count = 0
        self._pending = b""

    def _start(self) -> None:
        with self._log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _SERVER, warm_server.__file__], env=self.env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self._folder.name)
        self._pending = b""
        ready = self._answer(300, "ready")
        if not ready.get("ready"):
            raise RuntimeError(f"the warm python could not preload torch: {ready.get('error')}; "
                               f"its log: {self._log.read_text()[-3000:]}")
        self.modules = frozenset(ready["modules"])

    def _answer(self, timeout: float, what: str) -> dict[str, object]:
        """One line of the server's, read from its descriptor (no buffer for select to miss)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd], [], [], timeout)
            chunk = os.read(fd, 1 << 16) if ready else b""
            if not chunk:
                self.proc.kill()
                raise RuntimeError(f"the warm python gave no {what} (exit code "
                                   f"{self.proc.wait()}); its log: "
                                   + self._log.read_text()[-3000:])
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        answer: dict[str, object] = json.loads(line)
        return answer

    def run(self, args: Sequence[str], env: Mapping[str, str], cwd: str | Path,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """``python ARGS`` (``-c CODE ...`` or ``SCRIPT ...``) in ``env`` and ``cwd``, its output
        captured; :class:`subprocess.TimeoutExpired` after ``timeout`` seconds, the child
        killed, as ``subprocess.run`` does."""
        mine, theirs = _base_env(self.env), _base_env(env)
        differs = sorted(k for k in mine.keys() | theirs.keys() if mine.get(k) != theirs.get(k))
        assert not differs, (f"{differs}: a forked child cannot have torch imported under "
                             "another environment; run a fresh interpreter for this")
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        shadows = shadowing(self.env.get("PYTHONPATH", ""), env.get("PYTHONPATH", ""),
                            self.modules)
        assert not shadows, (f"{shadows} would change what the warm python imported "
                             "before the fork; run a fresh interpreter for this")
        self._count += 1
        out = Path(self._folder.name, f"{self._count}.out")
        err = Path(self._folder.name, f"{self._count}.err")
        request = {"args": list(args), "env": dict(env), "cwd": str(cwd), "timeout": timeout,
                   "stdout": str(out), "stderr": str(err)}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()
        # one line answers each request; the server itself kills a child past its timeout
        answer = self._answer(timeout + 120, f"answer for {list(args)[:1]}")
        if answer["timed_out"]:
            raise subprocess.TimeoutExpired([sys.executable, *args], timeout,
                                            out.read_text(), err.read_text())
        status = answer["status"]
        assert isinstance(status, int)
        return subprocess.CompletedProcess([sys.executable, *args], status, out.read_text(),
                                           err.read_text())

    def close(self) -> None:
        try:
            if self.proc is not None and self.proc.poll() is None:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                try:
                    self.proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            self._folder.cleanup()

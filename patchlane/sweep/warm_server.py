"""The warm-rank server: one process that imports torch once and forks a sweep's CPU ranks from
there, so each rank skips torch's import (most of a megatron rank's CPU on this lane:
``benchmarks/bench_rank_start.py``).

Run as a program by :mod:`patchlane.sweep.rank_start` (``python -P warm_server.py SOCKET``),
never imported by patchlane, and it never imports patchlane or any target itself: the rank it
forks imports patchlane first and its target after, so the overlay is decided by the same
import-time walk as in a fresh rank. Only torch (and the torch modules megatron-core imports
when it is imported) is there before.

Protocol: one line on stdout when ready (``{"ready": true, "preloaded": [...]}`` or
``{"ready": false, "error": ...}``); then a request per connection on the Unix socket
(``SOCK_SEQPACKET``), sent by the shim (:mod:`patchlane.sweep.warm_shim`) with its stdin,
stdout and stderr attached: ``{"argv", "env", "cwd"}``. The answer is ``{"pid"}`` once the rank
is forked and ``{"status"}`` (``os.waitstatus_to_exitcode``) once it exited. When the shim's
connection closes first (the sweep killed it), the rank's session is killed. When stdin closes
(the sweep is gone), every rank's session is killed and the server exits.

A rank's ``multiprocessing`` spawns go through the same door: its spawn executable is the
launcher this server writes beside its socket (:func:`write_launcher`), which starts the shim
in its spawn mode. That request adds ``"spawn": {"flags", "code", "args"}`` and ``"fds"``, the
numbers its descriptors had (multiprocessing's pipes and the resource tracker's, after stdin,
stdout and stderr); the child gets them at the same numbers and runs ``python -c CODE ARGS``
as a fresh interpreter would, with torch already imported. A spawned process is what imports
torch afresh in a warm rank otherwise: megatron-core's checkpoint writer starts a spawn-context
``Manager`` whose server unpickles each write result, torch's classes and so torch with them.
A request this server cannot honour (flags other than its own) gets ``{"error"}``, and the shim
starts the interpreter itself.

A request's ``PYTHONPATH`` may differ from this server's by folders that hold nothing it
imported (:mod:`patchlane.sweep.rank_start` checks that before it sends one here: a changed
copy of a release, a bisect step's release): the child's ``sys.path`` is rebuilt with the
request's, as Python would have built it at startup (:func:`rebuild_path`). The ready line
lists the top-level names the preload imported or looked for (``"modules"``) for that check.

One thread only, and no signal handler: forking from a process with other threads can copy a
lock some thread held.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import runpy
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import types

PRELOAD = ("torch", "torch._dynamo", "torch._inductor.compile_fx", "torch.distributed.tensor",
           "torch.distributed.checkpoint")
"""torch, then the torch modules megatron-core imports when it is imported (``-X importtime``
puts them at most of megatron.core's own import; without ``torch._dynamo`` a warm megatron
rank costs twice the wall time). ``torch._dynamo`` imports triton, which reads its settings
(``TRITON_INTERPRET``) when it is imported: a reproducer that sets the environment starts
fresh (:func:`patchlane.sweep.rank_start.warm_allowed`). Each one after torch is optional: a
torch without it is served with what it has."""
NEVER = ("patchlane", "megatron", "liger_kernel")
"""Modules the preload must leave unimported: patchlane and the targets. The rank imports them
itself, so the overlay is decided as in a fresh rank."""

CASE_DEADLINE = "PATCHLANE_CASE_DEADLINE"
"""As :data:`patchlane.sweep.reproduce.CASE_DEADLINE` (not imported: this program never imports
patchlane). A warm rank's parent is this server, so its deadline names this server's pid."""

RUNNER = "patchlane.sweep.runner"
REQUEST_BYTES = 1 << 20
MAX_FDS = 64
"""Descriptors one request may carry: a rank's three; a spawned process's three and those
multiprocessing passes it (its pipes, the resource tracker's)."""
POLL_SECONDS = 0.05


class _Asked:
    """A finder first on ``sys.meta_path`` that finds nothing and notes each top-level name
    asked for: what the preload looked for and did not find (an optional dependency) is what a
    folder on a rank's path must not hold either, or a fresh rank would have imported it."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        self.names.add(name.partition(".")[0])


_ASKED = _Asked()


def preload() -> list[str]:
    sys.meta_path.insert(0, _ASKED)
    try:
        import torch  # noqa: F401 - the point of the server

        loaded = ["torch"]
        for name in PRELOAD[1:]:
            try:
                importlib.import_module(name)
            except Exception:  # an older torch without it: the rank imports it itself, if at all
                continue
            loaded.append(name)
    finally:
        sys.meta_path.remove(_ASKED)
    leaked = [name for name in NEVER if name in sys.modules]
    if leaked:
        raise RuntimeError(f"imported {leaked} while preloading torch")
    return loaded


def imported() -> list[str]:
    """The top-level names the preload imported or looked for (:class:`_Asked`)."""
    return sorted({name.partition(".")[0] for name in sys.modules} | _ASKED.names)


def base_path() -> list[str]:
    """``sys.path`` as this interpreter builds it with no ``PYTHONPATH`` and no script folder:
    the standard library, site-packages and what their ``.pth`` files add (an editable
    install's folder among them). Read from a fresh interpreter, since ``site`` leaves out a
    ``.pth`` folder already on this one's ``PYTHONPATH`` (one subprocess, about 30 ms)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-P", "-c", "import json, sys; print(json.dumps("
                          "sys.path))"], env=env, capture_output=True, text=True, timeout=120,
                         check=True)
    found: list[str] = json.loads(out.stdout)
    return found


def rebuild_path(base: list[str], python_path: str) -> list[str]:
    """The ``sys.path`` an interpreter started with ``PYTHONPATH=python_path`` in the working
    directory has, less its script's folder: each entry made absolute (an empty one is the
    working directory) in front of ``base`` (:func:`base_path`), each folder once, at its
    first place (what ``site`` does at startup)."""
    head = [os.path.abspath(p) for p in python_path.split(os.pathsep)] if python_path else []
    return list(dict.fromkeys([*head, *base]))


def _child(request: dict[str, object], fds: list[int], closing: list[int],
           launcher: str | None) -> None:
    """In the forked child: become what the shim stands for: a rank (a fresh ``python -m
    patchlane.sweep.runner``), or a rank's spawned process (``python -c CODE ARGS``, as
    ``multiprocessing``'s spawn starts one). Never returns."""
    code = 1
    try:
        for fd in closing:
            with contextlib.suppress(OSError):
                os.close(fd)
        os.setsid()  # its own session, as the sweep's Popen(start_new_session=True)
        _place(fds, [int(n) for n in request.get("fds", [0, 1, 2])])  # type: ignore[attr-defined]
        env = dict(request["env"])  # type: ignore[call-overload]
        deadline = env.get(CASE_DEADLINE, "")
        if ":" in deadline:
            env[CASE_DEADLINE] = f"{deadline.partition(':')[0]}:{os.getppid()}"
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        sys.path[:] = rebuild_path(_BASE, env.get("PYTHONPATH", ""))
        # What it spawns in turn (megatron-core's checkpoint writer starts a spawn-context
        # Manager, which imports torch to unpickle each write result) starts here as well.
        if launcher is not None:
            import multiprocessing.spawn

            multiprocessing.spawn.set_executable(launcher)
        spawned = request.get("spawn")
        if isinstance(spawned, dict):
            _run_command(str(spawned["code"]), [str(a) for a in spawned["args"]])
        else:
            sys.path.insert(0, os.getcwd())  # as `python -m` puts it (-P left it out)
            sys.argv = [RUNNER, *request["argv"]]  # type: ignore[misc]
            runpy.run_module(RUNNER, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exit_status(exc)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    end_as_an_interpreter_does()
    os._exit(code)


def exit_status(exc: SystemExit) -> int:
    """The status an interpreter ends with on ``exc``; a message (``SystemExit("why")``) is
    printed to stderr, as an interpreter prints it."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def end_as_an_interpreter_does() -> None:
    """What a fresh rank's interpreter does as it ends, before the child's ``os._exit``: join
    the threads it started that are not daemons, run its exit functions (``atexit``: its own,
    and those torch and multiprocessing registered when imported, as a fresh rank has them),
    flush its output."""
    import atexit
    import threading

    with contextlib.suppress(Exception):
        threading._shutdown()  # type: ignore[attr-defined]
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()


_BASE: list[str] = []
"""This server's :func:`base_path`, read when it starts (:func:`serve`)."""


def _place(fds: list[int], targets: list[int]) -> None:
    """Put the received ``fds`` at the numbers they had in the shim (``targets``): first all
    above every target, so that placing one never closes another still to be placed."""
    if len(fds) != len(targets):
        raise ValueError(f"{len(fds)} descriptors received for {len(targets)} numbers")
    above = max(targets, default=2) + 1
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, above) for fd in fds]
    for fd in fds:
        os.close(fd)
    for fd, target in zip(moved, targets, strict=True):
        os.dup2(fd, target)
    for fd in moved:
        os.close(fd)


def _run_command(code: str, args: list[str]) -> None:
    """What ``python -c CODE ARGS`` runs: CODE in a new ``__main__`` module, ``sys.argv`` is
    ``["-c", *ARGS]``."""
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = ["-c", *args]
    exec(compile(code, "<string>", "exec"), main.__dict__)  # what `-c` does


def _refusal(request: dict[str, object]) -> str | None:
    """Why a spawned process cannot start here, so its shim starts a fresh interpreter:
    interpreter flags other than this server's (a fork keeps the server's). None for a rank,
    and for a spawned process whose flags are this server's."""
    spawned = request.get("spawn")
    if not isinstance(spawned, dict):
        return None
    # What multiprocessing itself puts on a spawned child's command line (the rank's flags,
    # which are this server's: a fork keeps sys.flags); the same function, so the same list.
    mine = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    if list(spawned.get("flags", [])) != mine:
        return f"flags {spawned.get('flags')} are not this server's {mine}"
    return None


def write_launcher(folder: str, socket_path: str) -> str | None:
    """The executable a warm rank's ``multiprocessing`` spawns in place of the interpreter: the
    shim in its spawn mode, which asks this server to fork the child (or, for anything but
    multiprocessing's own spawn command, starts the interpreter itself). A shell script, since
    ``set_executable`` takes one path and no arguments; None on a system without ``/bin/sh``
    (a distroless image), where what a rank spawns starts as it would without the server."""
    if not os.path.exists("/bin/sh"):
        return None
    shim = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_shim.py")
    path = os.path.join(folder, "spawn")
    words = [sys.executable, "-I", "-S", shim, socket_path, "--spawn", "--"]
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("#!/bin/sh\nexec " + " ".join(shlex.quote(w) for w in words) + ' "$@"\n')
    os.chmod(path, 0o755)
    return path


def _send(conn: socket.socket, message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):
        conn.send(json.dumps(message).encode())


def _kill_session(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def serve(path: str) -> int:
    try:
        loaded = preload()
        base = base_path()
    except BaseException as exc:  # told to the sweep, which then starts its ranks fresh
        print(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1
    # what the preload itself put on the path (nothing, in the torch releases read) stays
    started = rebuild_path(base, os.environ.get("PYTHONPATH", ""))
    _BASE[:] = base + [p for p in sys.path if p not in started]
    launcher = write_launcher(os.path.dirname(os.path.abspath(path)), path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listen")
    selector.register(sys.stdin, selectors.EVENT_READ, "stdin")
    ranks: dict[int, socket.socket] = {}  # pid -> its shim's connection
    print(json.dumps({"ready": True, "preloaded": loaded, "modules": imported(),
                      "pid": os.getpid()}), flush=True)
    while True:
        for key, _ in selector.select(POLL_SECONDS):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 1 << 12):  # the sweep is gone
                    for pid in ranks:
                        _kill_session(pid)
                    return 0
            elif key.data == "listen":
                conn, _ = listener.accept()
                try:
                    data, fds, _, _ = socket.recv_fds(conn, REQUEST_BYTES, MAX_FDS)
                    request = json.loads(data)
                except (OSError, ValueError):
                    conn.close()
                    continue
                refused = _refusal(request)
                if refused is not None:
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"error": refused})
                    conn.close()
                    continue
                closing = [listener.fileno(), sys.stdin.fileno(), conn.fileno(),
                           getattr(selector, "fileno", lambda: -1)(),
                           *(c.fileno() for c in ranks.values())]
                sys.stdout.flush()
                try:
                    pid = os.fork()
                except OSError as exc:  # no memory or pids left: this rank fails, not the server
                    for fd in fds:
                        os.close(fd)
                    _send(conn, {"error": f"fork failed: {exc}"})
                    conn.close()
                    continue
                if pid == 0:
                    _child(request, fds, closing, launcher)
                for fd in fds:
                    os.close(fd)
                ranks[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
                _send(conn, {"pid": pid})
            else:  # the shim's connection: closed when the shim was killed
                with contextlib.suppress(OSError):
                    if key.fileobj.recv(1):  # type: ignore[union-attr]
                        continue
                _kill_session(key.data)
                selector.unregister(key.fileobj)
        while ranks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            _kill_session(pid)  # what the rank left behind in its session ends with it
            if pid in ranks:
                conn = ranks.pop(pid)
                _send(conn, {"status": os.waitstatus_to_exitcode(status)})
                with contextlib.suppress(KeyError, ValueError):
                    selector.unregister(conn)
                conn.close()


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))

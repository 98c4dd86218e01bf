"""The process the sweep starts for a warm rank, in place of ``python -m patchlane.sweep.runner``:
it asks the warm-rank server (:mod:`patchlane.sweep.warm_server`) to fork the rank with this
process's stdin, stdout and stderr, its environment and folder, then lives exactly as long as
the rank and ends as it ended (its exit code, or killed by the same signal). So the sweep keeps
its own handling of a rank unchanged: its output pipe, its session killed at the end of the
case, a timeout, an OOM kill read from the exit status.

A SIGTERM, SIGINT or SIGHUP sent here goes on to the rank's session; a SIGKILL cannot be passed
on, and closes the connection instead, on which the server kills the rank's session.

Started as ``python -I -S warm_shim.py SOCKET -- RUNNER ARGS...``: no site, no patchlane, a
few milliseconds.

In its spawn mode (``warm_shim.py SOCKET --spawn -- ARGS...``, started by the launcher
the server writes, which a warm rank's ``multiprocessing`` takes for the interpreter) it stands
for a process the rank spawned: ``ARGS`` is what the interpreter would have been given. For
multiprocessing's own spawn command (``-c "from multiprocessing.spawn import spawn_main; ..."``)
it asks the server to fork the child with every descriptor it was passed, at the same numbers;
anything else (the resource tracker, a forkserver), or a server that will not, and it becomes
the interpreter it runs on with ``ARGS``, as a spawn without the server would have run.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys

SPAWN_MAIN = "from multiprocessing.spawn import spawn_main;"
"""How multiprocessing's spawn command line starts its ``-c`` program (``spawn.py``'s
``get_command_line``, Python 3.8 to 3.13)."""


def main(argv: list[str]) -> int:
    path, spawn_mode = argv[0], argv[1] == "--spawn"
    argv = argv[argv.index("--") + 1:]
    request: dict[str, object] = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    fds = [0, 1, 2]
    if spawn_mode:
        spawned, passed = _spawn_request(argv), _passed_fds()
        if spawned is None or passed is None:  # the rank's interpreter: the launcher's
            os.execv(sys.executable, [sys.executable, *argv])
        fds = passed
        request.update(argv=[], spawn=spawned, fds=fds)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        socket.send_fds(conn, [json.dumps(request).encode()], fds)
        reply = json.loads(conn.recv(1 << 16) or b'{"error": "no answer"}')
        if "pid" not in reply:
            raise OSError(reply.get("error", "no answer"))
        pid = int(reply["pid"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        if spawn_mode:  # the process the rank spawned starts all the same, as it would have
            conn.close()
            os.execv(sys.executable, [sys.executable, *argv])
        print(f"patchlane: the warm-rank server at {path} did not start the rank: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 70  # EX_SOFTWARE: the case is an error of the harness, never a verdict
    for fd in fds:  # the child holds them now: its pipes end when it does, as they would
        if fd > 2:
            os.close(fd)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        reply = conn.recv(1 << 16)
        status = int(json.loads(reply)["status"])
    except (OSError, ValueError, KeyError, TypeError):
        print(f"patchlane: the warm-rank server at {path} went away while "
              f"{'process' if spawn_mode else 'rank'} {pid} ran", file=sys.stderr)
        forward(signal.SIGKILL, None)
        return 70
    if status < 0:  # killed by a signal: so is this process, so the sweep reads the same
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


def _spawn_request(argv: list[str]) -> dict[str, object] | None:
    """The ``spawn`` part of the request for a multiprocessing spawn command line
    (``FLAGS... -c CODE ARGS...``), or None for any other command."""
    if "-c" not in argv:
        return None
    at = argv.index("-c")
    if at + 1 >= len(argv) or not argv[at + 1].startswith(SPAWN_MAIN):
        return None
    return {"flags": argv[:at], "code": argv[at + 1], "args": argv[at + 2:]}


def _passed_fds() -> list[int] | None:
    """stdin, stdout, stderr and every descriptor this process was started with: the ones
    multiprocessing passed (``spawnv_passfds`` keeps those alone, inheritable); the ones Python
    opens for itself are not inheritable. None where no ``/proc`` lists them."""
    try:
        listed = sorted(int(name) for name in os.listdir("/proc/self/fd") if name.isdigit())
    except OSError:
        return None
    passed = [0, 1, 2]
    for fd in listed:
        if fd > 2:
            with contextlib.suppress(OSError):  # the listing's own, closed by now
                if os.get_inheritable(fd):
                    passed.append(fd)
    return passed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

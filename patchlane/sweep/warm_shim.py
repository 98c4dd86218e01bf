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
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys


def main(argv: list[str]) -> int:
    path, argv = argv[0], argv[argv.index("--") + 1:]
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
        reply = json.loads(conn.recv(1 << 16) or b'{"error": "no answer"}')
        if "pid" not in reply:
            raise OSError(reply.get("error", "no answer"))
        pid = int(reply["pid"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        print(f"patchlane: the warm-rank server at {path} did not start the rank: "
              f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 70  # EX_SOFTWARE: the case is an error of the harness, never a verdict

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    try:
        reply = conn.recv(1 << 16)
        status = int(json.loads(reply)["status"])
    except (OSError, ValueError, KeyError, TypeError):
        print(f"patchlane: the warm-rank server at {path} went away while rank {pid} ran",
              file=sys.stderr)
        forward(signal.SIGKILL, None)
        return 70
    if status < 0:  # killed by a signal: so is this process, so the sweep reads the same
        signal.signal(-status, signal.SIG_DFL)
        os.kill(os.getpid(), -status)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

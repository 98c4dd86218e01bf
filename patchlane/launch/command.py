"""``patchlane run [--registry FILE] [--strict] [--reports DIR] [--evidence RUNS_ROOT] -- CMD
ARGS...``: the
environment that activates patchlane in every Python process of CMD, then ``exec`` of CMD (it
takes this process's place: signals from ``torchrun``, ``srun`` or a scheduler reach it
directly and its exit status is the job's)."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from .. import switch_values
from ..common.errors import PatchlaneError, UsageError
from ..common.exit_codes import ExitCode
from . import environment
from .activate import SUMMARY_ENV, hand_over, summary_setting
from .environment import EVIDENCE_ENV, launch_env

__all__ = ["BOOTSTRAP", "EVIDENCE_ENV", "CommandNotExecutableError", "CommandNotFoundError",
           "launch_env", "run_command"]


class CommandNotFoundError(PatchlaneError):
    """``patchlane run``: the command is not a file, nor found on ``PATH`` (127, as ``env``
    and the shells answer)."""

    exit_code = ExitCode.COMMAND_NOT_FOUND


class CommandNotExecutableError(PatchlaneError):
    """``patchlane run``: the command was found but cannot be executed: no execute
    permission, a directory, not a program (126, as ``env`` answers)."""

    exit_code = ExitCode.COMMAND_NOT_EXECUTABLE

BOOTSTRAP = Path(environment.BOOTSTRAP)
"""The folder whose ``sitecustomize.py`` activates patchlane (:mod:`.environment`)."""


def run_command(command: Sequence[str], *, registry: Sequence[Path] = (), strict: bool = False,
                reports: Path | None = None, evidence: Path | None = None) -> int:
    """Exec ``command`` with :func:`launch_env`; returns only if it cannot be started.
    ``registry``: each ``--registry`` file (repeatable)."""
    if not command:
        raise ValueError("patchlane run: no command; usage: patchlane run [options] -- CMD ...")
    for path in registry:
        if not path.is_file():  # a usage error, as a missing --evidence folder is
            raise UsageError(f"run: --registry {path}: no such file; fix: give the path of a "
                             "registry.yaml")
    if summary_setting() is None:
        # read by every process at exit, where nothing can refuse it: refused here, once
        raise UsageError("run: " + switch_values.unreadable(
            SUMMARY_ENV, os.environ.get(SUMMARY_ENV), True))
    if evidence is not None and not evidence.is_dir():
        # Refused here, once, rather than answered "never run" by every rank
        raise UsageError(f"run: --evidence {evidence}: no such directory; fix: give the runs "
                         "root `patchlane sweep --runs-root` wrote (or one run directory)")
    env = launch_env(os.environ, registry=registry, strict=strict, reports=reports,
                     evidence=evidence)
    hand_over(env)  # a nested `patchlane run`: the command prints the rank's line, not this
    try:
        os.execvpe(command[0], list(command), env)
    except OSError as exc:
        tried = os.fsdecode(exc.filename) if exc.filename is not None else command[0]
        if exc.errno == errno.ENOEXEC and os.path.isfile(tried):
            # A script with no #! line: as `env` (glibc's execvp) and the shells run it, with
            # /bin/sh; what sh cannot run it says itself, with its own 126
            with contextlib.suppress(OSError):
                os.execve("/bin/sh", ["/bin/sh", tried, *command[1:]], env)
        raise _not_started(command[0], exc) from None
    raise AssertionError("unreachable")  # pragma: no cover


def _not_started(name: str, exc: OSError) -> PatchlaneError:
    """The one-line error for a command ``exec`` refused, with ``env``'s exit convention:
    127 when nothing by that name was found, 126 when it was found and cannot run."""
    # execvpe reports the last PATH candidate it tried, as bytes: name the file as text.
    tried = os.fsdecode(exc.filename) if exc.filename is not None else name
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        if os.path.isfile(tried):  # the file is there: its #! interpreter is not
            return CommandNotFoundError(
                f"run: {name!r}: {tried} exists but the interpreter its first line (#!) names "
                "does not; fix: correct that line, or run the file with its interpreter")
        where = "no such file" if os.sep in name else "no such command on PATH"
        return CommandNotFoundError(f"run: {name!r}: {where}; fix: check the spelling, or "
                                    "give the command's path")
    if os.path.isdir(tried):
        why, fix = "is a directory", "give the path of the program in it"
    elif exc.errno == errno.ENOEXEC:
        why, fix = ("is not a program this machine runs (no #! line, or built for another "
                    "one)", f"add a #! line, or run it with its interpreter (python {tried})")
    elif exc.errno == errno.EACCES:
        why, fix = ("has no execute permission",
                    f"chmod +x {tried}, or run it with its interpreter (python {tried})")
    else:
        why, fix = f"cannot be executed ({exc.strerror or exc})", "check the file"
    return CommandNotExecutableError(f"run: {name!r}: {tried} {why}; fix: {fix}")

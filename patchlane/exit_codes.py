"""The one exit-code table of the ``patchlane`` command.

Library code never exits: errors carry their code (``PatchlaneError.exit_code``) and commands
return one of these; ``patchlane.cli.main`` is the only place a process ends. The sweep's three
codes are bits of one verdict summary (broken | error), still-affected its own bit.
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    OK = 0
    REPRODUCER_FAILED = 1
    """A reproducer's own assertion failed (the bug showed)."""
    USAGE = 2
    """Bad arguments, an unknown id, or a reproducer that could not run."""
    REGISTRY_REJECTED = 3
    DRIFT = 4
    OVERLAY_ERROR = 5
    STRICT_REFUSAL = 6
    REPRODUCER_ERROR = 7
    RANKS_DISAGREE = 8
    LEDGER_VIOLATION = 9
    SWEEP_BROKEN = 10
    SWEEP_ERROR = 11
    SWEEP_BROKEN_AND_ERROR = 12
    MATRIX_MISMATCH = 13
    UPSTREAM_UNREACHABLE = 14
    RETIREMENT_REFUSED = 15
    DOCTOR_PROBLEMS = 16
    IO_ERROR = 74
    """The filesystem refused (read-only run directory, full disk, missing permission): the
    message names the file (EX_IOERR)."""
    INTERNAL_ERROR = 70
    """An unexpected exception: a bug in patchlane, printed with its traceback (EX_SOFTWARE)."""

"""The one exit-code table of the ``patchlane`` command.

Library code never exits: errors carry their code (``PatchlaneError.exit_code``) and commands
return one of these; ``patchlane.cli.main`` is the only place a process ends. The README's
"Command line" section repeats this table, and ``tests/cli/test_exit_codes.py`` produces each
code through the real command.

The sweep exits with ``32 | bits``: 1 a case is broken, 2 a case is in error, 4 a bug outlives
its gate (still-affected: not an error, but loud). A nightly tests one bit with
``(( (rc & 32) && (rc & 4) ))``; ``0`` is a clean run. ``patchlane matrix`` compares each
set's verdicts with ``matrix.yaml`` instead: 13 on a mismatch.
"""

from __future__ import annotations

import enum

__all__ = ["SWEEP_BASE", "SWEEP_BITS", "ExitCode", "sweep_exit_code"]

SWEEP_BASE = 32

SWEEP_BITS: tuple[tuple[str, int], ...] = (("STILL_AFFECTED", 4), ("BROKEN", 1), ("ERROR", 2))
"""The sweep's exit bits, in the order the codes' names say them: each is owned by the verdict
of that name (:data:`patchlane.runs.verdicts.MEANING`, whose ``exit_bit`` says which). The
``SWEEP_*`` codes below are every combination, computed, not listed."""


_SWEEP_MASK = sum(bit for _, bit in SWEEP_BITS)


def _sweep_name(bits: int) -> str:
    """``SWEEP_STILL_AFFECTED_BROKEN_AND_ERROR`` for 7: the bits' names, in order, the last
    joined with ``AND``."""
    parts = [name for name, bit in SWEEP_BITS if bits & bit]
    head = "_".join(parts[:-1])
    return "SWEEP_" + (f"{head}_AND_{parts[-1]}" if head else parts[-1])


class ExitCode(enum.IntEnum):
    OK = 0
    REPRODUCER_FAILED = 1
    """A reproducer's own assertion failed (the bug showed)."""
    USAGE = 2
    """Bad arguments, an unknown id, a confirmation not given, a file or run directory named
    on the command line that cannot be used as asked."""
    REGISTRY_REJECTED = 3
    DRIFT = 4
    """Strict mode refused a target whose source no longer matches its fingerprint."""
    OVERLAY_ERROR = 5
    """An overlay (or a compat gate's check) is missing what the registry says, or failed to
    load or apply (strict mode), or was asked to revert what it never applied."""
    STRICT_REFUSAL = 6
    """Strict mode refused any other problem decision (an unevaluable gate, a missing config
    setting, a ledger violation)."""
    REPRODUCER_ERROR = 7
    """A reproducer could not be run (the harness or its environment failed), or a matrix
    set's sweep produced no result."""
    RANKS_DISAGREE = 8
    LEDGER_VIOLATION = 9
    MATRIX_MISMATCH = 13
    UPSTREAM_UNREACHABLE = 14
    RETIREMENT_REFUSED = 15
    DOCTOR_PROBLEMS = 16
    ENTRIES_NEVER_HIT = 17
    """``patchlane usage``: an active source patch applied in the reports given but never hit
    there (dead or misapplied: a retirement or review candidate). Not an error."""
    # The sweep's verdict summary, 32 | bits: one member per combination of SWEEP_BITS
    # (SWEEP_BROKEN = 33, ..., SWEEP_STILL_AFFECTED_BROKEN_AND_ERROR = 39). Enum's _ignore_
    # keeps the loop's name out of the members.
    _ignore_ = ["_bits"]
    for _bits in range(1, 1 << len(SWEEP_BITS)):
        vars()[_sweep_name(_bits)] = SWEEP_BASE | _bits
    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT): 128 + the signal, as a shell reports it. A sweep stops its
    running cases, writes the report of what finished and can be resumed."""
    TERMINATED = 143
    """Stopped by SIGTERM (a scheduler's cancel, ``kill``): 128 + the signal; a sweep stops
    as it does on Ctrl-C."""
    IO_ERROR = 74
    """The filesystem refused (read-only run directory, full disk, missing permission): the
    message names the file (EX_IOERR)."""
    MISSING_DEPENDENCY = 69
    """A package patchlane requires cannot be imported in this interpreter (a venv built
    without patchlane's dependencies): the message names it and the install command
    (EX_UNAVAILABLE)."""
    INTERNAL_ERROR = 70
    """An unexpected exception, or a bare ``PatchlaneError`` (a raise site that named no
    class): a bug in patchlane, printed with its traceback (EX_SOFTWARE)."""
    COMMAND_NOT_EXECUTABLE = 126
    """``patchlane run``: the command was found but cannot be executed (as ``env``)."""
    COMMAND_NOT_FOUND = 127
    """``patchlane run``: no such command (as ``env`` and the shells)."""



def sweep_exit_code(bits: int) -> ExitCode:
    """The sweep's status for ``bits`` (1 broken, 2 error, 4 still-affected: which verdict
    owns which bit is :data:`patchlane.runs.verdicts.EXIT_BITS`). A bit no code names is
    refused, never dropped: a verdict given a bit of its own needs its place in
    :data:`SWEEP_BITS` (and the README's table), or a sweep showing it would exit 0."""
    unknown = bits & ~_SWEEP_MASK
    if unknown:
        raise ValueError(f"sweep exit bits {unknown} are not in SWEEP_BITS {SWEEP_BITS}; "
                         "expected each verdict's exit_bit to be one of them: add the bit to "
                         "SWEEP_BITS and the README's exit-code table")
    return ExitCode(SWEEP_BASE | bits) if bits else ExitCode.OK

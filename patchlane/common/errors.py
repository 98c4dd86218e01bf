"""One error hierarchy rooted at :class:`PatchlaneError`.

Library code raises; only the CLI maps these to exit codes (``exit_code`` on each class, a
member of :class:`patchlane.common.exit_codes.ExitCode`). Every message names the file or patch id,
what was found, what was expected and the fix. Anything that is not a ``PatchlaneError`` is a
bug in patchlane: the CLI prints its traceback (exit 70) instead of a one-line message.

The root is never raised itself: every raise site uses a subclass whose ``exit_code`` says
what went wrong (usage 2, registry 3, drift 4, ...). The root's own code is
``INTERNAL_ERROR``: a raise that forgot to pick a class must read as the bug it is, never as
a verdict such as 1 ("the reproducer failed") or a usage error; the CLI prints its traceback.

Strict mode turns a problem decision into an error by its cause (:func:`patchlane.deciding.decider
.strict_error`): drift raises :class:`DriftError` (4), an overlay that failed to load or apply
:class:`StrictOverlayError` (5), anything else :class:`StrictModeError` (6). Both of the first
two are ``StrictModeError`` subclasses, so ``except StrictModeError`` still catches every
strict-mode refusal.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

from .exit_codes import ExitCode

__all__ = [
    "ECHO_LIMIT",
    "ControlsError",
    "DriftError",
    "MatrixError",
    "MatrixRunError",
    "OverlayError",
    "PatchlaneError",
    "RegistryError",
    "ReproducerError",
    "RunDirError",
    "StrictModeError",
    "StrictOverlayError",
    "SweepInterrupted",
    "SweepTerminated",
    "UnknownEntryError",
    "UsageError",
    "bounded",
    "clipped",
    "described",
    "drift_reason",
]


class PatchlaneError(Exception):
    """Root of every error patchlane raises on purpose; raise a subclass (see the module
    docstring): the root's code says "a bug in patchlane", not a verdict."""

    exit_code: ExitCode = ExitCode.INTERNAL_ERROR


class UsageError(PatchlaneError, ValueError):
    """A command was asked for something it cannot do as asked (an option value, a missing
    argument the parser cannot see)."""

    exit_code = ExitCode.USAGE


class UnknownEntryError(UsageError, KeyError):
    """An id that names no registry entry; says which ids exist and the closest one. A
    ``KeyError`` too, for callers of ``Registry.get`` that caught one before."""

    def __init__(self, entry_id: str, known: Iterable[str]) -> None:
        self.entry_id = entry_id
        self.known = tuple(known)
        close = difflib.get_close_matches(entry_id, self.known, n=1)
        self.closest = close[0] if close else None
        """The known id closest to ``entry_id``, if one is close."""
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(f"no registry entry {entry_id!r}{hint} Known ids: "
                         f"{', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0])


class ControlsError(UsageError):
    """A ``PATCHLANE_*`` environment variable holds a value patchlane cannot read."""


class RunDirError(UsageError):
    """A sweep run directory named on the command line cannot be used as asked: it exists and
    is not empty, another sweep holds it, it is no run directory (no or unreadable manifest,
    another schema), or the registry changed since it started. The fix is always another
    directory or another option, hence a usage error."""


class SweepInterrupted(PatchlaneError):
    """A sweep stopped by Ctrl-C (SIGINT) before every case finished: queued cases were
    cancelled, running ones stopped (their ranks killed), and the manifest says so; the cases
    that finished keep their receipts and ``--resume`` runs the rest."""

    exit_code = ExitCode.INTERRUPTED


class SweepTerminated(SweepInterrupted):
    """A sweep stopped by SIGTERM, as by Ctrl-C (:class:`SweepInterrupted`)."""

    exit_code = ExitCode.TERMINATED


class MatrixError(UsageError):
    """The release matrix file (``matrix.yaml``) is unreadable or malformed, or names no set
    the command asked for."""


ECHO_LIMIT = 300
"""Characters of a found value an error message repeats: a registry is user input, and a
megabyte value (or a structure built by YAML aliases) must not become a megabyte log line."""


def clipped(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis and the size of
    what was cut, so a reader sees where it was cut (the whole text stays where it came from:
    a receipt, the audit log)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit} more characters)"


def described(head: str, *, found: object = None, expected: str | None = None,
              fix: str | None = None, echo: bool = True) -> str:
    """The one shape of a message about bad input: ``HEAD; found X, expected Y; fix: Z`` (the
    parts given). ``echo``: the found value is user input, so it is repeated
    :func:`bounded`; False repeats it as given (already words)."""
    parts = [head]
    if expected is not None:
        parts.append(f"found {bounded(found) if echo else found}, expected {expected}")
    if fix is not None:
        parts.append(f"fix: {fix}")
    return "; ".join(parts)


def bounded(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters with the size of what was cut; a container
    of more than 1,000 items is summarised instead of rendered."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 1000:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text) - limit} more characters)"
    return text


class MissingDependencyError(PatchlaneError, ImportError):
    """A package patchlane requires cannot be imported (:mod:`patchlane.common.dependencies`)."""

    exit_code = ExitCode.MISSING_DEPENDENCY


class RegistryError(PatchlaneError, ValueError):
    """A registry file is malformed. Carries the file, entry id and key that were wrong."""

    exit_code = ExitCode.REGISTRY_REJECTED

    def __init__(
        self,
        path: Path | str,
        message: str,
        *,
        entry_id: str | None = None,
        key: str | None = None,
        found: object = None,
        expected: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.path = str(path)
        self.problem = message
        """What is wrong, without the file, key, found, expected and fix around it."""
        self.entry_id = entry_id
        self.key = key
        self.found = found
        self.expected = expected
        self.fix = fix
        where = self.path
        if entry_id is not None:
            where += f": entry {entry_id!r}"
        if key is not None:
            where += f", key {key!r}"
        super().__init__(described(f"{where}: {message}", found=found, expected=expected,
                                   fix=fix))


class OverlayError(PatchlaneError):
    """An entry's code file (an overlay, a compat gate's check) is missing what the registry
    says it provides, or failed to apply; or an overlay was asked to undo what it never did."""

    exit_code = ExitCode.OVERLAY_ERROR

    def __init__(self, entry_id: str, message: str) -> None:
        self.entry_id = entry_id
        # Not super(): StrictOverlayError is also a StrictModeError, whose __init__ takes other
        # arguments; each base sets its message through the root directly.
        PatchlaneError.__init__(self, f"patch {entry_id!r}: {message}")


class StrictModeError(PatchlaneError):
    """Raised in strict mode for a refusal, failure, ledger violation or unevaluable gate
    (subclasses: :class:`DriftError`, :class:`StrictOverlayError`)."""

    exit_code = ExitCode.STRICT_REFUSAL

    def __init__(self, entry_id: str, outcome: str, reason: str) -> None:
        self.entry_id = entry_id
        self.outcome = outcome
        self.reason = reason
        PatchlaneError.__init__(
            self,
            f"patch {entry_id!r}: {outcome}: {reason} (PATCHLANE_STRICT=1 turns every refusal "
            f"and failure into an error; unset it to skip with a logged reason)"
        )


def drift_reason(entry_id: str, expected: tuple[str, ...], found: str) -> str:
    """Why a drifted target is refused, with the fix: the audit's reason for ``refused:
    drift`` and the heart of :class:`DriftError`'s message."""
    return (
        f"patch {entry_id!r}: target source changed under us: fingerprint {found} is not one "
        f"of the recorded {list(expected)}; refusing to patch blindly. Fix: read the new "
        f"upstream source, re-run the reproducer, then record it with "
        f"`patchlane fingerprint {entry_id} --record`"
        + ("" if all(v.startswith("sha256-v2:") for v in expected) else
           ". Note: 'sha256:' values are format 1, a hash of ast.dump on the interpreter "
           "that recorded them (it differs between Python 3.11, 3.12 and 3.13); record the "
           "interpreter-independent 'sha256-v2:' value instead")
    )


class DriftError(StrictModeError):
    """Strict mode: the target's source no longer matches the fingerprint recorded in the
    registry (outside strict mode the entry is recorded ``refused: drift`` and skipped)."""

    exit_code = ExitCode.DRIFT

    def __init__(self, entry_id: str, expected: tuple[str, ...], found: str) -> None:
        self.expected = expected
        self.found = found
        super().__init__(entry_id, "refused: drift", drift_reason(entry_id, expected, found))


class StrictOverlayError(StrictModeError, OverlayError):
    """Strict mode: an overlay failed while being decided (its file did not load, it defines
    no ``overlay``, its probe raised, its target could not be read or wrapped). An
    :class:`OverlayError` by cause, a :class:`StrictModeError` by when it is raised."""

    exit_code = ExitCode.OVERLAY_ERROR

    def __init__(self, entry_id: str, reason: str) -> None:
        StrictModeError.__init__(self, entry_id, "failed: error", reason)


class ReproducerError(PatchlaneError):
    """A reproducer could not be run (not a pass/fail verdict: the harness itself failed)."""

    exit_code = ExitCode.REPRODUCER_ERROR

    def __init__(self, entry_id: str, message: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"reproducer {entry_id!r}: {message}")


class MatrixRunError(PatchlaneError):
    """A release set's sweep produced no result to compare (it exited before printing its
    index): its reproducers could not run there, which is not a mismatch."""

    exit_code = ExitCode.REPRODUCER_ERROR


def exit_if_uncaught(error: PatchlaneError, where: str = "`import patchlane`") -> None:
    """Make ``error``, raised by `import patchlane` or by the import of a target (strict
    mode, or a control that cannot be read), end the process as the command line does if
    nothing catches it: one line on stderr and the error's own exit code (docs/cli.md), not a
    traceback and exit 1. Code that catches it still gets the exception.

    Done with ``sys.excepthook``, chained to the one already there, because the import is the
    script's own line: there is no caller of ours to return a code to. The interpreter ends
    with a ``SystemExit`` raised by the hook as with one raised by the script. An interactive
    session keeps the traceback and goes on."""
    import sys

    previous = sys.excepthook
    if getattr(previous, "patchlane_error", None) is error:
        return  # the sticky failure raised again by a second import: already in place

    def hook(kind: type[BaseException], value: BaseException, tb: object) -> None:
        if value is not error or hasattr(sys, "ps1") or sys.flags.interactive:
            previous(kind, value, tb)  # type: ignore[arg-type]
            return
        sys.excepthook = previous
        code = int(error.exit_code)
        message = str(error).replace("\n", " ")
        sys.stderr.write(f"patchlane: {type(error).__name__}: {message} (stopped at "
                         f"{where}, exit {code})\n")
        sys.stderr.flush()
        raise SystemExit(code)

    hook.patchlane_error = error  # type: ignore[attr-defined]
    sys.excepthook = hook

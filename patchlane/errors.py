"""One error hierarchy rooted at :class:`PatchlaneError`.

Library code raises; only the CLI maps these to exit codes (``exit_code`` on each class, a
member of :class:`patchlane.exit_codes.ExitCode`). Every message names the file or patch id,
what was found, what was expected and the fix. Anything that is not a ``PatchlaneError`` is a
bug in patchlane: the CLI prints its traceback (exit 70) instead of a one-line message.
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
    "OverlayError",
    "PatchlaneError",
    "RegistryError",
    "ReproducerError",
    "StrictModeError",
    "UnknownEntryError",
    "UsageError",
    "bounded",
]


class PatchlaneError(Exception):
    """Root of every error patchlane raises on purpose."""

    exit_code: ExitCode = ExitCode.REPRODUCER_FAILED


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
        hint = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(f"no registry entry {entry_id!r}{hint} Known ids: "
                         f"{', '.join(self.known) or '(none)'}")

    def __str__(self) -> str:  # KeyError's own str() would quote the whole message
        return str(self.args[0])


class ControlsError(UsageError):
    """A ``PATCHLANE_*`` environment variable holds a value patchlane cannot read."""


ECHO_LIMIT = 300
"""Characters of a found value an error message repeats: a registry is user input, and a
megabyte value (or a structure built by YAML aliases) must not become a megabyte log line."""


def bounded(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)``, cut to ``limit`` characters with the size of what was cut; a container
    of more than 1,000 items is summarised instead of rendered."""
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 1000:
        return f"<{type(value).__name__} of {len(value)} items>"
    text = repr(value)
    if len(text) > limit:
        return f"{text[:limit]}… ({len(text) - limit} more characters)"
    return text


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
        parts = [f"{where}: {message}"]
        if expected is not None:
            parts.append(f"found {bounded(found)}, expected {expected}")
        if fix is not None:
            parts.append(f"fix: {fix}")
        super().__init__("; ".join(parts))


class DriftError(PatchlaneError):
    """The target's source no longer matches the fingerprint recorded in the registry."""

    exit_code = ExitCode.DRIFT

    def __init__(self, entry_id: str, expected: tuple[str, ...], found: str) -> None:
        self.entry_id = entry_id
        self.expected = expected
        self.found = found
        super().__init__(
            f"patch {entry_id!r}: target source changed under us: fingerprint {found} is not one "
            f"of the recorded {list(expected)}; refusing to patch blindly. Fix: read the new "
            f"upstream source, re-run the reproducer, then record it with "
            f"`patchlane fingerprint {entry_id}`"
            + ("" if all(v.startswith("sha256-v2:") for v in expected) else
               ". Note: 'sha256:' values are format 1, a hash of ast.dump on the interpreter "
               "that recorded them (it differs between Python 3.11, 3.12 and 3.13); record the "
               "interpreter-independent 'sha256-v2:' value instead")
        )


class OverlayError(PatchlaneError):
    """An overlay module is missing what the registry says it provides, or failed to apply."""

    exit_code = ExitCode.OVERLAY_ERROR

    def __init__(self, entry_id: str, message: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"patch {entry_id!r}: {message}")


class StrictModeError(PatchlaneError):
    """Raised in strict mode for a refusal, failure, ledger violation or unevaluable gate."""

    exit_code = ExitCode.STRICT_REFUSAL

    def __init__(self, entry_id: str, outcome: str, reason: str) -> None:
        self.entry_id = entry_id
        self.outcome = outcome
        self.reason = reason
        super().__init__(
            f"patch {entry_id!r}: {outcome}: {reason} (PATCHLANE_STRICT=1 turns every refusal "
            f"and failure into an error; unset it to skip with a logged reason)"
        )


class ReproducerError(PatchlaneError):
    """A reproducer could not be run (not a pass/fail verdict: the harness itself failed)."""

    exit_code = ExitCode.REPRODUCER_ERROR

    def __init__(self, entry_id: str, message: str) -> None:
        self.entry_id = entry_id
        super().__init__(f"reproducer {entry_id!r}: {message}")

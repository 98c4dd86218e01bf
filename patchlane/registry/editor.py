"""Editing a registry file in place: one entry's lines, under the file's edit lock, every other
byte kept.

Every command that writes a registry file (``new``, ``retire``, ``delete``, ``bisect --write``)
edits it through here: find the entry's block (:func:`entry_block`), a key's line in it
(:func:`key_line`, :func:`child_end`), change those lines keeping the file's own line endings
(:func:`stored_lines`), validate the whole result as the loader would and replace the file
atomically (:func:`write_validated`), all while holding the file's lock (:func:`registry_lock`),
so concurrent edits serialise instead of losing one another.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import PatchlaneError
from ..exit_codes import ExitCode
from ..files import atomic_write
from .loader import parse_registry

__all__ = [
    "LOCK_TIMEOUT",
    "RegistryEditError",
    "StoredLines",
    "child_end",
    "editing",
    "entry_block",
    "key_line",
    "read_as_stored",
    "registry_lock",
    "stored_lines",
    "write_validated",
    "yaml_scalar",
]


class RegistryEditError(PatchlaneError):
    """A registry file could not be edited (no such entry block, the lock held elsewhere).
    Each command passes its own error instead where it has one."""

    exit_code = ExitCode.REGISTRY_REJECTED


def entry_block(lines: list[str], entry_id: str, path: Path,
                error: Callable[[str], PatchlaneError] = RegistryEditError
                ) -> tuple[int, int, int]:
    """(first line, end, indentation) of the block of ``entry_id`` in a registry file's
    ``lines``; ``error`` builds the calling command's error when there is none."""
    pattern = re.compile(rf"^(\s*)-\s+id:\s*['\"]?{re.escape(entry_id)}['\"]?\s*(#.*)?$")
    for start, line in enumerate(lines):
        match = pattern.match(line)
        if match:
            indent = len(match.group(1))
            end = start + 1
            while end < len(lines):
                text = lines[end]
                stripped = text.strip()
                if stripped and not stripped.startswith("#") and \
                        len(text) - len(text.lstrip()) <= indent:
                    break
                end += 1
            # trailing blank and comment lines belong to what follows
            while end > start + 1 and (not lines[end - 1].strip()
                                       or lines[end - 1].strip().startswith("#")):
                end -= 1
            return start, end, indent
    raise error(f"{path}: no entry with `- id: {entry_id}` in block style; edit by hand")


def key_line(lines: list[str], start: int, end: int, indent: int, key: str) -> int | None:
    """The line in ``lines[start:end]`` where ``key:`` starts at exactly ``indent`` columns."""
    pattern = re.compile(rf"^\s{{{indent}}}{re.escape(key)}:(\s|$)")
    for i in range(start, end):
        if pattern.match(lines[i]):
            return i
    return None


def child_end(lines: list[str], at: int, end: int, indent: int) -> int:
    """End of the block under the key on line ``at`` (deeper-indented lines)."""
    j = at + 1
    while j < end:
        text = lines[j]
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        j += 1
    while j > at + 1 and not lines[j - 1].strip():
        j -= 1
    return j


def read_as_stored(path: Path) -> str:
    """A registry file's text with its line endings as stored."""
    # Not read_text(): its universal newlines would turn a CRLF file into LF, and the rest of
    # the file must stay byte-identical.
    return path.read_bytes().decode("utf-8")


@dataclass(frozen=True)
class StoredLines:
    """A registry file's text as lines to edit in place (:func:`stored_lines`)."""

    lines: list[str]
    """Every line with its line ending, the last one too (given the file's when it had none,
    so that a line inserted after it cannot run into it)."""
    newline: str
    """The file's line ending: what every inserted line ends with."""
    ended: bool
    """Whether the file's last line had a line ending."""

    def text(self) -> str:
        """The lines joined, ending as the file did (no line ending after the last line when
        the file had none there)."""
        text = "".join(self.lines)
        if not self.ended and text.endswith(self.newline):
            text = text[:-len(self.newline)]
        return text


def stored_lines(raw: str) -> StoredLines:
    """``raw`` (a registry file's text as stored) as lines for an in-place edit that keeps the
    file's line ending style: inserted lines end the way the file's lines do."""
    # The file's style is its first line break's: the last line may have none at all (a CRLF
    # file saved without a final line break), so the end of the file cannot tell.
    first = raw.find("\n")
    newline = "\r\n" if first > 0 and raw[first - 1] == "\r" else "\n"
    lines = raw.splitlines(keepends=True)
    ended = not lines or lines[-1].endswith(("\n", "\r"))
    if not ended:
        lines[-1] += newline
    return StoredLines(lines, newline, ended)


def write_validated(path: Path, text: str) -> None:
    parse_registry(path, text)  # refuse to write anything the loader would reject
    atomic_write(path, text)  # keeps the file's permissions; fsyncs the file and directory


def yaml_scalar(value: str) -> str:
    """``value`` as a YAML plain scalar where it can be one, else as a quoted string."""
    return json.dumps(value) if re.search(r"[:#'\"{}\[\],&*!|>%@`]|^\s|\s$", value) else value


LOCK_TIMEOUT = 60.0
"""Seconds an edit waits for another one of the same registry file to finish."""


@contextlib.contextmanager
def registry_lock(path: Path,
                  error: Callable[[str], PatchlaneError] = RegistryEditError) -> Iterator[None]:
    """Hold the registry file's edit lock (``.<name>.lock`` beside it, an OS file lock via
    filelock): every command that edits a registry file (``retire``, ``delete``, ``new``) takes
    this one lock, so their edits serialise. ``error`` builds the command's own error when the
    lock cannot be had."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(path.with_name(f".{path.name}.lock")), timeout=LOCK_TIMEOUT)
    try:
        with lock:
            yield
    except Timeout:
        raise error(f"{path}: another patchlane command has been editing it for "
                    f"{LOCK_TIMEOUT:.0f} s (lock {lock.lock_file}); retry when it is "
                    "done") from None


@contextlib.contextmanager
def editing(path: Path, error: Callable[[str], PatchlaneError] = RegistryEditError
            ) -> Iterator[str]:
    """Hold the registry file's edit lock and yield its text as stored. Two concurrent edits
    of different entries then both land: each reads the file only once the other has written
    it."""
    with registry_lock(path, error):
        yield read_as_stored(path)

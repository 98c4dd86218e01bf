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
from typing import TYPE_CHECKING

import yaml

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..common.files import atomic_write
from .loader import parse_registry

if TYPE_CHECKING:
    from packaging.version import Version

__all__ = [
    "LOCK_TIMEOUT",
    "RegistryEditError",
    "StoredLines",
    "child_end",
    "child_indent",
    "editing",
    "entry_block",
    "inline_value",
    "key_line",
    "read_as_stored",
    "record_fingerprints",
    "registry_lock",
    "release_items",
    "set_value",
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
    ``lines``; ``error`` builds the calling command's error when there is none.

    Found by the YAML parser, not by searching the text: the entry is the mapping of the
    ``entries`` sequence whose ``id`` is ``entry_id``, and its lines are where the parser says
    that mapping starts and ends. The same words inside another entry's ``notes: |`` block, a
    quoted string or a comment are text, never an entry."""
    try:
        document = yaml.compose("".join(lines), Loader=_Loader)
    except yaml.YAMLError as exc:
        raise error(f"{path}: not YAML the editor can read ({exc}); edit by hand") from None
    entries = _value(document, "entries")
    item = next((node for node in entries.value if _is_entry(node, entry_id)), None) \
        if isinstance(entries, yaml.SequenceNode) else None
    if not isinstance(item, yaml.MappingNode) or item.flow_style \
            or not re.match(r"^\s*-\s", lines[item.start_mark.line]):
        raise error(f"{path}: no entry with `- id: {entry_id}` in block style; edit by hand")
    start, mark = item.start_mark.line, item.end_mark
    # the parser ends a block mapping at the next token: at the start of the line that follows
    # it (the next `- id:`, or the end of the file), or after a value on its own last line
    before = lines[mark.line][:mark.column] if mark.line < len(lines) else ""
    end = mark.line if not before.strip() else mark.line + 1
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = max(start + 1, min(end, len(lines)))
    # trailing blank and comment lines belong to what follows
    while end > start + 1 and (not lines[end - 1].strip()
                               or lines[end - 1].strip().startswith("#")):
        end -= 1
    return start, end, indent


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _is_entry(node: object, entry_id: str) -> bool:
    found = _value(node, "id")
    return isinstance(found, yaml.ScalarNode) and found.value == entry_id


def _value(node: object, key: str) -> object:
    """The value node under ``key`` of a mapping node (None when there is none)."""
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if isinstance(k, yaml.ScalarNode) and k.value == key:
            return v
    return None


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
    """Hold the registry file's edit lock (an OS file lock via filelock): every command that
    edits a registry file (``new``, ``retire``, ``delete``, ``bisect --write``,
    ``fingerprint --record``) takes this one lock, so their edits serialise. ``error`` builds
    the command's own error when the lock cannot be had.

    The lock file lives in this user's cache (``$XDG_CACHE_HOME/patchlane/locks``, named by the
    registry's real path), never beside the registry: a file there is one more thing `git add
    -A` would commit. So edits serialise per machine and user, which is where two commands
    meet; two users editing one registry on a shared disk are what version control is for."""
    import hashlib
    import os

    from filelock import FileLock, Timeout

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    locks = base / "patchlane" / "locks"
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:32]
    lock = FileLock(str(locks / f"{name}.lock"), timeout=LOCK_TIMEOUT)
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


# -- values in place ---------------------------------------------------------------------------

_SCALAR_LINE = re.compile(r"^(?P<head>\s*[\w\"'.+-]+\s*:\s*)(?P<value>\"[^\"]*\"|'[^']*'|[^#\s]"
                          r"[^#]*?)?(?P<tail>\s+#.*)?(?P<nl>\r?\n)?$")


def set_value(line: str, value: str,
              error: Callable[[str], PatchlaneError] = RegistryEditError) -> str:
    """``line`` (``key: old  # comment``) with the value ``value`` (already YAML), its key,
    comment and line ending kept; the same line when the value is already that."""
    import yaml

    match = _SCALAR_LINE.match(line)
    if match is None:
        raise error(f"cannot rewrite {line.strip()!r} in place; edit it by hand")
    old = match["value"]
    if old is not None and yaml.safe_load(old) == yaml.safe_load(value):
        return line  # the same value: keep its bytes
    return f"{match['head']}{value}{match['tail'] or ''}{match['nl'] or ''}"


def child_indent(lines: list[str], at: int, stop: int, default: int) -> int:
    """The indentation of the first key or item under line ``at`` (``default``: none yet)."""
    for line in lines[at + 1:stop]:
        if line.strip() and not line.lstrip().startswith("#"):
            return len(line) - len(line.lstrip())
    return default


def inline_value(line: str) -> object:
    """The flow value of ``key: {...}`` or ``key: [...]`` on ``line`` (None for a block key)."""
    import yaml

    value = yaml.safe_load(line.split(":", 1)[1]) if ":" in line else None
    return value if isinstance(value, (dict, list)) else None


def release_items(lines: list[str], start: int, stop: int) -> list[tuple[int, Version]]:
    """``(line, Version)`` of each ``"X.Y.Z": ...`` key in ``lines[start:stop]``."""
    from ..common.versions import parse_version

    items = []
    for i in range(start, stop):
        match = re.match(r"^\s*[\"']?([^\"':#\s]+)[\"']?\s*:", lines[i])
        version = parse_version(match[1]) if match else None
        if version is not None:
            items.append((i, version))
    return items


def record_fingerprints(lines: list[str], start: int, end: int, key: int, newline: str,
                        seen: list[tuple[str | None, str, str]],
                        error: Callable[[str], PatchlaneError] = RegistryEditError) -> int:
    """Record fingerprint values in the entry block ``lines[start:end]`` (its keys at ``key``
    columns): each ``(release, value, note)`` of ``seen`` is added to ``fingerprint.sha256``
    (once, with ``note`` as its comment) and, when ``release`` is given (a release that ran),
    to ``fingerprint.releases``. The two always agree: a release recorded there with a value
    ``sha256`` lacks would stop the next strict start there with a drift error. Returns the
    block's new end."""
    from packaging.version import Version

    path_note = "edit fingerprint by hand"
    at = key_line(lines, start, end, key, "fingerprint")
    if at is None:
        raise error(f"the entry has no `fingerprint:` block at the expected indentation; "
                    f"{path_note}")
    stop = child_end(lines, at, end, key)
    sub = child_indent(lines, at, stop, key + 2)

    def insert(where: int, new: list[str]) -> None:
        nonlocal end, stop
        lines[where:where] = new
        end += len(new)
        stop += len(new)

    sha = key_line(lines, at + 1, stop, sub, "sha256")
    if sha is None or inline_value(lines[sha]) is not None:
        raise error("fingerprint.sha256 is not a block list (`- \"sha256-v2:...\"` lines); "
                    f"{path_note}")
    sha_stop = sha + 1
    while sha_stop < stop:  # its items: deeper, or at its own column (an indentless list)
        text = lines[sha_stop]
        depth = len(text) - len(text.lstrip())
        if text.strip() and not text.lstrip().startswith("#") and (
                depth < sub or (depth == sub and not text.lstrip().startswith("-"))):
            break
        sha_stop += 1
    while sha_stop > sha + 1 and not lines[sha_stop - 1].strip():
        sha_stop -= 1
    known = {m[1] for line in lines[sha + 1:sha_stop]
             if (m := re.match(r"^\s*-\s*[\"']?([^\"'#\s]+)", line))}
    item_pad = " " * child_indent(lines, sha, sha_stop, sub + 2)
    for _, value, note in seen:
        if value not in known:
            insert(sha_stop, [f"{item_pad}- {json.dumps(value)}  # {note}{newline}"])
            sha_stop += 1
            known.add(value)
    ran = [(release, value) for release, value, _ in seen if release is not None]
    if not ran:
        return end
    rel = key_line(lines, at + 1, stop, sub, "releases")
    if rel is not None and inline_value(lines[rel]) is not None:
        raise error("fingerprint.releases is written in flow style ({...}); make it a block "
                    "mapping first")
    if rel is None:
        insert(stop, [f"{' ' * sub}releases:  # seen at run time{newline}"])
        rel = stop - 1
    for version, value in sorted(ran, key=lambda rv: Version(rv[0])):
        rstop = child_end(lines, rel, end, sub)
        items = release_items(lines, rel + 1, rstop)
        pad = " " * (len(lines[items[0][0]]) - len(lines[items[0][0]].lstrip())
                     if items else sub + 2)
        same = next((i for i, v in items if v == Version(version)), None)
        if same is not None:
            lines[same] = set_value(lines[same], json.dumps(value), error)
            continue
        after = next((i for i, v in items if v > Version(version)), None)
        where = after if after is not None else (items[-1][0] + 1 if items else rel + 1)
        insert(where, [f"{pad}{json.dumps(version)}: {json.dumps(value)}{newline}"])
    return end

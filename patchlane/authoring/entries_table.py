"""The entries table of ``docs/entries.md`` beside a registry, kept by the commands that change
what it shows: ``patchlane new`` adds the entry's row, ``patchlane bisect --write`` puts the
gate it drew in it. A registry with no such file (a team's, usually) has no table to keep.

Only the row's own cells are written; the prose around the table, and any words a maintainer
added to a row after its gate, stay as they are.
"""

from __future__ import annotations

from pathlib import Path

from ..common.files import atomic_write
from ..registry import Entry
from ..registry.editor import read_as_stored, stored_lines

__all__ = ["HEAD", "add_row", "docs_table", "row_for", "update_gate"]

HEAD = "| id | kind | target | applies to | upstream |"


def docs_table(registry: Path) -> Path | None:
    """The ``docs/entries.md`` beside ``registry`` that holds the table; None when none."""
    path = registry.parent / "docs" / "entries.md"
    try:
        return path if HEAD in read_as_stored(path) else None
    except (OSError, UnicodeDecodeError):
        return None


def row_for(entry: Entry, gate: str | None) -> str:
    """The entry's row, from its registry block (``gate``: ``applies_to`` as written, which
    the table quotes)."""
    target = entry.target.object_path or entry.target.distribution or "-"
    where = f"{entry.target.distribution} `{gate}`" if gate is not None and \
        entry.target.distribution else (f"`{gate}`" if gate is not None else "any release")
    links = []
    if entry.upstream.issue:
        links.append(f"issue [{_short(entry.upstream.issue)}]({entry.upstream.issue})")
    if entry.upstream.pr:
        links.append(f"fix [{_short(entry.upstream.pr, 'PR ')}]({entry.upstream.pr})")
    upstream = ", ".join(links) or "not forwarded"
    return f"| `{entry.id}` | {entry.kind.value} | `{target}` | {where} | {upstream} |"


def _short(url: str, prefix: str = "") -> str:
    number = url.rstrip("/").rpartition("/")[2]
    return f"{prefix}#{number}" if number.isdigit() else url


def add_row(path: Path, entry: Entry, gate: str | None) -> bool:
    """Append ``entry``'s row at the end of the table in ``path``; False when it has one."""
    stored = stored_lines(read_as_stored(path))
    lines = stored.lines
    head = next(i for i, line in enumerate(lines) if line.rstrip("\r\n") == HEAD)
    end = head + 1
    while end < len(lines) and lines[end].startswith("|"):
        if lines[end].startswith(f"| `{entry.id}` |"):
            return False
        end += 1
    lines.insert(end, row_for(entry, gate) + stored.newline)
    atomic_write(path, stored.text())
    return True


def update_gate(path: Path, entry_id: str, old: str, new: str) -> bool:
    """Put the gate ``new`` in place of ``old`` in ``entry_id``'s row; False when the row, or
    ``old`` in it, is not there (the row says something else: left to its maintainer)."""
    stored = stored_lines(read_as_stored(path))
    for i, line in enumerate(stored.lines):
        if line.startswith(f"| `{entry_id}` |") and f"`{old}`" in line:
            stored.lines[i] = line.replace(f"`{old}`", f"`{new}`", 1)
            atomic_write(path, stored.text())
            return True
    return False

"""A run compared with an earlier one: verdict changes inside the same comparison class only.

Where the class differs (lane, hardware class, upstream versions) a change is reported as a
class change, never as a regression; a row the earlier run had and this one lacks is said, not
silently dropped.
"""

from __future__ import annotations

from typing import Any

from ...runs.index import RunIndex

__all__ = ["Change", "compare"]


class Change(dict[str, Any]):
    """One row's difference from the previous run (JSON data in the index): its ``key``, and
    as ``change`` what differs: ``verdict-changed``, ``class-changed``, ``new`` (a row the
    previous run lacked) or ``gone`` (one it had), with the verdict it ``was`` and is ``now``.
    Runs recorded before 2026-11-29 named that key ``kind``; nothing reads a stored change
    back (every page and summary compares afresh)."""


def compare(previous: RunIndex, current: RunIndex) -> list[Change]:
    """Verdict changes between two runs (see the module docstring)."""
    before = {r.key: r for r in previous.rows}
    changes: list[Change] = []
    for row in current.rows:
        old = before.pop(row.key, None)
        if old is None:
            changes.append(Change(key=row.key, change="new", now=row.verdict.value))
            continue
        was, now = old.comparison_key, row.comparison_key
        if was and now and was != now:
            diff = {k: [was.get(k), now.get(k)] for k in now if was.get(k) != now.get(k)}
            changes.append(Change(key=row.key, change="class-changed", was=old.verdict.value,
                                  now=row.verdict.value, differs=diff))
        elif old.verdict is not row.verdict:
            changes.append(Change(key=row.key, change="verdict-changed", was=old.verdict.value,
                                  now=row.verdict.value))
    changes += [Change(key=key, change="gone", was=old.verdict.value)
                for key, old in before.items()]
    return changes

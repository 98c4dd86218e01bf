"""What ``patchlane bisect --write`` records in the release matrix beside the registry: for
each set that installs one release of the entry's distribution, the verdict the bisection's
runs of that release showed, so a new entry is swept both ways by the matrix with no hand
edit of ``matrix.yaml``.

Only what a run showed is written:

* a release inside the new gate that failed without the overlay and passed with it:
  ``guarding``;
* a release below the gate: ``skipped`` (the sweep does not run it);
* a release above the gate that passed without the overlay: ``upstream-fixed``.

Anything else (a run that errored, a release inside the gate where the overlay did not guard,
a set swept on the GPU only, a release above the gate of an entry another one continues) is
left as it is and said, with why. The file is edited in place, line by line inside the one
set's ``expect:`` block, so its comments, order and layout stay; what is written is read back
by the matrix's own loader before the file is replaced.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.specifiers import SpecifierSet

from ..common.errors import MatrixError
from ..common.files import atomic_write
from ..common.versions import in_range
from ..installed.gates import gate_side
from ..registry import Entry
from ..registry.editor import read_as_stored, registry_lock, stored_lines
from ..runs.verdicts import Finding, Verdict
from .bisect import BisectError, Bisection
from .matrix import MatrixSet, parse_matrix

__all__ = ["Expectation", "expected_verdicts", "write_expectations"]


@dataclass(frozen=True)
class Expectation:
    """One set's verdict for the entry, as the runs showed it (``verdict`` None: not written,
    ``why`` says why)."""

    set_name: str
    release: str
    verdict: Verdict | None
    why: str


def expected_verdicts(entry: Entry, result: Bisection,
                      sets: Sequence[MatrixSet]) -> list[Expectation]:
    """Each set that installs one release of ``entry``'s distribution, with the verdict the
    runs of ``result`` showed for it under the gate ``result`` proposes."""
    gate = SpecifierSet(result.applies_to or "")
    found = []
    for matrix_set in sets:
        pinned = matrix_set.releases_of(entry.target.distribution)
        if len(pinned) != 1:
            continue
        release = pinned[0]

        def say(verdict: Verdict | None, why: str, name: str = matrix_set.name,
                version: str = release) -> None:
            found.append(Expectation(name, version, verdict, why))

        if "cpu" not in matrix_set.lanes:
            say(None, f"swept on {', '.join(matrix_set.lanes)} only; the bisection ran on "
                "the CPU: record it from that lane's sweep")
            continue
        run = result.run_of(release)
        if run is None:
            say(None, f"{release} did not run in this bisection (it does not install on "
                "this interpreter?): run bisect with --python for it")
            continue
        if in_range(gate, release):
            if run.finding is Finding.AFFECTED and run.overlay == "guarding":
                say(Verdict.GUARDING, "fails without the overlay, passes with it")
            else:
                say(None, f"inside the gate but the runs showed {run.finding.value}"
                    + (f", {run.overlay}" if run.overlay else "") + ": not a verdict to expect")
            continue
        side = gate_side(gate, release)
        if side == "below" and run.finding in (Finding.NOT_AFFECTED, Finding.ABSENT):
            say(Verdict.SKIPPED, f"below the gate ({run.finding.value})")
        elif side == "above" and run.finding is Finding.NOT_AFFECTED \
                and not entry.continued_by:
            say(Verdict.UPSTREAM_FIXED, "above the gate, passes without the overlay")
        else:
            say(None, f"{side} the gate, {run.finding.value}"
                + (f" (continued by {entry.continued_by})" if entry.continued_by else "")
                + ": the sweep's verdict is not known from this run")
    return found


def write_expectations(path: Path, entry_id: str, expectations: Sequence[Expectation],
                       date: _dt.date) -> list[str]:
    """Record each expectation with a verdict in ``path`` (a ``matrix.yaml``), in place and
    under its edit lock; returns what changed, one line each. Nothing is written unless the
    whole file reads back with every verdict."""
    wanted = {e.set_name: e.verdict for e in expectations if e.verdict is not None}
    if not wanted:
        return []

    def locked(message: str) -> BisectError:
        return BisectError(message)

    with registry_lock(path, locked):
        raw = read_as_stored(path)
        stored = stored_lines(raw)
        changes = []
        for set_name, verdict in wanted.items():
            change = _set_expectation(stored.lines, stored.newline, set_name, entry_id,
                                      verdict, date)
            if change:
                changes.append(change)
        text = stored.text()
        try:
            sets = {s.name: s for s in parse_matrix(path, text)}
        except MatrixError as exc:
            raise BisectError(f"{path}: the matrix would not read with {entry_id}'s "
                              f"expectations ({exc}); nothing written. Fix: add them by "
                              "hand") from None
        wrong = [n for n, v in wanted.items() if sets[n].expect.get(entry_id) != v]
        if wrong:
            raise BisectError(f"{path}: {entry_id}'s expectation did not read back in "
                              f"{', '.join(wrong)}; nothing written. Fix: add it by hand")
        if text != raw:
            atomic_write(path, text)
    return changes


def _set_expectation(lines: list[str], newline: str, set_name: str, entry_id: str,
                     verdict: Verdict, date: _dt.date) -> str | None:
    head = next((i for i, line in enumerate(lines) if re.fullmatch(
        rf"(\s*)- name:\s*['\"]?{re.escape(set_name)}['\"]?\s*(#.*)?", line.rstrip("\r\n"))),
        None)
    if head is None:
        raise BisectError(f"set {set_name!r}: no `- name: {set_name}` line to edit; nothing "
                          "written. Fix: add the expectation by hand")
    dash = len(lines[head]) - len(lines[head].lstrip())
    end = next((i for i in range(head + 1, len(lines)) if lines[i].strip()
                and not lines[i].lstrip().startswith("#")
                and len(lines[i]) - len(lines[i].lstrip()) <= dash), len(lines))
    expect = next((i for i in range(head, end) if re.fullmatch(
        r"\s*(- )?expect:\s*(#.*)?", lines[i].rstrip("\r\n"))), None)
    if expect is None:
        raise BisectError(f"set {set_name!r}: no block `expect:` (one key per line) to add "
                          f"{entry_id} to; nothing written. Fix: add it by hand")
    key_indent = len(lines[expect]) - len(lines[expect].lstrip(" -"))
    stop = next((i for i in range(expect + 1, end) if lines[i].strip()
                 and not lines[i].lstrip().startswith("#")
                 and len(lines[i]) - len(lines[i].lstrip()) <= key_indent), end)
    children = [i for i in range(expect + 1, stop) if lines[i].strip()
                and not lines[i].lstrip().startswith("#")]
    indent = (len(lines[children[0]]) - len(lines[children[0]].lstrip())) if children \
        else key_indent + 2
    mark = f"# patchlane bisect --write, {date.isoformat()}"
    for i in children:
        match = re.fullmatch(rf"(\s*){re.escape(entry_id)}:\s*([\w-]+)\s*(#.*)?",
                             lines[i].rstrip("\r\n"))
        if match is None:
            continue
        if match.group(2) == verdict.value:
            return None
        lines[i] = f"{match.group(1)}{entry_id}: {verdict.value}   {mark} (was " \
                   f"{match.group(2)}){newline}"
        return f"{set_name}: {entry_id}: {match.group(2)} -> {verdict.value}"
    last = children[-1] if children else expect
    lines.insert(last + 1, f"{' ' * indent}{entry_id}: {verdict.value}   {mark}{newline}")
    return f"{set_name}: {entry_id}: {verdict.value}"

"""Retirement: the evidence that a fix is upstream, and the in-place registry edits that record it.

A retirement needs, as the entry's ``retire_when`` asks:

* upstream: the PR merged and in a release (``patchlane upstream``: a
  :class:`~patchlane.upstream.records.TrackReport` whose state is
  :attr:`UpstreamState.RELEASED <patchlane.upstream.records.UpstreamState.RELEASED>`), and when
  ``release`` is set, a release the gate can name;
* the sweep: a run directory where the reproducer *passes without the overlay* on such a
  release (:attr:`Verdict.UPSTREAM_FIXED <patchlane.runs.verdicts.Verdict.UPSTREAM_FIXED>`)
  and no case is broken or in error. Each row is read back from the receipts
  (:mod:`patchlane.runs.verify`), not taken from ``index.json`` on trust;
* the probe (``probe: true``): in that run, the overlay stayed out because the probe said so
  (past the gate, where only the case without the overlay runs: the probe, asked there, said so)
  (the with-overlay receipt's decision is :attr:`Outcome.UPSTREAM_FIXED
  <patchlane.deciding.audit.Outcome.UPSTREAM_FIXED>`).

``retire`` rewrites only the entry's own lines in ``registry.yaml`` (status, date,
``applied_upstream``, the evidence), byte for byte preserving comments, order and formatting of
the rest of the file; the result is validated before it replaces the file, atomically
(:func:`patchlane.common.files.atomic_write`). Overlay and reproducer stay: the reproducer keeps
guarding in the sweep. ``delete`` (only of a retired entry) is its own command.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..common.versions import in_range
from ..deciding.audit import Outcome
from ..registry import Entry, Status, parse_registry
from ..registry.editor import (
    child_end,
    editing,
    entry_block,
    key_line,
    stored_lines,
    write_validated,
    yaml_scalar,
)
from ..runs.verdicts import Verdict
from ..runs.verify import checked_rows
from .records import TrackReport, UpstreamState

__all__ = [
    "RetireError",
    "RetirementReview",
    "SweepRow",
    "delete_entry",
    "evaluate",
    "read_sweep_rows",
    "retire_entry",
]


class RetireError(PatchlaneError):
    exit_code = ExitCode.RETIREMENT_REFUSED


@dataclass(frozen=True)
class SweepRow:
    """One (entry, lane, world size) row of a sweep run directory, as retirement weighs it."""

    run: str
    lane: str
    world_size: int
    verdict: Verdict
    installed: str | None
    """The release the reproducer ran against (None when the sweep could not tell)."""
    probe: Outcome | None
    """The decision in the with-overlay receipt (``upstream-fixed`` when the probe kept the
    overlay out); for a row that ran without the overlay only (past the gate), ``upstream-fixed``
    when the probe, asked there, said so; None otherwise."""
    stale: tuple[str, ...] = ()
    """The parts a retirement rests on that changed since this run
    (:mod:`patchlane.registry.content`): ``reproducer`` (a run of another version of it is not
    evidence about today's) and ``overlay`` (the file whose probe the run asked: its answer is
    not today's probe's)."""
    created: str = ""
    """When the run was made (its index's ``created``): the newest run of a release decides."""

    @property
    def release_class(self) -> tuple[str, int, str | None]:
        """What a newer run of the same entry revokes an older one on: lane, world size and
        the release it ran against."""
        return self.lane, self.world_size, self.installed

    def describe(self) -> str:
        return (f"{self.verdict.value} on {self.installed} [{self.lane} ws={self.world_size}] "
                f"in run {self.run}")

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "lane": self.lane, "world_size": self.world_size,
                "verdict": self.verdict.value, "installed": self.installed,
                "probe": None if self.probe is None else self.probe.value,
                "stale": list(self.stale), "created": self.created}


@dataclass
class RetirementReview:
    """What `retire` found for one entry: the upstream state, the sweep rows read back from
    their receipts, the release carrying the fix, and what is still missing (empty: ready)."""

    entry_id: str
    upstream: TrackReport | None = None
    sweep: list[SweepRow] = field(default_factory=list)
    released_in: str | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "ready": self.ready, "missing": self.missing,
                "released_in": self.released_in,
                "upstream": None if self.upstream is None else self.upstream.as_dict(),
                "sweep": [row.as_dict() for row in self.sweep]}


def read_sweep_rows(entry: Entry, run_dir: Path) -> list[SweepRow]:
    """``entry``'s rows in the run directory ``run_dir``, each checked against what the sweep
    wrote it from (:func:`patchlane.runs.verify.checked_rows`): the manifest's plan and
    the receipts, whose verdict is derived again by the row's rule. An index row its
    receipts do not bear out, a receipt missing or changed, or a file that is not what
    ``patchlane sweep`` writes raises :class:`RetireError` naming it."""
    # Design choice: retirement rests on the receipts, not on index.json, a report anyone can
    # edit: one field changed there (guarding -> upstream-fixed) must not retire a fix.
    from ..registry.content import changed_parts, entry_content

    index, checked = checked_rows(run_dir, entry.id, RetireError)
    now = entry_content(entry)
    rows = []
    for item in checked:
        row, receipts = item.row, item.receipts
        # With the overlay: the decision the probe made. Past the gate (and for a retired
        # entry) only the case without it ran: the probe was asked there, not acted on.
        probe = (_probe_outcome(run_dir / row.receipts["with"], receipts["with"])
                 if "with" in receipts
                 else _probe_asked(receipts["without"]) if "without" in receipts else None)
        ran = receipts.get("without") or receipts.get("with") or {}
        # The reproducer is what a retirement rests on (it passes without the overlay on the
        # fixed release): a run of another version of it says nothing about today's. The
        # overlay file holds the probe: a probe rewritten since answers for itself, not the run.
        stale = tuple(p for p in changed_parts(ran.get("content"), now)
                      if p in ("reproducer", "overlay"))
        rows.append(SweepRow(run=index.run_id, lane=row.lane, world_size=row.world_size,
                             verdict=row.verdict, installed=row.installed, probe=probe,
                             stale=stale, created=index.created))
    return rows


def _probe_outcome(receipt_path: Path, receipt: Mapping[str, Any]) -> Outcome | None:
    audit = receipt.get("audit")
    decision = audit.get("decision") if isinstance(audit, dict) else None
    outcome = decision.get("outcome") if isinstance(decision, dict) else None
    if outcome is None:
        return None
    try:
        return Outcome(outcome)
    except ValueError:
        raise RetireError(f"{receipt_path}: decision outcome {outcome!r} is not one of "
                          f"{[o.value for o in Outcome]}") from None


def _probe_asked(receipt: Mapping[str, Any]) -> Outcome | None:
    asked = receipt.get("probe")
    return Outcome.UPSTREAM_FIXED if isinstance(asked, dict) \
        and asked.get("outcome") == Outcome.UPSTREAM_FIXED.value else None


def evaluate(entry: Entry, upstream: TrackReport | None,
             run_dirs: list[Path]) -> RetirementReview:
    """Combine tracking and sweep evidence against ``entry.retire_when``."""
    evidence = RetirementReview(entry.id, upstream=upstream)
    when = entry.retire_when
    if upstream is not None:
        evidence.released_in = upstream.released_in
    needs_upstream = when.upstream_released or when.release is not None or bool(entry.upstream.pr)
    if needs_upstream:
        if upstream is None:
            evidence.missing.append("upstream tracking (run without --skip-upstream)")
        elif upstream.state is not UpstreamState.RELEASED:
            evidence.missing.append(f"upstream: {upstream.state.value}: {upstream.reason}")
        elif when.release is not None and not upstream.gate_names_release:
            evidence.missing.append(f"upstream released the fix in "
                                    f"{evidence.released_in}, which retire_when.release "
                                    f"{when.release} does not name")
    # Sweep evidence for every entry with a reproducer: a source patch's, and a ledger
    # entry's (its bad side passing is what retires a floor, a pin or a setting).
    if entry.reproducer is not None:
        for run_dir in run_dirs:
            evidence.sweep.extend(read_sweep_rows(entry, run_dir))
        claimed = [r for r in evidence.sweep if r.verdict is Verdict.UPSTREAM_FIXED
                   and (when.release is None or (r.installed and
                                                 in_range(when.release, r.installed)))]
        current = [r for r in claimed if "reproducer" not in r.stale]
        # The newest run of today's reproducer on a release decides, as for "proven here": an
        # older upstream-fixed is revoked by a newer run on that release where the bug shows.
        newest = _newest_by_release(r for r in evidence.sweep if "reproducer" not in r.stale
                                    and r.verdict in _JUDGED)
        fixed = [r for r in current if newest[r.release_class] is r]
        if claimed and not current:
            runs = ", ".join(sorted({f"{r.run} ({', '.join(r.stale)})" for r in claimed}))
            evidence.missing.append(
                f"sweep: the runs showing upstream-fixed are stale: the entry changed since "
                f"them ({runs}); sweep again for evidence of today's reproducer")
        elif current and not fixed:
            revoked = "; ".join(sorted(f"{r.describe()}, revoked by "
                                       f"{newest[r.release_class].describe()}"
                                       for r in current))
            evidence.missing.append(
                f"sweep: a newer run of the same release no longer shows upstream-fixed "
                f"({revoked}); the newest run of each release decides")
        elif not fixed:
            seen = sorted({f"{r.verdict.value}@{r.installed}" for r in evidence.sweep})
            evidence.missing.append(
                "sweep: no run shows the reproducer passing without the overlay on a fixed "
                f"release (seen: {seen or 'no run directory given: --evidence RUN_DIR'})")
        elif when.probe and not any(r.probe is Outcome.UPSTREAM_FIXED and "overlay" not in r.stale
                                    for r in fixed):
            asked = [r for r in fixed if r.probe is Outcome.UPSTREAM_FIXED]
            evidence.missing.append(
                "probe: no run where the probe reported upstream-fixed" if not asked else
                "probe: the runs where the probe reported upstream-fixed asked another overlay "
                f"file ({', '.join(sorted({r.run for r in asked}))}: the overlay, whose probe "
                "it is, changed since); sweep again to ask today's probe")
        broken = [r for r in evidence.sweep if r.verdict in (Verdict.BROKEN, Verdict.ERROR)]
        if broken:
            evidence.missing.append(f"sweep: {len(broken)} case(s) broken or in error")
    return evidence


_JUDGED = frozenset({Verdict.GUARDING, Verdict.UPSTREAM_FIXED, Verdict.STILL_AFFECTED,
                     Verdict.COVERED})
"""Verdicts that say whether the bug shows without the overlay: only those revoke an older
run (a skipped lane, or a case in error, judged nothing; broken and error rows refuse a
retirement on their own)."""


def _newest_by_release(rows: Iterable[SweepRow]) -> dict[tuple[str, int, str | None], SweepRow]:
    """Each release class's newest row (by the run's ``created``, then its id)."""
    newest: dict[tuple[str, int, str | None], SweepRow] = {}
    for row in rows:
        held = newest.get(row.release_class)
        if held is None or (row.created, row.run) > (held.created, held.run):
            newest[row.release_class] = row
    return newest


def _current_status(path: Path, raw: str, entry_id: str) -> Status:
    for current in parse_registry(path, raw):
        if current.id == entry_id:
            return current.status
    raise RetireError(f"{path}: entry {entry_id!r} is no longer in the file (deleted since "
                      "the registry was loaded)")


def retire_entry(entry: Entry, *, date: _dt.date, applied_upstream: str | None,
                 evidence: list[str]) -> str:
    """Rewrite ``entry``'s block in its registry file, under its edit lock; return the new
    text."""
    with editing(entry.source, RetireError) as raw:
        if _current_status(entry.source, raw, entry.id) is Status.RETIRED:
            raise RetireError(f"{entry.source}: entry {entry.id!r} is already retired")
        return _retire_in(entry, raw, date=date, applied_upstream=applied_upstream,
                          evidence=evidence)


def _retire_in(entry: Entry, raw: str, *, date: _dt.date, applied_upstream: str | None,
               evidence: list[str]) -> str:
    path = entry.source
    stored = stored_lines(raw)
    lines, newline = stored.lines, stored.newline
    start, end, indent = entry_block(lines, entry.id, path, RetireError)
    key_indent = indent + 2
    pad = " " * key_indent

    status_at = key_line(lines, start, end, key_indent, "status")
    if status_at is None:
        raise RetireError(f"{path}: entry {entry.id!r} has no `status:` line at the expected "
                          "indentation; edit by hand")
    lines[status_at] = f"{pad}status: retired{newline}"
    lines.insert(status_at + 1, f"{pad}retired: {date.isoformat()}{newline}")
    end += 1

    if applied_upstream:
        up = key_line(lines, start, end, key_indent, "upstream")
        assert up is not None  # the schema requires it
        stop = child_end(lines, up, end, key_indent)
        sub_indent = key_indent + 2
        existing = key_line(lines, up + 1, stop, sub_indent, "applied_upstream")
        line = f"{' ' * sub_indent}applied_upstream: {yaml_scalar(applied_upstream)}{newline}"
        if existing is not None:
            current = yaml.safe_load(lines[existing].strip()) or {}
            if current.get("applied_upstream") != applied_upstream:  # same value: keep bytes
                lines[existing] = line
        else:
            lines.insert(stop, line)
            end += 1

    ev_lines = [f"{' ' * (key_indent + 4)}- {yaml_scalar(item)}{newline}" for item in evidence]
    ev = key_line(lines, start, end, key_indent, "evidence")
    # A block key: nothing after the colon but a comment (`evidence:  # what ran`)
    block = ev is not None and re.fullmatch(r"\s*(#.*)?", lines[ev].split(":", 1)[1].rstrip(
        "\r\n")) is not None
    if ev is not None and block and _items_under(lines, ev, end, key_indent):
        raise RetireError(f"{path}: entry {entry.id!r}: `evidence:` is a list; the retirement "
                          "is recorded under a `retirement:` key beside what it holds; fix: "
                          "make it a mapping first (e.g. its items under `ran:`)")
    if ev is not None and block:
        stop = child_end(lines, ev, end, key_indent)
        lines[stop:stop] = [f"{' ' * (key_indent + 2)}retirement:{newline}", *ev_lines]
    else:
        if ev is not None:  # a one-line evidence value: keep it, add the retirement beside it
            raise RetireError(f"{path}: entry {entry.id!r} has an inline `evidence:` value; "
                              "make it a mapping first")
        at = key_line(lines, start, end, key_indent, "owner") or status_at
        lines[at:at] = [f"{pad}evidence:{newline}",
                        f"{' ' * (key_indent + 2)}retirement:{newline}", *ev_lines]
    text = stored.text()
    write_validated(path, text)
    return text


def _items_under(lines: list[str], at: int, end: int, indent: int) -> bool:
    """Whether the block under key line ``at`` is a list (its first line an item)."""
    for line in lines[at + 1:child_end(lines, at, end, indent)]:
        text = line.strip()
        if text and not text.startswith("#"):
            return text.startswith("- ") or text == "-"
    return False


def delete_entry(entry: Entry) -> str:
    """Remove a retired entry's block (only that block) from its registry file, under its
    edit lock."""
    path = entry.source
    with editing(path, RetireError) as raw:
        status = _current_status(path, raw, entry.id)
        if status is not Status.RETIRED:
            raise RetireError(f"{path}: entry {entry.id!r} is {status.value}; only a retired "
                              f"entry can be deleted (`patchlane retire {entry.id}` first)")
        entries = parse_registry(path, raw)
        dependents = [e.id for e in entries if entry.id in e.depends_on]
        if dependents:
            raise RetireError(f"{path}: entries {dependents} depend on {entry.id!r} "
                              "(depends_on); deleting it would leave them naming nothing. Fix: "
                              "delete or edit those first")
        stored = stored_lines(raw)
        start, end, _ = entry_block(stored.lines, entry.id, path, RetireError)
        del stored.lines[start:end]  # comments around it stay: they may belong to a section
        if not any(e.id != entry.id for e in entries):
            # The last entry: `entries:` holding nothing reads as null, which the registry
            # refuses; `entries: []` is a registry of none (and `patchlane new` appends to it).
            at = next((i for i, line in enumerate(stored.lines)
                       if re.match(r"entries:\s*(#.*)?$", line.rstrip("\r\n"))), None)
            if at is not None:
                line = stored.lines[at]
                ending = line[len(line.rstrip("\r\n")):]
                stored.lines[at] = re.sub(r"^entries:\s*", "entries: [] ",
                                          line.rstrip("\r\n")).rstrip() + ending
        text = stored.text()
        write_validated(path, text)
        return text

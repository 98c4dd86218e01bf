"""Hits from production: the per-process reports of many ``patchlane run --reports DIR`` jobs,
read and added up per entry (``patchlane usage``).

Each process a job starts writes its ``patchlane.report()`` at exit (launch/activate.py): every
entry's decision, whether its overlay is applied, and how often it ran (``hits``), with the
process's host, pid, parent pid, rank, job and stack (launch/job.py). Per entry this adds up
the jobs and ranks that named it, applied it and hit it, the hits, when it was first and last
seen, and the stacks (interpreter, torch, target release) it was seen on.

What a rank is. A process with ``RANK`` (torchrun, ``SLURM_PROCID`` via the launcher) is that
rank of its job; its children (data-loader and checkpoint workers inherit ``RANK``) add their
hits to it. A process without a rank that started ranks is a launcher (torchrun's agent): its
hits count, it is no rank. Any other process without a rank is a rank of its own, with the
rankless processes it started.

What is flagged. An active source patch that was applied on some rank but has no hits in any
report given is dead or misapplied: the bug's code path never ran under the overlay (a
retirement or review candidate). An entry never applied (gated out, disabled, its module never
imported, refused) is not flagged, and its state says which. Other kinds (floors, pins,
compat gates, config) have no overlay to hit and are not counted.

Reports that cannot be used (unreadable, not JSON, not a report, a damaged field) are listed
with the reason and left out; the rest still count.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import stat
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..registry import KINDS, Kind

__all__ = [
    "MAX_REPORT_BYTES",
    "EntryStack",
    "EntryUsage",
    "ProcessReport",
    "RankKey",
    "Unreadable",
    "Usage",
    "aggregate",
    "collect",
    "read_report",
]

MAX_REPORT_BYTES = 16 * 2**20
"""A per-process report is a few KiB per entry; a file far larger is not one."""

_ORDER = ("applied", "reverted", "refused: drift", "failed: error", "upstream-fixed",
          "skipped: gate", "skipped: dependency", "skipped: disabled",
          "skipped: not applicable", "retired")
"""Which outcome speaks for a rank whose processes decided differently (a worker that never
imported the target stays pending while its rank applied the overlay): the first here, then
any other, then pending."""


class _Bad(ValueError):
    """One report cannot be used: the reason, naming the key."""


@dataclass(frozen=True)
class Unreadable:
    path: Path
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"path": str(self.path), "reason": self.reason}


@dataclass(frozen=True)
class EntrySeen:
    """One entry in one process's report."""

    id: str
    kind: str
    status: str
    outcome: str | None
    """The decision's outcome; None before the first decision."""
    reason: str
    applied: bool
    hits: int
    distribution: str | None
    installed: str | None
    version_source: str | None
    paths: Mapping[str, int]
    registry: str | None = None
    """The registry file that declared it (reports from before it was recorded: None)."""


@dataclass(frozen=True)
class ProcessReport:
    path: Path
    job: str
    host: str
    pid: int
    ppid: int | None
    rank: str | None
    at: float
    """When the process wrote its report (its exit), seconds since the epoch."""
    launcher: bool
    """torchrun's agent by its command line (its ranks may have written no report)."""
    python: str | None
    torch: str | None
    entries: tuple[EntrySeen, ...]


def _expect(where: str, value: Any, kind: type | tuple[type, ...], expected: str) -> Any:
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise _Bad(f"{where}: found {value!r}, expected {expected}")
    if not isinstance(value, kind):
        shown = repr(value) if len(repr(value)) <= 60 else type(value).__name__
        raise _Bad(f"{where}: found {shown}, expected {expected}")
    return value


def _opt_str(where: str, value: Any) -> str | None:
    return None if value is None else _expect(where, value, str, "a string or null")


def _entry(where: str, data: Any) -> EntrySeen:
    _expect(where, data, dict, "an object")
    hits = _expect(f"{where}.hits", data.get("hits"), int, "a whole number >= 0")
    if hits < 0:
        raise _Bad(f"{where}.hits: found {hits}, expected a whole number >= 0")
    decision = data.get("decision")
    if decision is not None:
        _expect(f"{where}.decision", decision, dict, "an object or null")
    else:
        decision = {}
    paths = data.get("paths") or {}
    _expect(f"{where}.paths", paths, dict, "an object of path -> count")
    for name, count in paths.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _Bad(f"{where}.paths.{name}: found {count!r}, expected a whole number >= 0")
    entry_id = _expect(f"{where}.id", data.get("id"), str, "the entry's id")
    if not entry_id:
        raise _Bad(f"{where}.id: found '', expected the entry's id")
    return EntrySeen(
        id=entry_id,
        kind=_expect(f"{where}.kind", data.get("kind"), str, "the entry's kind"),
        status=_expect(f"{where}.status", data.get("status"), str, "'active' or 'retired'"),
        outcome=_opt_str(f"{where}.decision.outcome", decision.get("outcome")),
        reason=_opt_str(f"{where}.decision.reason", decision.get("reason")) or "",
        applied=_expect(f"{where}.applied", data.get("applied"), bool, "true or false"),
        hits=hits,
        distribution=_opt_str(f"{where}.decision.distribution", decision.get("distribution")),
        installed=_opt_str(f"{where}.decision.installed", decision.get("installed")),
        version_source=_opt_str(f"{where}.decision.version_source",
                                decision.get("version_source")),
        paths=dict(paths), registry=_opt_str(f"{where}.registry", data.get("registry")))


def _parse(path: Path, data: Any) -> ProcessReport:
    _expect("the report", data, dict, "a JSON object (a per-process report)")
    process = data.get("process")
    if process is None:
        raise _Bad("no `process`: not a per-process report of `patchlane run --reports` "
                   "(a `patchlane status --json` output has none)")
    _expect("process", process, dict, "an object")
    entries = data.get("entries")
    _expect("entries", entries, list, "a list of entries")
    at = _expect("process.at", process.get("at"), (int, float), "seconds since the epoch")
    if not math.isfinite(at) or at < 0:
        raise _Bad(f"process.at: found {at!r}, expected seconds since the epoch")
    try:
        _iso(at)  # a time no calendar holds (year 10000 and later) is no report's time
    except (OverflowError, ValueError, OSError):
        raise _Bad(f"process.at: found {at!r}, expected seconds since the epoch (a date "
                   "before the year 10000)") from None
    rank = process.get("rank")
    if rank is not None:
        rank = str(_expect("process.rank", rank, (str, int), "a rank or null"))
    ppid = process.get("ppid")
    if ppid is not None:
        _expect("process.ppid", ppid, int, "a process id or null")
    argv = process.get("argv")
    first = str(argv[0]) if isinstance(argv, list) and argv else ""
    stack = process.get("stack")
    stack = stack if isinstance(stack, dict) else {}  # reports from before stacks existed
    job = process.get("job")
    return ProcessReport(
        path=path,
        # Before reports named their job, a job's reports were the folder it wrote them to.
        job=_expect("process.job", job, str, "the job's id") if job is not None
        else f"folder:{path.parent}",
        host=_expect("process.host", process.get("host"), str, "the host name"),
        pid=_expect("process.pid", process.get("pid"), int, "a process id"),
        ppid=ppid, rank=rank, at=float(at),
        launcher=rank is None and (first.endswith("torch/distributed/run.py")
                                   or os.path.basename(first) == "torchrun"),
        python=_opt_str("process.stack.python", stack.get("python")),
        torch=_opt_str("process.stack.torch", stack.get("torch")),
        entries=tuple(_entry(f"entries[{i}]", e) for i, e in enumerate(entries)))


def read_report(path: Path) -> ProcessReport:
    """One per-process report; ``ValueError`` (one line: the key, what was found, what was
    expected) or ``OSError`` when it cannot be used."""
    with open(path, "rb") as fh:
        raw = fh.read(MAX_REPORT_BYTES + 1)
    if len(raw) > MAX_REPORT_BYTES:
        raise _Bad(f"larger than {MAX_REPORT_BYTES} bytes: not a per-process report")
    try:
        text = raw.decode("utf-8")  # what `patchlane run` writes; json.loads would guess
    except UnicodeDecodeError as exc:
        raise _Bad(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except RecursionError:
        raise _Bad("not JSON a report could be: nested too deeply") from None
    except ValueError as exc:
        raise _Bad(f"not JSON ({exc}): cut off or overwritten") from None
    return _parse(path, data)


def _files(root: Path, bad: list[Unreadable]) -> Iterator[Path]:
    """``root`` itself when it is a file, else every ``*.json`` under it (sub-folders too: one
    folder per job under a reports root), in name order, symlinked folders not followed. A
    folder that cannot be listed goes to ``bad``; the others are still read."""
    if not root.is_dir():
        yield root
        return

    def unlisted(exc: OSError) -> None:
        bad.append(Unreadable(Path(exc.filename or root), f"cannot list: {exc.strerror or exc}"))

    for folder, dirs, files in os.walk(root, onerror=unlisted):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".json") and not name.startswith("."):  # .x.json.tmp: a write
                yield Path(folder, name)                              # in progress


def collect(roots: Sequence[Path]) -> tuple[list[ProcessReport], list[Unreadable]]:
    """Every report under ``roots`` (folders or files), each file once, and the files that
    could not be used, with why. A root that does not exist raises ``FileNotFoundError``."""
    reports: list[ProcessReport] = []
    bad: list[Unreadable] = []
    seen: set[Path] = set()
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(2, "no such file or folder", str(root))
        for path in _files(root, bad):
            try:
                key = path.resolve()
            except (OSError, RuntimeError) as exc:  # a symlink loop: RuntimeError on 3.11
                bad.append(Unreadable(path, f"cannot read: {exc}"))
                continue
            if key in seen:
                continue
            seen.add(key)
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    raise _Bad("not a regular file")  # a FIFO would block the read
                reports.append(read_report(path))
            except OSError as exc:
                bad.append(Unreadable(path, f"cannot read: {exc.strerror or exc}"))
            except _Bad as exc:
                bad.append(Unreadable(path, str(exc)))
    return reports, bad


# -- adding up ------------------------------------------------------------------------------

RankKey = tuple[str, ...]
"""``("rank", job, RANK)``, or ``("process", job, host, pid)`` of a rankless root process."""


def _rank_keys(reports: Sequence[ProcessReport]) -> list[RankKey | None]:
    """Each report's rank (None: a launcher). See the module docstring."""
    by_pid = {(r.job, r.host, r.pid): r for r in reports}
    starts_ranks = {(r.job, r.host, r.ppid) for r in reports if r.rank is not None}

    def launcher(r: ProcessReport) -> bool:
        return r.rank is None and (r.launcher or (r.job, r.host, r.pid) in starts_ranks)

    keys: list[RankKey | None] = []
    for r in reports:
        if r.rank is not None:
            keys.append(("rank", r.job, r.rank))
            continue
        if launcher(r):
            keys.append(None)
            continue
        root, hops = r, 0
        while hops < 64:  # pids of one job on one host; a cycle would be a damaged report
            parent = by_pid.get((r.job, r.host, root.ppid)) if root.ppid is not None else None
            if parent is None or parent.rank is not None or launcher(parent):
                break
            root, hops = parent, hops + 1
        keys.append(("process", r.job, root.host, str(root.pid)))
    return keys


@dataclass(frozen=True)
class EntryStack:
    """What one entry ran on in the jobs: the interpreter, torch, and its target's release
    (usage counts jobs per such stack; not the proof's comparison class,
    :class:`patchlane.deciding.proof.Stack`)."""

    python: str | None
    torch: str | None
    release: str | None
    """``distribution version`` of the entry's target as its gate saw it (``(tree)`` when read
    from a source tree); None while the entry was never decided (its module not imported)."""

    def as_dict(self) -> dict[str, str | None]:
        return {"python": self.python, "torch": self.torch, "release": self.release}


def _release(e: EntrySeen) -> str | None:
    if e.installed is None:
        return None
    tree = (e.version_source or "").startswith("source tree")
    return f"{e.distribution or '?'} {e.installed}" + (" (tree)" if tree else "")


@dataclass
class _StackCount:
    ranks: set[RankKey] = field(default_factory=set)
    applied: set[RankKey] = field(default_factory=set)
    hits: int = 0


@dataclass
class EntryUsage:
    """One entry across every report given."""

    id: str
    kind: str
    status: str
    jobs: set[str] = field(default_factory=set)
    jobs_applied: set[str] = field(default_factory=set)
    jobs_hit: set[str] = field(default_factory=set)
    ranks: set[RankKey] = field(default_factory=set)
    ranks_applied: set[RankKey] = field(default_factory=set)
    ranks_hit: set[RankKey] = field(default_factory=set)
    hits: int = 0
    paths: Counter[str] = field(default_factory=Counter)
    first_seen: float = math.inf
    last_seen: float = 0.0
    last_hit: float | None = None
    outcomes: dict[RankKey, list[tuple[str | None, str, str | None]]] = field(
        default_factory=dict)
    """Per rank: each of its processes' (outcome, reason, release)."""
    stacks: dict[EntryStack, _StackCount] = field(default_factory=dict)
    registry: str | None = None
    """The registry file that declares it, as the newest report says."""

    @property
    def counted(self) -> bool:
        """Whether hits say anything: an active source patch (it has an overlay to hit)."""
        return self.status == "active" and _carries_overlay(self.kind)

    @property
    def state(self) -> str:
        if self.status != "active":
            return self.status
        if not self.counted:
            return "not counted"
        if self.hits:
            return "hit"
        return "dead" if self.ranks_applied else "not applied"

    @property
    def flagged(self) -> bool:
        """Applied somewhere, never hit anywhere: dead or misapplied."""
        return self.state == "dead"

    def rank_outcomes(self) -> Counter[str]:
        """How many ranks ended in each outcome (a rank's most telling one: ``_ORDER``)."""
        counts: Counter[str] = Counter()
        for seen in self.outcomes.values():
            counts[_rank_outcome(seen)[0]] += 1
        return counts

    def note(self) -> str:
        """What the state means, in a sentence."""
        ranks = len(self.ranks)
        of = f"{_n(len(self.jobs), 'job')}, {_n(ranks, 'rank')}"
        if self.status != "active":
            return f"{self.status}: seen on {of}"
        if not self.counted:
            return (f"a {self.kind} entry has no overlay to hit; "
                    f"{_outcomes(self.rank_outcomes())} ({of})")
        if self.hits:
            return (f"hit {_n(self.hits, 'time')} on {len(self.ranks_hit)} of the "
                    f"{_n(len(self.ranks_applied), 'rank')} it was applied on ({of})")
        if self.ranks_applied:
            return (f"dead or misapplied: applied on {len(self.ranks_applied)} of "
                    f"{_n(ranks, 'rank')} in {_n(len(self.jobs_applied), 'job')}, never hit "
                    "(a retirement or review candidate: is the patched code path still taken?)")
        return f"never applied, not flagged: {self.why_not_applied()}"

    def why_not_applied(self) -> str:
        """Each outcome with its ranks and one reason a rank gave for it."""
        parts = []
        by: dict[str, list[str]] = {}
        for seen in self.outcomes.values():
            outcome, reason = _rank_outcome(seen)
            by.setdefault(outcome, []).append(reason)
        for outcome, reasons in sorted(by.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            label = {"pending": "its module was never imported",
                     "skipped: gate": "gated out"}.get(outcome, outcome)
            common = Counter(r for r in reasons if r).most_common(1)
            parts.append(f"{label} on {_n(len(reasons), 'rank')}"
                         + (f" ({common[0][0]})" if common and outcome != "pending" else ""))
        return "; ".join(parts) or "no rank decided it"

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "kind": self.kind, "status": self.status, "state": self.state,
            "registry": self.registry,
            "flagged": self.flagged, "note": self.note(),
            "jobs": len(self.jobs), "jobs_applied": len(self.jobs_applied),
            "jobs_hit": len(self.jobs_hit),
            "ranks": len(self.ranks), "ranks_applied": len(self.ranks_applied),
            "ranks_hit": len(self.ranks_hit),
            "hits": self.hits, "paths": dict(sorted(self.paths.items())),
            "first_seen": _iso(self.first_seen), "last_seen": _iso(self.last_seen),
            "last_hit": _iso(self.last_hit) if self.last_hit is not None else None,
            "outcomes": dict(sorted(self.rank_outcomes().items())),
            "stacks": [{**s.as_dict(), "ranks": len(c.ranks), "ranks_applied": len(c.applied),
                        "hits": c.hits} for s, c in self.sorted_stacks()],
        }

    def sorted_stacks(self) -> list[tuple[EntryStack, _StackCount]]:
        return sorted(self.stacks.items(), key=lambda kv: tuple(
            v or "" for v in (kv[0].python, kv[0].torch, kv[0].release)))


def _rank_outcome(seen: list[tuple[str | None, str, str | None]]) -> tuple[str, str]:
    def rank(item: tuple[str | None, str, str | None]) -> int:
        outcome = item[0] or "pending"
        return _ORDER.index(outcome) if outcome in _ORDER else \
            len(_ORDER) + (outcome == "pending")
    best = min(seen, key=rank)
    return best[0] or "pending", best[1]


def _outcomes(counts: Counter[str]) -> str:
    return ", ".join(f"{o} on {_n(n, 'rank')}" for o, n in sorted(counts.items())) or "undecided"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class Usage:
    """Every entry across the reports given, and what was left out."""

    entries: list[EntryUsage]
    reports: int
    jobs: list[str]
    ranks: int
    launchers: int
    unreadable: list[Unreadable]

    @property
    def flagged(self) -> list[EntryUsage]:
        return [e for e in self.entries if e.flagged]

    def as_dict(self) -> dict[str, Any]:
        return {"reports": self.reports, "jobs": self.jobs, "ranks": self.ranks,
                "launchers": self.launchers,
                "entries": [e.as_dict() for e in self.entries],
                "flagged": [e.id for e in self.flagged],
                "unreadable": [u.as_dict() for u in self.unreadable]}


def aggregate(reports: Sequence[ProcessReport],
              unreadable: Iterable[Unreadable] = ()) -> Usage:
    """Per entry (in the order reports first name them), what ``reports`` say together."""
    keys = _rank_keys(reports)
    entries: dict[str, EntryUsage] = {}
    for report, key in zip(reports, keys, strict=True):
        for seen in report.entries:
            usage = entries.get(seen.id)
            if usage is None:
                usage = entries[seen.id] = EntryUsage(seen.id, seen.kind, seen.status)
            else:  # the newest report says what the entry is now (a retirement since)
                if report.at >= usage.last_seen:
                    usage.kind, usage.status = seen.kind, seen.status
            if seen.registry and (usage.registry is None or report.at >= usage.last_seen):
                usage.registry = seen.registry
            usage.jobs.add(report.job)
            usage.first_seen = min(usage.first_seen, report.at)
            usage.last_seen = max(usage.last_seen, report.at)
            usage.hits += seen.hits
            usage.paths.update(seen.paths)
            applied = seen.applied or seen.outcome == "applied"
            if seen.hits:
                usage.jobs_hit.add(report.job)
                usage.last_hit = max(usage.last_hit or 0.0, report.at)
            stack = EntryStack(report.python, report.torch, _release(seen))
            count = usage.stacks.setdefault(stack, _StackCount())
            count.hits += seen.hits
            if key is None:  # a launcher: its hits count, it is no rank
                continue
            usage.ranks.add(key)
            count.ranks.add(key)
            usage.outcomes.setdefault(key, []).append((seen.outcome, seen.reason,
                                                       _release(seen)))
            if applied:
                usage.jobs_applied.add(report.job)
                usage.ranks_applied.add(key)
                count.applied.add(key)
            if seen.hits:
                usage.ranks_hit.add(key)
    # Stacks a launcher alone brought (no rank, no hit) say nothing about the job.
    for usage in entries.values():
        usage.stacks = {s: c for s, c in usage.stacks.items() if c.ranks or c.hits}
    ranks = {k for k in keys if k is not None}
    return Usage(entries=list(entries.values()), reports=len(reports),
                 jobs=sorted({r.job for r in reports}), ranks=len(ranks),
                 launchers=sum(k is None for k in keys), unreadable=list(unreadable))


def _carries_overlay(kind: str) -> bool:
    """Whether entries of ``kind`` (as a usage file spells it) carry an overlay; False for a
    kind this patchlane does not know (a newer one wrote the file)."""
    try:
        return KINDS[Kind(kind)].with_overlay
    except ValueError:
        return False

"""Run directories side by side: a run's comparison class, the earlier runs under its runs
root, and which of them it is compared with.

A verdict is comparable only inside its comparison class (the receipts' ``comparison_key``:
lane, host class, torch and target versions). A *run's* class is what its rows' keys say
together, plus its shard (another shard holds other rows):

* ``host_class`` and ``torch``: the sets seen across the run's receipts;
* ``distributions``: per distribution, the versions seen.

Two runs are of the same class when shard, host classes and torch agree, every distribution
both ran has the same version in both, and they share at least one row. So adding an entry on
a new distribution keeps last night comparable, while a torch upgrade, another machine or a
matrix set of other releases does not. Runs with no receipt at all (everything skipped) say
nothing about hardware and are compared only with their own kind.

The runs root is the directory holding the run directory (``--runs-root``, or the folder
``--run-dir`` names). Only its direct subdirectories with an ``index.json`` count, so a
nightly root of a year of runs costs one small JSON read per run. An index that cannot be read
or is not a sweep index is left out with the reason; it never breaks tonight's report.

A night swept in shards and merged (``patchlane merge``) is one run here: the merged
directory. The shard run directories it lists are left out (:attr:`Found.merged`): their rows
are the merged run's rows, and counting them again would put each night in the history and
the "other class" count N + 1 times, and offer a shard as the nearest earlier run. A shard
that no merge lists (a night before merging, or one not merged yet) counts as the run it is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.files import resolved
from .index import RunIndex

__all__ = ["HISTORY_RUNS", "SCAN_RUNS", "Found", "FoundRun", "class_differences", "discover",
           "earlier", "load", "run_class", "same_class"]

HISTORY_RUNS = 14
"""Earlier runs of the same class shown in the page's history (two weeks of nightlies)."""
SCAN_RUNS = 200
"""Index files read at most, the newest first: a runs root of years of nightlies (or one shared
with a matrix) costs a bounded read per report."""


@dataclass(frozen=True)
class FoundRun:
    path: Path
    index: RunIndex

    @property
    def created(self) -> str:
        return self.index.created


def run_class(index: RunIndex) -> dict[str, Any]:
    keys = [r.comparison_key for r in index.rows if r.comparison_key is not None]
    dists: dict[str, set[str]] = {}
    for key in keys:
        for name, version in (key.get("distributions") or {}).items():
            dists.setdefault(str(name), set()).add(str(version))
    return {
        "shard": str(index.shard or "1/1"),
        "host_class": sorted({str(k.get("host_class")) for k in keys}),
        "torch": sorted({str(k.get("torch")) for k in keys}),
        "distributions": {name: sorted(v) for name, v in sorted(dists.items())},
    }


def class_differences(current: RunIndex, earlier: RunIndex) -> list[str]:
    """How ``earlier``'s class differs from ``current``'s, one phrase each (``old -> new``);
    empty when they are of the same class (rows shared aside)."""
    now, then = run_class(current), run_class(earlier)
    out = []
    for field, label in (("shard", "shard"), ("host_class", "host class"),
                         ("torch", "torch (imported)")):
        if now[field] != then[field]:
            out.append(f"{label} {_show(then[field])} -> {_show(now[field])}")
    for name in sorted(set(now["distributions"]) & set(then["distributions"])):
        if now["distributions"][name] != then["distributions"][name]:
            out.append(f"{name} {_show(then['distributions'][name])} -> "
                       f"{_show(now['distributions'][name])}")
    return out


def _show(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(value) if value else "(none ran)"
    return str(value)


def same_class(current: RunIndex, earlier: RunIndex) -> bool:
    shared = current.row_keys() & earlier.row_keys()
    return bool(shared) and not class_differences(current, earlier)


def load(path: Path) -> RunIndex:
    """A run directory's index, checked (ValueError, KeyError, TypeError or OSError): one
    that says when it was created, which ordering runs needs."""
    index = RunIndex.load(path)
    if not index.created:
        raise KeyError("created")
    return index


@dataclass
class Found:
    """The runs read under a runs root, oldest first, and what was left out."""

    runs: list[FoundRun]
    unreadable: list[str]
    """``name: why`` for each run directory whose index could not be used."""
    not_read: int = 0
    """Older run directories past :data:`SCAN_RUNS`."""
    merged: list[str] = dataclasses.field(default_factory=list)
    """Run directories left out as shards of a merged run found here (or of the run being
    reported: ``leave_out``); the merged run stands for them."""


def discover(root: Path, *, exclude: Path | None = None, limit: int = SCAN_RUNS,
             leave_out: Collection[str] = ()) -> Found:
    """The runs directly under ``root`` with a usable index (the newest ``limit`` by the index
    file's modification time), except ``exclude``, the runs whose ids ``leave_out`` names, and
    the shards of a merged run found there (see the module docstring)."""
    skip = resolved(exclude) if exclude is not None else None
    candidates: list[tuple[float, str, Path]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:  # no runs root (a first run elsewhere) or one we may not list
        return Found([], [])
    for item in entries:
        path = Path(item.path)
        if item.name.startswith(".") or resolved(path) == skip:
            continue
        try:  # not a run directory, or one still running: nothing to say
            mtime = (path / "index.json").stat().st_mtime
        except OSError:
            continue
        candidates.append((-mtime, item.name, path))
    candidates.sort()
    found, problems = [], []
    for _, name, path in candidates[:max(0, limit)]:
        try:
            index = load(path)
            run_class(index)  # what every report asks of an earlier run: asked here, once
            found.append(FoundRun(path, index))
        except (OSError, ValueError, KeyError, TypeError, AttributeError,
                RecursionError) as exc:
            # Another run's bad index (edited, truncated, a FIFO in its place) is that run's
            # problem: listed with the reason, never a reason for tonight's report to fail.
            problems.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    parts = set(leave_out).union(*(r.index.merged_run_ids() for r in found))
    merged = sorted(r.path.name for r in found if r.index.run_id in parts)
    found = [r for r in found if r.index.run_id not in parts]
    found.sort(key=lambda f: (f.created, f.path.name))
    return Found(found, sorted(problems), max(0, len(candidates) - max(0, limit)), merged)


def earlier(index: RunIndex, runs: list[FoundRun]) -> list[FoundRun]:
    """The runs created before ``index``'s run, oldest first."""
    return [r for r in runs if (r.created, r.index.run_id) < (index.created, index.run_id)]

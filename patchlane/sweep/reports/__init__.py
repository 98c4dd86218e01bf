"""Reports of a run directory, one module per output: the index (:mod:`.build`, the typed
model in :mod:`patchlane.runs.index`), the comparison with an earlier run of the same
comparison class (:mod:`.comparison`), ``summary.md`` (:mod:`.markdown`), ``junit.xml``
(:mod:`.junit`) and the static page ``report.html`` (:mod:`.page`).

The earlier run is the one ``--compare`` names, else the latest earlier run of the same
comparison class under the runs root (:mod:`patchlane.runs.found`); the page's history is
the runs ``--history`` names plus the latest runs of the same class found there. The index
carries what the page shows (provenance gathered from the receipts, each entry's gate and
upstream links, relative links to receipts and rank logs), so every report can be rebuilt from
the run directory alone.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...common.files import atomic_write
from ...registry import Registry
from ...runs import found as runs_mod
from ...runs.index import RunIndex
from ...runs.manifest import RunDir
from ..engine import VerdictRow
from ..recorded import RecordedRun, recorded_runs
from .build import index_data
from .comparison import Change, compare
from .junit import junit
from .markdown import markdown
from .page import HistoryRun, page

__all__ = ["Change", "compare", "index_data", "junit", "load_index", "markdown", "page",
           "publish", "write_reports"]


def load_index(run_dir: Path) -> RunIndex:
    """``run_dir``'s index, read back and checked."""
    return RunIndex.load(run_dir)


def write_reports(run: RunDir, rows: Sequence[VerdictRow], *,
                  previous: RunIndex | None = None,
                  history: Iterable[Path] = (),
                  runs_root: Path | None = None,
                  registry: Registry | None = None,
                  upstream: Mapping[str, Any] | None = None) -> RunIndex:
    """Write index.json, summary.md, junit.xml and report.html into ``run``.

    ``previous``: the index to compare with (``--compare``); by default the latest earlier run
    of the same comparison class under ``runs_root`` (default: the directory holding the run).
    ``history``: run directories the page's history shows whatever their class (``--history``),
    besides the latest runs of the same class under ``runs_root``. ``registry`` and
    ``upstream`` (:func:`patchlane.upstream.known.known_states`) give each entry's gate and
    upstream links with their tracked state."""
    index = index_data(run, rows, registry=registry, upstream=upstream)
    return publish(index, run.path, previous=previous, history=history, runs_root=runs_root)


def publish(index: RunIndex, out: Path, *, previous: RunIndex | None = None,
            history: Iterable[Path] = (), runs_root: Path | None = None,
            leave_out: Collection[str] = ()) -> RunIndex:
    """Compare ``index`` with the earlier runs beside ``out`` and write its four reports there
    (see :func:`write_reports`); ``leave_out``: run ids under the runs root that are part of
    this run (a merge's own shards), never an earlier run of it."""
    root = runs_root if runs_root is not None else out.parent
    # First everything read from the runs root (earlier runs, their classes, the history's
    # indexes), then the reports rendered, then written: the run directory holds either the
    # previous reports or all four new ones' inputs, never a half-read mix.
    scan = runs_mod.discover(root, exclude=out, leave_out=leave_out)
    found = scan.runs
    before = runs_mod.earlier(index, found)
    same = [r for r in before if runs_mod.same_class(index, r.index)]
    other = [r for r in before if not runs_mod.same_class(index, r.index)]
    # named runs (--history): shown whatever their class; a bad index is an error
    named = [(path, load_index(path)) for path in history if (path / "index.json").is_file()]
    differs = [runs_mod.class_differences(index, data) for _, data in named]
    lineage: dict[str, Any] = {"runs_root": str(root), "earlier": len(before),
                               "same_class": len(same), "other_class": len(other),
                               "history_limit": runs_mod.HISTORY_RUNS,
                               "scan_limit": runs_mod.SCAN_RUNS,
                               "unreadable": scan.unreadable, "not_read": scan.not_read,
                               "nearest_other": None}
    if scan.merged:
        lineage["merged_shards"] = len(scan.merged)
    if other:
        lineage["nearest_other"] = {"run_id": other[-1].index.run_id,
                                    "differs": runs_mod.class_differences(index, other[-1].index)
                                    or ["no row in common"]}
    index = index.replace(lineage=lineage)

    def href(path: Path) -> str | None:
        page_file = path / "report.html"
        if not page_file.is_file():
            return None
        return Path(os.path.relpath(page_file.resolve(), out.resolve())).as_posix()

    chosen: tuple[RunIndex | None, str | None, Path | None] = (
        (previous, "compare", None) if previous is not None else
        ((same[-1].index, "same-class", same[-1].path) if same else (None, None, None)))
    prev, how, prev_path = chosen
    if prev is not None:
        if prev_path is None:  # named by --compare: link it when it is one of the runs here
            prev_path = next((r.path for r in found if r.index.run_id == prev.run_id), None)
        shared = prev.row_keys() & index.row_keys()
        index = index.replace(compare={
            "previous_run": prev.run_id, "how": how, "previous_created": prev.created,
            "previous_report": href(prev_path) if prev_path else None,
            "rows_compared": len(shared), "changes": compare(prev, index)})
    shown: dict[Path, HistoryRun] = {}
    for (path, data), differences in zip(named, differs, strict=True):
        shown[path.resolve()] = HistoryRun(data, href(path), differences)
    for r in same[-runs_mod.HISTORY_RUNS:]:
        shown.setdefault(r.path.resolve(), HistoryRun(r.index, href(r.path), []))
    texts = {"junit.xml": junit(index, out),
             "report.html": page(index, list(shown.values()), _recorded()),
             "summary.md": markdown(index)}
    index.dump(out)
    for name, text in texts.items():
        atomic_write(out / name, text)
    return index


def _recorded() -> list[RecordedRun]:
    """The GPU runs kept beside the default registry (a checkout's ``gpu-runs/``; a wheel
    ships none)."""
    from ...lazy.watchlist import default_registry

    return recorded_runs(Path(default_registry()).parent / "gpu-runs")

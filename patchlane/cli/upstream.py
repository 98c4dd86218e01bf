"""``patchlane upstream``, ``patchlane retire`` and ``patchlane delete``: the maintainers' side."""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from ..errors import PatchlaneError
from ..registry import Entry
from ..upstream.retire import RetireError, delete_entry, evaluate, retire_entry
from ._common import lane, table


def _config(offline: bool, cache_dir: Path | None) -> Any:
    from ..upstream.tracking import TrackerConfig, default_cache_dir

    return TrackerConfig(
        github_api=os.environ.get("PATCHLANE_GITHUB_API", "https://api.github.com"),
        pypi=os.environ.get("PATCHLANE_PYPI_URL", "https://pypi.org"),
        cache_dir=cache_dir or Path(os.environ.get("PATCHLANE_CACHE", default_cache_dir())),
        offline=offline,
    )


def _track(entry: Entry, client: Any) -> dict[str, Any]:
    from ..upstream.tracking import DEFAULT_TAG_TEMPLATES, track

    dist = entry.upstream.distribution or entry.target.distribution
    template = DEFAULT_TAG_TEMPLATES.get(dist, "v{version}")
    report: dict[str, Any] = track(entry, client, tag_template=template).as_dict()
    return report


def run_upstream(ids: list[str] | None, offline: bool, as_json: bool, cache_dir: Path | None,
                 evidence: list[Path] | None) -> int:
    from ..upstream.tracking import Client, UpstreamError

    registry = lane().registry
    entries = [registry.get(i) for i in ids] if ids else list(registry.entries)
    rows: list[list[str]] = []
    out: list[dict[str, Any]] = []
    failures = 0
    with Client(_config(offline, cache_dir)) as client:
        for entry in entries:
            if not (entry.upstream.pr or entry.upstream.issue):
                rows.append([entry.id, "-", "-", "-", "no upstream link", "-"])
                continue
            try:
                report = _track(entry, client)
            except UpstreamError as exc:
                failures += 1
                rows.append([entry.id, "?", "?", "?", "error", str(exc)])
                out.append({"entry_id": entry.id, "error": str(exc)})
                continue
            verdict = evaluate(entry, report, evidence or [])
            issue = (report.get("issue") or {}).get("state", "-")
            pr = report.get("pr") or {}
            pr_text = "merged" if pr.get("merged") else pr.get("state", "-")
            retire = "ready to retire" if verdict.ready else "; ".join(verdict.missing)
            if entry.status.value == "retired":
                retire = "retired"
            rows.append([entry.id, issue, pr_text, report.get("released_in") or "-",
                         report["verdict"] + (" (stale cache)" if report.get("stale") else ""),
                         retire])
            out.append({"entry_id": entry.id, "tracking": report,
                        "retirement": verdict.as_dict()})
    if as_json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print(table(["ID", "ISSUE", "PR", "RELEASED IN", "UPSTREAM", "RETIREMENT"], rows,
                    width=80))
    return 14 if failures else 0


def run_retire(entry_id: str, evidence: list[Path] | None, offline: bool, skip_upstream: bool,
               date: str | None, applied_upstream: str | None, force: str | None,
               cache_dir: Path | None) -> int:
    entry = lane().registry.get(entry_id)
    report = None
    if not skip_upstream and (entry.upstream.pr or entry.upstream.issue):
        from ..upstream.tracking import Client

        with Client(_config(offline, cache_dir)) as client:
            report = _track(entry, client)
    verdict = evaluate(entry, report, evidence or [])
    if not verdict.ready and not force:
        raise RetireError(f"{entry_id}: not enough evidence to retire:\n  - "
                          + "\n  - ".join(verdict.missing)
                          + "\n(--force REASON records a retirement anyway, with the reason)")
    when = _dt.date.fromisoformat(date) if date else _dt.date.today()
    applied = applied_upstream or (
        f"{entry.upstream.distribution or entry.target.distribution} {verdict.released_in}"
        if verdict.released_in else None)
    lines = []
    if report is not None:
        lines.append(f"upstream {report['verdict']}: {report['reason']}")
    for row in verdict.sweep:
        lines.append(f"sweep {row['run']}: {row['verdict']} on {row['installed']} "
                     f"[{row['lane']} ws={row['world_size']}] probe={row['probe']}")
    if force:
        lines.append(f"forced: {force}" + (f" (missing: {'; '.join(verdict.missing)})"
                                           if verdict.missing else ""))
    retire_entry(entry, date=when, applied_upstream=applied, evidence=lines)
    print(f"{entry_id}: retired in {entry.source} ({when}); overlay and reproducer kept, the "
          "reproducer stays in the sweep as a regression guard")
    return 0


def run_delete(entry_id: str, yes: bool) -> int:
    entry = lane().registry.get(entry_id)
    if not yes:
        raise PatchlaneError(f"{entry_id}: deleting removes the entry from {entry.source}; "
                             "pass --yes to confirm")
    delete_entry(entry)
    kept = [str(p) for p in (entry.overlay, entry.reproducer) if p is not None]
    print(f"{entry_id}: removed from {entry.source}" + (
        f"; files left for you to remove or keep: {', '.join(kept)}" if kept else ""))
    return 0

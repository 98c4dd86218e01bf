"""``patchlane upstream``, ``patchlane retire`` and ``patchlane delete``: the maintainers' side."""

from __future__ import annotations

import datetime as _dt
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import UsageError
from ..common.exit_codes import ExitCode
from ..deciding.controls import ToolSettings
from ..registry import Entry, Status
from ..upstream.retire import RetireError, delete_entry, evaluate, retire_entry
from .common import decider, one_entry, table

if TYPE_CHECKING:
    from ..upstream.http import Client, TrackerConfig
    from ..upstream.records import TrackReport


def tracker_config(offline: bool, cache_dir: Path | None) -> TrackerConfig:
    """How ``upstream``, ``retire`` and ``bisect`` reach GitHub and PyPI."""
    from ..upstream.cache import default_cache_dir
    from ..upstream.http import TrackerConfig

    # The variables are read once, in controls.ToolSettings (as the sweep reads them); what is
    # unset falls back to TrackerConfig's own defaults, which live in one place too.
    settings = ToolSettings.from_env()
    return TrackerConfig(
        github_api=settings.github_api or TrackerConfig.github_api,
        pypi=settings.pypi_url or TrackerConfig.pypi,
        cache_dir=cache_dir or settings.upstream_cache or default_cache_dir(),
        offline=offline,
    )


def _template(entry: Entry) -> str:
    from ..upstream.track import DEFAULT_TAG_TEMPLATES

    dist = entry.upstream.distribution or entry.target.distribution
    return DEFAULT_TAG_TEMPLATES.get(dist, "v{version}")


def _track(entry: Entry, client: Client) -> TrackReport:
    from ..upstream.track import track

    return track(entry, client, tag_template=_template(entry))


@contextmanager
def _tracker(offline: bool, cache_dir: Path | None,
             git: Path | None) -> Iterator[Callable[[Entry], TrackReport]]:
    """What tracks one entry: the local git repository ``git`` (no HTTP client is opened), or
    GitHub and PyPI through one client."""
    if git is not None:
        from ..upstream.gitrepo import GitRepo, track_git

        repo = GitRepo(git)  # checked once, before any entry
        yield lambda entry: track_git(entry, repo, tag_template=_template(entry))
        return
    from ..upstream.http import Client

    with Client(tracker_config(offline, cache_dir)) as client:
        yield lambda entry: _track(entry, client)


def run_upstream(ids: list[str] | None, offline: bool, as_json: bool, cache_dir: Path | None,
                 evidence: list[Path] | None, *, git: Path | None = None) -> int:
    from ..upstream.errors import UpstreamError

    registry = decider().registry
    entries = [registry.get(i) for i in ids] if ids else list(registry.entries)
    rows: list[list[str]] = []
    out: list[dict[str, Any]] = []
    failures = 0
    answered: list[TrackReport] = []
    with _tracker(offline, cache_dir, git) as track_one:
        for entry in entries:
            if not (entry.upstream.pr or entry.upstream.issue):
                rows.append([entry.id, "-", "-", "-", "no upstream link", "-"])
                continue
            try:
                report = track_one(entry)
            except UpstreamError as exc:
                failures += 1
                rows.append([entry.id, "?", "?", "?", "error", str(exc)])
                out.append({"entry_id": entry.id, "error": str(exc)})
                continue
            answered.append(report)
            verdict = evaluate(entry, report, evidence or [])
            issue = report.issue.state if report.issue is not None else "-"
            pr = report.pr
            pr_text = "-" if pr is None else "merged" if pr.merged else pr.state
            retire = "ready to retire" if verdict.ready else "; ".join(verdict.missing)
            if entry.status is Status.RETIRED:
                retire = "retired"
            rows.append([entry.id, issue, pr_text, report.released_in or "-",
                         report.state.value + (" (stale cache)" if report.stale else ""),
                         retire])
            out.append({"entry_id": entry.id, "tracking": report.as_dict(),
                        "retirement": verdict.as_dict()})
    if git is not None and answered:
        _record_git(answered, git, tracker_config(offline, cache_dir).cache_dir)
    if as_json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print(table(["ID", "ISSUE", "PR", "RELEASED IN", "UPSTREAM", "RETIREMENT"], rows,
                    width=80))
    return ExitCode.UPSTREAM_UNREACHABLE if failures else ExitCode.OK


def _record_git(reports: list[TrackReport], git: Path, cache_dir: Path) -> None:
    """Keep the mirror's answers where the sweep's page reads upstream state (the GitHub
    tracker's cache directory); failing to is said, and does not change the answers."""
    from ..upstream.gitanswers import record_git_answers

    try:
        record_git_answers(cache_dir, reports, git)
    except OSError as exc:
        print(f"patchlane upstream: could not record the git answers in {cache_dir} "
              f"({exc.strerror or exc}); the sweep's page will not show them", file=sys.stderr)


def run_retire(entry_id: str, evidence: list[Path] | None, offline: bool, skip_upstream: bool,
               date: str | None, applied_upstream: str | None, force: str | None,
               cache_dir: Path | None, *, git: Path | None = None) -> int:
    try:
        when = _dt.date.fromisoformat(date) if date else _dt.date.today()
    except ValueError:
        raise UsageError(f"--date {date!r} is not a date; expected YYYY-MM-DD") from None
    entry = one_entry(entry_id)[1]
    for run_dir in evidence or []:
        # Before anything is asked of upstream: a mistyped run is a usage error, as `status
        # --evidence` and `draft` say it, not exit 74 after the tracker ran
        if not (run_dir / "index.json").is_file():
            what = "no such directory" if not run_dir.exists() else "no index.json in it"
            raise UsageError(f"retire: --evidence {run_dir}: {what}; fix: give a sweep's run "
                             "directory (the one its last line printed)")
    report = None
    if not skip_upstream and (entry.upstream.pr or entry.upstream.issue):
        with _tracker(offline, cache_dir, git) as track_one:
            report = track_one(entry)
    verdict = evaluate(entry, report, evidence or [])
    if not verdict.ready and not force:
        raise RetireError(f"{entry_id}: not enough evidence to retire:\n  - "
                          + "\n  - ".join(verdict.missing)
                          + "\n(--force REASON records a retirement anyway, with the reason)")
    applied = applied_upstream or (
        f"{entry.upstream.distribution or entry.target.distribution} {verdict.released_in}"
        if verdict.released_in else None)
    lines = []
    if report is not None:
        lines.append(f"upstream {report.state.value}: {report.reason}")
    for row in verdict.sweep:
        probe = None if row.probe is None else row.probe.value
        lines.append(f"sweep {row.run}: {row.verdict.value} on {row.installed} "
                     f"[{row.lane} ws={row.world_size}] probe={probe}")
    if force:
        lines.append(f"forced: {force}" + (f" (missing: {'; '.join(verdict.missing)})"
                                           if verdict.missing else ""))
    retire_entry(entry, date=when, applied_upstream=applied, evidence=lines)
    print(f"{entry_id}: retired in {entry.source} ({when}); overlay and reproducer kept, the "
          "reproducer stays in the sweep as a regression guard")
    return ExitCode.OK


def run_delete(entry_id: str, yes: bool) -> int:
    entry = one_entry(entry_id)[1]
    if not yes:
        raise UsageError(f"{entry_id}: deleting removes the entry from {entry.source}; "
                         "pass --yes to confirm")
    delete_entry(entry)
    kept = [str(p) for p in (entry.overlay, entry.reproducer) if p is not None]
    print(f"{entry_id}: removed from {entry.source}" + (
        f"; files left for you to remove or keep: {', '.join(kept)}" if kept else ""))
    return ExitCode.OK

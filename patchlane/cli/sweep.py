"""``patchlane sweep``: every reproducer without and with its overlay, into a run directory
(manifest, receipts, reports), with a verdict table on stdout."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..controls import ToolSettings
from ..errors import RunDirError
from ..evidence.manifest import CaseState, RunDir
from ..evidence.provenance import git_revision, patch_set_digest
from ..evidence.reports import load_index, write_reports
from ..evidence.reproduce import Lane
from ..evidence.sweep import Shard, SweepEvent, exit_code, new_run, run_sweep
from ..evidence.verdicts import ACTION, Verdict
from ..exit_codes import ExitCode
from ..registry import Registry
from .common import decider, table
from .reproduce import print_tails

_ROOT = Path(__file__).resolve().parents[2]


def _run_id(shard: Shard) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = platform.node().split(".")[0] or "host"
    suffix = f"-shard{shard.index}of{shard.count}" if shard.count > 1 else ""
    return f"{stamp}-{host}{suffix}"


class Progress:
    """A live line on a terminal; one plain line per finished case anywhere else (CI logs)."""

    def __init__(self, quiet: bool) -> None:
        self.live = sys.stderr.isatty() and not os.environ.get("CI")
        self.quiet = quiet

    def __call__(self, event: SweepEvent) -> None:
        if self.quiet:
            return
        if self.live:
            label = "running" if event.state is CaseState.RUNNING else event.state.value
            sys.stderr.write(f"\r\x1b[K[{event.done}/{event.total}] {label}: {event.case_id}")
            if event.done == event.total and event.state.finished:
                sys.stderr.write("\n")
        elif event.state.finished:
            outcome = event.outcome.value if event.outcome is not None else event.state.value
            sys.stderr.write(f"[{event.done}/{event.total}] {event.case_id}: {outcome}\n")
        sys.stderr.flush()


@dataclass(frozen=True)
class SweepOptions:
    """What ``patchlane sweep`` was asked for (its command-line options, by name)."""

    lanes: list[Lane] | None = None
    only: list[str] | None = None
    timeout: float = 600.0
    as_json: bool = False
    jobs: int = 1
    shard: str = "1/1"
    runs_root: Path | None = None
    run_dir: Path | None = None
    resume: Path | None = None
    compare: Path | None = None
    history: list[Path] | None = None
    quiet: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SweepOptions:
        return cls(lanes=args.lane, only=args.only, timeout=args.timeout, as_json=args.json,
                   jobs=args.jobs, shard=args.shard, runs_root=args.runs_root,
                   run_dir=args.run_dir, resume=args.resume, compare=args.compare,
                   history=args.history, quiet=args.quiet)


def run_sweep_command(options: SweepOptions) -> ExitCode:
    o = options
    lanes, only, runs_root, run_dir, resume = o.lanes, o.only, o.runs_root, o.run_dir, o.resume
    quiet = o.quiet
    registry = decider().registry
    shard = Shard.parse(o.shard)
    with contextlib.ExitStack() as held:
        if resume is not None:
            # One sweep per run directory at a time; checked before anything is rewritten.
            held.enter_context(RunDir.lock(resume))
            run = RunDir.open(resume)
            if run.manifest.get("registry_digest") != registry.digest:
                raise RunDirError(f"{resume}: the registry changed since this run started "
                                  f"({run.manifest.get('registry_digest')} -> "
                                  f"{registry.digest}); start a new run instead of resuming "
                                  "(the run directory was left as it was)")
            requeued = run.requeue_unfinished()
            if not quiet:
                print(f"resuming {resume}: {len(requeued)} case(s) to run", file=sys.stderr)
        else:
            settings = ToolSettings.from_env()
            root = runs_root or settings.runs_root
            path = run_dir or root / _run_id(shard)
            header = {"run_id": path.name, "patchlane": __version__,
                      "registry_digest": registry.digest,
                      "patch_set": patch_set_digest(registry), "git": git_revision(_ROOT),
                      "argv": sys.argv[1:], "sources": [str(p) for p in registry.sources]}
            # Durations for the longest-first order come from the runs beside this one: the
            # runs root, or the folder --run-dir puts it in (unless --runs-root names another).
            run = new_run(registry, path, lanes=lanes, only=only, shard=shard, header=header,
                          history=runs_root or path.parent, schedule=settings.schedule)
            held.enter_context(RunDir.lock(path))
        return _run_and_report(registry, run, jobs=o.jobs, timeout=o.timeout, quiet=quiet,
                               compare=o.compare, history=o.history, as_json=o.as_json)


def _known_upstream(registry: Registry) -> dict[str, dict[str, object]]:
    """Each entry's upstream state as ``patchlane upstream`` last cached it (no request is
    sent: the nightly page must not need the network)."""
    from ..controls import ToolSettings
    from ..upstream.known import known_states

    settings = ToolSettings.from_env()
    return known_states(registry.entries, cache_dir=settings.upstream_cache,
                        github_api=settings.github_api)


def _run_and_report(registry: Registry, run: RunDir, *, jobs: int, timeout: float,
                    quiet: bool, compare: Path | None, history: list[Path] | None,
                    as_json: bool) -> ExitCode:
    rows = run_sweep(registry, run, jobs=jobs, timeout=timeout, on_event=Progress(quiet))
    previous = load_index(compare) if compare is not None else None
    index = write_reports(run, rows, previous=previous, history=history or [],
                          registry=registry, upstream=_known_upstream(registry))
    if as_json:
        print(json.dumps(index.as_dict(), indent=2))
    else:
        print(table(["ENTRY", "LANE", "WS", "INSTALLED", "VERDICT", "REASON"],
                    [[r.entry_id, r.lane, str(r.world_size), r.installed or "-",
                      r.verdict.value, r.reason] for r in rows], width=90))
        # The table prints each reason whole; an error's failing rank's last lines follow
        # it, so the terminal (or CI log) says why by itself.
        print_tails((f"\nerror {row.key}: {row.reason}", row.stderr_tail)
                    for row in rows if row.verdict is Verdict.ERROR)
        counts = ", ".join(f"{v.value}: {n}" for v, n in sorted(index.counts.items(),
                                                                 key=lambda kv: kv[0].value))
        print(f"\n{counts or 'nothing to run'}")
        if index.count(Verdict.STILL_AFFECTED):
            print("STILL AFFECTED: a bug outlives its gate on the installed release, which runs "
                  f"unprotected there: {ACTION[Verdict.STILL_AFFECTED]} (exit bit 4)")
        if index.count(Verdict.UPSTREAM_FIXED):
            print("UPSTREAM FIXED: retirement candidates above (not a failure): "
                  f"{ACTION[Verdict.UPSTREAM_FIXED]}")
        compared = index.compare or {}
        for change in compared.get("changes", []):
            print(f"change vs {compared['previous_run']}: {dict(change)}")
        print(f"run directory: {run.path} (summary.md, junit.xml, report.html, receipts/)")
    return exit_code(rows)

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
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..common.errors import RunDirError, SweepInterrupted, UsageError
from ..common.exit_codes import ExitCode
from ..deciding.controls import ToolSettings
from ..registry import Registry
from ..reproducer import RunOutcome
from ..runs.index import RunIndex, read_index
from ..runs.manifest import CaseState, RunDir
from ..runs.verdicts import ACTION, Verdict
from ..sweep.engine import Shard, SweepEvent, exit_code, new_run, run_sweep, verdicts
from ..sweep.provenance import git_revision, patch_set_digest
from ..sweep.rank_start import RankStart
from ..sweep.reports import write_reports
from ..sweep.reproduce import Lane
from .common import decider, table, upstream_fixed_advice, use_wheelhouse
from .reproduce import print_tails

_ROOT = Path(__file__).resolve().parents[2]


def _run_id(shard: Shard) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    host = platform.node().split(".")[0] or "host"
    suffix = f"-shard{shard.number}of{shard.count}" if shard.count > 1 else ""
    return f"{stamp}-{host}{suffix}"


_SAME_SECOND = 99
"""Sweeps of one host and shard a runs root takes in one second: ``ID``, ``ID-02`` ... ``ID-99``."""


def _new_run_dir(root: Path, shard: Shard) -> Path:
    """A fresh run directory under ``root``, claimed by creating it (``mkdir`` fails where it
    exists, so two sweeps started in the same second never share one). The second gets the
    same id with ``-02`` (two digits, so ids still sort by time, then by start)."""
    base = _run_id(shard)
    root.mkdir(parents=True, exist_ok=True)
    for n in range(1, _SAME_SECOND + 1):
        path = root / (base if n == 1 else f"{base}-{n:02d}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RunDirError(f"{root}: {_SAME_SECOND} run directories named {base}[-NN] exist "
                      "already; start the sweep again in a second, or name one with --run-dir")


class Progress:
    """A live line on a terminal (elapsed time and an ETA); one plain line per finished case
    anywhere else (CI logs), stamped with the time since the sweep began and the case's own
    time. A case run without the overlay that fails is what a guarding entry expects: it reads
    as such, not as a bare ``fail``."""

    def __init__(self, quiet: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.live = sys.stderr.isatty() and not os.environ.get("CI")
        self.quiet = quiet
        self._clock = clock
        self._began = clock()
        self._started: dict[str, float] = {}

    def line(self, event: SweepEvent) -> str | None:
        """What a finished (or, live, any) event prints; None: nothing."""
        now = self._clock()
        if event.state is CaseState.RUNNING:
            self._started.setdefault(event.case_id, now)
        elapsed = now - self._began
        if self.live:
            label = "running" if event.state is CaseState.RUNNING else event.state.value
            eta = ""
            if 0 < event.done < event.total:
                eta = f", about {_clock_text(elapsed / event.done * (event.total - event.done))}" \
                      " left"
            return f"[{event.done}/{event.total} {_clock_text(elapsed)}{eta}] {label}: " \
                   f"{event.case_id}"
        if not event.state.finished:
            return None
        outcome = event.outcome.value if event.outcome is not None else event.state.value
        if event.outcome is RunOutcome.FAIL and event.case_id.endswith("--without"):
            outcome = "fail, as expected without the overlay (the bug shows)"
        took = now - self._started.pop(event.case_id, now)
        return f"[{_clock_text(elapsed)}] [{event.done}/{event.total}] {event.case_id}: " \
               f"{outcome} ({took:.1f}s)"

    def __call__(self, event: SweepEvent) -> None:
        if self.quiet:
            return
        text = self.line(event)
        if text is None:
            return
        if self.live:
            sys.stderr.write(f"\r\x1b[K{text}")
            if event.done == event.total and event.state.finished:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()


def _clock_text(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}:{secs:02d}"


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
    group: str | None = None
    wheelhouse: Path | None = None
    rank_start: str | None = None
    """None: ``PATCHLANE_RANK_START`` (``ToolSettings.rank_start``)."""

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SweepOptions:
        return cls(lanes=args.lane, only=args.only, timeout=args.timeout, as_json=args.json,
                   jobs=args.jobs, shard=args.shard, runs_root=args.runs_root,
                   run_dir=args.run_dir, resume=args.resume, compare=args.compare,
                   history=args.history, quiet=args.quiet, group=args.group,
                   wheelhouse=args.wheelhouse, rank_start=args.rank_start)


def run_sweep_command(options: SweepOptions) -> ExitCode:
    o = options
    lanes, only, runs_root, run_dir, resume = o.lanes, o.only, o.runs_root, o.run_dir, o.resume
    quiet = o.quiet
    registry = decider().registry
    _known_ids(registry, only)
    if o.wheelhouse is not None:
        use_wheelhouse(o.wheelhouse)
    shard = Shard.parse(o.shard)
    # Earlier runs named on the command line are read before anything runs: a mistyped or
    # malformed one is a usage error now, not a failure after the last case.
    previous = named_index(o.compare, "--compare") if o.compare is not None else None
    for path in o.history or []:
        if (path / "index.json").exists():
            named_index(path, "--history")
    with contextlib.ExitStack() as held:
        if resume is not None:
            if not (resume / "manifest.json").is_file():
                # Checked before the lock: taking it would create the folder (and a lock file
                # in a folder that is no run), so a typo would leave an empty run behind.
                what = "the folder does not exist" if not resume.exists() else \
                    "that folder holds no manifest.json"
                raise RunDirError(f"--resume {resume}: no such run ({what}); fix: give the "
                                  "path of an earlier sweep's run directory (the one its last "
                                  "line printed)")
            # One sweep per run directory at a time; checked before anything is rewritten.
            held.enter_context(RunDir.lock(resume))
            run = RunDir.open(resume)
            if run.manifest.get("registry_digest") != registry.digest:
                raise RunDirError(f"{resume}: the registry changed since this run started "
                                  f"({run.manifest.get('registry_digest')} -> "
                                  f"{registry.digest}); start a new run instead of resuming "
                                  "(the run directory was left as it was)")
            recorded_set = run.manifest.get("patch_set")
            if recorded_set is not None and recorded_set != patch_set_digest(registry):
                # A finished case of one reproducer joined to a resumed one of another makes a
                # row neither proves (a verdict of two different files).
                raise RunDirError(f"{resume}: an overlay, reproducer or check changed since this "
                                  f"run started ({recorded_set} -> "
                                  f"{patch_set_digest(registry)}); a resumed case would join "
                                  "a finished one of other code in one row; start a new run "
                                  "instead of resuming (the run directory was left as it was)")
            known = {e.id for e in registry.entries}
            gone = sorted({str(c.get("entry_id")) for c in run.manifest["cases"].values()
                           if c.get("entry_id") not in known})
            if gone:
                raise RunDirError(f"{resume / 'manifest.json'}: names entries the registry no "
                                  f"longer has: {', '.join(gone)}; expected every case's entry "
                                  "in the registry it started with; fix: start a new run (the "
                                  "run directory was left as it was)")
            recorded = run.manifest.get("wheelhouse")
            if o.wheelhouse is None and isinstance(recorded, str) and recorded:
                # The run installs from where it started: resumed without --wheelhouse, an
                # air-gapped night's run would ask the package index for its releases.
                use_wheelhouse(Path(recorded))
                if not quiet:
                    print(f"resuming from the wheelhouse the run started with: {recorded}",
                          file=sys.stderr)
            requeued = run.requeue_unfinished()
            if not quiet:
                print(f"resuming {resume}: {len(requeued)} case(s) to run", file=sys.stderr)
        else:
            settings = ToolSettings.from_env()
            root = runs_root or settings.runs_root
            path = run_dir or _new_run_dir(root, shard)
            header = {"run_id": path.name, "host": platform.node() or None,
                      # Shards of one night run on one interpreter: the merge checks it.
                      "python": f"{sys.version_info.major}.{sys.version_info.minor}",
                      # The night this shard belongs to: `patchlane merge` joins its shards.
                      **({"group": o.group} if o.group is not None else {}),
                      "patchlane": __version__,
                      "registry_digest": registry.digest,
                      "patch_set": patch_set_digest(registry), "git": git_revision(_ROOT),
                      "argv": sys.argv[1:], "sources": [str(p) for p in registry.sources],
                      **({"wheelhouse": str(Path(settings.wheelhouse).absolute())}
                         if settings.wheelhouse is not None else {})}
            # Durations for the longest-first order come from the runs beside this one: the
            # runs root, or the folder --run-dir puts it in (unless --runs-root names another).
            run = new_run(registry, path, lanes=lanes, only=only, shard=shard, header=header,
                          history=runs_root or path.parent, schedule=settings.schedule)
            held.enter_context(RunDir.lock(path))
        return _run_and_report(registry, run, jobs=o.jobs, timeout=o.timeout, quiet=quiet,
                               previous=previous, history=o.history, as_json=o.as_json,
                               start=RankStart(o.rank_start
                                               or ToolSettings.from_env().rank_start))


def _known_ids(registry: Registry, only: list[str] | None) -> None:
    """Every ``--only`` id names an entry: an unknown one would sweep nothing and say all is
    well (exit 0), the false all-clear a nightly must never give."""
    known = {e.id for e in registry.entries}
    unknown = [i for i in only or [] if i not in known]
    if unknown:
        comma = any("," in i for i in unknown)
        raise UsageError(
            f"--only {', '.join(repr(i) for i in unknown)}: no such entry in the registry "
            f"({len(known)} entries: `patchlane status` lists them); fix: "
            + ("repeat --only for each id (--only a --only b), not a comma list" if comma
               else "name an entry the registry has"))


def named_index(path: Path, option: str) -> RunIndex:
    """The index of a run directory named with ``option``; RunDirError (usage) naming it and
    what is wrong when it cannot be read as one."""
    try:
        return read_index(path, lambda message: RunDirError(f"{option} {path}: {message}"))
    except OSError as exc:
        raise RunDirError(f"{option} {path}: cannot read {path / 'index.json'} "
                          f"({exc.strerror or exc}); expected a run directory a finished sweep "
                          "wrote") from None


def _known_upstream(registry: Registry) -> dict[str, dict[str, object]]:
    """Each entry's upstream state as ``patchlane upstream`` last cached it (no request is
    sent: the nightly page must not need the network)."""
    from ..deciding.controls import ToolSettings
    from ..upstream.known import known_states

    settings = ToolSettings.from_env()
    return known_states(registry.entries, cache_dir=settings.upstream_cache,
                        github_api=settings.github_api)


def _run_and_report(registry: Registry, run: RunDir, **options: object) -> ExitCode:
    """The sweep, then its reports, with SIGINT and SIGTERM recorded until the reports are
    written: a second Ctrl-C, or a scheduler's repeated SIGTERM, while the sweep stopped in
    order or wrote its reports killed the writing, and the night was left without summary,
    junit.xml, index.json or report.html. A signal that lands after every case finished
    stops the command once the reports are written, with the signal's own exit code."""
    from ..sweep.stopping import stopped, stopping_signals

    with stopping_signals() as late:
        code = _sweep_and_report(registry, run, **options)  # type: ignore[arg-type]
    if late.signum is not None and code not in (ExitCode.INTERRUPTED, ExitCode.TERMINATED):
        error = stopped(late.signum, "every case had finished; the reports are written",
                        "sweep")
        print(f"patchlane: {error}", file=sys.stderr)
        return error.exit_code
    return code


def _sweep_and_report(registry: Registry, run: RunDir, *, jobs: int, timeout: float,
                      quiet: bool, previous: RunIndex | None, history: list[Path] | None,
                      as_json: bool, start: RankStart = RankStart.FRESH) -> ExitCode:
    progress = Progress(quiet)
    try:
        rows = run_sweep(registry, run, jobs=jobs, timeout=timeout, on_event=progress,
                         start=start)
    except SweepInterrupted as stopped:
        # The report of what finished (the rest: "case did not finish (resume the run)"), then
        # the signal's exit status; the manifest already says the run was interrupted.
        if progress.live and not quiet:
            sys.stderr.write("\n")  # end the live progress line
        write_reports(run, verdicts(run), previous=previous, history=history or [],
                      registry=registry, upstream=_known_upstream(registry))
        print(f"patchlane: {stopped}; report: {run.path / 'report.html'}", file=sys.stderr)
        return stopped.exit_code
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
            print("UPSTREAM FIXED (not a failure):")
            gates = {e.id: e.serves for e in registry.entries}
            homes = {e.id: e.source for e in registry.entries}
            # one line per entry and release (its world sizes and lanes say the same)
            for entry_id, installed in dict.fromkeys(
                    (r.entry_id, r.installed) for r in rows
                    if r.verdict is Verdict.UPSTREAM_FIXED):
                print("  " + upstream_fixed_advice(entry_id, installed, gates.get(entry_id),
                                                   registry=homes.get(entry_id)))
        compared = index.compare or {}
        for change in compared.get("changes", []):
            print(f"change vs {compared['previous_run']}: {dict(change)}")
        print(f"run directory: {run.path} (summary.md, junit.xml, report.html, receipts/)")
    return exit_code(rows)

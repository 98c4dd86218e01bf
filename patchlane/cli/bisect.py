"""``patchlane bisect ID``: the releases an entry's bug is in, from runs of its reproducer."""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..common.exit_codes import ExitCode
from ..deciding.controls import ToolSettings
from .common import one_entry, positive_int, positive_seconds, release_cache, table

if TYPE_CHECKING:
    from ..releases.bisect import Bisection

T = TypeVar("T")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "bisect", help="find the releases an entry's bug is in, by running its reproducer",
        description="Run the entry's reproducer without the overlay against releases of its "
        "target distribution from PyPI (each installed side by side), bisecting from a release "
        "known to be affected to the first affected and the first fixed release, and propose "
        "applies_to from the runs.")
    p.add_argument("id")
    p.add_argument("--jobs", "-j", type=positive_int, default=1,
                   help="runs at a time (each probe round runs up to this many releases)")
    p.add_argument("--pre", action="store_true", help="include prereleases")
    p.add_argument("--pivot", metavar="RELEASE",
                   help="start from this release (it must be affected) instead of the "
                   "installed one or the entry's recorded ones")
    p.add_argument("--write", action="store_true",
                   help="record the result in the registry, in place: applies_to, "
                   "retire_when.release, fingerprint.releases of the releases run, and an "
                   "evidence line. Each affected release also runs with the overlay: the gate "
                   "widens only to releases where the overlay guards (nothing is written "
                   "otherwise)")
    p.add_argument("--run-dir", type=Path,
                   help="where each run's record and logs go (default: "
                   "$PATCHLANE_RUNS/bisect-ID-STAMP)")
    p.add_argument("--cache", type=Path, default=None,
                   help="where releases are installed side by side (default: "
                   "$PATCHLANE_RELEASE_CACHE, else ~/.cache/patchlane/releases; shared by "
                   "matrix, bisect, radar and ledger reproducers)")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per run")
    p.add_argument("--offline", action="store_true",
                   help="list the releases from the PyPI answer cached earlier")
    p.add_argument("--cache-dir", type=Path, help="the cache of PyPI answers")
    p.add_argument("--python", metavar="PYTHON", action="append", default=[],
                   help="another interpreter (a venv's python with patchlane installed) for "
                   "the releases that do not install on this one: where the search stops at "
                   "them, it goes on there and one gate is drawn from both (repeatable; e.g. "
                   "megatron-core 0.17 and newer install on Python 3.12 only)")
    # what --write needs from each run, and the one side of --pivot to search, asked of the
    # bisect on another --python
    p.add_argument("--for-write", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--side", choices=("up", "down"), help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")


def _run_dir(entry_id: str, given: Path | None) -> Path:
    from ..releases.bisect import BisectError

    if given is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        given = ToolSettings.from_env().runs_root / f"bisect-{entry_id}-{stamp}"
    if given.exists() and (not given.is_dir() or any(given.iterdir())):
        raise BisectError(f"--run-dir {given}: exists and is not an empty directory; expected "
                          "a new one (its records would mix with another bisection's); fix: "
                          "name another, or leave --run-dir out")
    return given


def run_bisect(args: argparse.Namespace) -> int:
    from ..common.files import atomic_write_json
    from ..installed.gates import resolve_version
    from ..releases.bisect import (
        BisectError,
        RunRecord,
        bisect_entry,
        list_candidates,
        one_side,
        write_bisection,
    )
    from ..releases.release_runs import ReleaseRunner
    from ..upstream.http import Client
    from .upstream import tracker_config

    entry = one_entry(args.id)[1]
    if entry.reproducer is None:
        raise BisectError(f"{entry.id}: a {entry.kind.value} entry without a reproducer has "
                          "nothing to run against each release; fix: give it a reproducer "
                          "(reproducers/<id>.py) and name it under `reproducer:`")
    for python in args.python:
        check_python(python)
    dist = entry.target.distribution
    run_dir = _run_dir(entry.id, args.run_dir)
    with Client(tracker_config(args.offline, args.cache_dir)) as client:
        listing = list_candidates(client, dist, pre=args.pre)
    if args.side and args.pivot:
        listing = one_side(listing, args.pivot, args.side)
    run_dir.mkdir(parents=True, exist_ok=True)  # once there is something to run
    # how one release runs (the evidence side) is given to the search (the maintainers' side)
    runner = ReleaseRunner(entry, run_dir, release_cache(args.cache), timeout=args.timeout,
                           fingerprints=args.write or args.for_write,
                           overlay_leg=args.write or args.for_write)
    if not args.quiet:
        sdists = sum(c.how == "sdist" for c in listing.candidates)
        print(f"{entry.id}: {len(listing.candidates)} releases of {dist} install here "
              f"({sdists} only from an sdist); records in {run_dir}", file=sys.stderr)

    def progress(phase: str, run: RunRecord) -> None:
        if not args.quiet:
            print(f"  [{phase}] {run.release}: {run.finding.value} ({run.seconds:.0f} s)",
                  file=sys.stderr, flush=True)

    # --write: each release the team's matrix runs gets a run too, so the fingerprint a strict
    # start there needs is recorded with the rest
    in_matrix = _matrix_releases(entry)
    also_run = sorted(in_matrix or ()) if args.write or args.for_write else []

    def search() -> Bisection:
        here = bisect_entry(entry, listing, runner, jobs=args.jobs,
                            installed=resolve_version(dist, None, entry.target.version_from)[0],
                            pivot=args.pivot,
                            also_run=also_run, progress=progress)
        here.run_dir = run_dir
        for python in args.python:
            here = _on_another_python(python, args, here, runner)
        return here

    result = _stoppable(search, runner, run_dir)
    atomic_write_json(run_dir / "bisect.json", result.as_dict())
    if args.write:
        old_gate = entry.applies_to_shown  # as the file writes it, before --write changes it
        write_bisection(entry, result, date=_dt.date.today(), checked=in_matrix)
        print(f"{entry.id}: recorded in {entry.source}: applies_to {result.applies_to!r}",
              file=sys.stderr)
        _record_in_docs(entry, old_gate, result.applies_to)
        ran = sorted({run.release for _, run in result.runs if run.fingerprint},
                     key=_version_key)
        unmatched = [v for v in ran if in_matrix is not None and v not in in_matrix]
        if unmatched:
            print(f"{entry.id}: the fingerprints of {', '.join(unmatched)} went to "
                  f"fingerprint.sha256 only: no set of {entry.source.parent / 'matrix.yaml'} "
                  "runs them (the release matrix checks every value fingerprint.releases "
                  "records); add a set to record them there", file=sys.stderr)
        _record_in_matrix(entry, result)
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
        return ExitCode.OK
    _show(result, run_dir)
    return ExitCode.OK


def _show(result: Bisection, run_dir: Path) -> None:
    """The runs as a table, the proposal, the notes and the releases not run, with why."""
    # WITH OVERLAY: the leg `--write` reads before it widens a gate (an affected release runs
    # with the overlay too: guarding, or why not); "-" where it did not run.
    rows = [[run.release, run.how, run.finding.value, run.overlay or "-",
             f"{run.seconds:.0f}", phase,
             run.message.strip().splitlines()[0] if run.message.strip() else ""]
            for phase, run in sorted(result.runs, key=lambda pr: _version_key(pr[1].release))]
    print(table(["RELEASE", "HOW", "VERDICT", "WITH OVERLAY", "S", "PHASE", "WHY"], rows,
                width=70))
    print(f"\nfirst affected {result.first_affected}, first fixed "
          f"{result.first_fixed or 'none'}: proposed applies_to {result.applies_to!r}")
    print(f"{result.runs_taken} runs of {len(result.releases)} releases considered "
          f"({result.seconds:.0f} s); records in {run_dir}")
    for note in result.notes:
        print(f"note: {note}")
    reasons: dict[str, list[str]] = {}
    for version, why in result.skipped:
        if version == "*":  # the prereleases, counted in their reason
            print(f"not run: {why}")
        else:
            reasons.setdefault(why, []).append(version)
    if reasons:
        print(f"not run ({sum(map(len, reasons.values()))} release(s) that do not install on "
              f"Python {result.python}):")
        for why, versions in reasons.items():
            shown = ", ".join(versions) if len(versions) <= 6 else \
                f"{', '.join(versions[:3])} … {', '.join(versions[-2:])}"
            print(f"  {shown}: {why}")


def check_python(python: str) -> None:
    """Refuse ``--python`` that is not a Python with patchlane, before any release runs here
    (a bisect can take an hour before it needs the other interpreter)."""
    import subprocess

    from ..releases.bisect import BisectError

    probe = "import json, sys, patchlane; print(json.dumps(list(sys.version_info[:2])))"
    fix = "fix: name a venv's bin/python that has patchlane installed, e.g. .venv312/bin/python"
    try:
        proc = subprocess.run([python, "-c", probe], capture_output=True, text=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BisectError(f"--python {python}: cannot run it ({exc}); {fix}") from None
    try:
        version = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.stdout.strip() \
            else None
    except ValueError:
        version = None
    if proc.returncode != 0 or not isinstance(version, list):
        said = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines()
                or ["nothing"])[-1][:160]
        raise BisectError(f"--python {python}: not a Python with patchlane (exit "
                          f"{proc.returncode}, it said: {said}); {fix}")


def _on_another_python(python: str, args: argparse.Namespace, here: Bisection,
                       runner: Any) -> Bisection:
    """Go on with ``here`` on interpreter ``python`` where it stopped at releases that do not
    install on this one: that interpreter's own ``bisect --json`` from the last (or first)
    affected release, then one result from both (:func:`~patchlane.releases.bisect.combine`).
    Its runs and records go under ``RUN_DIR/python-N``."""
    import subprocess
    import time

    from ..releases.bisect import BisectError, beyond_here, combine
    from ..sweep.reproduce import CaseInterrupted

    searches = beyond_here(here)
    if not searches:
        return here
    assert here.run_dir is not None
    n = len(list(here.run_dir.glob("python-*"))) + 1
    errors = []
    combined = here
    for pivot, side in searches:
        run_dir = here.run_dir / f"python-{n}-{side}-{pivot}"
        cmd = [python, "-m", "patchlane.cli.main", "bisect", here.entry_id, "--json",
               "--quiet", *(["--for-write"] if args.write else []), "--pivot", pivot,
               "--side", side, "--run-dir", str(run_dir),
               "--cache", str(runner.cache), "--timeout", str(args.timeout),
               "--jobs", str(args.jobs), *(["--pre"] if args.pre else []),
               *(["--offline"] if args.offline else []),
               *(["--cache-dir", str(args.cache_dir)] if args.cache_dir else [])]
        if not args.quiet:
            print(f"  [python {python}] from {pivot} {side}: the releases that do not install "
                  "here", file=sys.stderr, flush=True)
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
        except OSError as exc:
            raise BisectError(f"--python {python}: cannot start it ({exc.strerror}); expected "
                              "the path of a Python interpreter with patchlane installed; fix: "
                              "name its venv's bin/python") from None
        while proc.poll() is None:  # Ctrl-C or SIGTERM here stops it too
            if runner.stop.is_set():
                proc.terminate()
                proc.communicate()
                raise CaseInterrupted(f"the Python {python} bisect (stopped)")
            time.sleep(0.2)
        out, err = proc.communicate()
        try:
            answer = json.loads(out) if proc.returncode == 0 else None
        except ValueError:
            answer = None
            errors.append(f"from {pivot} {side}: it printed no bisect result "
                          f"({(out.strip().splitlines() or ['nothing'])[0][:80]!r})")
        if answer is not None:
            combined = combine(combined, answer)
        elif proc.returncode != 0:
            errors.append(f"from {pivot} {side}: exit {proc.returncode}: "
                          f"{(err.strip().splitlines() or ['no message'])[-1]}")
    if len(errors) == len(searches):
        raise BisectError(f"{here.entry_id}: the bisect on --python {python} found nothing to "
                          f"add ({'; '.join(errors)}); expected it to run the releases that do "
                          "not install here; fix: check that interpreter has patchlane and the "
                          "entry's dependencies installed (its records: "
                          f"{here.run_dir / f'python-{n}-*'}), or leave --python out")
    combined.notes += [f"--python {python}: {e}" for e in errors]
    return combined


def _record_in_docs(entry: Any, old: str | None, new: str | None) -> None:
    """The gate drawn, in the entry's row of the docs' entries table beside the registry."""
    from ..authoring.entries_table import docs_table, update_gate

    table = docs_table(entry.source)
    if table is None or old is None or new is None or old == new:
        return
    if update_gate(table, entry.id, old, new):
        print(f"{entry.id}: recorded in {table}: applies to `{new}`", file=sys.stderr)
    else:
        print(f"{entry.id}: {table}: its row does not quote `{old}`; put `{new}` there",
              file=sys.stderr)


def _record_in_matrix(entry: Any, result: Bisection) -> None:
    """The verdict each set of the matrix beside the registry should see, as the runs showed
    it, written there: the matrix then sweeps the entry both ways on each of its releases."""
    from ..releases.matrix import load_matrix
    from ..releases.matrix_expectations import expected_verdicts, write_expectations

    path = entry.source.parent / "matrix.yaml"
    if not path.is_file():
        return
    expectations = expected_verdicts(entry, result, load_matrix(path))
    changes = write_expectations(path, entry.id, expectations, _dt.date.today())
    for change in changes:
        print(f"{entry.id}: recorded in {path}: {change}", file=sys.stderr)
    for item in expectations:
        if item.verdict is None:
            print(f"{entry.id}: {path}: set {item.set_name} ({item.release}) left as it is: "
                  f"{item.why}", file=sys.stderr)


def _matrix_releases(entry: Any) -> set[str] | None:
    """The releases of the entry's distribution that the ``matrix.yaml`` beside its registry
    installs (None when there is no such file, or it does not read)."""
    from ..common.errors import MatrixError
    from ..releases.matrix import load_matrix

    path = entry.source.parent / "matrix.yaml"
    if not path.is_file():
        return None
    try:
        sets = load_matrix(path)
    except MatrixError:
        return None
    return {release for s in sets for release in s.releases_of(entry.target.distribution)}


def _stoppable(search: Callable[[], T], runner: Any, run_dir: Path) -> T:
    """Run ``search`` in a worker thread while this one watches for Ctrl-C and SIGTERM: on
    either the running case's ranks are killed at once (not after --timeout), nothing more
    starts, the interruption is recorded in ``run_dir/interrupted.json``, and the command
    exits 130 or 143 (the releases that ran keep their records)."""
    import concurrent.futures as cf

    from ..common.files import atomic_write_json
    from ..sweep.installs import stop_installs
    from ..sweep.reproduce import CaseInterrupted
    from ..sweep.stopping import SIGNAL_POLL_SECONDS, signal_name, stopped, stopping_signals

    with stopping_signals() as caught, cf.ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(search)
        while True:
            try:
                return future.result(timeout=SIGNAL_POLL_SECONDS)
            except cf.TimeoutError:
                pass
            except CaseInterrupted:
                break  # the signal stopped a case: said below
            if caught.signum is not None:
                runner.stop.set()
                stop_installs()  # a release downloading now stops too, not after pip ends
                with contextlib.suppress(CaseInterrupted):
                    future.result()  # the search ends at its running case
                break
    signum = caught.signum or signal.SIGINT
    ran = sorted(p.stem for p in (run_dir / "runs").glob("*.json"))
    atomic_write_json(run_dir / "interrupted.json", {"signal": signal_name(signum),
                                                     "releases_run": ran})
    raise stopped(signum, f"{len(ran)} release(s) ran (their records are in {run_dir}); run "
                  "bisect again to finish", "bisect")


def _version_key(text: str) -> tuple[int, object]:
    from ..common.versions import parse_version

    version = parse_version(text)
    return (0, version) if version is not None else (1, text)

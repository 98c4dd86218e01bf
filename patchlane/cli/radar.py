"""``patchlane radar``: the releases on PyPI newer than the newest with run evidence, per
target distribution, and the entries each must be swept for; ``--sweep`` sweeps them."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
from pathlib import Path

from ..common.exit_codes import sweep_exit_code
from ..deciding.controls import ToolSettings
from .common import decider, positive_int, positive_seconds, release_cache, table

_ROOT = Path(__file__).resolve().parents[2]


def matrix_file(given: Path | None) -> Path:
    """``--matrix``, else the working folder's ``matrix.yaml``, else the checkout's (an
    installed patchlane has none beside it: the working folder is where a user keeps one)."""
    if given is not None:
        return given
    here = Path("matrix.yaml")
    return here if here.is_file() else _ROOT / "matrix.yaml"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "radar", help="list upstream releases newer than any with run evidence (and sweep them)",
        description="Per target distribution: the newest release with run evidence (the "
        "entries' fingerprint.releases and matrix.yaml), the releases on PyPI newer than it "
        "that install here, and the entries to sweep for each. --sweep installs each side by "
        "side, sweeps those entries there and proposes the registry edit per verdict.")
    p.add_argument("--sweep", action="store_true", help="sweep each new release")
    p.add_argument("--only", action="append", metavar="DIST",
                   help="only this target distribution (repeatable)")
    p.add_argument("--pre", action="store_true", help="include prereleases")
    p.add_argument("--matrix", type=Path, default=None,
                   help="release sets whose releases count as run (default: ./matrix.yaml, "
                   "else the checkout's)")
    p.add_argument("--jobs", "-j", type=positive_int, default=1,
                   help="cases at a time in each sweep")
    p.add_argument("--timeout", type=positive_seconds, default=600.0, help="seconds per case")
    p.add_argument("--cache", type=Path, default=None,
                   help="where releases are installed side by side (default: "
                   "$PATCHLANE_RELEASE_CACHE, else ~/.cache/patchlane/releases; shared by "
                   "matrix, bisect, radar and ledger reproducers)")
    p.add_argument("--runs-root", type=Path,
                   help="where each release's sweep goes (default: $PATCHLANE_RUNS)")
    p.add_argument("--offline", action="store_true",
                   help="list the releases from the PyPI answers cached earlier")
    p.add_argument("--cache-dir", type=Path, help="the cache of PyPI answers")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run_radar(args: argparse.Namespace) -> int:
    from ..common.errors import MatrixRunError
    from ..releases.bisect import list_candidates
    from ..releases.matrix import interpreter, load_matrix, sweep_releases
    from ..releases.radar import RadarRow, failed_sweep, radar, read_sweep
    from ..runs.verdicts import exit_bits
    from ..upstream.http import Client
    from .upstream import tracker_config

    registry = decider().registry
    matrix = matrix_file(args.matrix)
    sets = load_matrix(matrix) if matrix.is_file() else []
    with Client(tracker_config(args.offline, args.cache_dir)) as client:
        wanted = {d.lower() for d in args.only or []}
        rows: list[RadarRow] = [
            row for row in radar(registry, lambda d: list_candidates(client, d, pre=args.pre),
                                 [(s.name, s.install) for s in sets])
            if not wanted or row.distribution.lower() in wanted]
    swept = []
    if args.sweep:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        root = args.runs_root or ToolSettings.from_env().runs_root
        for row in rows:
            for release in row.new:
                name = f"radar-{row.distribution}-{release}"
                run_dir = root / f"{name}-py{interpreter()}-{stamp}"
                if not args.json:
                    print(f"sweeping {row.distribution} {release} for {', '.join(row.entries)}",
                          file=sys.stderr, flush=True)
                try:
                    index, code = sweep_releases(
                        name, [f"{row.distribution}=={release}"], row.entries,
                        cache=release_cache(args.cache), run_dir=run_dir, jobs=args.jobs,
                        timeout=args.timeout, command="radar")
                except (subprocess.CalledProcessError, MatrixRunError, OSError) as exc:
                    # One release pip cannot install (or whose sweep gave nothing) is one bad
                    # row: the night goes on to the next release.
                    why = (f"pip could not install {row.distribution}=={release} (exit "
                           f"{exc.returncode})" if isinstance(exc, subprocess.CalledProcessError)
                           else str(exc).splitlines()[0])
                    swept.append(failed_sweep(row.distribution, release, run_dir, row.entries,
                                              why))
                    continue
                swept.append(read_sweep(registry, row.distribution, release, index, run_dir,
                                        code))
    # A new release that needs someone (broken, error, still affected) makes the radar's own
    # status say so, with the bits of every sweep together, as one sweep would.
    status = sweep_exit_code(exit_bits(v for s in swept for vs in s.verdicts.values()
                                       for v in vs))
    if args.json:
        print(json.dumps({"python": interpreter(), "rows": [r.as_dict() for r in rows],
                          "swept": [s.as_dict() for s in swept]}, indent=2))
        return status
    print(table(["DISTRIBUTION", "NEWEST RUN", "NEWER ON PYPI (INSTALLS HERE)", "ENTRIES"],
                [[r.distribution, r.newest_with_evidence or "none recorded",
                  ", ".join(r.new) or "-", ", ".join(r.entries)] for r in rows], width=70))
    for r in rows:
        if r.newest_with_evidence is None:
            print(f"{r.distribution}: no release with recorded run evidence (fingerprint."
                  "releases or matrix.yaml): the sweep of the installed release is its evidence")
        for release, why in r.left_out:
            print(f"{r.distribution} {release}: left out: {why}")
    for s in swept:
        print(f"\n{s.distribution} {s.release} (run {s.run_dir}, exit {s.exit_code}):")
        for entry_id, verdicts in s.verdicts.items():
            seen = ", ".join(sorted({v.value for v in verdicts}))
            print(f"  {entry_id}: {seen}: {s.proposals[entry_id]}")
    return status

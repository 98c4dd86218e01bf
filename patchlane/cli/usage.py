"""``patchlane usage REPORTS_DIR... [--json]``: per entry, what production jobs did with it,
from the per-process reports ``patchlane run --reports DIR`` leaves (patchlane/training/usage.py
adds them up). Exits 17 when an applied entry was never hit, else 0."""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

from ..common.errors import UsageError
from ..common.exit_codes import ExitCode
from .common import registry_label, table


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "usage", help="hits from production: add up the per-rank reports of many jobs",
        description="Read the per-process reports that `patchlane run --reports DIR` left "
        "(every folder given, and the folders under it: one per job is fine) and say per "
        "entry: jobs, ranks, where it was applied, hits, first and last seen, and the stacks "
        "(Python, torch, target release) it ran on. An active source patch applied but never "
        "hit in any of them is flagged (dead or misapplied: a retirement or review "
        "candidate; exit 17); an entry never applied is not, and its state says why. Files "
        "that are not usable reports are listed with the reason and left out.")
    p.add_argument("dirs", nargs="+", type=Path, metavar="REPORTS_DIR",
                   help="a `--reports` folder of `patchlane run` (or a folder of them, or "
                   "one report file)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def run_usage(args: argparse.Namespace) -> int:
    from ..training.usage import aggregate, collect

    try:
        reports, unreadable = collect(args.dirs)
    except FileNotFoundError as exc:
        raise UsageError(f"patchlane usage: REPORTS_DIR {exc.filename}: no such file or "
                         "folder; expected the folder given to `patchlane run --reports DIR`; "
                         "fix: check the path") from None
    for bad in unreadable:
        print(f"patchlane usage: left out {bad.path}: {bad.reason}", file=sys.stderr)
    if not reports:
        where = ", ".join(str(d) for d in args.dirs)
        raise UsageError(
            f"patchlane usage: no per-process report in {where}"
            + (f" ({len(unreadable)} file(s) could not be used, listed above)"
               if unreadable else "")
            + "; expected the JSON files `patchlane run --reports DIR -- CMD` writes there; "
            "fix: pass that folder, after a job ran with --reports")
    usage = aggregate(reports, unreadable)
    code = ExitCode.ENTRIES_NEVER_HIT if usage.flagged else ExitCode.OK
    if args.json:
        print(json.dumps(usage.as_dict(), indent=2))
        return code
    print(f"{usage.reports} report(s): {len(usage.jobs)} job(s), {usage.ranks} rank(s)"
          + (f", {usage.launchers} launcher process(es)" if usage.launchers else "")
          + (f"; {len(unreadable)} file(s) left out (above)" if unreadable else "") + "\n")
    # whose entries: a column when the reports name several registry files
    several = len({e.registry for e in usage.entries}) > 1
    print(table(["ENTRY", *(["REGISTRY"] if several else []), "JOBS", "RANKS", "APPLIED",
                 "HITS", "FIRST SEEN", "LAST SEEN", "STATE", "WHAT IT MEANS"],
                [[e.id, *([registry_label(e.registry)] if several else []), str(len(e.jobs)),
                  str(len(e.ranks)), str(len(e.ranks_applied)), str(e.hits),
                  _when(e.first_seen), _when(e.last_seen), e.state, e.note()]
                 for e in usage.entries]))
    print()
    print(table(["ENTRY", "PYTHON", "TORCH", "TARGET RELEASE", "RANKS", "APPLIED", "HITS"],
                [[e.id, s.python or "?", s.torch or "-", s.release or "-", str(len(c.ranks)),
                  str(len(c.applied)), str(c.hits)]
                 for e in usage.entries if e.counted for s, c in e.sorted_stacks()]))
    if usage.flagged:
        print(f"\nDEAD OR MISAPPLIED (exit {int(code)}): "
              + ", ".join(e.id for e in usage.flagged) + ": applied, never hit in these "
              "reports. A retirement or review candidate: does the job still take the code "
              "path the entry patches (`patchlane show ID`)? If not, retire it or narrow its "
              "gate; if it should, the overlay wraps something the job no longer calls.")
    return code


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%d %H:%MZ")

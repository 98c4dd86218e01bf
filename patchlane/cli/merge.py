"""``patchlane merge``: the shards of one sweep into one run directory and one page
(:mod:`patchlane.sweep.merge`), with the sweep's exit status over every row."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..common.exit_codes import ExitCode
from .common import add_comparison_options


def group_name(text: str) -> str:
    """argparse type for ``--group``: it becomes part of a directory name."""
    from ..sweep.merge import GROUP

    if not GROUP.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"--group {text!r}: expected 1 to 64 letters, digits, '.', '_' or '-', starting "
            "with a letter or digit (e.g. $SLURM_ARRAY_JOB_ID)")
    return text


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "merge", help="merge the shards of one sweep (--shard I/N) into one run directory",
        description="Merge the run directories of one sweep's shards into one index.json, "
        "summary.md, junit.xml and report.html over every planned row, each row with the shard, "
        "host and run directory it came from. A shard that is missing or did not finish is "
        "shown as such (its rows are errors); shards of different plans are refused. Exits as "
        "the sweep does: 32 | bits over every row.")
    p.add_argument("run_dirs", nargs="*", type=Path, metavar="RUN_DIR",
                   help="the shards' run directories (default: those of --group under "
                   "--runs-root)")
    p.add_argument("--group", type=group_name, metavar="NAME",
                   help="the night's group (`patchlane sweep --group NAME`): finds its shards "
                   "under --runs-root, and every shard given must record it")
    p.add_argument("--runs-root", type=Path, metavar="DIR",
                   help="where the shards are found (with --group) and earlier runs are "
                   "compared with (default: $PATCHLANE_RUNS or ./runs with --group, else the "
                   "folder holding the first RUN_DIR)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="the merged run directory (default: <runs root>/<start>-merged-<group>)")
    add_comparison_options(p)
    p.add_argument("--json", action="store_true", help="print the merged JSON index")


def run_merge(args: argparse.Namespace) -> ExitCode:
    from ..common.errors import UsageError
    from ..common.exit_codes import sweep_exit_code
    from ..deciding.controls import ToolSettings
    from ..runs.verdicts import exit_bits
    from ..sweep.merge import DELIVERED, find_group, merge
    from .common import table
    from .sweep import named_index

    paths: list[Path] = list(args.run_dirs)
    root: Path | None = args.runs_root
    if not paths:
        if args.group is None:
            raise UsageError("merge: give the shards' run directories, or --group NAME to find "
                             "them under the runs root")
        root = root or ToolSettings.from_env().runs_root
        paths = find_group(root, args.group)
        if not paths:
            raise UsageError(f"merge: no run directory of group {args.group!r} under {root} "
                             "(none of the newest runs there has a manifest.json recording it); "
                             "fix: check --runs-root, and that the shards ran with `patchlane "
                             f"sweep --group {args.group}`, or name their run directories")
    previous = named_index(args.compare, "--compare") if args.compare is not None else None
    for path in args.history or []:
        if (path / "index.json").exists():
            named_index(path, "--history")
    result = merge(paths, out=args.out, group=args.group, runs_root=root, previous=previous,
                   history=args.history or [])
    index = result.index
    if args.json:
        print(json.dumps(index.as_dict(), indent=2))
    else:
        print(table(["ENTRY", "LANE", "WS", "SHARD", "VERDICT", "REASON"],
                    [[r.entry_id, r.lane, str(r.world_size), str((r.origin or {}).get("shard")),
                      r.verdict.value, r.reason] for r in index.rows], width=90))
        for s in index.shards or ():
            where = f" {s['run_dir']}" if s.get("run_dir") else ""
            why = f": {s['why']}" if s.get("why") and s.get("state") != DELIVERED else ""
            print(f"shard {s['shard']}: {s['state']}{where}{why}")
        counts = ", ".join(f"{v.value}: {n}" for v, n in sorted(index.counts.items(),
                                                                 key=lambda kv: kv[0].value))
        print(f"\n{counts or 'nothing to run'}")
        compared = index.compare or {}
        for change in compared.get("changes", []):
            print(f"change vs {compared['previous_run']}: {dict(change)}")
        print(f"merged run directory: {result.out} (summary.md, junit.xml, report.html)")
    return sweep_exit_code(exit_bits(r.verdict for r in index.rows))

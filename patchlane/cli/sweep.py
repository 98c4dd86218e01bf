"""``patchlane sweep``: every reproducer without and with its overlay, as a verdict table."""

from __future__ import annotations

import json
import sys

from ..sweep import VerdictRow, exit_code, sweep
from ._common import lane, table


def run_sweep(lanes: list[str] | None, only: list[str] | None, timeout: float,
              as_json: bool) -> int:
    registry = lane().registry

    def progress(row: VerdictRow) -> None:
        print(f"  {row.entry_id} [{row.lane} ws={row.world_size}]: {row.verdict.value}",
              file=sys.stderr, flush=True)

    rows = sweep(registry, lanes=lanes, only=only, timeout=timeout, progress=progress)
    if as_json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        print(table(["ENTRY", "LANE", "WS", "INSTALLED", "VERDICT", "REASON"],
                    [[r.entry_id, r.lane, str(r.world_size), r.installed or "-",
                      r.verdict.value, r.reason] for r in rows], width=90))
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.verdict.value] = counts.get(r.verdict.value, 0) + 1
        print("\n" + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())))
        for r in rows:
            for case in r.cases:
                if case.outcome.value == "error":
                    for rank in case.ranks:
                        if rank.get("log_tail"):
                            print(f"\n--- {r.entry_id} {case.mode.value} rank {rank['rank']} "
                                  f"({rank['log']}) ---\n{rank['log_tail']}")
    return exit_code(rows)

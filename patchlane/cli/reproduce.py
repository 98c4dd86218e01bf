"""``patchlane reproduce ID``: run one reproducer, with or without its overlay."""

from __future__ import annotations

from ..evidence.reproduce import Mode, RunOutcome, read_spec, run_case
from ._common import lane


def run_reproduce(entry_id: str, without: bool, lane_name: str, sizes: list[int] | None,
                  timeout: float) -> int:
    entry = lane().registry.get(entry_id)
    spec = read_spec(entry)
    mode = Mode.WITHOUT if without else Mode.WITH
    worst = 0
    for size in sizes or spec.world_sizes:
        result = run_case(entry, mode, lane=lane_name, world_size=size, timeout=timeout)
        print(f"{entry_id} [{mode.value} overlay, {lane_name}, world size {size}]: "
              f"{result.outcome.value.upper()} in {result.seconds:.1f}s: {result.message}")
        if result.outcome is RunOutcome.ERROR:
            for rank in result.ranks:
                if rank.get("stderr_tail"):
                    print(f"--- rank {rank['rank']} log ({rank['log']}), last lines ---\n"
                          f"{rank['stderr_tail']}")
        code = {RunOutcome.PASS: 0, RunOutcome.FAIL: 1, RunOutcome.ERROR: 2}[result.outcome]
        worst = max(worst, code)
    return worst

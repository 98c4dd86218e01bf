"""``patchlane reproduce ID``: run one reproducer, with or without its overlay."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from pathlib import Path

from ..common.exit_codes import ExitCode
from ..sweep.rank_start import RankStart
from ..sweep.reproduce import Lane, Mode, RunOutcome, read_spec, run_case
from .common import one_entry

__all__ = ["print_tails", "run_reproduce"]


def print_tails(items: Iterable[tuple[str, str | None]]) -> None:
    """Print each heading, then its rank-log tail (if any) in full, every line marked ``  | ``:
    a table row holds a reason, not the log lines behind it, so the terminal (or CI log) says
    why by itself."""
    for heading, tail in items:
        print(heading)
        if tail:
            print(textwrap.indent(tail, "  | ", lambda _: True))


def run_reproduce(entry_id: str, without: bool, lane_name: Lane, sizes: list[int] | None,
                  timeout: float, keep: Path | None = None) -> ExitCode:
    """Run the cases and print one line each. Their folders are removed once judged (the
    failing ranks' last lines are printed, which is what a person reads); ``keep`` names the
    folder to keep them in instead: a temporary folder per call would pile up in /tmp."""
    entry = one_entry(entry_id)[1]
    spec = read_spec(entry)
    mode = Mode.WITHOUT if without else Mode.WITH
    absent = spec.missing()
    if absent:  # as the sweep says it: skipped, nothing to act on
        print(f"{entry_id} [{mode.value} overlay, {lane_name}]: SKIPPED: needs "
              f"{', '.join(absent)}, not installed here (the reproducer's REQUIRES)")
        return ExitCode.OK
    if lane_name not in spec.lanes:  # as the sweep says it: the reproducer is not for it
        print(f"{entry_id} [{mode.value} overlay, {lane_name}]: SKIPPED: the reproducer "
              f"declares lanes {list(spec.lanes)}; run it with --lane {spec.lanes[0]}")
        return ExitCode.OK
    devices = None
    if lane_name == "cuda":
        from ..sweep.engine import cuda_devices

        devices = cuda_devices()
    worst = ExitCode.OK
    for size in sizes or spec.world_sizes:
        if devices is not None and devices < size:
            # a pass here would be a CPU's, printed as the cuda lane's
            print(f"{entry_id} [{mode.value} overlay, cuda, world size {size}]: NOT RUN: lane "
                  f"unavailable: {devices} CUDA device(s); run it where the GPUs are, or "
                  "--lane cpu")
            worst = max(worst, ExitCode.REPRODUCER_ERROR)
            continue
        result = run_case(entry, mode, lane=lane_name, world_size=size, timeout=timeout,
                          workdir=keep)
        # A warm rank's figures (its peak memory) are not a fresh one's: say which it was.
        warm = ", ranks warm" if result.rank_start.get("rank_start") == RankStart.WARM.value \
            else ""
        print(f"{entry_id} [{mode.value} overlay, {lane_name}, world size {size}{warm}]: "
              f"{result.outcome.value.upper()} in {result.seconds:.1f}s: {result.message}")
        if result.outcome is RunOutcome.ERROR:
            print_tails((f"--- rank {rank['rank']} log ({_where(rank['log'])}), last lines ---",
                         rank["stderr_tail"]) for rank in result.ranks if rank.get("stderr_tail"))
        worst = max(worst, result.outcome.exit_code)
    return worst


def _where(log: str | None) -> str:
    return log if log is not None else "removed with the case; --keep DIR keeps it"

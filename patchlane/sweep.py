"""Verdicts: each active entry's reproducer run without and with its overlay, per lane and size.

``guarding``        fails without the overlay, passes with it: the patch is needed and works.
``upstream-fixed``  passes without the overlay: a retirement candidate (not a failure).
``broken``          fails with the overlay.
``error``           a case could not give a verdict (import, setup, run, timeout, crash, oom).
``skipped``         the gate excludes the installed release, or the lane is unavailable.
"""

from __future__ import annotations

import enum
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .gates import check_gate
from .registry import Entry, Kind, Registry
from .reproduce import CaseResult, Mode, RunOutcome, read_spec, run_case

__all__ = ["EXIT_BROKEN", "EXIT_ERROR", "Verdict", "VerdictRow", "exit_code", "sweep"]

EXIT_BROKEN = 10
EXIT_ERROR = 11
EXIT_BROKEN_AND_ERROR = 12


class Verdict(str, enum.Enum):
    GUARDING = "guarding"
    UPSTREAM_FIXED = "upstream-fixed"
    BROKEN = "broken"
    ERROR = "error"
    SKIPPED = "skipped"


@dataclass
class VerdictRow:
    entry_id: str
    lane: str
    world_size: int
    verdict: Verdict
    reason: str
    installed: str | None = None
    cases: list[CaseResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "lane": self.lane, "world_size": self.world_size,
            "verdict": self.verdict.value, "reason": self.reason, "installed": self.installed,
            "cases": [c.as_dict() for c in self.cases],
        }


def verdict_of(without: CaseResult, with_: CaseResult | None) -> tuple[Verdict, str]:
    if without.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"without overlay: {without.stage}: {without.message}"
    if without.outcome is RunOutcome.PASS:
        return Verdict.UPSTREAM_FIXED, "passes without the overlay: retirement candidate"
    assert with_ is not None
    if with_.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"with overlay: {with_.stage}: {with_.message}"
    if with_.outcome is RunOutcome.FAIL:
        return Verdict.BROKEN, f"fails with the overlay: {with_.message}"
    return Verdict.GUARDING, f"fails without ({without.message[:80]}), passes with"


def cuda_devices() -> int:
    # In a child interpreter: the sweep process itself never imports torch.
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
        return int(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return 0


def sweep(
    registry: Registry,
    *,
    lanes: Iterable[str] | None = None,
    only: Iterable[str] | None = None,
    timeout: float = 600.0,
    progress: Callable[[VerdictRow], None] | None = None,
) -> list[VerdictRow]:
    gpus = cuda_devices() if lanes is None or "cuda" in lanes else 0
    wanted = list(lanes) if lanes is not None else (["cpu", "cuda"] if gpus else ["cpu"])
    ids = set(only) if only else None
    rows: list[VerdictRow] = []
    for entry in registry.entries:
        if not _sweepable(entry) or (ids is not None and entry.id not in ids):
            continue
        for row in _entry_rows(entry, wanted, gpus, timeout):
            rows.append(row)
            if progress is not None:
                progress(row)
    return rows


def _sweepable(entry: Entry) -> bool:
    # Retired entries stay in the sweep: their reproducer is the regression guard.
    return entry.kind is Kind.SOURCE_PATCH and entry.reproducer is not None


def _entry_rows(entry: Entry, lanes: list[str], gpus: int,
                timeout: float) -> Iterable[VerdictRow]:
    spec = read_spec(entry)
    gate = check_gate(entry.target.distribution, entry.applies_to)
    for lane in lanes:
        for size in spec.world_sizes:
            row = VerdictRow(entry.id, lane, size, Verdict.SKIPPED, "", gate.found)
            if lane not in spec.lanes:
                row.reason = f"reproducer declares lanes {list(spec.lanes)}"
            elif lane == "cuda" and gpus < size:
                row.reason = f"lane unavailable: {gpus} CUDA device(s), world size {size}"
            elif not gate.open and entry.active:
                row.reason = f"gate: {gate.reason}"
            else:
                without = run_case(entry, Mode.WITHOUT, lane=lane, world_size=size,
                                   timeout=timeout)
                row.cases.append(without)
                with_ = None
                if without.outcome is RunOutcome.FAIL:
                    with_ = run_case(entry, Mode.WITH, lane=lane, world_size=size,
                                     timeout=timeout)
                    row.cases.append(with_)
                row.verdict, row.reason = verdict_of(without, with_)
            yield row


def exit_code(rows: Iterable[VerdictRow]) -> int:
    verdicts = {r.verdict for r in rows}
    broken, error = Verdict.BROKEN in verdicts, Verdict.ERROR in verdicts
    if broken and error:
        return EXIT_BROKEN_AND_ERROR
    return EXIT_BROKEN if broken else EXIT_ERROR if error else 0

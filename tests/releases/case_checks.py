"""What an entry's cases must show beyond their verdict: the failure it is about (its message),
and that each rank ran on the release the set installs, with the overlay on or off as the mode
says.

A guarding verdict already says the reproducer failed without the overlay and passed with it.
These checks say it failed *for the reason the entry is about*, so a reproducer that starts
failing for another reason (an import error, a changed API) cannot pass as the bug.

One run serves both: the release matrix (tests/releases/test_matrix.py) reads every case it
swept from the run directory and applies an entry's check on every set where the entry guards,
so a release set's reproducers run once per suite run, not once for the verdict and again for
these. The CUDA tests hand :func:`check_cases` the cases they run themselves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from patchlane.runs.index import RunIndex
from patchlane.sweep.reproduce import RunOutcome


@dataclass(frozen=True)
class Case:
    """One case as a check reads it: a :class:`~patchlane.sweep.reproduce.CaseResult`, or one
    read back from a run directory (its receipt and its ranks' own records)."""

    outcome: RunOutcome
    message: str
    ranks: list[dict[str, Any]]
    """Each rank's ``rank<N>.json``: the audit of its entry included."""


def recorded_cases(run_dir: Path, entry_id: str,
                   lane: str = "cpu") -> dict[int, tuple[Case, Case]]:
    """The cases ``run_dir`` (a sweep's run directory) ran ``entry_id`` in on ``lane``, per
    world size, as (without, with): read from the run's own index (each row names its
    receipts), then each receipt's outcome and message and the rank records of the attempt it
    was written from. A row that did not run both ways is left out."""
    found = {}
    for row in RunIndex.load(run_dir).rows:
        if row.entry_id == entry_id and row.lane == lane \
                and {"without", "with"} <= set(row.receipts):
            found[row.world_size] = (_recorded(run_dir / row.receipts["without"]),
                                     _recorded(run_dir / row.receipts["with"]))
    return found


def _recorded(receipt_path: Path) -> Case:
    receipt = json.loads(receipt_path.read_text(encoding="utf-8"))
    ranks = []
    for rank in receipt["ranks"]:
        attempt = Path(rank["log"]).parent
        ranks.append(json.loads((attempt / f"rank{rank['rank']}.json").read_text("utf-8")))
    return Case(RunOutcome(receipt["outcome"]), receipt["message"], ranks)


def _without(case: Case, version: str, *needles: str) -> None:
    assert case.outcome is RunOutcome.FAIL, (case.message, case.ranks)
    assert case.ranks, "no rank reported: nothing says where the case ran"
    for needle in needles:
        assert needle in case.message, (needle, case.message)
    for rank in case.ranks:
        decision = rank["audit"]["decision"]
        assert decision["outcome"] == "skipped: disabled", decision
        assert decision["installed"] == version, "the case ran against another release"
        assert rank["audit"]["hits"] == 0


def _with(case: Case, version: str, hits: int = 1) -> None:
    assert case.outcome is RunOutcome.PASS, (case.message, case.ranks)
    assert case.ranks, "no rank reported: nothing says where the case ran"
    for rank in case.ranks:
        decision = rank["audit"]["decision"]
        assert decision["outcome"] == "applied", decision
        assert decision["installed"] == version, "the case ran against another release"
        assert rank["audit"]["hits"] >= hits, rank["audit"]


def _rerun_sentinel(without: Case, with_: Case, version: str) -> None:
    # Megatron-LM #4378: the steady save wrote no rerun-state key, so the fault save's load
    # finds one missing; with the overlay both saves go through it.
    _without(without, version, "Missing key in checkpoint state_dict: "
                               "rerun_state_machine_state/shard_")
    _with(with_, version, hits=2)


def _graph_safe(without: Case, with_: Case, version: str) -> None:
    # the indexer loss's backward copies host data while a CUDA graph is captured
    _without(without, version, "aten.lift_fresh.default (host-data) at", "dsa.py",
             "in backward")
    _with(with_, version)


def _streamed(without: Case, with_: Case, version: str) -> None:
    _without(without, version, "scores were materialised")
    _with(with_, version)


def _streamed_fn(without: Case, with_: Case, version: str) -> None:
    _without(without, version, "scores were materialised", "forward peaked",
             "forward+backward peaked")
    _with(with_, version)
    # the receipt says which path ran and why: on a CPU, the torch path, for its tensors
    audit = with_.ranks[0]["audit"]
    reasons = audit["path_reasons"]
    assert set(reasons) == set(audit["paths"]) and reasons, audit
    assert all("cpu, not CUDA" in why for why in reasons.values()), reasons


CHECKS: Mapping[str, Callable[[Case, Case, str], None]] = {
    "mcore_rerun_sentinel": _rerun_sentinel,
    "mcore_dsa_indexer_loss_graph_safe": _graph_safe,
    "mcore_dsa_streamed_index_scores": _streamed,
    "mcore_dsa_streamed_index_scores_fn": _streamed_fn,
}
"""Entry id -> its check of (the case without, the case with, the release installed)."""


def check_cases(entry_id: str, without: Any, with_: Any, version: str) -> None:
    """Apply ``entry_id``'s check to two cases (:class:`Case` or ``CaseResult``)."""
    CHECKS[entry_id](_as_case(without), _as_case(with_), version)


def _as_case(result: Any) -> Case:
    return result if isinstance(result, Case) else Case(result.outcome, result.message,
                                                        list(result.ranks))

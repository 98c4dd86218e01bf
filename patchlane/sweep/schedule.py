"""The order a sweep starts its cases in: longest first, from durations of earlier runs.

With ``--jobs N`` the cases go through a FIFO pool, so the last case started bounds the wall
time: a long case started late runs on alone while the other workers sit idle. Starting the
longest cases first (LPT scheduling) keeps the wall time close to ``max(longest case,
total / jobs)``; registry order only gets there when the registry happens to list its heavy
entries first.

Durations come from earlier receipts (``seconds``, the case's own wall time, all ranks) in the
run directories beside the new one (its runs root). A case is matched across runs by the key
the run directory already uses, :func:`~patchlane.runs.manifest.case_id` (entry, lane,
world size, mode), on the same host class: the receipt's ``comparison_key.host_class`` equal
to this machine's (:func:`~patchlane.sweep.provenance.host_class_here`, told without
importing torch). A runs root shared by several machines (an H200 box and a CPU runner writing
to one volume) holds durations that differ tenfold between them, so another class's duration
is used only when this class has none for the case. Within a class, preferably the same
release: the receipt's ``comparison_key.distributions`` (the target distribution's and
torch's versions) equal to what is installed now; a receipt from another release of the same
case still beats no estimate. The manifest says where each estimate came from (``match``:
the release; ``host_class``: the receipt's, beside the block's own ``host_class``).

Cases with no known duration start first: a new entry may well be the longest one, and
starting it last is exactly the worst case this order exists to avoid; a short unknown case
started early costs little. Among themselves, and wherever estimates tie, cases keep their
plan (registry) order, so the order is deterministic.

Cheap by construction: only the newest :data:`HISTORY_RUNS` run directories (by their
manifest's modification time: one ``stat`` per directory of the root, no manifest parsed) are
consulted, newest first; per run only the receipts of the cases still lacking a same-class,
same-release estimate are opened, by name (no globbing), and no further run is opened once
every case has one, so a nightly root of a year of runs costs a directory listing and,
usually, one run's receipts. This machine's class costs one ``nvidia-smi`` call, and none
when there is no earlier run. A receipt that cannot be read, is not JSON, is too large or
does not carry a plausible duration is skipped, never fatal: the order is an optimisation,
never a reason for a sweep to fail.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from ..common.files import read_regular, resolved
from ..deciding.controls import SCHEDULE_POLICIES

__all__ = ["DEFAULT_POLICY", "HERE", "HISTORY_RUNS", "POLICIES", "dispatch_order", "plan_schedule",
           "prior_durations", "recent_runs"]

POLICIES = SCHEDULE_POLICIES
DEFAULT_POLICY = SCHEDULE_POLICIES[0]
HISTORY_RUNS = 32
"""How many of the newest earlier runs are consulted for durations: enough to reach last
night's run of the same shard past tonight's other shards (a Slurm array of 16 writes 16 run
directories a night). A run holding none of the wanted receipts costs one failed ``open`` per
case still without an estimate."""
_MAX_RECEIPT_BYTES = 4 * 2**20
"""Real receipts are a few KiB; anything far larger is not one this sweep should parse."""

Release = Mapping[str, Any]


class _Here:
    """:data:`HERE`'s type: this machine's host class, found only when earlier runs exist."""

    def __repr__(self) -> str:
        return "HERE"


HERE: Final = _Here()
"""``plan_schedule(host_class=HERE)``, the default: this machine's class
(:func:`~patchlane.sweep.provenance.host_class_here`)."""


def recent_runs(root: Path, *, exclude: Path | None = None,
                limit: int = HISTORY_RUNS) -> list[Path]:
    """The newest ``limit`` run directories directly under ``root`` (those holding a
    ``manifest.json``), newest first; ties by name. One ``stat`` per directory."""
    skip = resolved(exclude) if exclude is not None else None
    found: list[tuple[float, str, Path]] = []
    try:
        entries = list(os.scandir(root))
    except OSError:  # no runs root yet (a first sweep), or one we may not read
        return []
    for item in entries:
        path = Path(item.path)
        try:
            mtime = (path / "manifest.json").stat().st_mtime
        except OSError:
            continue
        if skip is not None and resolved(path) == skip:
            continue
        found.append((-mtime, item.name, path))
    found.sort()
    return [path for _, _, path in found[:max(0, limit)]]


def _read_duration(path: Path, cid: str) -> tuple[float, Release | None, str | None] | None:
    """(seconds, the receipt's release, its host class) of one earlier receipt, or None when
    it is not a usable one (missing, unreadable, partial, another case's, or an error that
    says nothing about how long the case runs)."""
    try:  # a FIFO or a device in a receipt's place is not one, and must not block planning
        data = read_regular(path, _MAX_RECEIPT_BYTES)
    except OSError:
        return None
    if len(data) > _MAX_RECEIPT_BYTES:
        return None
    try:
        receipt = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or absurdly nested
        return None
    if not isinstance(receipt, dict) or receipt.get("case_id") != cid:
        return None
    seconds = receipt.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) \
            or not math.isfinite(seconds) or seconds < 0:
        return None
    outcome = receipt.get("outcome")
    # A pass or a fail ran the reproducer to its end; a timeout ran at least that long. Any
    # other error (import, crash, setup) stopped early and would understate the case.
    if outcome not in ("pass", "fail") and not (outcome == "error"
                                                and receipt.get("stage") == "timeout"):
        return None
    key = receipt.get("comparison_key")
    dists = key.get("distributions") if isinstance(key, dict) else None
    host = key.get("host_class") if isinstance(key, dict) else None
    return (float(seconds), dists if isinstance(dists, dict) else None,
            host if isinstance(host, str) else None)


def prior_durations(runs: Sequence[Path], cases: Mapping[str, Release | None],
                    host_class: str | None = None
                    ) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per case id, the newest usable duration among ``runs`` (newest first), best match
    first: recorded on ``host_class`` (any class when None: it could not be told) before any
    other class, and within that the same release (``match: same-release``) before another
    (``other-release``). Returns the estimates and the names of the runs consulted."""
    found: dict[str, dict[str, Any]] = {}
    tier: dict[str, int] = {}  # 0 is the best match: nothing better to look for
    pending = list(cases)
    consulted: list[str] = []
    for run in runs:
        if not pending:
            break
        consulted.append(run.name)
        still = []
        for cid in pending:
            got = _read_duration(run / "receipts" / f"{cid}.json", cid)
            if got is not None:
                seconds, release, host = got
                want = cases[cid]
                same_release = want is not None and release is not None \
                    and dict(release) == dict(want)
                other_host = host_class is not None and host != host_class
                rank = 2 * other_host + (not same_release)
                # Runs come newest first: the first receipt of a tier is its newest.
                if rank < tier.get(cid, 4):
                    tier[cid] = rank
                    found[cid] = {"estimate_s": round(seconds, 3), "from": run.name,
                                  "match": "same-release" if same_release else "other-release",
                                  "host_class": host}
            if tier.get(cid) != 0:
                still.append(cid)  # go on looking in older runs for a better match
        pending = still
    return found, consulted


def plan_schedule(cases: Iterable[tuple[str, Release | None]], *, history: Path | None,
                  exclude: Path | None = None, policy: str = DEFAULT_POLICY,
                  limit: int = HISTORY_RUNS,
                  host_class: str | _Here | None = HERE) -> dict[str, Any]:
    """The manifest's ``schedule``: the policy, this machine's host class, the runs consulted
    and, per case (plan order in, dispatch order out), its estimate and where it came from.
    ``host_class``: the class whose durations count first (default: this machine's; None:
    every class alike)."""
    if policy not in POLICIES:
        raise ValueError(f"schedule policy {policy!r}: expected one of {list(POLICIES)}")
    wanted = dict(cases)
    runs = recent_runs(history, exclude=exclude, limit=limit) if history is not None else []
    if isinstance(host_class, _Here):
        from .provenance import host_class_here

        # Only when there is history to weigh: a first sweep runs no nvidia-smi for it.
        host_class = host_class_here() if runs else None
    estimates, consulted = prior_durations(runs, wanted, host_class)
    plan_order = list(wanted)
    if policy == "longest-first":
        position = {cid: i for i, cid in enumerate(plan_order)}

        def rank(cid: str) -> tuple[int, float, int]:
            known = estimates.get(cid)
            if known is None:  # unknown first (see the module docstring), in plan order
                return (0, 0.0, position[cid])
            return (1, -float(known["estimate_s"]), position[cid])

        plan_order.sort(key=rank)
    return {
        "policy": policy,
        "unknown": "first",
        "history_root": str(history) if history is not None else None,
        "host_class": host_class,
        "source_runs": consulted,
        "order": [{"case": cid, **(estimates.get(cid)
                                   or {"estimate_s": None, "from": None, "match": None,
                                       "host_class": None})}
                  for cid in plan_order],
    }


def dispatch_order(manifest: Mapping[str, Any], queued: Sequence[str]) -> list[str]:
    """``queued`` in the order the manifest's schedule gives (a resumed run keeps the order it
    was planned with). A manifest from before schedules existed, or a case the schedule does
    not list, keeps manifest order (the latter ahead of the listed ones: nothing is known of
    it, and unknown cases start first)."""
    schedule = manifest.get("schedule")
    order = schedule.get("order") if isinstance(schedule, Mapping) else None
    rank: dict[str, int] = {}
    for item in order if isinstance(order, list) else []:
        cid = item.get("case") if isinstance(item, Mapping) else None
        if isinstance(cid, str):
            rank.setdefault(cid, len(rank))
    return sorted(queued, key=lambda cid: rank.get(cid, -1))

"""The sweep: every active entry's reproducer without and with its overlay, per lane and world
size, in parallel, into a run directory with a manifest, receipts and reports.

One :class:`~patchlane.runs.verdicts.Verdict` per (entry, lane, world size): guarding,
upstream-fixed, still-affected, broken, error or skipped (see
:mod:`patchlane.runs.verdicts`).

Past the gate. An active entry on a release above its ``applies_to`` (or inside its
``retire_when.release``) is not skipped: its reproducer runs *without* the overlay only (the
overlay is never applied outside its gate), and the row says whether upstream fixed the bug
(``upstream-fixed``: the evidence retirement needs) or the bug outlives the gate
(``still-affected``). Below the gate's lower bound the row stays skipped: nothing is claimed
about releases from before the bug.

Carried onward. An entry whose ``continued_by`` names the entry guarding the same bug on later
releases (upstream moved the code, the bug came along) gets ``covered`` there instead of
``still-affected``, wherever the named entry is active and its gate admits the installed
release: the alarm would be false. The row names the guarding entry and that entry's own
verdict in the same run.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.exit_codes import ExitCode, sweep_exit_code
from ..common.versions import in_range
from ..deciding.ledger import installed_outside
from ..installed.gates import (
    KNOWN_TREE_VERSIONS,
    GateResult,
    distribution_roots,
    gate_side,
    locate_source,
    resolve_version,
)
from ..registry import Entry, Registry
from ..runs.index import row_key
from ..runs.manifest import CaseState, RunDir, case_id, now
from ..runs.rows import CaseView, PlannedRow, RowRule
from ..runs.verdicts import Verdict, exit_bits
from .rank_start import RankStart
from .reproduce import (
    CaseInterrupted,
    CaseResult,
    Lane,
    Mode,
    ReproducerSpec,
    RunOutcome,
    parse_lane,
    read_spec,
    run_case,
)
from .schedule import DEFAULT_POLICY, dispatch_order, plan_schedule
from .stopping import SIGNAL_POLL_SECONDS, signal_name, stopped, stopping_signals
from .wheelhouse_manifest import in_use

__all__ = [
    "UNFINISHED",
    "Shard",
    "SweepEvent",
    "VerdictRow",
    "exit_code",
    "plan_record",
    "run_sweep",
    "sweep",
    "verdicts",
]


@dataclass
class VerdictRow:
    entry_id: str
    lane: Lane
    world_size: int
    verdict: Verdict
    reason: str
    installed: str | None = None
    cases: list[CaseResult] = field(default_factory=list)
    receipts: dict[str, str] = field(default_factory=dict)
    comparison_key: dict[str, Any] | None = None
    stderr_tail: str | None = None
    """For an error: the failing case's last log lines (redacted); the reason is one line."""
    read: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    """The receipts (by mode) read to give the verdict, so the reports read none again."""

    @property
    def key(self) -> str:
        return row_key(self.entry_id, self.lane, self.world_size)

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "lane": self.lane, "world_size": self.world_size,
            "verdict": self.verdict.value, "reason": self.reason, "installed": self.installed,
            "receipts": self.receipts, "comparison_key": self.comparison_key,
            "stderr_tail": self.stderr_tail,
            "cases": [c.as_dict() for c in self.cases],
        }


@dataclass(frozen=True)
class Shard:
    number: int
    """1-based."""
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        try:
            i, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ValueError(f"--shard {text!r}: expected i/n, e.g. 2/4") from None
        if not 1 <= i <= n:
            raise ValueError(f"--shard {text!r}: i must be between 1 and n (1-based)")
        return cls(i, n)

    def __str__(self) -> str:
        return f"{self.number}/{self.count}"

    def owns(self, position: int) -> bool:
        return position % self.count == self.number - 1


def cuda_devices() -> int:
    # No NVIDIA device node and no driver tool: no CUDA lane, without paying ~2 s for a torch
    # import. Otherwise ask torch, in a child interpreter (the sweep never imports torch).
    if not Path("/dev/nvidiactl").exists() and shutil.which("nvidia-smi") is None:
        return 0
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=True)
        return int(out.stdout.strip().splitlines()[-1])
    except (subprocess.SubprocessError, ValueError, IndexError):
        return 0


def exit_code(rows: Iterable[VerdictRow]) -> ExitCode:
    """``32 | bits`` for broken (1), error (2) and still-affected (4) rows; 0 otherwise."""
    return sweep_exit_code(exit_bits(r.verdict for r in rows))


# -- planning ----------------------------------------------------------------------------------

def _sweepable(entry: Entry) -> bool:
    # Retired entries stay in the sweep: their reproducer is the regression guard. A ledger
    # entry with a reproducer is swept like a source patch: without it (a floor's or pin's
    # bad side installed, a setting left at upstream's default) and with it.
    return entry.reproducer is not None


def ledger_beyond(entry: Entry) -> str | None:
    """Why a floor's or pin's reproducer runs on its bad side only: a ``when.installed``
    condition excludes this environment (the bug it works around is fixed here), so the row
    asks whether the bad side still fails. None when the entry applies here."""
    when = entry.when
    if not entry.active or when is None:
        return None
    for name, spec, gate in installed_outside(when):
        if gate.found is not None:  # not installed: nothing here says the bug is fixed
            return (f"{name} {gate.found} is outside when.installed {str(spec)!r}: checking "
                    "whether the bad side still fails here (without the entry only)")
    return None


def beyond_gate(entry: Entry, gate: GateResult) -> str | None:
    """Why ``entry``'s reproducer runs without its overlay only on a release its gate excludes
    (see the module docstring); None when the row is an ordinary skip."""
    if not entry.active or gate.open or gate.found is None or not gate.comparable:
        return None
    side = gate_side(entry.applies_to, gate.found)
    retire = entry.retire_when.release
    if retire is not None and in_range(retire, gate.found):
        return (f"{entry.target.distribution} {gate.found} is inside retire_when.release "
                f"{str(retire)!r}: checking whether upstream fixed it (without the overlay "
                "only)")
    if side == "above":
        return (f"{entry.target.distribution} {gate.found} is past the gate "
                f"{str(entry.applies_to)!r}: checking whether the bug is still there (without "
                "the overlay only)")
    return None


def _target_missing(entry: Entry, gate: GateResult) -> str | None:
    """Why the installed release cannot be exercised for ``entry`` although its version is
    known: the target module is absent (megatron-core wheels before 0.17 ship no
    megatron.training), or found only in *another* install than the one the version came from
    (a namespace package merging a release directory with the venv's own copy). None when the
    target is part of the release the gate read."""
    module = entry.target.module
    if module is None or gate.found is None:
        return None
    file = locate_source(module)
    release = f"{entry.target.distribution} {gate.found}"
    if file is None:
        return f"target module {module} is not part of {release}"
    roots = _release_roots(entry, gate)
    if roots and not any(file.resolve().is_relative_to(root) for root in roots):
        return (f"target module {module} comes from {file.parent}, not from {release} "
                f"({', '.join(map(str, roots))}): a mixed environment, not a release")
    return None


def _release_roots(entry: Entry, gate: GateResult) -> list[Path]:
    from importlib import metadata

    if gate.source.origin == "source tree" and gate.source.path is not None:
        # the folder on sys.path that holds the version module: megatron/core/package_info.py
        # (megatron.core.package_info) -> the folder holding megatron/
        version_file = Path(gate.source.path).resolve()
        version_from = (entry.target.version_from
                        or KNOWN_TREE_VERSIONS.get(entry.target.distribution) or "")
        depth = version_from.partition(":")[0].count(".") + 1
        depth += version_file.name == "__init__.py"
        return [version_file.parents[depth - 1]] if len(version_file.parents) >= depth else []
    try:
        return distribution_roots(metadata.distribution(entry.target.distribution))
    except (metadata.PackageNotFoundError, OSError):
        return []


def covering_entry(registry: Registry, entry: Entry) -> str | None:
    """The entry that guards ``entry``'s bug on the installed release, past ``entry``'s gate:
    its ``continued_by`` (followed along the chain), when that entry is active and its gate
    admits the installed release. None otherwise."""
    seen: set[str] = set()
    step = entry
    while step.continued_by and step.continued_by not in seen:
        seen.add(step.continued_by)
        step = registry.get(step.continued_by)
        if step.active and step.applies_to is not None and step.read_gate().open:
            return step.id
    return None


def _slots(registry: Registry, lanes: Sequence[Lane],
           only: set[str] | None) -> Iterator[tuple[Entry, ReproducerSpec, Lane, int]]:
    """Every row the sweep plans over all shards, in plan order (entry x lane x world size):
    the positions :meth:`Shard.owns` deals out."""
    for entry in registry.entries:
        if not _sweepable(entry) or (only is not None and entry.id not in only):
            continue
        spec = read_spec(entry)
        for lane in lanes:
            for size in spec.world_sizes:
                yield entry, spec, lane, size


PLAN_SCHEMA = 1


def plan_record(registry: Registry, lanes: Sequence[Lane], only: set[str] | None,
                shard: Shard) -> dict[str, Any]:
    """The whole plan a shard is one slice of, for its manifest (``plan``): every row of every
    shard in plan order (row ``i`` belongs to shard ``i % count + 1``), the shard count, and a
    digest of the registry, the lanes and the rows. Shards of one sweep record the same digest;
    ``patchlane merge`` joins only those, and names the rows a missing shard owed."""
    rows = [[entry.id, lane, size] for entry, _, lane, size in _slots(registry, lanes, only)]
    basis = {"schema": PLAN_SCHEMA, "registry_digest": registry.digest, "lanes": list(lanes),
             "rows": rows}
    digest = hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()
    return {"schema": PLAN_SCHEMA, "digest": f"sha256:{digest}", "count": shard.count,
            "rows": rows}


def plan(registry: Registry, lanes: Sequence[Lane], gpus: int, only: set[str] | None,
         shard: Shard) -> list[PlannedRow]:
    """Rows (entry x lane x world size) this shard owns, each of its kind (see
    :mod:`patchlane.runs.rows`): skipped with the reason, both ways, past the gate
    (covered when another entry guards the bug there), or a retired entry's regression
    guard."""
    rows: list[PlannedRow] = []
    # An entry's gate is read once, and only when this shard owns one of its rows.
    seen: dict[str, tuple[GateResult, str | None, str | None, str | None]] = {}
    # Offline (a wheelhouse in use), a ledger case whose bad side it lacks cannot run: the row
    # is skipped and says what to add, rather than an error after a failed pip.
    house = in_use()
    for position, (entry, spec, lane, size) in enumerate(_slots(registry, lanes, only)):
        if not shard.owns(position):
            continue
        if entry.id not in seen:
            gate = entry.read_gate()
            beyond = beyond_gate(entry, gate) or ledger_beyond(entry)
            seen[entry.id] = (gate, beyond,
                              covering_entry(registry, entry) if beyond else None,
                              _target_missing(entry, gate))
        gate, beyond, covered_by, missing = seen[entry.id]
        skip = None
        if lane not in spec.lanes:
            skip = f"reproducer declares lanes {list(spec.lanes)}"
        elif lane == "cuda" and gpus < size:
            skip = f"lane unavailable: {gpus} CUDA device(s), world size {size}"
        elif not gate.open and entry.active and beyond is None:
            skip = f"gate: {gate.reason}"
        elif missing:
            skip = missing
        elif spec.missing():
            skip = (f"needs {', '.join(spec.missing())}, not installed here (the reproducer's "
                    "REQUIRES): nothing to act on")
        elif house is not None and (lacking := [r for r in spec.bad_side
                                                 if not house.holds(r)]):
            option = " --torch-builds" if any(r in house.skipped for r in lacking) else ""
            skip = (f"needs {', '.join(lacking)}, not in the wheelhouse ({house.root}): the "
                    "case without the overlay runs on it; add it with `patchlane wheelhouse"
                    f"{option}`")
        if skip is not None:
            rule, beyond_why, covered = RowRule.SKIPPED, None, None
        elif not entry.active:
            rule, beyond_why, covered = RowRule.REGRESSION_GUARD, None, None
        elif beyond:
            rule = RowRule.PAST_GATE_COVERED if covered_by else RowRule.PAST_GATE
            beyond_why, covered = beyond, covered_by
        else:
            rule, beyond_why, covered = RowRule.BOTH_WAYS, None, None
        rows.append(PlannedRow(entry.id, lane, size, rule, gate.found, skip,
                               beyond_why, covered))
    return rows


# -- running -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class SweepEvent:
    case_id: str
    state: CaseState
    done: int
    total: int
    outcome: RunOutcome | None = None


def run_sweep(
    registry: Registry,
    run: RunDir,
    *,
    jobs: int = 1,
    timeout: float = 600.0,
    env: Mapping[str, str] | None = None,
    on_event: Callable[[SweepEvent], None] | None = None,
    start: RankStart | None = None,
) -> list[VerdictRow]:
    """Run every queued case of ``run`` (a fresh plan or a resumed one) and return verdicts.
    ``start``: how each case's ranks start (:mod:`~patchlane.sweep.rank_start`; None:
    ``PATCHLANE_RANK_START``, fresh unless set).

    Ctrl-C (SIGINT) or SIGTERM, in the main thread: queued cases are cancelled, running ones
    stopped (each rank's session killed) and put back in the queue, the manifest records the
    interruption, and :class:`~patchlane.common.errors.SweepInterrupted` (or
    :class:`~patchlane.common.errors.SweepTerminated`) is raised; the caller writes the reports of
    what finished (:func:`verdicts`), and ``--resume`` runs the rest."""
    from .receipts import build_receipt

    header = run.manifest
    entries = {e.id: e for e in registry.entries}
    # The pool starts cases in submission order: the schedule's (longest first), also when
    # resuming; a manifest without one keeps manifest (registry) order.
    queued = dispatch_order(run.manifest, [cid for cid, _ in run.cases()
                                           if run.state(cid) is CaseState.QUEUED])
    total = len(run.manifest["cases"])
    done = total - len(queued)
    counter = threading.Lock()
    stop = threading.Event()

    def one(cid: str) -> None:
        nonlocal done
        if stop.is_set():  # picked up just as the sweep stopped: it stays queued
            return
        case = run.manifest["cases"][cid]
        entry = entries[case["entry_id"]]
        workdir = run.begin(cid)
        if on_event:
            on_event(SweepEvent(cid, CaseState.RUNNING, done, total))
        started = now()
        try:
            result: CaseResult | None = run_case(
                entry, Mode(case["mode"]), lane=parse_lane(case["lane"], cid),
                world_size=case["world_size"], timeout=timeout, workdir=workdir, env=env,
                flat=True, stop=stop, start=start)
        except CaseInterrupted:  # no result: back in the queue, for --resume
            result = None
        receipt = None if result is None else build_receipt(
            run_id=header["run_id"], case_id=cid, entry=entry, result=result, started=started,
            finished=now(), header=header)
        state = run.settle(cid, receipt)
        if result is None:
            return
        with counter:
            done += 1
            finished = done
        if on_event:
            on_event(SweepEvent(cid, state, finished, total, result.outcome))

    with stopping_signals() as caught, cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        pending = {pool.submit(one, cid) for cid in queued}
        try:
            while pending and caught.signum is None:
                finished, pending = cf.wait(pending, timeout=SIGNAL_POLL_SECONDS,
                                            return_when=cf.FIRST_EXCEPTION)
                for future in finished:
                    future.result()  # a case's own exception (a full disk) ends the sweep
        finally:
            if pending:  # stopped early (a signal, an exception): nothing more starts
                stop.set()
                pool.shutdown(wait=True, cancel_futures=True)
    if caught.signum is not None:
        run.mark_interrupted(signal_name(caught.signum))
        unfinished = run.manifest["interrupted"]["unfinished"]
        raise stopped(caught.signum, f"{total - unfinished} of {total} case(s) finished, "
                      f"{unfinished} left; finish it with `patchlane sweep --resume "
                      f"{run.path}`", "sweep")
    return verdicts(run)


UNFINISHED = "case did not finish (resume the run)"
"""The reason of a row whose cases did not all finish (a stopped or killed sweep)."""


def verdicts(run: RunDir) -> list[VerdictRow]:
    rows = []
    cases = dict(run.cases())
    planned: list[PlannedRow] = []
    for raw in run.manifest["rows"]:
        where = f"{run.path / 'manifest.json'}: rows"
        has_with = case_id(raw["entry_id"], parse_lane(raw["lane"], where), raw["world_size"],
                           Mode.WITH) in cases
        row = PlannedRow.from_manifest(raw, where, has_with)
        planned.append(row)
        out = VerdictRow(row.entry_id, row.lane, row.world_size, Verdict.SKIPPED,
                         row.skip or "", row.installed)
        if row.rule is not RowRule.SKIPPED:
            ids = {m: case_id(row.entry_id, row.lane, row.world_size, m) for m in row.modes}
            present = {m: cases[c] for m, c in ids.items() if c in cases}
            if len(present) < len(ids) or not all(CaseState(c["state"]).finished
                                                  for c in present.values()):
                out.verdict, out.reason = Verdict.ERROR, UNFINISHED
            else:
                out.receipts = {m.value: case["receipt"] for m, case in present.items()}
                # Each receipt is read once, here; the reports use what was read.
                out.read = {m.value: run.read_receipt(cid) for m, cid in ids.items()}
                receipt = out.read[Mode.WITHOUT.value]
                out.comparison_key = receipt["comparison_key"]
                dists = receipt["provenance"]["runtime"].get("distributions") or {}
                out.installed = dists.get(_distribution(receipt)) or out.installed
                # Shown only with an error verdict (the log of the case its reason names).
                tail = _failing_tail(out.read, present)
                out.verdict, out.reason = row.verdict(present)
                out.stderr_tail = tail if out.verdict is Verdict.ERROR else None
        rows.append(out)
    return _name_covering_verdicts(rows, planned)


def _name_covering_verdicts(rows: list[VerdictRow],
                            planned: Sequence[PlannedRow]) -> list[VerdictRow]:
    """A covered row's reason ends with what the covering entry's own row got in this run (on
    the same lane), or that it did not run here (``--only``, another shard)."""
    got: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        got.setdefault((r.entry_id, r.lane), []).append(r.verdict.value)
    for r, p in zip(rows, planned, strict=True):
        if r.verdict is Verdict.COVERED:
            other = str(p.covered_by)
            seen = sorted(set(got.get((other, r.lane), [])))
            r.reason += (f" {other} here: {', '.join(seen)}." if seen
                         else f" {other} did not run in this sweep.")
    return rows


def _failing_tail(read: Mapping[str, Mapping[str, Any]],
                  present: Mapping[Mode, Mapping[str, Any]]) -> str | None:
    # The case the reason names: without first, as in verdict_of. Receipts from before the
    # field existed have no tail; the reason alone stands then.
    mode = next((m for m in (Mode.WITHOUT, Mode.WITH)
                 if m in present and CaseView.of(present[m]).outcome is RunOutcome.ERROR), None)
    if mode is None:
        return None
    tail = read[mode.value].get("stderr_tail")
    return str(tail) if tail else None


def _distribution(receipt: Mapping[str, Any]) -> str | None:
    record = receipt["provenance"].get("record") or {}
    return record.get("distribution")


def new_run(registry: Registry, path: Path, *, lanes: Iterable[Lane] | None,
            only: Iterable[str] | None, shard: Shard, header: dict[str, Any],
            history: Path | None = None, schedule: str = DEFAULT_POLICY) -> RunDir:
    """Plan a sweep into a fresh run directory: rows, then both modes of each runnable row,
    then the order to start them in (``schedule``: longest first from the durations of earlier
    runs under ``history``, see :mod:`patchlane.sweep.schedule`; none read when it is
    None)."""
    asked: list[Lane] | None = list(lanes) if lanes is not None else None
    gpus = cuda_devices() if asked is None or "cuda" in asked else 0
    wanted: list[Lane] = asked if asked else (["cpu", "cuda"] if gpus else ["cpu"])
    chosen = set(only) if only else None
    run = RunDir.create(path, {**header, "lanes": wanted, "shard": str(shard),
                               "cuda_devices": gpus,
                               "plan": plan_record(registry, wanted, chosen, shard)})
    rows = plan(registry, wanted, gpus, chosen, shard)
    run.manifest["rows"] = [row.as_dict() for row in rows]
    run.save()
    # Each row's rule says which modes run: both ways, or without the overlay only (past the
    # gate, where the overlay never applies; a retired entry's regression guard).
    for row in rows:
        for mode in row.modes:
            cid = case_id(row.entry_id, row.lane, row.world_size, mode)
            run.add_case(cid, {"entry_id": row.entry_id, "lane": row.lane,
                               "world_size": row.world_size, "mode": mode.value})
    run.manifest["schedule"] = plan_schedule(_releases(registry, run), history=history,
                                             exclude=path, policy=schedule)
    run.save()
    return run


def _releases(registry: Registry, run: RunDir) -> list[tuple[str, dict[str, Any] | None]]:
    """Each case with the release it will run on, as its receipt's
    ``comparison_key.distributions`` will name it (the target's and torch's versions, resolved
    as the rank resolves them, without importing either)."""
    dist = {e.id: e.target.distribution for e in registry.entries}
    installed = {row["entry_id"]: row.get("installed") for row in run.manifest["rows"]}
    torch: str | None = None
    if run.manifest["cases"]:
        torch = resolve_version("torch")[0]
    out: list[tuple[str, dict[str, Any] | None]] = []
    for cid, case in run.cases():
        entry_id = case["entry_id"]
        release = {dist[entry_id]: installed.get(entry_id), "torch": torch}
        out.append((cid, dict(sorted(release.items()))))
    return out


def sweep(registry: Registry, *, lanes: Iterable[Lane] | None = None,
          only: Iterable[str] | None = None, timeout: float = 600.0, jobs: int = 1,
          run_dir: Path | None = None) -> list[VerdictRow]:
    """Convenience for tests and the pytest plugin: plan + run into a (temporary) run dir."""
    import tempfile

    path = run_dir or Path(tempfile.mkdtemp(prefix="patchlane-sweep-"))
    run = new_run(registry, path, lanes=list(lanes) if lanes else None, only=only,
                  shard=Shard(1, 1), header={"run_id": path.name})
    return run_sweep(registry, run, jobs=jobs, timeout=timeout)

"""Training-run integration: every rank runs the same patch set, and every checkpoint says which.

:func:`verify_ranks` gathers each rank's patch set (patchlane version, registry digest, and per
entry: enabled or not, installed target version, gate, decision, fingerprint) and fails loudly
on *every* rank, naming the ranks and entries that differ, before the first training collective
can hang or silently diverge. It runs by itself right after ``torch.distributed
.init_process_group`` (turn off with ``PATCHLANE_VERIFY_RANKS=0``).

A decision still ``pending`` on a rank (its target not imported yet) is compared only on what
is already known there (enabled, installed version, gate), so import order cannot cause a false
alarm.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import platform
import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from .. import startup
from .._version import __version__
from ..common.errors import ControlsError, PatchlaneError, exit_if_uncaught
from ..common.exit_codes import ExitCode
from ..deciding.audit import Outcome
from ..deciding.controls import Controls

log = logging.getLogger(__name__)

__all__ = ["RankMismatchError", "compare_patch_sets", "local_patch_set", "patch_set_hash",
           "run_stamp", "verify_ranks"]

RUN_STAMP_SCHEMA = 1


class RankMismatchError(PatchlaneError):
    """Ranks of one job run different patch sets."""

    exit_code = ExitCode.RANKS_DISAGREE

    def __init__(self, rank: int, differences: Sequence[str]) -> None:
        self.rank = rank
        self.differences = list(differences)
        lines = "\n  ".join(self.differences)
        super().__init__(
            f"rank {rank}: ranks of this job run different patch sets:\n  {lines}\n"
            "Fix: start every rank with the same environment (PATCHLANE_DISABLE/ONLY/REGISTRY) "
            "and the same installed releases; `patchlane status` on each node shows its set")


def local_patch_set() -> dict[str, Any]:
    decider = startup.current()
    latest = decider.audit.latest()
    entries: dict[str, dict[str, Any]] = {}
    for entry in decider.registry.entries:
        decision = latest.get(entry.id)
        gate = entry.read_gate() if entry.target.distribution else None
        pending = decision is None or decision.outcome is Outcome.PENDING
        entries[entry.id] = {
            "status": entry.status.value,
            "enabled": decider.left_out(entry.id) is None,
            "installed": gate.found if gate else None,
            "gate_open": gate.open if gate else None,
            "decision": None if pending or decision is None else decision.outcome.value,
            # checked now, not read from the audit: a rank whose overlay something replaced
            # since (a lookup no longer reaches it) disagrees with the ranks where it runs
            "applied": decider.is_applied(entry.id),
            "fingerprint": None if decision is None else decision.fingerprint_found,
            "depends_on": list(entry.depends_on),
        }
    error = startup.startup_error()
    return {"patchlane": __version__, "registry_digest": decider.registry.digest,
            # a rank that read no settings (or no registry) applied nothing: named as such
            "startup_error": None if error is None else f"{type(error).__name__}: {error}",
            "entries": entries}


def patch_set_hash(record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def _groups(values: dict[int, Any]) -> str:
    by: dict[str, list[int]] = defaultdict(list)
    for rank, value in sorted(values.items()):
        by[json.dumps(value)].append(rank)
    return "; ".join(f"ranks {_span(r)} = {v}" for v, r in by.items())


def _span(ranks: list[int]) -> str:
    return ",".join(map(str, ranks))


def compare_patch_sets(records: Sequence[dict[str, Any]]) -> list[str]:
    """Human-readable differences between the ranks' records (empty when they agree)."""
    problems: list[str] = []
    for key in ("patchlane", "startup_error", "registry_digest"):
        values = {r: rec.get(key) for r, rec in enumerate(records)}
        if len(set(map(json.dumps, values.values()))) > 1:
            problems.append(f"{key}: {_groups(values)}")
    ids = sorted({i for rec in records for i in rec.get("entries", {})})
    differing: set[str] = set()
    per_entry: dict[str, list[str]] = {}
    for entry_id in ids:
        for field in ("status", "enabled", "installed", "gate_open", "decision", "fingerprint",
                      "applied"):
            values = {r: rec.get("entries", {}).get(entry_id, {}).get(field, "<absent>")
                      for r, rec in enumerate(records)}
            if field in ("decision", "fingerprint"):
                # only ranks that already decided can disagree on the decision
                values = {r: v for r, v in values.items() if v is not None}
            if field == "applied":
                # nor on whether the overlay is on the call path (an older patchlane's record
                # has no such field: not compared)
                decided = {r for r, rec in enumerate(records)
                           if rec.get("entries", {}).get(entry_id, {}).get("decision")}
                values = {r: v for r, v in values.items() if r in decided and v != "<absent>"}
            if len(set(map(json.dumps, values.values()))) > 1:
                differing.add(entry_id)
                per_entry.setdefault(entry_id, []).append(
                    f"entry {entry_id} {field}: {_groups(values)}")
    for entry_id in ids:
        lines = per_entry.get(entry_id, [])
        # An entry that depends_on a differing one differs because of it: say so, so the
        # reader fixes the cause (the dependency's environment), not the symptom.
        causes = sorted({dep for rec in records
                         for dep in rec.get("entries", {}).get(entry_id, {}).get("depends_on", [])
                         if dep in differing})
        if lines and causes:
            lines = [f"{line} (follows from {', '.join(causes)}, which it depends on)"
                     for line in lines]
        problems.extend(lines)
    return problems


def verify_ranks(group: Any = None) -> str:
    """Compare this rank's patch set with every other rank's; raise on any difference.

    Returns the patch-set hash all ranks agree on. A collective: every rank must call it."""
    import torch.distributed as dist

    record = local_patch_set()
    if not dist.is_available() or not dist.is_initialized():
        return patch_set_hash(record)
    records: list[Any] = [None] * dist.get_world_size(group)
    dist.all_gather_object(records, record, group=group)
    problems = compare_patch_sets(records)
    if problems:
        raise RankMismatchError(dist.get_rank(group), problems)
    return patch_set_hash(record)


def run_stamp() -> dict[str, Any]:
    """The run stamp: a small JSON-serialisable record of this process's patch set, meant for
    every checkpoint: months later it answers "which runs had patch X?"."""
    from ..common.redaction import environment_overlay

    decider = startup.current()
    record = local_patch_set()
    torch = sys.modules.get("torch")
    versions: dict[str, Any] = {"python": platform.python_version(),
                                "torch": str(torch.__version__) if torch else None}
    entries = []
    for entry in decider.registry.entries:
        decision = decider.audit.latest().get(entry.id)
        versions.setdefault(entry.target.distribution or "-", record["entries"][entry.id]
                            ["installed"])
        entries.append({
            "id": entry.id, "kind": entry.kind.value, "status": entry.status.value,
            "outcome": decision.outcome.value if decision else None,
            "reason": decision.reason if decision else None,
            "installed": record["entries"][entry.id]["installed"],
            "fingerprint": decision.fingerprint_found if decision else None,
            "applied": record["entries"][entry.id]["applied"],
            "hits": decider.audit.hits[entry.id],
            "upstream": entry.upstream.pr or entry.upstream.issue,
        })
    versions.pop("-", None)
    return {
        "schema_version": RUN_STAMP_SCHEMA,
        "kind": "patchlane.run_stamp",
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "patchlane": __version__,
        "registry_digest": decider.registry.digest,
        "rejected_registries": [{"path": e.path, "error": str(e)}
                                for e in decider.registry.rejected],
        "patch_set": patch_set_hash(record),
        "strict": decider.controls.strict,
        "entries": entries,
        "versions": versions,
        "host": platform.node(),
        "environment": environment_overlay(),
        "summary": decider.summary(),
    }


def _wrap_init_process_group(module: Any) -> None:
    """Post-import hook on torch.distributed: verify ranks right after the group exists."""
    try:  # one parser for every switch (deciding/controls.py)
        controls = Controls.from_env()
    except ControlsError:  # this rank applied nothing; it still joins the check (a collective)
        controls = Controls.unreadable()
    if not controls.verify_ranks:
        return
    _wrap_where_called(module)
    # The same function under the names other modules call it by: init_device_mesh (FSDP2,
    # torchtitan) calls device_mesh's own global, taken from distributed_c10d at import, and a
    # script may import it from there too. Wrapped only torch.distributed's, those jobs ran
    # with ranks that disagreed and no check.
    for name in _ALSO_CALLED_FROM:
        if name in sys.modules:
            _wrap_where_called(sys.modules[name])
        else:
            from .. import import_hook

            import_hook.when_imported(name, _wrap_where_called)


_ALSO_CALLED_FROM = ("torch.distributed.distributed_c10d", "torch.distributed.device_mesh")


def _destroy_quietly() -> None:
    """Destroy the process groups (``destroy_process_group()`` with no group: the default one
    this init made, and any the job made before it), never masking the rank mismatch being
    raised."""
    import torch.distributed as dist

    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:  # the mismatch is the error to report; this is only said
        log.warning("after the rank mismatch, the process group could not be destroyed: %s",
                    exc)


def _wrap_where_called(module: Any) -> None:
    """``module.init_process_group`` wrapped to verify ranks once the group exists (once)."""
    import wrapt

    current = getattr(module, "init_process_group", None)
    if current is None or getattr(getattr(current, "_self_wrapper", None),
                                  "__patchlane_rank_check__", False):
        return  # already wrapped (a reload of torch.distributed, or a second decider)

    def after_init(wrapped: Any, instance: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> Any:
        result = wrapped(*args, **kwargs)
        try:
            verify_ranks(kwargs.get("group"))  # init's own kwargs never name a group: default
        except RankMismatchError as error:
            # The group this call made is taken down before the error leaves it, as a failed
            # init leaves none. Left to the interpreter's exit, gloo's threads were at times
            # destroyed unjoined and the rank died by SIGABRT ("terminate called without an
            # active exception", exit -6), not with the table's exit 8. Every rank got the
            # same answer from the all-gather, so no rank still waits on this group.
            _destroy_quietly()
            # raised in the job's own init_process_group: uncaught (a script under `patchlane
            # run`), one line and exit 8 as the table says, not a traceback and exit 1
            exit_if_uncaught(error, "`torch.distributed.init_process_group`")
            raise
        return result

    after_init.__patchlane_rank_check__ = True  # type: ignore[attr-defined]
    wrapt.wrap_function_wrapper(module, "init_process_group", after_init)


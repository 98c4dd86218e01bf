"""patchlane: declared, gated, proven and tracked local fixes for upstream training-stack bugs.

``import patchlane`` at the top of a training script reads the registry and registers
post-import hooks; overlays are applied lazily when their target module is imported. It never
imports torch or megatron itself.
"""

from __future__ import annotations

from typing import Any

from . import startup
from ._version import __version__
from .audit import Decision, Outcome
from .errors import (
    DriftError,
    OverlayError,
    PatchlaneError,
    RegistryError,
    ReproducerError,
    StrictModeError,
)

__all__ = [
    "Decision",
    "DriftError",
    "Outcome",
    "OverlayError",
    "PatchlaneError",
    "RegistryError",
    "ReproducerError",
    "StrictModeError",
    "__version__",
    "apply",
    "check_config",
    "hit_path",
    "hits",
    "report",
    "revert",
    "run_receipt",
    "verify_ranks",
]


def apply() -> None:
    """Re-walk the registry: idempotent; re-applies overlays lost to a reload or a revert."""
    startup.current().apply()


def revert(entry_id: str) -> Decision:
    """Restore the original target of ``entry_id`` in this process."""
    return startup.current().revert(entry_id)


def hits(entry_id: str, path: str | None = None) -> int:
    """How many times the overlay of ``entry_id`` ran in this process; with ``path``, how many
    of those calls took that branch (as the overlay records with :func:`hit_path`)."""
    audit = startup.current().audit
    return audit.hits[entry_id] if path is None else audit.paths[(entry_id, path)]


def hit_path(entry_id: str, path: str) -> None:
    """Called by an overlay to record which branch a call took (e.g. "fused" vs "routed")."""
    startup.current().audit.paths[(entry_id, path)] += 1


def verify_ranks(group: Any = None) -> str:
    """Compare the patch set across all ranks (a collective); raises on any difference.
    Runs by itself after ``torch.distributed.init_process_group`` unless
    ``PATCHLANE_VERIFY_RANKS=0``."""
    from .training.ranks import verify_ranks as _verify

    return _verify(group)


def run_receipt() -> dict[str, Any]:
    """A JSON-serialisable record of this process's patch set, to store with checkpoints."""
    from .training.ranks import run_receipt as _receipt

    return _receipt()


def check_config(config: Any) -> list[Any]:
    """Run every compat gate on a run's configuration (a Megatron args namespace or a
    TransformerConfig); raises :class:`patchlane.ledger.CompatGateError` naming the upstream
    issue when a known-bad combination is configured. A gate disabled by PATCHLANE_DISABLE /
    PATCHLANE_ONLY is skipped (its result says so). Returns the per-gate results."""
    from .ledger import check_config as _check

    lane = startup.current()
    return _check(config, list(lane.registry.entries), lane.controls)


def report() -> dict[str, Any]:
    """Everything decided in this process, as JSON-ready data."""
    lane = startup.current()
    latest = lane.audit.latest()
    error = startup.startup_error()
    entries = []
    for entry in lane.registry.entries:
        decision = latest.get(entry.id)
        entries.append({
            "id": entry.id,
            "kind": entry.kind.value,
            "status": entry.status.value,
            "target": entry.target.object_path or entry.target.distribution,
            "decision": decision.as_dict() if decision else None,
            "applied": lane.is_applied(entry.id),
            "hits": lane.audit.hits[entry.id],
            "paths": {p: n for (e, p), n in lane.audit.paths.items() if e == entry.id},
        })
    return {
        "patchlane": __version__,
        "strict": lane.controls.strict,
        "registries": [str(p) for p in lane.registry.sources],
        "registry_digest": lane.registry.digest,
        "startup_error": str(error) if error else None,
        # PATCHLANE_DISABLE / PATCHLANE_ONLY ids that name no loaded entry (a typo, or an id
        # of another registry set): they changed nothing here.
        "unknown_control_ids": sorted(lane.unknown_control_ids),
        "entries": entries,
        "history": [d.as_dict() for d in lane.audit.history()],
        "summary": lane.summary(),
    }


startup.start()

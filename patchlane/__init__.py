"""patchlane: declared, gated, proven and tracked local fixes for upstream training-stack bugs.

``import patchlane`` at the top of a training script reads the registry and registers
post-import hooks; overlays are applied lazily when their target module is imported. It never
imports torch or megatron itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import startup
from ._version import __version__
from .audit import Decision, Outcome
from .errors import (
    ControlsError,
    DriftError,
    OverlayError,
    PatchlaneError,
    RegistryError,
    ReproducerError,
    StrictModeError,
    StrictOverlayError,
    UnknownEntryError,
    UsageError,
)
from .loading import entry_id

if TYPE_CHECKING:
    from .ledger import CompatGateError, LedgerError
    from .reporting import EntryReport, Report
    from .training.ranks import RankMismatchError

__all__ = [
    "CompatGateError",
    "ControlsError",
    "Decision",
    "DriftError",
    "EntryReport",
    "LedgerError",
    "Outcome",
    "OverlayError",
    "PatchlaneError",
    "RankMismatchError",
    "RegistryError",
    "Report",
    "ReproducerError",
    "StrictModeError",
    "StrictOverlayError",
    "UnknownEntryError",
    "UsageError",
    "__version__",
    "apply",
    "check_config",
    "entry_id",
    "hit_path",
    "hits",
    "report",
    "revert",
    "run_receipt",
    "verify_ranks",
]

# Names whose modules `import patchlane` does not load: errors of public calls (the ledger
# pulls in json; the rank check hashlib, json and platform) and the report's TypedDicts (only
# a type checker or report() needs them). Imported on first access instead, so naming them
# costs nothing at import time.
_LAZY = {
    "CompatGateError": "ledger",
    "EntryReport": "reporting",
    "LedgerError": "ledger",
    "RankMismatchError": "training.ranks",
    "Report": "reporting",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'patchlane' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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

    decider = startup.current()
    return _check(config, list(decider.registry.entries), decider.controls)


def report() -> Report:
    """Everything decided in this process, as JSON-ready data (shape:
    :class:`patchlane.reporting.Report`)."""
    from .reporting import build_report

    return build_report(startup.current(), startup.startup_error())


try:
    startup.start()
except PatchlaneError as _error:  # strict mode: uncaught, one line and the error's exit code
    startup.exit_if_uncaught(_error)
    raise

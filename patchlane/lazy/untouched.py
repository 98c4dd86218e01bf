"""What the startup walk records for an entry before its target module is imported: one rule
for :meth:`patchlane.deciding.decider.Decider.start` and for a process whose startup never ran,
which says the same without loading it (the line each rank of ``patchlane run`` prints at exit).

Outcomes are the values of :class:`patchlane.deciding.audit.Outcome`, as text: that enum's module is
not imported here.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from .watchlist import RowTuple

__all__ = ["CHECKED_ON_DEMAND", "RETIRED_REASON", "at_start", "report"]

RETIRED_REASON = "status: retired (reproducer kept as a guard)"
CHECKED_ON_DEMAND = "checked by patchlane.check_config(config)"


def at_start(decided_by: str, active: bool, disabled: str | None,
             waiting: str) -> tuple[str, str]:
    """``(outcome, reason)`` the startup walk records for an entry while its module is not
    imported; ``decided_by`` is how its kind is decided (its startup row says:
    :class:`patchlane.registry.kinds.DecidedBy`, as text), ``disabled`` why PATCHLANE_DISABLE /
    PATCHLANE_ONLY leave it out, if they do. A disabled entry that wraps still waits: its walk
    reads the gate on import, so its audit names the installed release."""
    if not active:
        return "retired", RETIRED_REASON
    if disabled is not None and decided_by != "wrap":
        return "skipped: disabled", disabled
    if decided_by == "on demand":
        return "ledger: on demand", CHECKED_ON_DEMAND
    return "pending", waiting


def report(rows: "Iterable[RowTuple]",
           disabled: "Callable[[str], str | None]") -> dict[str, object]:
    """The part of :func:`patchlane.report` a rank's exit line reads, for a process that never
    ran its startup: every entry as :func:`at_start` records it, no hits, no evidence."""
    entries = []
    for entry_id, kind, active, _dist, _module, _modules, waiting, _applies, decided_by in rows:
        outcome, reason = at_start(decided_by, active, disabled(entry_id), waiting)
        entries.append({"id": entry_id, "kind": kind,
                        "decision": {"entry_id": entry_id, "outcome": outcome, "reason": reason},
                        "applied": False, "hits": 0, "paths": {}, "path_reasons": {},
                        "evidence": None})
    return {"entries": entries, "startup_error": None, "rejected_registries": [],
            "evidence": None}

"""The audit: every decision the startup walk takes, with its reason, and per-overlay hit counts.

Decisions are appended, never rewritten: re-deciding an entry (after ``revert``, a reload or
``apply()``) adds a record, and :meth:`AuditLog.latest` answers "what holds now" from a dict
kept up to date on every record (never by replaying the history: that made deciding n entries
quadratic in n).
"""

from __future__ import annotations

import datetime as _dt
import enum
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypedDict

__all__ = ["AuditLog", "Decision", "DecisionRecord", "Outcome"]


class Outcome(str, enum.Enum):
    PENDING = "pending"
    """Hook registered; the target module has not been imported yet."""
    APPLIED = "applied"
    SKIPPED_GATE = "skipped: gate"
    SKIPPED_DISABLED = "skipped: disabled"
    SKIPPED_DEPENDENCY = "skipped: dependency"
    """A source patch whose ``depends_on`` entry is not applied here (though its gate admits
    this release): what this entry fixes is not there to fix."""
    SKIPPED_NOT_APPLICABLE = "skipped: not applicable"
    """A ledger entry whose ``when:`` condition does not hold in this process (a pin for
    Triton's CPU interpreter when triton is imported without ``TRITON_INTERPRET=1``)."""
    UPSTREAM_FIXED = "upstream-fixed"
    REFUSED_DRIFT = "refused: drift"
    REFUSED_EVIDENCE = "refused: evidence"
    """``PATCHLANE_REQUIRE_EVIDENCE=1`` and no passing run proved the overlay on this stack:
    not applied (patchlane.deciding.proof says what was found instead)."""
    FAILED_ERROR = "failed: error"
    REVERTED = "reverted"
    RETIRED = "retired"
    LEDGER = "ledger: on demand"
    """A compat gate: checked when the run calls ``patchlane.check_config``."""
    LEDGER_OK = "ledger: ok"
    LEDGER_VIOLATION = "ledger: violation"
    CONFIG_APPLIED = "config: applied"

    @property
    def is_problem(self) -> bool:
        # A gate that excludes the installed release is the registry working as declared
        # (one registry carries entries for several releases): not a problem, even in strict
        # mode. A gate that cannot be evaluated at all is recorded as failed: error instead.
        return self in (Outcome.REFUSED_DRIFT, Outcome.REFUSED_EVIDENCE, Outcome.FAILED_ERROR,
                        Outcome.LEDGER_VIOLATION)


# :meth:`Decision.as_dict`: one decision as JSON-ready data, keys in field order. The functional
# form with real types: under `from __future__ import annotations` the class form compiles every
# field's annotation string at `import patchlane`, which this module is part of.
DecisionRecord = TypedDict("DecisionRecord", {  # noqa: UP013 - the cost above
    "entry_id": str,
    "outcome": str,
    "reason": str,
    "distribution": str | None,
    "installed": str | None,
    "applies_to": str | None,
    "fingerprint_expected": list[str],
    "fingerprint_found": str | None,
    "at": str,
    "version_source": str | None,
})


@dataclass(frozen=True)
class Decision:
    entry_id: str
    outcome: Outcome
    reason: str
    distribution: str | None = None
    installed: str | None = None
    applies_to: str | None = None
    fingerprint_expected: tuple[str, ...] = ()
    fingerprint_found: str | None = None
    at: str = ""
    version_source: str | None = None
    """Where ``installed`` came from: ``metadata`` or ``source tree (<file>)``."""

    def as_dict(self) -> DecisionRecord:
        return {"entry_id": self.entry_id, "outcome": self.outcome.value, "reason": self.reason,
                "distribution": self.distribution, "installed": self.installed,
                "applies_to": self.applies_to,
                "fingerprint_expected": list(self.fingerprint_expected),
                "fingerprint_found": self.fingerprint_found, "at": self.at,
                "version_source": self.version_source}


class AuditLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decisions: list[Decision] = []
        self._latest: dict[str, Decision] = {}
        self._view = MappingProxyType(self._latest)
        self._pending: set[str] = set()
        # A Counter increment is one bytecode-level dict update under the GIL; the hot path
        # of every overlay call takes no lock.
        self.hits: Counter[str] = Counter()
        self.paths: Counter[tuple[str, str]] = Counter()
        self.path_reasons: dict[tuple[str, str], str] = {}
        """Why each branch was taken, as the overlay said at its latest call."""

    @staticmethod
    def stamp() -> str:
        """The ``at`` of a decision taken now (UTC, milliseconds)."""
        return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")

    def record(self, decision: Decision) -> Decision:
        if not decision.at:
            decision = Decision(**{**decision.__dict__, "at": self.stamp()})
        self.record_many((decision,))
        return decision

    def record_many(self, decisions: Iterable[Decision]) -> None:
        """Record already-stamped decisions in order, under one lock: the startup walk's one
        record per entry costs a list append and two dict/set updates each, nothing more."""
        with self._lock:
            for decision in decisions:
                self._decisions.append(decision)
                self._latest[decision.entry_id] = decision
                if decision.outcome is Outcome.PENDING:
                    self._pending.add(decision.entry_id)
                else:
                    self._pending.discard(decision.entry_id)

    def history(self) -> list[Decision]:
        with self._lock:
            return list(self._decisions)

    def latest(self) -> MappingProxyType[str, Decision]:
        """The decision that holds now, per entry id: a live read-only view, O(1). Iterate a
        ``.copy()`` (one atomic C call) where another thread may record a first decision."""
        return self._view

    def get(self, entry_id: str) -> Decision | None:
        """The decision that holds now for ``entry_id`` (None before the first)."""
        return self._latest.get(entry_id)

    def counts(self) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        """Copies of :attr:`hits` and :attr:`paths` to iterate while overlays keep counting.

        Overlays count without a lock (the hot path), so a first hit or a first branch adds a
        key while a reader may be walking the counter ("dictionary changed size during
        iteration"). ``dict.copy`` is one C call that the GIL does not interrupt; a lock would
        cost every overlay call instead."""
        return dict.copy(self.hits), dict.copy(self.paths)

    def pending(self) -> int:
        """How many entries are still ``pending``: the decider is settled when none is."""
        return len(self._pending)

    def clear(self) -> None:
        with self._lock:
            self._decisions.clear()
            self._latest.clear()
            self._pending.clear()
            self.hits.clear()
            self.paths.clear()
            self.path_reasons.clear()

"""The audit: every decision the startup walk takes, with its reason, and per-overlay hit counts.

Decisions are appended, never rewritten: re-deciding an entry (after ``revert``, a reload or
``apply()``) adds a record, and :meth:`AuditLog.latest` answers "what holds now".
"""

from __future__ import annotations

import datetime as _dt
import enum
import threading
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["AuditLog", "Decision", "Outcome"]


class Outcome(str, enum.Enum):
    PENDING = "pending"
    """Hook registered; the target module has not been imported yet."""
    APPLIED = "applied"
    SKIPPED_GATE = "skipped: gate"
    SKIPPED_DISABLED = "skipped: disabled"
    UPSTREAM_FIXED = "upstream-fixed"
    REFUSED_DRIFT = "refused: drift"
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
        return self in (Outcome.REFUSED_DRIFT, Outcome.FAILED_ERROR, Outcome.LEDGER_VIOLATION)


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

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["fingerprint_expected"] = list(self.fingerprint_expected)
        return data


class AuditLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decisions: list[Decision] = []
        # A Counter increment is one bytecode-level dict update under the GIL; the hot path
        # of every overlay call takes no lock.
        self.hits: Counter[str] = Counter()
        self.paths: Counter[tuple[str, str]] = Counter()

    def record(self, decision: Decision) -> Decision:
        if not decision.at:
            stamp = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")
            decision = Decision(**{**decision.__dict__, "at": stamp})
        with self._lock:
            self._decisions.append(decision)
        return decision

    def history(self) -> list[Decision]:
        with self._lock:
            return list(self._decisions)

    def latest(self) -> dict[str, Decision]:
        out: dict[str, Decision] = {}
        for decision in self.history():
            out[decision.entry_id] = decision
        return out

    def clear(self) -> None:
        with self._lock:
            self._decisions.clear()
            self.hits.clear()
            self.paths.clear()

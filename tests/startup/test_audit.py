"""The audit log answers "what holds now" from a maintained dict, never by replaying history."""

from __future__ import annotations

import pytest

from patchlane.deciding.audit import AuditLog, Decision, Outcome


def test_latest_and_pending_follow_every_record(monkeypatch: pytest.MonkeyPatch) -> None:
    audit = AuditLog()
    audit.record_many([Decision("a", Outcome.PENDING, "waiting", at="t0"),
                       Decision("b", Outcome.PENDING, "waiting", at="t0")])
    assert audit.pending() == 2
    applied = audit.record(Decision("a", Outcome.APPLIED, "ok"))
    assert applied.at  # stamped when recorded without one
    # deciding n entries used to replay the whole history per decision (quadratic): now the
    # answers never touch it
    monkeypatch.setattr(audit, "history", lambda: pytest.fail("history replayed"))
    latest = audit.latest()
    assert latest["a"] is applied and latest["b"].outcome is Outcome.PENDING
    assert audit.get("a") is applied and audit.get("nope") is None
    assert audit.pending() == 1
    audit.record(Decision("b", Outcome.SKIPPED_DISABLED, "listed in PATCHLANE_DISABLE"))
    assert audit.pending() == 0 and latest["b"].outcome is Outcome.SKIPPED_DISABLED  # live view
    with pytest.raises(TypeError):
        latest["a"] = applied  # type: ignore[index]  # read-only: only record() changes it


def test_history_keeps_every_record_and_clear_forgets_all() -> None:
    audit = AuditLog()
    for outcome in (Outcome.PENDING, Outcome.APPLIED, Outcome.REVERTED):
        audit.record(Decision("a", outcome, outcome.value))
    assert [d.outcome for d in audit.history()] == [Outcome.PENDING, Outcome.APPLIED,
                                                     Outcome.REVERTED]
    audit.clear()
    assert audit.history() == [] and dict(audit.latest()) == {} and audit.pending() == 0

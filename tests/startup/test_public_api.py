"""The top-level package: every error a public call raises is importable from it (the heavy
ones lazily: tests/cli/test_cli.py checks what `import patchlane` loads), and
``patchlane.report()`` has the typed shape it declares."""

from __future__ import annotations

import dataclasses
import json
from typing import get_type_hints

import pytest

import patchlane
from patchlane.audit import Decision, DecisionRecord, Outcome
from patchlane.reporting import EntryReport, Report, build_report

from ..conftest import FakeTarget


def test_every_name_in_all_resolves_and_errors_come_from_their_modules() -> None:
    from patchlane import errors, ledger, loading
    from patchlane.training import ranks

    for name in patchlane.__all__:
        assert getattr(patchlane, name) is not None, name
    assert patchlane.LedgerError is ledger.LedgerError
    assert patchlane.CompatGateError is ledger.CompatGateError
    assert patchlane.RankMismatchError is ranks.RankMismatchError
    assert patchlane.UnknownEntryError is errors.UnknownEntryError
    assert patchlane.entry_id is loading.entry_id
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        patchlane.NoSuchError  # noqa: B018


def test_the_report_has_its_declared_shape(fake_target: FakeTarget) -> None:
    lane = fake_target.lane()
    fake_target.import_target().Greeter().greet("x")
    report = build_report(lane)
    assert list(report) == list(get_type_hints(Report))
    (entry,) = report["entries"]
    assert list(entry) == list(get_type_hints(EntryReport))
    decision = entry["decision"]
    assert decision is not None and decision["outcome"] == Outcome.APPLIED.value
    assert entry["hits"] == 1 and entry["applied"] is True
    json.dumps(report)  # JSON-ready as it is


def test_a_decision_record_keeps_the_field_order_and_values() -> None:
    decision = Decision("x", Outcome.REFUSED_DRIFT, "why", distribution="d", installed="1.0",
                        applies_to=">=1", fingerprint_expected=("a", "b"),
                        fingerprint_found="c", at="now", version_source="source tree (f.py)")
    record = decision.as_dict()
    assert list(record) == [f.name for f in dataclasses.fields(Decision)]
    assert list(record) == list(get_type_hints(DecisionRecord))
    assert record == {**dataclasses.asdict(decision), "outcome": "refused: drift",
                      "fingerprint_expected": ["a", "b"]}

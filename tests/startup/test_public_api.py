"""The top-level package: every error a public call raises is importable from it (the heavy
ones lazily: tests/cli/test_cli.py checks what `import patchlane` loads), and
``patchlane.report()`` has the typed shape it declares."""

from __future__ import annotations

import dataclasses
import json
from typing import get_type_hints

import pytest

import patchlane
from patchlane.deciding.audit import Decision, DecisionRecord, Outcome
from patchlane.deciding.reporting import EntryReport, Report, build_report

from ..conftest import FakeTarget


def test_every_name_in_all_resolves_and_errors_come_from_their_modules() -> None:
    from patchlane import loading
    from patchlane.common import errors
    from patchlane.deciding import ledger
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
    decider = fake_target.decider()
    fake_target.import_target().Greeter().greet("x")
    report = build_report(decider)
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


def test_the_report_reads_hits_while_other_threads_record_them(fake_target: FakeTarget) -> None:
    # `patchlane run --reports` builds the report at exit while data-loader threads may still
    # call an overlay that records its branch: each new branch adds a key to the counter.
    import sys
    import threading

    decider = fake_target.decider()
    fake_target.import_target()
    stop = threading.Event()

    def record() -> None:
        # Keys come and go (a bounded set, so the copies stay small): each adds or removes one.
        i = 0
        while not stop.is_set():
            n = i % 1024
            key = (fake_target.entry_id, f"branch {n}")
            if i % 2048 < 1024:
                decider.audit.paths[key] += 1
                decider.audit.hits[f"other {n}"] += 1
            else:
                del decider.audit.paths[key], decider.audit.hits[f"other {n}"]
            i += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: mid-iteration, as a busy job would
    thread = threading.Thread(target=record)
    thread.start()
    try:
        reports = [build_report(decider) for _ in range(1000)]
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert len(reports) == 1000

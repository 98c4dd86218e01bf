"""The run directory without running anything: the manifest's case states, receipts that
validate against the schema (and a clear error where jsonschema is missing), and reports built
from verdict rows. Every file is written through patchlane.common.files: fsynced, directory too, and
no temp file left behind."""

from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from patchlane.common.errors import PatchlaneError
from patchlane.registry import load_registries
from patchlane.runs.manifest import CaseState, RunDir, case_id
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import VerdictRow, verdicts
from patchlane.sweep.receipts import SchemaValidatorMissing, build_receipt, validate
from patchlane.sweep.reports import write_reports
from patchlane.sweep.reproduce import CaseResult, Mode, RunOutcome

from ..conftest import FakeTarget


@pytest.fixture
def fsynced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The paths os.fsync was called on (files by their temp name, directories as they are)."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    yield seen


def no_temp_files(root: Path) -> None:
    left = [p for p in root.rglob("*") if p.name.endswith(".tmp")]
    assert left == [], left


def test_case_states_move_through_the_manifest(tmp_path: Path, fsynced: list[str]) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    cid = case_id("fake_entry", "cpu", 2, Mode.WITHOUT)
    assert cid == "fake_entry--cpu--ws2--without"
    run.add_case(cid, {"entry_id": "fake_entry", "lane": "cpu", "world_size": 2,
                       "mode": Mode.WITHOUT.value})
    assert run.state(cid) is CaseState.QUEUED
    run.transition(cid, CaseState.RUNNING)
    assert run.state(cid) is CaseState.RUNNING and not run.state(cid).finished
    run.transition(cid, CaseState.FAILED, outcome=RunOutcome.FAIL.value)
    reopened = RunDir.open(run.path)
    assert reopened.state(cid) is CaseState.FAILED and reopened.state(cid).finished
    case = reopened.manifest["cases"][cid]
    assert (case["state"], case["attempts"], case["outcome"]) == ("failed", 1, "fail")
    # finished, but its receipt is gone: back to the queue
    assert reopened.requeue_unfinished() == [cid]
    assert RunDir.open(run.path).state(cid) is CaseState.QUEUED
    assert str(run.path) in fsynced  # the directory, so the rename itself is durable
    assert any(p.startswith(str(run.path / ".manifest.json.")) for p in fsynced), fsynced
    assert (run.path / "manifest.json").read_text().endswith("}\n")
    no_temp_files(run.path)


def test_a_manifest_that_is_not_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PatchlaneError, match="no manifest"):
        RunDir.open(tmp_path)
    (tmp_path / "manifest.json").write_text("{half")
    with pytest.raises(PatchlaneError, match="not valid JSON"):
        RunDir.open(tmp_path)
    (tmp_path / "manifest.json").write_text('{"schema_version": 99}')
    with pytest.raises(PatchlaneError, match="schema_version 99"):
        RunDir.open(tmp_path)
    with pytest.raises(PatchlaneError, match="already exists and is not empty"):
        RunDir.create(tmp_path, {"run_id": "again"})


def test_a_hand_edited_case_state_is_named_with_the_states_there_are(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    cid = case_id("fake_entry", "cpu", 1, Mode.WITH)
    run.add_case(cid, {"entry_id": "fake_entry"})
    manifest = json.loads((run.path / "manifest.json").read_text())
    manifest["cases"][cid]["state"] = "runing"
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PatchlaneError) as info:
        RunDir.open(run.path)
    assert info.value.exit_code == 2  # a run directory that cannot be used as asked
    message = str(info.value)
    assert message.startswith(f"{run.path / 'manifest.json'}: cases.{cid}.state is 'runing', "
                              "expected one of queued, running, ok, failed, error"), message
    assert "did you mean 'running'?" in message and "fix:" in message
    manifest["cases"] = ["not", "an", "object"]
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PatchlaneError, match="cases is a list, expected an object"):
        RunDir.open(run.path)


def receipt_for(fake: FakeTarget, outcome: RunOutcome = RunOutcome.FAIL) -> dict[str, Any]:
    entry = load_registries([fake.write_registry()]).entries[0]
    # a rank that reported no provenance of its own: the sweep's view stands in
    ranks = [{"rank": 0, "outcome": outcome.value, "message": "bug shows", "exit_code": 1,
              "log": "rank0.log"}]
    result = CaseResult(entry.id, Mode.WITHOUT, "cpu", 1, outcome, "bug shows", seconds=0.5,
                        ranks=ranks)
    return build_receipt(run_id="r", case_id=case_id(entry.id, "cpu", 1, Mode.WITHOUT),
                         entry=entry, result=result, started="2026-01-01T00:00:00+00:00",
                         finished="2026-01-01T00:00:01+00:00", header={})


def test_receipts_validate_against_the_schema(fake_target: FakeTarget) -> None:
    receipt = receipt_for(fake_target)
    assert validate(receipt) == []
    assert receipt["provenance"]["source"] == "sweep"
    assert receipt["ranks"][0]["timings"] == {} and receipt["ranks"][0]["peak_memory"] == {}
    assert validate({**receipt, "lane": "gpu"}) == ["lane: 'gpu' is not one of ['cpu', 'cuda']"]
    assert validate({**receipt, "outcome": "passed"})
    assert validate({**receipt, "ranks": []}) == ["ranks: [] should be non-empty"]
    assert any("'stage' is a required property" in p
               for p in validate({k: v for k, v in receipt.items() if k != "stage"}))


def test_validating_without_jsonschema_is_a_clear_error(fake_target: FakeTarget,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    receipt = receipt_for(fake_target)
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # `import jsonschema` fails
    with pytest.raises(SchemaValidatorMissing, match=r"needs jsonschema.*pip install "
                                                     r"'jsonschema>=4'") as info:
        validate(receipt)
    assert isinstance(info.value, ImportError) and isinstance(info.value, PatchlaneError)


ROWS = [
    VerdictRow("e_guard", "cpu", 1, Verdict.GUARDING, "fails without, passes with"),
    VerdictRow("e_error", "cpu", 1, Verdict.ERROR, "without overlay: run: KeyError: 'x'",
               stderr_tail="Traceback\nKeyError: 'x'"),
    VerdictRow("e_fixed", "cuda", 2, Verdict.UPSTREAM_FIXED, "passes without the overlay"),
    VerdictRow("e_broken", "cpu", 1, Verdict.BROKEN, "fails with the overlay: a | b"),
    VerdictRow("e_skip", "cuda", 1, Verdict.SKIPPED, "lane unavailable"),
]


def test_reports_list_rows_worst_first_and_count_them(tmp_path: Path,
                                                      fsynced: list[str]) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    index = write_reports(run, ROWS).as_dict()
    assert index["counts"] == {"guarding": 1, "error": 1, "upstream-fixed": 1, "broken": 1,
                               "skipped": 1}
    summary = (run.path / "summary.md").read_text()
    order = [line.split(" | ")[0].lstrip("| ") for line in summary.splitlines()
             if line.startswith("| e_")]
    assert order == ["e_broken", "e_error", "e_fixed", "e_guard", "e_skip"]
    assert "> **Upstream fixed** 1 case(s)" in summary and "a \\| b" in summary
    suite = ET.parse(run.path / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"),
            suite.get("skipped")) == ("5", "1", "1", "1")
    page = (run.path / "report.html").read_text()
    assert 'background:#c62828;color:#fff" title="fails with the overlay: a | b">broken' in page
    assert '<a href="#error-e_error-cpu-ws1"' in page and "<h2>Errors</h2>" in page
    for name in ("index.json", "summary.md", "junit.xml", "report.html"):
        assert any(p.startswith(str(run.path / f".{name}.")) for p in fsynced), (name, fsynced)
    no_temp_files(run.path)
    assert json.loads((run.path / "index.json").read_text())["rows"][1]["verdict"] == "error"


def test_still_affected_is_loud_and_every_report_says_what_to_do(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    rows = [*ROWS[:1], VerdictRow("e_still", "cpu", 1, Verdict.STILL_AFFECTED,
                                  "still fails without the overlay past the gate"),
            VerdictRow("e_fixed", "cpu", 1, Verdict.UPSTREAM_FIXED, "passes without")]
    write_reports(run, rows)
    summary = (run.path / "summary.md").read_text()
    assert "> **Still affected** 1 case(s)" in summary
    assert "- **still-affected**: review the entry" in summary
    assert "- **upstream-fixed**: retirement candidate" in summary
    suite = ET.parse(run.path / "junit.xml").getroot()
    failure = suite.find("testsuite/testcase[@classname='patchlane.e_still']/failure")
    assert failure is not None and failure.get("type") == "still-affected"
    assert "extend applies_to" in (failure.get("message") or "")
    assert suite.get("failures") == "1" and suite.get("errors") == "0"
    page = (run.path / "report.html").read_text()
    assert "<h2>For a maintainer</h2>" in page and "<h2>What each verdict asks</h2>" in page
    assert page.index("e_still") < page.index("<h2>What each verdict asks</h2>")
    assert "#6a1b9a" in page


def test_an_index_with_an_unknown_verdict_is_refused_by_name(tmp_path: Path) -> None:
    first = RunDir.create(tmp_path / "a", {"run_id": "a"})
    write_reports(first, ROWS[:1])
    index = json.loads((first.path / "index.json").read_text())
    index["rows"][0]["verdict"] = "fine"
    (first.path / "index.json").write_text(json.dumps(index))
    second = RunDir.create(tmp_path / "b", {"run_id": "b"})
    with pytest.raises(ValueError, match=r"index row e_guard\[cpu-ws1\]: 'fine' is not a "
                                         "verdict"):
        write_reports(second, ROWS[:1], history=[first.path])


def test_verdicts_read_back_from_a_manifest(tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    run.manifest["rows"] = [
        {"entry_id": "e", "lane": "cpu", "world_size": 1, "installed": "1.0", "skip": None},
        {"entry_id": "s", "lane": "cuda", "world_size": 1, "installed": "1.0",
         "skip": "lane unavailable"},
    ]
    run.add_case(case_id("e", "cpu", 1, Mode.WITHOUT),
                 {"entry_id": "e", "lane": "cpu", "world_size": 1, "mode": "without"})
    rows = verdicts(run)
    assert [(r.verdict, r.lane) for r in rows] == [(Verdict.ERROR, "cpu"),
                                                    (Verdict.SKIPPED, "cuda")]
    assert rows[0].reason == "case did not finish (resume the run)"
    run.manifest["rows"][0]["lane"] = "tpu"
    with pytest.raises(ValueError, match="'tpu' is not a lane"):
        verdicts(run)


def test_resume_takes_a_case_killed_after_its_receipt_from_the_receipt(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    ids = [case_id(f"e{i}", "cpu", 1, Mode.WITHOUT) for i in range(3)]
    for cid in ids:
        run.add_case(cid, {"entry_id": cid[:2], "lane": "cpu", "world_size": 1,
                           "mode": "without"})
        run.transition(cid, CaseState.RUNNING)
    # e0: killed after its receipt was written, before the manifest said so
    run.write_receipt(ids[0], receipt_for(fake_target, RunOutcome.FAIL))
    # e1: a receipt nobody could have written completely (the writes are atomic)
    (run.receipt_path(ids[1])).write_text("{half")
    # e2: killed while running, no receipt
    receipt_bytes = run.receipt_path(ids[0]).read_bytes()
    assert RunDir.open(run.path).requeue_unfinished() == ids[1:]
    reopened = RunDir.open(run.path)
    assert [reopened.state(c) for c in ids] == [CaseState.FAILED, CaseState.QUEUED,
                                                 CaseState.QUEUED]
    adopted = reopened.manifest["cases"][ids[0]]
    assert (adopted["outcome"], adopted["message"], adopted["seconds"], adopted["receipt"],
            adopted["finished"]) == ("fail", "bug shows", 0.5, f"receipts/{ids[0]}.json",
                                     "2026-01-01T00:00:01+00:00")
    assert run.receipt_path(ids[0]).read_bytes() == receipt_bytes  # never rewritten


def test_junit_has_a_testsuites_root_times_and_the_stack(tmp_path: Path) -> None:
    """What CI systems read: a <testsuites> root, a time per case (its receipts' seconds) and
    for the suite, and the stack the run compares within as properties."""
    import xml.etree.ElementTree as ET

    from patchlane.runs.index import IndexRow, RunIndex
    from patchlane.runs.verdicts import Verdict
    from patchlane.sweep.reports.junit import junit

    (tmp_path / "receipts").mkdir()
    for mode, seconds in (("without", 1.25), ("with", 2.5)):
        (tmp_path / "receipts" / f"e--cpu--ws1--{mode}.json").write_text(
            json.dumps({"seconds": seconds}))
    row = IndexRow("e", "cpu", 1, Verdict.GUARDING, "fails without, passes with",
                   installed="0.16.1",
                   receipts={m: f"receipts/e--cpu--ws1--{m}.json" for m in ("without", "with")})
    index = RunIndex(run_id="r1", created="2026-11-27T00:00:00+00:00", rows=(row,),
                     registry_digest="sha256:ab",
                     comparison_class={"lane": "cpu", "distributions": {"torch": ["2.13.0"]}})
    root = ET.fromstring(junit(index, tmp_path).split("?>", 1)[1])
    assert root.tag == "testsuites" and root.get("time") == "3.750"
    suite = root.find("testsuite")
    assert suite is not None and suite.get("time") == "3.750"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["lane"] == "cpu" and props["distributions.torch"] == "2.13.0"
    assert props["registry_digest"] == "sha256:ab" and props["installed"] == "0.16.1"
    case = suite.find("testcase")
    assert case is not None and case.get("time") == "3.750"
    assert "registry" not in {p.get("name") for p in case.iter("property")}  # none recorded


def test_the_reports_say_whose_each_entry_is(tmp_path: Path) -> None:
    """A team's registry beside the catalog: JUnit's case and the HTML page name the file."""
    import xml.etree.ElementTree as ET

    from patchlane.runs.index import IndexRow, RunIndex
    from patchlane.runs.verdicts import Verdict
    from patchlane.sweep.reports.junit import junit
    from patchlane.sweep.reports.page import page

    rows = (IndexRow("team_fix", "cpu", 1, Verdict.GUARDING, "fails without, passes with"),
            IndexRow("mcore_x", "cpu", 1, Verdict.GUARDING, "fails without, passes with"))
    entries = {"team_fix": {"registry": "/srv/team/team.yaml", "catalog": False},
               "mcore_x": {"registry": "/venv/site-packages/patchlane/_bundle/registry.yaml",
                           "catalog": True}}
    index = RunIndex(run_id="r1", created="2026-11-27T00:00:00+00:00", rows=rows,
                     entries=entries)
    root = ET.fromstring(junit(index).split("?>", 1)[1])
    whose = {c.get("classname"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in root.iter("testcase")}
    assert whose["patchlane.team_fix"]["registry"] == "/srv/team/team.yaml"
    assert whose["patchlane.mcore_x"]["registry"].endswith("_bundle/registry.yaml")
    html = page(index)
    assert '<b>team_fix</b> <span class="muted small" title="/srv/team/team.yaml">' \
        "(team.yaml)</span>" in html
    assert "<b>mcore_x</b> <span class=\"muted small\"" in html and "(catalog)" in html
    # a path is text from outside: escaped like any other
    marked = RunIndex(run_id="r1", created="2026-11-27T00:00:00+00:00", rows=rows,
                      entries={**entries, "team_fix": {"registry": "/srv/<i>x</i>.yaml"}})
    assert "<i>x</i>" not in page(marked) and "&lt;i&gt;x&lt;/i&gt;.yaml" in page(marked)

"""One record per verdict (patchlane.runs.verdicts.MEANING), read by every report and command.

Each verdict must have its record, and every consumer must handle every verdict: the reports
(summary.md, junit.xml, report.html), the sweep's exit status, radar's proposal and an upstream
draft's table. A verdict added to the enum without its record fails here first; one whose
record a consumer ignores fails in that consumer's case below.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from patchlane.authoring.draft import AffectedRow, render_draft
from patchlane.common.exit_codes import SWEEP_BASE, SWEEP_BITS, ExitCode, sweep_exit_code
from patchlane.registry import load_registries
from patchlane.releases.radar import proposal
from patchlane.runs.manifest import RunDir
from patchlane.runs.verdicts import (
    ACTION,
    ASKS,
    EXIT_BITS,
    MEANING,
    SECTIONS,
    SEVERITY,
    Verdict,
    sections,
)
from patchlane.sweep.engine import VerdictRow, exit_code
from patchlane.sweep.reports import write_reports

from ..conftest import FakeTarget


def test_every_verdict_has_one_record_and_the_tables_derive_from_it() -> None:
    assert set(MEANING) == set(Verdict)
    assert sorted(m.rank for m in MEANING.values()) == list(range(len(Verdict)))
    assert list(SEVERITY) == sorted(Verdict, key=lambda v: MEANING[v].rank)
    assert {v: m.action for v, m in MEANING.items()} == ACTION
    assert {v: m.asks for v, m in MEANING.items()} == ASKS
    for v, m in MEANING.items():
        assert m.section is None or m.section in SECTIONS, v
        assert m.junit in ("passed", "failure", "error", "skipped"), v
        assert m.colour.startswith("#") and len(m.colour) == 7, v
    # exit bits: each one owned by exactly one verdict, named as the exit codes name it
    owners = {m.exit_bit: v for v, m in MEANING.items() if m.exit_bit}
    assert len(owners) == len(EXIT_BITS) == len(SWEEP_BITS)
    assert {bit: name for name, bit in SWEEP_BITS} == {
        bit: v.name for bit, v in owners.items()}


def test_exit_codes_are_computed_from_the_bits() -> None:
    combos = [c for c in ExitCode if SWEEP_BASE < c < SWEEP_BASE * 2]
    assert [int(c) for c in combos] == [SWEEP_BASE | b for b in range(1, 1 << len(SWEEP_BITS))]
    assert ExitCode.SWEEP_STILL_AFFECTED_BROKEN_AND_ERROR == 39
    assert ExitCode.SWEEP_BROKEN_AND_ERROR == 35
    assert sweep_exit_code(0) is ExitCode.OK
    # a verdict given a bit no code names would make a sweep that shows it exit 0: refused
    with pytest.raises(ValueError, match=r"sweep exit bits 8 are not in SWEEP_BITS .*add the "
                                         r"bit to SWEEP_BITS and the README's exit-code table"):
        sweep_exit_code(8 | 1)


@pytest.mark.parametrize("verdict", list(Verdict), ids=lambda v: v.value)
def test_every_report_and_consumer_handles_the_verdict(verdict: Verdict, tmp_path: Path,
                                                       fake_target: FakeTarget) -> None:
    meaning = MEANING[verdict]
    row = VerdictRow("e_one", "cpu", 1, verdict, f"the reason of a {verdict.value} row")

    # the sweep's exit status: its bit, or nothing
    assert exit_code([row]) == sweep_exit_code(meaning.exit_bit)

    # the three reports
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    write_reports(run, [row])
    summary = (run.path / "summary.md").read_text()
    assert f"**{verdict.value}**" in summary and meaning.asks in summary
    assert f"- **{verdict.value}**: {meaning.action}" in summary
    titles = {anchor: title for anchor, title, _ in sections()}
    if meaning.section is not None:
        assert f"## {titles[meaning.section]}" in summary
    else:
        assert not any(f"## {t}" in summary for t in titles.values())

    case = ET.parse(run.path / "junit.xml").getroot().find("testsuite/testcase")
    assert case is not None
    shown = {child.tag for child in case} & {"failure", "error", "skipped"}
    assert shown == ({meaning.junit} if meaning.junit != "passed" else set()), shown

    page = (run.path / "report.html").read_text()
    assert meaning.colour in page
    if meaning.section is not None:
        assert f'<section id="{meaning.section}">' in page

    # radar: the edit it proposes on a new release
    entry = load_registries([fake_target.write_registry()]).entries[0]
    said = proposal(entry, verdict, "1.3.0", covered_by="e_next")
    assert said and "{" not in said, said

    # an upstream draft's table: what the reproducer showed there, affected or not
    draft = render_draft(
        entry, [AffectedRow("r", "1.3.0", "3.11", "cpu", 1, verdict, "boom")], None,
        today=dt.date(2026, 11, 27), overlay_doc=None)
    assert meaning.shows in draft
    affected_line = next(line for line in draft.splitlines() if line.startswith("Affected: "))
    assert ("1.3.0" in affected_line) is meaning.affected, affected_line

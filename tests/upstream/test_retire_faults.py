"""`retire` and the sweep's reports when the disk refuses (issue 14, fault injection): the
registry is unchanged, no temp file is left, and the CLI exits 74 naming the file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from patchlane.registry import Status, load_registries
from patchlane.runs.manifest import RunDir
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import VerdictRow
from patchlane.sweep.reports import write_reports
from patchlane.upstream.retire import retire_entry

from ..fault_injection import disk_full
from .test_retire import ENTRY


def test_a_full_disk_during_retire_leaves_the_registry_and_no_temp_file(
        registry_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = registry_file.read_bytes()
    entry = load_registries([registry_file]).get(ENTRY)
    with disk_full(monkeypatch), pytest.raises(OSError) as info:
        retire_entry(entry, date=dt.date(2026, 11, 22), applied_upstream=None, evidence=["x"])
    assert "No space left" in str(info.value)
    assert registry_file.read_bytes() == before
    assert load_registries([registry_file]).get(ENTRY).status is Status.ACTIVE
    assert not [p for p in registry_file.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_full_disk_while_writing_reports_leaves_no_partial_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    rows = [VerdictRow("e", "cpu", 1, Verdict.GUARDING, "fails without, passes with")]
    with disk_full(monkeypatch), pytest.raises(OSError):
        write_reports(run, rows)
    names = {p.name for p in run.path.iterdir()}
    assert "index.json" not in names and not [n for n in names if ".tmp" in n], names

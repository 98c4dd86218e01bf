"""Drafts for fixes not forwarded upstream: the change file applied to a module on sys.path,
the evidence table, and the public text (no local paths). Mechanics on a fake module; the real
releases' drafts are verified in tests/releases/test_drafts.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from patchlane.evidence.verdicts import Verdict
from patchlane.registry import load_registries
from patchlane.upstream.draft import (
    AffectedRow,
    DraftError,
    affected_rows,
    apply_proposal,
    load_proposal,
    render_draft,
)

from ..conftest import FakeTarget


def change_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "change.yaml"
    path.write_text(text)
    return path


def test_replace_and_region_edits_make_a_unified_diff(fake_target: FakeTarget,
                                                      tmp_path: Path) -> None:
    path = change_file(tmp_path, f"""
object: {fake_target.module}:Greeter.greet
edits:
  - replace: "    return f\\"hello {{name}}\\"\\n"
    with: "    return f\\"hello, {{name}}\\"\\n"
""")
    change = apply_proposal(load_proposal(path), fake_target.distribution)
    assert change.against == (f"{fake_target.distribution} 1.2.0, "
                               f"{fake_target.package}/target.py")
    assert change.diff.splitlines()[:2] == [f"--- a/{fake_target.package}/target.py",
                                            f"+++ b/{fake_target.package}/target.py"]
    assert '-        return f"hello {name}"' in change.diff
    assert '+        return f"hello, {name}"' in change.diff  # re-indented into the class
    assert "def shout" in change.changed and fake_target.target_file.read_text() == \
        change.original  # the release's file is untouched

    region = change_file(tmp_path, f"""
object: {fake_target.module}:shout
edits:
  - from: "def shout"
    through: "upper()\\n"
    with: "def shout(text):\\n    return text.upper() + '!'\\n"
""")
    assert "+    return text.upper() + '!'" in apply_proposal(
        load_proposal(region), fake_target.distribution).diff


@pytest.mark.parametrize(("body", "message"), [
    ("object: {m}:Greeter.greet\nedits:\n  - replace: 'not there'\n    with: x\n",
     "its first anchor occurs 0 times in Greeter.greet"),
    ("object: {m}:Greeter.wave\nedits:\n  - replace: x\n    with: y\n",
     "defines no function Greeter.wave: the object moved"),
    ("object: {m}:shout\nedits:\n  - from: 'def shout'\n    through: 'nowhere'\n    with: y\n",
     "`through` does not occur after `from`"),
    ("object: {m}:shout\nedits: []\n", "expected `object: module:Qualified.name` and a"),
    ("object: {m}:shout\nedits:\n  - replace: ''\n    with: y\n", "non-empty anchors"),
    ("object: plnowhere.mod:f\nedits:\n  - replace: x\n    with: y\n",
     "plnowhere.mod is not on sys.path"),
])
def test_a_change_that_does_not_apply_is_named(fake_target: FakeTarget, tmp_path: Path,
                                               body: str, message: str) -> None:
    path = change_file(tmp_path, body.format(m=fake_target.module))
    with pytest.raises(DraftError, match=message.replace("(", r"\(")) as info:
        apply_proposal(load_proposal(path), fake_target.distribution)
    assert str(path) in str(info.value)


def test_the_draft_says_what_ran_and_names_no_local_path(fake_target: FakeTarget,
                                                         tmp_path: Path) -> None:
    entry = load_registries([fake_target.write_registry()]).entries[0]
    rows = [AffectedRow("run-a", "1.2.0", "3.12.1", "cpu", 1, Verdict.GUARDING,
                        f"bug at /home/me/site-packages/{fake_target.package}/target.py:5"),
            AffectedRow("run-b", "2.0.0", "3.11.7", "cpu", 1, Verdict.UPSTREAM_FIXED, "")]
    text = render_draft(entry, rows, None, today=dt.date(2026, 11, 22), overlay_doc="Why.")
    assert "| plfake" in text and "fails without the overlay, passes with it" in text
    assert "passes without the overlay: not affected" in text
    assert "Affected: 1.2.0." in text and "were not run and are not claimed" in text
    assert f"AssertionError: bug at {fake_target.package}/target.py:5" in text
    assert "/home/me" not in text and str(tmp_path) not in text
    assert "(no `drafts/<id>.change.yaml`" in text
    assert text.endswith("\n") and not text.endswith("\n\n")


def test_evidence_that_is_not_a_run_directory_is_named(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    entry = load_registries([fake_target.write_registry()]).entries[0]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "index.json").write_text(json.dumps({"rows": "nope"}))
    with pytest.raises(DraftError, match="not a sweep run directory"):
        affected_rows(entry, [tmp_path / "run"])

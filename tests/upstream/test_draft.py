"""Drafts for fixes not forwarded upstream: the change file applied to a module on sys.path,
the evidence table, and the public text (no local paths). Mechanics on a fake module; the real
releases' drafts are verified in tests/releases/test_drafts.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from patchlane.authoring.draft import (
    AffectedRow,
    DraftError,
    affected_rows,
    apply_proposal,
    load_proposal,
    render_draft,
)
from patchlane.registry import load_registries
from patchlane.runs.verdicts import Verdict

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


def test_a_draft_of_a_forwarded_entry_says_where_it_went(fake_target: FakeTarget) -> None:
    """An entry made with `patchlane new --pr URL` is forwarded: its draft says so, never
    "Not yet forwarded"."""
    import dataclasses

    entry = load_registries([fake_target.write_registry()]).entries[0]
    assert "Not yet forwarded." in render_draft(entry, [], None, today=dt.date(2026, 11, 22),
                                                overlay_doc="")
    pr = "https://github.com/NVIDIA/Megatron-LM/pull/4448"
    sent = dataclasses.replace(entry, upstream=entry.upstream._replace(forwarded=pr, pr=pr))
    text = render_draft(sent, [], None, today=dt.date(2026, 11, 22), overlay_doc="")
    assert "Not yet forwarded" not in text and f"Forwarded: {pr}." in text


def test_the_draft_pairs_the_reproducer_with_its_own_output(fake_target: FakeTarget) -> None:
    entry = load_registries([fake_target.write_registry()]).entries[0]
    old = AffectedRow("run-old", "1.2.0", "3.12.1", "cpu", 1, Verdict.GUARDING,
                      "what the earlier reproducer printed", ("reproducer",))
    new = AffectedRow("run-new", "1.2.0", "3.12.1", "cpu", 1, Verdict.GUARDING,
                      "what this reproducer printed")
    text = render_draft(entry, [old, new], None, today=dt.date(2026, 11, 22), overlay_doc="")
    assert "what this reproducer printed" in text and "earlier reproducer" not in text
    assert "**Stale:**" not in text
    text = render_draft(entry, [old], None, today=dt.date(2026, 11, 22), overlay_doc="")
    assert "what the earlier reproducer printed" in text
    assert "**Stale:** this output came from an earlier version of the reproducer (run " \
           "run-old recorded other content); sweep again before sending." in text


def test_evidence_that_is_not_a_run_directory_is_named(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    entry = load_registries([fake_target.write_registry()]).entries[0]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "index.json").write_text(json.dumps({"rows": "nope"}))
    with pytest.raises(DraftError, match="not a sweep run directory"):
        affected_rows(entry, [tmp_path / "run"])


USAGE_SOURCE = '''
class Greeter:
    def usage(self, name):
        text = """
Usage: greet NAME
    NAME  who to greet
"""
        banner = f"""
{name}:
  hello
"""
        return text.strip() + banner
'''


def test_a_method_holding_a_flush_left_string_changes_only_the_edited_line(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """The indentation is the def's, not the smallest common one: a multi-line string written
    flush left inside the method is its text, kept as it is, and every line the edits did not
    touch is the release's own."""
    (fake_target.root / fake_target.package / "usage.py").write_text(USAGE_SOURCE)
    path = change_file(tmp_path, f"""
object: {fake_target.package}.usage:Greeter.usage
edits:
  - replace: "    return text.strip() + banner\\n"
    with: "    help = '''\\nmore\\n'''\\n    return text.strip() + banner + help\\n"
""")
    change = apply_proposal(load_proposal(path), fake_target.distribution,
                            target_module=fake_target.module)
    changed = [line for line in change.diff.splitlines()[2:] if line[:1] in "+-"]
    assert changed == ["-        return text.strip() + banner",
                       "+        help = '''", "+more", "+'''",
                       "+        return text.strip() + banner + help"], change.diff
    namespace: dict[str, Any] = {}
    exec(compile(change.changed, "usage.py", "exec"), namespace)  # still Python, and means it
    assert namespace["Greeter"]().usage("ann") == ("Usage: greet NAME\n    NAME  who to greet"
                                                  "\nann:\n  hello\n\nmore\n")


def test_edits_that_leave_the_function_not_python_are_refused(fake_target: FakeTarget,
                                                              tmp_path: Path) -> None:
    path = change_file(tmp_path, f"""
object: {fake_target.module}:shout
edits:
  - replace: "return text.upper()"
    with: "return '''unterminated"
""")
    with pytest.raises(DraftError, match=r"the edits leave shout not valid Python") as info:
        apply_proposal(load_proposal(path), fake_target.distribution)
    assert str(path) in str(info.value)


def test_a_change_outside_the_entry_s_distribution_is_labelled_with_its_own(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """The diff says which release it is against: the distribution that owns the changed
    module, not the entry's when that is another one."""
    other = f"plother_{fake_target.package[7:]}"
    (fake_target.root / other).mkdir()
    (fake_target.root / other / "__init__.py").write_text("")
    (fake_target.root / other / "mod.py").write_text("def f(x):\n    return x\n")
    info = fake_target.root / f"{other}_dist-3.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {other}-dist\nVersion: 3.1\n")
    (info / "top_level.txt").write_text(f"{other}\n")
    bare = f"plbare_{fake_target.package[7:]}"
    (fake_target.root / f"{bare}.py").write_text("def g(x):\n    return x\n")
    owned = change_file(tmp_path, f"object: {other}.mod:f\nedits:\n"
                                  "  - replace: 'return x'\n    with: 'return x + 1'\n")
    change = apply_proposal(load_proposal(owned), fake_target.distribution,
                            target_module=fake_target.module)
    assert change.against == (f"{other}-dist 3.1 (not {fake_target.distribution}, the entry's "
                              f"distribution), {other}/mod.py")
    unowned = change_file(tmp_path, f"object: {bare}:g\nedits:\n"
                                    "  - replace: 'return x'\n    with: 'return -x'\n")
    change = apply_proposal(load_proposal(unowned), fake_target.distribution,
                            target_module=fake_target.module)
    assert change.against == (f"{bare} (no installed distribution owns it, and it is not "
                              f"{fake_target.distribution}, the entry's distribution; version "
                              f"unknown), {bare}.py")
    # the entry's own module, with no metadata naming its files: the entry's distribution
    mine = change_file(tmp_path, f"object: {fake_target.module}:shout\nedits:\n"
                                 "  - replace: 'upper()'\n    with: 'upper() + \"!\"'\n")
    assert apply_proposal(load_proposal(mine), fake_target.distribution,
                          target_module=fake_target.module).against.startswith(
        f"{fake_target.distribution} 1.2.0, ")


@pytest.mark.slow
def test_verify_on_a_single_file_module_runs_the_reproducer(fake_target: FakeTarget,
                                                            tmp_path: Path) -> None:
    """``draft --verify`` copies the release's top package; a single-file module is the file
    itself, not a directory to copy."""
    import os
    import subprocess
    import sys

    from patchlane.installed.fingerprint import compute_from_source

    single = f"plsingle_{fake_target.package[7:]}"
    source = fake_target.target_file.read_text()
    (fake_target.root / f"{single}.py").write_text(source)
    entry = fake_target.entry(
        target={"distribution": fake_target.distribution, "object": f"{single}:Greeter.greet"},
        fingerprint={"policy": "refuse",
                     "sha256": [compute_from_source(source, ("Greeter.greet",))]})
    fake_target.write_registry(entry)
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {single} as t\n"
        "    assert t.Greeter().greet('a') == 'hello, a', 'no comma'\n")
    (fake_target.root / "drafts" / f"{fake_target.entry_id}.change.yaml").write_text(
        f"object: {single}:Greeter.greet\nedits:\n"
        "  - replace: 'return f\"hello {name}\"'\n    with: 'return f\"hello, {name}\"'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root),
                                           str(Path(__file__).resolve().parents[2])]))
    elsewhere = tmp_path / "elsewhere"  # not the release's directory: it would come first
    elsewhere.mkdir()
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "draft",
                          fake_target.entry_id, "--verify"], capture_output=True, text=True,
                         env=env, cwd=elsewhere, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "with the change, no overlay, world size 1: pass" in out.stdout
    assert f"change against {fake_target.distribution} 1.2.0, {single}.py" in out.stdout
    # a change that does not fix it: exit 1, and said in words (it used to be the code alone)
    (fake_target.root / "drafts" / f"{fake_target.entry_id}.change.yaml").write_text(
        f"object: {single}:Greeter.greet\nedits:\n"
        "  - replace: 'return f\"hello {name}\"'\n    with: 'return f\"hi {name}\"'\n")
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "draft",
                          fake_target.entry_id, "--verify"], capture_output=True, text=True,
                         env=env, cwd=elsewhere, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "world size 1: fail" in out.stdout
    assert f"{fake_target.entry_id}: not verified: the reproducer does not pass with the " \
           "proposed change applied" in out.stderr

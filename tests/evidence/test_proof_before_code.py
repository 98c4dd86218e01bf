"""Proof is decided before any overlay code runs, on the bytes that then run: under
PATCHLANE_REQUIRE_EVIDENCE an unproven overlay's file is never executed (its top level could
patch anything) nor its probe called; what runs is the source the proof hashed, never a
cached module of other bytes nor bytecode from ``__pycache__``; the content hash covers the
overlay library's package and subpackages; a config entry is asked for proof too."""

from __future__ import annotations

import importlib.util
import os
import py_compile
from pathlib import Path
from typing import Any

import pytest

from patchlane.deciding.audit import Outcome
from patchlane.loading import load_file
from patchlane.registry import content

from ..conftest import FakeTarget

MARKING_OVERLAY = '''
from pathlib import Path

Path({marker!r}).write_text("the overlay file ran")


def overlay(wrapped, instance, args, kwargs):
    return "patched " + wrapped(*args, **kwargs)


def probe(module):
    Path({probed!r}).write_text("the probe ran")
    return False
'''


def test_an_unproven_overlay_never_runs_under_require_evidence(fake_target: FakeTarget,
                                                                 tmp_path: Path) -> None:
    marker, probed = tmp_path / "ran", tmp_path / "probed"
    fake_target.write_overlay(MARKING_OVERLAY.format(marker=str(marker), probed=str(probed)))
    runs = tmp_path / "runs"
    runs.mkdir()
    decider = fake_target.decider({"PATCHLANE_REQUIRE_EVIDENCE": "1",
                                   "PATCHLANE_EVIDENCE": str(runs)})
    module = fake_target.import_target()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.REFUSED_EVIDENCE, decision
    assert not marker.exists() and not probed.exists()  # none of its code ran
    assert module.Greeter().greet("x") == "hello x"
    # without the requirement the same file runs, probe first: the test can fail
    fake_target.decider().apply()
    assert marker.exists() and probed.exists()


def test_what_runs_is_the_source_never_bytecode_beside_it(tmp_path: Path) -> None:
    """A ``.pyc`` in ``__pycache__`` whose header matches the source (another user's) holds
    other code: the file's own bytes run."""
    path = tmp_path / "patches" / "planted.py"
    path.parent.mkdir()
    honest = "VALUE = 'source'  # pad\n"
    planted = "VALUE = 'planted' # pad\n"
    assert len(honest) == len(planted)
    path.write_text(planted)
    stat = path.stat()
    cached = Path(importlib.util.cache_from_source(str(path)))
    py_compile.compile(str(path), cfile=str(cached), doraise=True)
    path.write_text(honest)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # the header matches again
    module = load_file("planted", "overlay", path)
    assert module.VALUE == "source"
    assert module.__cached__ is None


def test_a_module_loaded_from_other_bytes_is_not_handed_out(tmp_path: Path) -> None:
    path = tmp_path / "edited.py"
    path.write_text("VALUE = 'edited'\n")
    edited = load_file("edited_entry", "overlay", path)
    assert edited.VALUE == "edited"
    path.write_text("VALUE = 'proven'\n")  # the proven file put back
    proven = load_file("edited_entry", "overlay", path)
    assert proven.VALUE == "proven" and proven is not edited
    assert load_file("edited_entry", "overlay", path) is proven  # once per content
    # the bytes given are the bytes run, whatever the file holds by then
    given = load_file("edited_entry", "overlay", path, b"VALUE = 'given'\n")
    assert given.VALUE == "given"


def test_the_content_hash_covers_the_library_package_and_its_subpackages(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lib = tmp_path / "overlaylib"
    (lib / "kernels").mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "kernels" / "__init__.py").write_text("from .fast import go\n")
    (lib / "kernels" / "fast.py").write_text("def go():\n    return 1\n")
    (lib / "unused.py").write_text("X = 1\n")
    monkeypatch.setattr(content, "_OVERLAYLIB", lib)
    overlay = tmp_path / "overlay.py"
    overlay.write_text("from patchlane.overlaylib import kernels\n")

    def now() -> str:
        return content._overlay_hash(overlay)

    first = now()
    (lib / "unused.py").write_text("X = 2\n")
    assert now() == first  # not imported: not part of what runs
    for edited in (lib / "__init__.py", lib / "kernels" / "__init__.py",
                   lib / "kernels" / "fast.py"):
        before = now()
        edited.write_text(edited.read_text() + "# edited\n")
        assert now() != before, edited


def test_a_config_entry_is_asked_for_proof_too(fake_target: FakeTarget,
                                               tmp_path: Path) -> None:
    # like torch._dynamo.config: a module of a torch-based stack (the proof's class has torch)
    (fake_target.root / fake_target.package / "settings.py").write_text(
        "import torch  # noqa: F401\nLIMIT = 8\n")
    setting = {
        "id": "fake_setting", "kind": "config", "summary": "raise the fake limit",
        "target": {"distribution": fake_target.distribution},
        "settings": {f"{fake_target.package}.settings.LIMIT": 64},
        "reproducer": "reproducers/fake_setting.py",
        "upstream": {"issue": "https://example.invalid/issues/2", "forwarded": "not-needed"},
        "retire_when": {"probe": True, "reproducer": True}, "owner": "tests",
        "added": "2026-11-27", "status": "active"}
    (fake_target.root / "reproducers" / "fake_setting.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.package}.settings as s\n"
        "    assert s.LIMIT == 64, f'the limit is {s.LIMIT}'\n")
    fake_target.write_registry(fake_target.entry(), setting)
    runs = tmp_path / "runs"
    runs.mkdir()
    decider = fake_target.decider({"PATCHLANE_REQUIRE_EVIDENCE": "1",
                                   "PATCHLANE_EVIDENCE": str(runs)})
    settings: Any = importlib.import_module(f"{fake_target.package}.settings")
    decision = decider.audit.latest()["fake_setting"]
    assert decision.outcome is Outcome.REFUSED_EVIDENCE, decision
    assert "never run" in decision.reason, decision.reason
    assert settings.LIMIT == 8

    # swept (fails without, passes with): proven on this stack, so applied under the switch
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0",
               PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root), env.get("PYTHONPATH", "")]))
    swept = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--only",
                            "fake_setting", "--runs-root", str(runs), "--quiet"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert swept.returncode == 0 and "guarding" in swept.stdout, swept.stdout + swept.stderr
    check = (f"import patchlane, {fake_target.package}.settings as s\n"
             "print(s.LIMIT, [e['decision']['outcome'] for e in patchlane.report()['entries']"
             " if e['id'] == 'fake_setting'])\n")
    applied = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                             env={**env, "PATCHLANE_REQUIRE_EVIDENCE": "1",
                                  "PATCHLANE_EVIDENCE": str(runs)}, timeout=120)
    assert applied.stdout.strip() == "64 ['config: applied']", applied.stdout + applied.stderr


def test_the_patch_set_digest_covers_the_library_code_an_overlay_runs(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two shards of one night that ran other library code have other patch sets, so merge
    refuses them (it hashed the overlay file alone)."""
    from patchlane.registry import load_registries
    from patchlane.sweep.provenance import patch_set_digest

    lib = tmp_path / "overlaylib"
    lib.mkdir()
    (lib / "__init__.py").write_text("")
    (lib / "helper.py").write_text("def fix(x):\n    return x\n")
    monkeypatch.setattr(content, "_OVERLAYLIB", lib)
    fake_target.write_overlay("from patchlane.overlaylib import helper\n\n\n"
                              "def overlay(wrapped, instance, args, kwargs):\n"
                              "    return helper.fix(wrapped(*args, **kwargs))\n")
    registry = load_registries([fake_target.write_registry()])
    first = patch_set_digest(registry)
    (lib / "helper.py").write_text("def fix(x):\n    return x + '!'\n")
    edited = patch_set_digest(registry)
    assert edited != first
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n    assert True\n")
    assert patch_set_digest(registry) != edited  # the reproducer is content too


def test_the_content_hash_covers_the_teams_own_modules_the_files_import(
        fake_target: FakeTarget) -> None:
    """A team's overlay that imports a helper of its own (beside its registry, on the job's
    path): an edit to the helper, or to a module the helper imports, makes the overlay part
    differ, so a proof of the old helper is stale. The target's own tree beside the registry,
    installed packages and unrelated files are not in it; a file that imports none of the
    team's modules hashes as before."""
    from patchlane.registry import load_registries

    fake = fake_target
    root = fake.root
    overlay = root / "patches" / f"{fake.entry_id}.py"
    plain = overlay.read_bytes()

    def parts() -> dict[str, str]:
        (entry,) = load_registries([fake.write_registry()]).entries
        return content.entry_content(entry)

    before = parts()
    assert before["overlay"] == "sha256:" + __import__("hashlib").sha256(plain).hexdigest()
    (root / "team_helpers.py").write_text("import json\nimport team_pkg.inner\nSCALE = 2\n")
    (root / "team_pkg").mkdir()
    (root / "team_pkg" / "__init__.py").write_text("")
    (root / "team_pkg" / "inner.py").write_text("from . import deep\n")
    (root / "team_pkg" / "deep.py").write_text("VALUE = 1\n")
    (root / "unrelated.py").write_text("X = 1\n")
    # a registry at the root of a Megatron-LM fork: upstream's tree, never the team's own
    (root / "megatron").mkdir()
    (root / "megatron" / "__init__.py").write_text("")
    (root / "megatron" / "core.py").write_text("VERSION = 1\n")
    overlay.write_bytes(plain + (
        f"\n\ndef _scale():\n    import team_helpers\n    from {fake.package} import target\n"
        "    import megatron.core\n    return team_helpers.SCALE, target\n").encode())
    with_helper = parts()
    assert with_helper["entry"] == before["entry"]
    for edit, counts in ((root / "team_helpers.py", True), (root / "team_pkg" / "deep.py", True),
                         (root / "team_pkg" / "__init__.py", True),
                         (root / "unrelated.py", False), (fake.target_file, False),
                         (root / "megatron" / "core.py", False)):
        was = parts()
        edit.write_text(edit.read_text() + "\n# edited\n")
        now = parts()
        assert (now["overlay"] != was["overlay"]) is counts, edit
        assert now["reproducer"] == was["reproducer"] and now["entry"] == was["entry"], edit
    # a reproducer's helper beside it (its folder is on the path when it runs) counts the same
    reproducer = root / "reproducers" / f"{fake.entry_id}.py"
    reproducer.write_text(reproducer.read_text() + "\nimport _repro_common\n")
    (root / "reproducers" / "_repro_common.py").write_text("N = 1\n")
    was = parts()["reproducer"]
    (root / "reproducers" / "_repro_common.py").write_text("N = 2\n")
    assert parts()["reproducer"] != was

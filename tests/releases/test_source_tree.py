"""Targets imported from a source tree with no distribution metadata (a Megatron-LM checkout on
PYTHONPATH): the gate reads the version the tree declares (megatron/core/package_info.py), the
decision says so, the rerun overlay applies there and its reproducer fails without it and
passes with it; a local edit in a patched target is refused as drift; doctor names the nearest
upstream release.

The trees are real releases' files (the wheel's `megatron/` package) copied without their
dist-info, put first on PYTHONPATH ahead of the venv's installed megatron-core: the shadowing
a checkout on PYTHONPATH does in a training container. Per interpreter: 0.16.1 on Python 3.11,
0.17.1 on Python 3.12 (megatron-core >= 0.17 ships cp312 wheels only).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.sweep.reproduce import Mode, RunOutcome, run_case

from .conftest import ROOT, release_dir, requires_megatron

pytestmark = [pytest.mark.upstream, pytest.mark.slow, requires_megatron]

VERSION = "0.17.1" if sys.version_info >= (3, 12) else "0.16.1"
ENTRY = "mcore_rerun_sentinel"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("megatron-lm") / f"Megatron-LM-core_v{VERSION}"
    shutil.copytree(release_dir("megatron-core", VERSION) / "megatron", root / "megatron",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert not list(root.glob("*.dist-info"))
    return root


def env_for(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tree)
    env["PYTHONWARNINGS"] = "ignore"
    env["PATCHLANE_STRICT"] = "1"
    return env


def report_after_import(tree: Path, module: str) -> dict[str, dict[str, object]]:
    code = (f"import json, patchlane, {module} as m; "
            "print(json.dumps({'file': m.__file__, 'entries': {e['id']: e for e in "
            "patchlane.report()['entries']}}))")
    out = subprocess.run([sys.executable, "-c", code], env=env_for(tree), capture_output=True,
                         text=True, timeout=300, cwd=tree.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert str(data["file"]).startswith(str(tree)), "the tree did not shadow the install"
    entries: dict[str, dict[str, object]] = data["entries"]
    return entries


def test_gate_reads_the_trees_declared_version_and_says_so(tree: Path) -> None:
    entries = report_after_import(tree, "megatron.core.rerun_state_machine")
    decision = entries[ENTRY]["decision"]
    assert isinstance(decision, dict)
    assert decision["outcome"] == "applied", decision
    assert decision["installed"] == VERSION
    source = str(decision["version_source"])
    assert source.startswith("source tree (") and "package_info.py" in source
    assert str(tree) in source
    assert "from the source tree" in str(decision["reason"])


@pytest.mark.parametrize("world_size", [1, 2])
def test_rerun_reproducer_fails_without_and_passes_with_from_the_tree(
        tree: Path, world_size: int, tmp_path: Path) -> None:
    entry = startup.current().registry.get(ENTRY)
    without = run_case(entry, Mode.WITHOUT, world_size=world_size, workdir=tmp_path,
                       env=env_for(tree))
    assert without.outcome is RunOutcome.FAIL, (without.message, without.ranks)
    assert "Missing key in checkpoint state_dict: rerun_state_machine_state" in without.message
    with_ = run_case(entry, Mode.WITH, world_size=world_size, workdir=tmp_path,
                     env=env_for(tree))
    assert with_.outcome is RunOutcome.PASS, (with_.message, with_.ranks)
    for rank in with_.ranks:
        decision = rank["audit"]["decision"]
        assert decision["outcome"] == "applied" and decision["installed"] == VERSION
        assert str(decision["version_source"]).startswith("source tree")
        assert rank["audit"]["hits"] >= 2


def test_a_local_edit_in_the_patched_target_is_refused_as_drift(tree: Path,
                                                                 tmp_path: Path) -> None:
    edited = tmp_path / "edited"
    shutil.copytree(tree, edited)
    rsm = edited / "megatron" / "core" / "rerun_state_machine.py"
    text = rsm.read_text()
    # a behaviour change in the fingerprinted method (RerunStateMachine.state_dict): one
    # extra statement before its last one, at that statement's indentation
    cls = next(n for n in ast.parse(text).body
               if isinstance(n, ast.ClassDef) and n.name == "RerunStateMachine")
    method = next(n for n in cls.body
                  if isinstance(n, ast.FunctionDef) and n.name == "state_dict")
    last = method.body[-1]
    lines = text.splitlines(keepends=True)
    lines.insert(last.lineno - 1, " " * last.col_offset + "_local_edit = 1\n")
    rsm.write_text("".join(lines))
    code = "import patchlane, megatron.core.rerun_state_machine"
    out = subprocess.run([sys.executable, "-c", code], env=env_for(edited), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode != 0
    assert "refused: drift" in out.stderr and ENTRY in out.stderr

    doctor = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "doctor", "--json"],
                            env={**env_for(edited), "PATCHLANE_STRICT": "0"},
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    data = json.loads(doctor.stdout)
    match = next(m for m in data["releases"] if m["distribution"] == "megatron-core")
    assert match["declared"] == VERSION
    assert match["nearest"] == VERSION, match
    assert match["differ"] == [ENTRY], match


def test_doctor_names_the_nearest_upstream_release_of_a_clean_tree(tree: Path) -> None:
    doctor = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "doctor", "--json"],
                            env={**env_for(tree), "PATCHLANE_STRICT": "0"}, capture_output=True,
                            text=True, timeout=600, cwd=ROOT)
    data = json.loads(doctor.stdout)
    match = next(m for m in data["releases"] if m["distribution"] == "megatron-core")
    assert match["source"].startswith("source tree") and match["declared"] == VERSION
    assert match["nearest"] == VERSION
    assert ENTRY in match["matched"] and match["differ"] == []


def test_the_sweep_plans_and_reports_the_trees_release(tree: Path, tmp_path: Path) -> None:
    """The planner decides before importing anything: it must still see the tree (not the
    venv's installed wheel) and gate on the tree's version, and the receipts say where the
    version came from."""
    run = tmp_path / "run"
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--lane", "cpu",
                          "--only", ENTRY, "--run-dir", str(run), "--jobs", "2", "--json",
                          "--quiet"], env=env_for(tree), capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout)["rows"]
    assert {(r["verdict"], r["installed"]) for r in rows} == {("guarding", VERSION)}, rows
    receipt = json.loads(next((run / "receipts").glob(f"{ENTRY}--cpu--ws1--with.json"))
                         .read_text())
    sources = receipt["provenance"]["runtime"]["version_sources"]
    assert sources["megatron-core"].startswith("source tree (" + str(tree))

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
from typing import Any

import pytest

from .case_checks import check_cases, recorded_cases
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


@pytest.fixture(scope="module")
def tree_sweep(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """``patchlane sweep --only`` the entry, from the tree: its run directory and the
    finished command. One run, read by the tests below (both ways, world sizes 1 and 2)."""
    run = tmp_path_factory.mktemp("tree-sweep") / "run"
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--lane", "cpu",
                          "--only", ENTRY, "--run-dir", str(run), "--jobs", "2", "--json",
                          "--quiet"], env=env_for(tree), capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    return run, out


@pytest.mark.parametrize("world_size", [1, 2])
def test_rerun_reproducer_fails_without_and_passes_with_from_the_tree(
        tree_sweep: tuple[Path, Any], world_size: int) -> None:
    run, out = tree_sweep
    assert out.returncode == 0, out.stderr[-3000:]
    without, with_ = recorded_cases(run, ENTRY)[world_size]
    check_cases(ENTRY, without, with_, VERSION)
    for rank in with_.ranks:
        assert str(rank["audit"]["decision"]["version_source"]).startswith("source tree")


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


def test_the_sweep_plans_and_reports_the_trees_release(tree: Path,
                                                      tree_sweep: tuple[Path, Any]) -> None:
    """The planner decides before importing anything: it must still see the tree (not the
    venv's installed wheel) and gate on the tree's version, and the receipts say where the
    version came from."""
    run, out = tree_sweep
    assert out.returncode == 0, out.stderr[-3000:]
    rows = json.loads(out.stdout)["rows"]
    assert {(r["verdict"], r["installed"]) for r in rows} == {("guarding", VERSION)}, rows
    receipt = json.loads(next((run / "receipts").glob(f"{ENTRY}--cpu--ws1--with.json"))
                         .read_text())
    sources = receipt["provenance"]["runtime"]["version_sources"]
    assert sources["megatron-core"].startswith("source tree (" + str(tree))

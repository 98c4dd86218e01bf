"""Retirement end to end on a real release: a team's copy of the default registry is swept on
megatron-core 0.18.2 (Python 3.12; PR #4448 ships from 0.18.0), and `patchlane retire
mcore_rerun_sentinel --evidence RUN --git REPO` succeeds from that evidence alone, with no
GitHub access, rewriting only the entry's own lines. After it, the retired entry's reproducer
keeps running, without its overlay, as the regression guard.

The git repository is built here with Megatron-LM's tag names and PR #4448's squash subject
(CI cannot reach GitHub); with ``PATCHLANE_MEGATRON_GIT`` pointing at a mirror of
NVIDIA/Megatron-LM the same test runs against the real history instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..upstream.test_gitrepo import GitBuilder, lines
from .conftest import ROOT, release_env

pytestmark = [pytest.mark.upstream, pytest.mark.slow,
              pytest.mark.skipif(sys.version_info[:2] != (3, 12),
                                 reason="megatron-core 0.18.2 ships cp312 wheels only: the "
                                        "Python 3.12 suite runs this"),
              pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]

ENTRY = "mcore_rerun_sentinel"


def megatron_history(root: Path) -> Path:
    """Megatron-LM's shape where it matters: 0.17.1 without the fix, PR #4448 squashed on
    main, then core_v0.18.0 and core_v0.18.2."""
    g = GitBuilder(root)
    g.commit("Initial", rerun=lines("state = None"))
    g.tag("core_v0.17.1")
    g.commit("Fix checkpoint loading with rerun state machine  (#4448)",
             rerun=lines("state = 'sentinel'"))
    g.tag("core_v0.18.0")
    g.commit("Unrelated change (#4500)", other=lines("x = 1"))
    g.tag("core_v0.18.2")
    return root


def patchlane(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args], env=env,
                          capture_output=True, text=True, check=False, timeout=900)


def test_retire_on_0_18_2_from_sweep_evidence_and_git_alone(tmp_path: Path) -> None:
    team = tmp_path / "team"
    team.mkdir()
    shutil.copy(ROOT / "registry.yaml", team / "registry.yaml")
    for folder in ("patches", "reproducers", "checks", "drafts"):
        shutil.copytree(ROOT / folder, team / folder)
    before = (team / "registry.yaml").read_bytes()
    env = release_env("megatron-core", "0.18.2")
    env.update(PATCHLANE_REGISTRY=str(team / "registry.yaml"), PATCHLANE_DEFAULT_REGISTRY="0",
               # no GitHub: a request would fail on this dead address
               PATCHLANE_GITHUB_API="http://127.0.0.1:9", PYTHONWARNINGS="ignore")
    run = tmp_path / "run-0.18.2"
    swept = patchlane("sweep", "--run-dir", str(run), "--only", ENTRY, "--jobs", "2", "--json",
                      "--quiet", env=env)
    index = json.loads(swept.stdout)
    rows = [r for r in index["rows"] if r["entry_id"] == ENTRY]
    assert [r["verdict"] for r in rows] == ["upstream-fixed", "upstream-fixed"], rows
    assert all(r["installed"] == "0.18.2" and "past the gate" in r["reason"] for r in rows)
    assert swept.returncode == 0, swept.stderr[-2000:]

    repo = Path(os.environ.get("PATCHLANE_MEGATRON_GIT") or megatron_history(tmp_path / "mlm"))
    retired = patchlane("retire", ENTRY, "--evidence", str(run), "--git", str(repo),
                        "--date", "2026-11-22", env=env)
    assert retired.returncode == 0, retired.stdout + retired.stderr
    after = (team / "registry.yaml").read_bytes()
    start = before.index(f"  - id: {ENTRY}\n".encode())
    end = before.index(b"  - id: ", start + 1)
    assert after[:start] == before[:start]  # every other byte of the file is unchanged
    assert after.endswith(before[end:])
    block = after[start:len(after) - len(before[end:])].decode()
    assert "    status: retired\n    retired: 2026-11-22\n" in block
    assert "first released in megatron-core 0.18.0 (tag core_v0.18.0)" in block
    assert "upstream-fixed on 0.18.2 [cpu ws=2] probe=upstream-fixed" in block
    assert 'applied_upstream: "megatron-core 0.18.0"' in block

    # The retired entry's reproducer stays in the sweep, without its overlay: the guard.
    guard = patchlane("sweep", "--run-dir", str(tmp_path / "guard"), "--only", ENTRY,
                      "--json", "--quiet", env=env)
    rows = [r for r in json.loads(guard.stdout)["rows"] if r["entry_id"] == ENTRY]
    assert [r["verdict"] for r in rows] == ["upstream-fixed", "upstream-fixed"], rows
    assert all("regression guard" in r["reason"] for r in rows)

"""The #7428 follow-up on a real Megatron-LM 0.16.1 source tree (megatron-core wheels before
0.17 ship no megatron.training): with our mcore_rerun_sentinel backport applied, a strict
resume fails without mcore_strict_load_idle_rerun_shard and passes with it; without the
backport there is no sentinel to trip on and it passes as it is.

The tree is ``git archive core_v0.16.1`` of a Megatron-LM mirror named by
``PATCHLANE_MEGATRON_GIT`` (CI cannot reach GitHub; the released wheels run in matrix.yaml).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.sweep.reproduce import Mode, RunOutcome, run_case

pytestmark = [pytest.mark.upstream, pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("PATCHLANE_MEGATRON_GIT"),
                                 reason="PATCHLANE_MEGATRON_GIT is not set: point it at a "
                                        "`git clone --mirror` of NVIDIA/Megatron-LM"),
              pytest.mark.skipif(shutil.which("git") is None, reason="needs git")]

ENTRY = "mcore_strict_load_idle_rerun_shard"


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mlm-0.16.1")
    archive = subprocess.run(["git", "-C", os.environ["PATCHLANE_MEGATRON_GIT"], "archive",
                              "core_v0.16.1", "megatron"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive.stdout, check=True)
    return root


@pytest.mark.parametrize("world_size", [1, 2])
def test_fails_without_passes_with_on_the_0_16_1_tree_with_the_backport(
        tree: Path, tmp_path: Path, world_size: int) -> None:
    entry = startup.current().registry.get(ENTRY)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tree), os.environ.get("PYTHONPATH")]))}
    without = run_case(entry, Mode.WITHOUT, world_size=world_size, workdir=tmp_path, env=env)
    assert without.outcome is RunOutcome.FAIL, without.message
    assert "issue #7428" in without.message
    with_ = run_case(entry, Mode.WITH, world_size=world_size, workdir=tmp_path, env=env)
    assert with_.outcome is RunOutcome.PASS, with_.message
    audit = with_.ranks[0]["audit"]["decision"]
    assert audit["outcome"] == "applied" and "source tree" in (audit["version_source"] or "")


def test_without_the_backport_there_is_nothing_to_fix(tree: Path, tmp_path: Path) -> None:
    import subprocess as sp
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(tree), os.environ.get("PYTHONPATH")])),
        "PATCHLANE_ONLY": ENTRY, "PATCHLANE_DISABLE": ENTRY}  # the backport not applied
    out = sp.run([sys.executable, "-m", "patchlane.sweep.runner", "--entry", ENTRY,
                  "--mode", "without", "--workdir", str(tmp_path)], env=env,
                 capture_output=True, text=True, timeout=600)
    assert '"outcome": "pass"' in out.stdout.splitlines()[-1], out.stdout[-2000:]

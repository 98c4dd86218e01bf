"""liger_flce_weighted_none against the installed real liger-kernel (CPU: Triton interpreter).
Other releases (0.6.2 skipped, 0.6.3/0.7.0 guarding, 0.8.2/0.8.5 upstream-fixed) run in the
release matrix (tests/releases/test_matrix.py)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.sweep.reproduce import Mode, RunOutcome, run_case

ENTRY_ID = "liger_flce_weighted_none"

try:
    LIGER = metadata.version("liger-kernel")
except metadata.PackageNotFoundError:
    LIGER = None

pytestmark = [pytest.mark.upstream, pytest.mark.slow,
              pytest.mark.skipif(LIGER is None, reason="liger-kernel is not installed")]


def test_affected_release_fails_without_and_passes_with(tmp_path: Path) -> None:
    entry = startup.current().registry.get(ENTRY_ID)
    without = run_case(entry, Mode.WITHOUT, workdir=tmp_path)
    assert without.outcome is RunOutcome.FAIL, (without.message, without.ranks)
    assert "Liger-Kernel #968" in without.message and "off by" in without.message
    assert without.ranks[0]["audit"]["decision"]["installed"] == LIGER
    with_ = run_case(entry, Mode.WITH, workdir=tmp_path)
    assert with_.outcome is RunOutcome.PASS, (with_.message, with_.ranks)
    audit = with_.ranks[0]["audit"]
    assert audit["decision"]["outcome"] == "applied"
    # 'none' went through the routed path; mean and sum stayed on liger's fused kernels
    assert audit["paths"]["routed"] >= 6 and audit["paths"]["fused"] == 2, audit["paths"]
    # and the receipt says why each path was taken
    assert "rows by torch ops (cpu tensors)" in audit["path_reasons"]["routed"], audit
    assert audit["path_reasons"]["fused"].startswith("reduction="), audit


@pytest.mark.gpu
def test_cuda_lane(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    entry = startup.current().registry.get(ENTRY_ID)
    assert run_case(entry, Mode.WITHOUT, lane="cuda", workdir=tmp_path).outcome is \
        RunOutcome.FAIL
    assert run_case(entry, Mode.WITH, lane="cuda", workdir=tmp_path).outcome is RunOutcome.PASS

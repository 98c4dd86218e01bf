"""mcore_dsa_cp_validation_capture_gate's own logic (its target, megatron-core 0.19, cannot be
installed here: this tests the overlay's branching with a stand-in validator, not the fix)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from patchlane.loading import load_file
from patchlane.testing.capture import capture_check

ROOT = Path(__file__).resolve().parents[2]
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def overlay() -> Any:
    return load_file("mcore_dsa_cp_validation_capture_gate", "overlay",
                      ROOT / "patches" / "mcore_dsa_cp_validation_capture_gate.py")


def host_syncing_validator(sq: int, skv: int, cp_size: int, cp_group: Any = None,
                           device: Any = None) -> None:
    """Shaped like upstream's: host data, a sync in a branch, .item()."""
    lens = torch.tensor([sq])
    if not torch.all(lens == sq):
        raise RuntimeError("mismatch")
    if skv != sq and skv != int(lens.sum().item()) * cp_size:
        raise RuntimeError("Non-packed DSA allgather CP expects uniform lengths")


def test_eager_calls_run_the_full_validation(overlay: Any) -> None:
    calls = []

    def wrapped(*args: Any, **kwargs: Any) -> None:
        calls.append(args)
        host_syncing_validator(*args, **kwargs)

    overlay.overlay(wrapped, None, (8, 16, 2, None, "cpu"), {})
    assert calls == [(8, 16, 2, None, "cpu")]
    with pytest.raises(RuntimeError):
        overlay.overlay(wrapped, None, (8, 17, 2, None, "cpu"), {})


def test_under_capture_only_the_host_side_check_runs(overlay: Any) -> None:
    with capture_check(lane="cpu") as unpatched:
        host_syncing_validator(8, 16, 2)
    assert not unpatched.ok  # the stand-in is capture-illegal on its own
    with capture_check(lane="cpu") as report:
        overlay.overlay(host_syncing_validator, None, (8, 16, 2, None, "cpu"), {})
    assert report.ok, report.violations
    with capture_check(lane="cpu"), pytest.raises(RuntimeError, match="uniform"):
        overlay.overlay(host_syncing_validator, None, (8, 17, 2, None, "cpu"), {})

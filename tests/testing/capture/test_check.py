"""capture_check / CaptureCheck / check_call / is_capturing: raise_on_first, order, nesting,
exits on every path, one region per object, lane selection, warm-up, lazy import.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import CaptureError, capture_check, check_call  # noqa: E402

from .conftest import HAS_CUDA, assert_frame, here, mode_depths  # noqa: E402


def test_raise_on_first_stops_before_the_op_and_names_it(x: Any) -> None:
    ran = []
    with pytest.raises(CaptureError) as info, \
            capture_check(lane="cpu", raise_on_first=True) as report:
        x.add(1)
        line = here() + 1
        torch.nonzero(x)
        ran.append("after")
    assert ran == []
    err = info.value
    assert (err.violation.op, err.violation.rule) == ("aten.nonzero.default",
                                                       "data-dependent-shape")
    assert_frame(err.violation, line, "test_raise_on_first_stops_before_the_op_and_names_it")
    for part in (err.violation.op, err.violation.rule, err.violation.frame):
        assert part in str(err)
    assert report.violations == [err.violation]


def test_without_raise_on_first_every_violation_is_recorded_in_order(x: Any) -> None:
    with capture_check(lane="cpu") as report:
        x[0].item()
        x.tolist()
        torch.tensor(2.0)
        x.cpu()
        x.to("meta")
        torch.unique(x)
    assert [v.rule for v in report.violations] == [
        "host-sync", "host-sync", "host-data", "device-to-host", "host-to-device",
        "data-dependent-shape"]


def test_nested_checks_both_see_the_inner_region(x: Any) -> None:
    before = mode_depths()
    with capture_check(lane="cpu") as outer:
        x.tolist()
        with capture_check(lane="cpu") as inner:
            x[0].item()
        torch.nonzero(x)
        assert mode_depths() == (before[0] + 1, before[1] + 1)
    assert [v.rule for v in inner.violations] == ["host-sync"]
    assert [v.op for v in outer.violations] == [
        "Tensor.tolist", "aten._local_scalar_dense.default", "aten.nonzero.default"]
    assert mode_depths() == before


def test_exceptions_propagate_and_the_modes_are_always_exited(x: Any) -> None:
    before = mode_depths()
    with pytest.raises(ValueError, match="boom"), capture_check(lane="cpu") as report:
        x.tolist()
        raise ValueError("boom")
    assert mode_depths() == before
    x[0].item()  # after the region: not recorded
    assert [v.op for v in report.violations] == ["Tensor.tolist"]


def test_nothing_leaks_after_a_clean_exit(x: Any) -> None:
    before = mode_depths()
    with capture_check(lane="cpu") as report:
        x.add(1)
    assert mode_depths() == before
    x.tolist()
    torch.nonzero(x)
    assert report.ok


def test_a_check_is_entered_once() -> None:
    check = capture_check(lane="cpu")
    with check:
        pass
    with pytest.raises(RuntimeError, match="once"), check:
        pass


def test_lane_is_validated_and_auto_selected() -> None:
    with pytest.raises(ValueError, match="lane"):
        capture_check(lane="tpu")
    assert capture_check().lane == ("cuda" if HAS_CUDA else "cpu")
    if not HAS_CUDA:
        with pytest.raises(RuntimeError, match="CUDA"):
            capture_check(lane="cuda")


def test_check_call_warms_up_once_then_checks(x: Any) -> None:
    calls = []

    def step() -> None:
        calls.append(1)
        x.tolist()

    report = check_call(step, lane="cpu", warmup=True)
    assert len(calls) == 2
    assert [v.op for v in report.violations] == ["Tensor.tolist"]
    assert check_call(lambda: x * 2, lane="cpu", warmup=False).ok


def test_importing_the_module_does_not_import_torch() -> None:
    import subprocess

    code = ("import sys, patchlane.testing.capture; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


def test_is_capturing_follows_the_region() -> None:
    from patchlane.testing.capture import is_capturing

    assert not is_capturing()
    with capture_check(lane="cpu"):
        assert is_capturing()
        with capture_check(lane="cpu"):
            assert is_capturing()
        assert is_capturing()
    assert not is_capturing()
    with pytest.raises(KeyError), capture_check(lane="cpu"):
        raise KeyError("boom")
    assert not is_capturing()


def test_the_package_exports_the_public_api() -> None:
    import patchlane.testing.capture as capture

    assert sorted(capture.__all__) == sorted([
        "RULES", "CaptureCheck", "CaptureError", "CaptureReport", "CaptureViolation", "Rule",
        "StepCheck", "capture_check", "check_call", "check_step", "is_capturing"])
    for name in capture.__all__:
        assert getattr(capture, name) is not None, name
    assert isinstance(capture_check(lane="cpu"), capture.CaptureCheck)

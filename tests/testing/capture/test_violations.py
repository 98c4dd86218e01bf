"""CaptureViolation / CaptureReport: JSON-ready records and the text a failing assert shows."""

from __future__ import annotations

import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import (  # noqa: E402
    RULES,
    CaptureError,
    CaptureReport,
    CaptureViolation,
    capture_check,
)


def test_as_dict_is_json_ready(x: Any) -> None:
    with capture_check(lane="cpu") as report:
        x.tolist()
        torch.nonzero(x)
    data = json.loads(json.dumps(report.as_dict()))
    assert data["lane"] == "cpu" and data["ok"] is False and data["completed"] is True
    assert [v["rule"] for v in data["violations"]] == ["host-sync", "data-dependent-shape"]
    assert set(data["violations"][0]) == {"op", "rule", "frame", "message"}
    assert data["violations"][0] == report.violations[0].as_dict()
    assert set(RULES) == {"host-sync", "host-data", "device-to-host", "host-to-device",
                          "data-dependent-shape"}


def test_format_says_ok_or_lists_each_violation() -> None:
    assert CaptureReport(lane="cpu").format() == "capture check (cpu lane): no violations"
    first = CaptureViolation(op="Tensor.tolist", rule="host-sync", frame="f.py:1 in g",
                             message="Tensor.tolist at f.py:1 in g ...")
    report = CaptureReport(lane="cuda", violations=[first], completed=False)
    assert str(report) == report.format() == (
        "capture check (cuda lane): 1 violation(s), region ended early by a capture error\n"
        "  - Tensor.tolist at f.py:1 in g ...")
    assert not report.ok


def test_capture_error_carries_the_violation_and_the_fix() -> None:
    violation = CaptureViolation(op="aten.nonzero.default", rule="data-dependent-shape",
                                 frame="f.py:1 in g", message="aten.nonzero.default at f.py:1.")
    error = CaptureError(violation)
    assert error.violation is violation
    assert str(error).startswith("aten.nonzero.default at f.py:1. Fix: ")

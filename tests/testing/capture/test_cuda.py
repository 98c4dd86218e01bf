"""The cuda lane: a real capture (the ``gpu`` tests skip without CUDA)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import (  # noqa: E402
    CaptureError,
    CaptureViolation,
    capture_check,
    check_call,
)
from patchlane.testing.capture.cuda import (  # noqa: E402
    first_line,
    is_capture_error,
    rule_from_error,
)

from .conftest import assert_frame, gpu, here, needs_cuda, single  # noqa: E402


@gpu
@needs_cuda
def test_cuda_lane_legal_region_is_ok_and_restores_sync_mode() -> None:
    x = torch.randn(64, device="cuda")
    w = torch.randn(64, 64, device="cuda", requires_grad=True)
    scale = torch.tensor(0.5, device="cuda")

    def step() -> None:
        y = torch.softmax(w @ x, 0) * scale
        torch.where(y > 0, y, 0.0).sum().backward()

    mode = torch.cuda.get_sync_debug_mode()
    stream = torch.cuda.current_stream()
    report = check_call(step, lane="cuda", warmup=True)
    assert report.ok, report.format()
    assert report.completed
    assert torch.cuda.get_sync_debug_mode() == mode
    assert torch.cuda.current_stream() == stream
    assert not torch.cuda.is_current_stream_capturing()


@gpu
@needs_cuda
def test_cuda_lane_item_is_named_once_and_ends_the_region() -> None:
    x = torch.randn(4, device="cuda")
    x.sum()
    mode = torch.cuda.get_sync_debug_mode()
    ran = []
    with capture_check(lane="cuda") as report:
        line = here() + 1
        x.sum().item()
        ran.append("after")
    v = single(report)
    assert (v.op, v.rule) == ("aten._local_scalar_dense.default", "host-sync")
    assert_frame(v, line, "test_cuda_lane_item_is_named_once_and_ends_the_region")
    assert ran == [] and not report.completed
    assert not torch.cuda.is_current_stream_capturing()
    assert torch.cuda.get_sync_debug_mode() == mode
    torch.cuda.synchronize()  # the device is usable again


@gpu
@needs_cuda
def test_cuda_lane_raise_on_first_and_nonzero() -> None:
    x = torch.randn(4, device="cuda")
    x.nonzero()
    with pytest.raises(CaptureError) as info, capture_check(lane="cuda", raise_on_first=True):
        torch.nonzero(x)
    assert info.value.violation.rule == "data-dependent-shape"
    assert not torch.cuda.is_current_stream_capturing()


@gpu
@needs_cuda
def test_cuda_lane_device_to_host_copy() -> None:
    x = torch.randn(4, device="cuda")
    with capture_check(lane="cuda") as report:
        x.cpu()
    v = report.violations[0]
    assert (v.op, v.rule) == ("Tensor.cpu", "device-to-host")
    assert len(report.violations) == 1, report.format()


@pytest.mark.parametrize("error, capture", [
    (RuntimeError("CUDA error: operation not permitted when stream is capturing"), True),
    (RuntimeError("called a synchronizing CUDA operation"), True),
    (RuntimeError("CUDA error: operation failed due to a previous error during capture"), True),
    (RuntimeError("CUDA out of memory"), False),
    (ValueError("stream is capturing"), False),
    (CaptureError(CaptureViolation("op", "host-sync", "f.py:1 in g", "capturing")), False),
], ids=["not-permitted", "sync-debug-mode", "invalidated", "oom", "not-runtime", "ours"])
def test_which_errors_are_capture_errors(error: BaseException, capture: bool) -> None:
    """Runs without CUDA: the texts CUDA and torch's sync debug mode raise under capture."""
    assert is_capture_error(error) is capture


def test_rule_and_first_line_of_a_capture_error() -> None:
    copy = RuntimeError("cudaMemcpyAsync device to host while capturing\nmore detail")
    assert rule_from_error(copy) == "device-to-host"
    assert rule_from_error(RuntimeError("called a synchronizing CUDA operation")) == "host-sync"
    assert first_line(copy) == "RuntimeError: cudaMemcpyAsync device to host while capturing"
    assert first_line(RuntimeError()) == "RuntimeError: "

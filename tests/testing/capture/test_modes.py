"""The modes see backward: ops issued during ``loss.backward()`` (custom
``autograd.Function.backward`` code included) are judged, blamed on the backward's own line.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import CaptureError, capture_check  # noqa: E402

from .conftest import assert_frame, gpu, here, needs_cuda, single  # noqa: E402

BACKWARD_LINE: dict[str, int] = {}


class HostScaledIdentity(torch.autograd.Function):
    """Like upstream code that builds a loss scale with torch.tensor(1.0) inside backward."""

    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        return a.clone()

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        BACKWARD_LINE["tensor"] = here() + 1
        scale = torch.tensor(1.0, device=grad.device)
        return grad * scale


class SyncingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: Any) -> Any:
        return a * 2

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        BACKWARD_LINE["item"] = here() + 1
        if grad.sum().item() > 1e9:
            return grad
        return grad * 2


def test_host_data_in_a_custom_backward_is_caught_during_backward() -> None:
    a = torch.randn(3, requires_grad=True)
    with capture_check(lane="cpu") as report:
        out = HostScaledIdentity.apply(a)
        out.sum().backward()
    v = single(report)
    assert (v.op, v.rule) == ("aten.lift_fresh.default", "host-data")
    assert_frame(v, BACKWARD_LINE["tensor"], "backward")
    assert torch.equal(a.grad, torch.ones(3))


def test_sync_in_a_custom_backward_is_caught_during_backward() -> None:
    a = torch.randn(3, requires_grad=True)
    with capture_check(lane="cpu") as report:
        SyncingBackward.apply(a).sum().backward()
    v = single(report)
    assert (v.op, v.rule) == ("aten._local_scalar_dense.default", "host-sync")
    assert_frame(v, BACKWARD_LINE["item"], "backward")


def test_raise_on_first_raises_out_of_backward() -> None:
    a = torch.randn(3, requires_grad=True)
    out = HostScaledIdentity.apply(a)
    with pytest.raises(CaptureError) as info, capture_check(lane="cpu", raise_on_first=True):
        out.sum().backward()
    assert_frame(info.value.violation, BACKWARD_LINE["tensor"], "backward")
    assert a.grad is None


def test_builtin_backward_of_mask_indexing_is_flagged_at_the_backward_call(mask: Any) -> None:
    a = torch.randn(4, requires_grad=True)
    picked = a[mask]  # outside the region
    with capture_check(lane="cpu") as report:
        line = here() + 1
        picked.sum().backward()
    v = single(report)  # index_put(accumulate=True) with the bool mask
    assert v.rule == "data-dependent-shape"
    assert_frame(v, line, "test_builtin_backward_of_mask_indexing_is_flagged_at_the_backward_call")


@gpu
@needs_cuda
def test_cuda_lane_catches_host_data_in_backward() -> None:
    a = torch.randn(3, device="cuda", requires_grad=True)
    HostScaledIdentity.apply(a).sum().backward()  # warm-up
    a.grad = None
    with capture_check(lane="cuda") as report:
        line = here() + 1
        HostScaledIdentity.apply(a).sum().backward()
    v = single(report)
    assert v.rule in ("host-data", "host-sync"), report.format()
    # On an H100 (torch 2.11) CUDA ran this backward on the autograd engine's device thread,
    # beyond the calling thread's rule modes: the capture error is named at the backward()
    # call, saying so; the cpu lane names the line inside the backward (the test above).
    if v.frame.endswith(" in backward"):
        assert_frame(v, BACKWARD_LINE["tensor"], "backward")
    else:
        assert_frame(v, line, "test_cuda_lane_catches_host_data_in_backward")
        assert "inside an autograd backward" in v.message, v.message


def test_an_error_through_autograd_says_where_the_rules_could_not_follow() -> None:
    # the message of a capture error that came up through loss.backward(), without a GPU:
    # the recorder is given the real traceback of an error raised in a backward
    from patchlane.testing.capture.recorder import Recorder
    from patchlane.testing.capture.violations import CaptureReport

    class Refused(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            raise RuntimeError("CUDA error: operation not permitted when stream is capturing")

    x = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError) as caught:
        Refused.apply(x).sum().backward()
    recorder = Recorder(CaptureReport(lane="cuda"), raise_on_first=False)
    v = recorder.region_error(caught.value, caught.value.__traceback__)
    assert "inside an autograd backward" in v.message and v.rule == "host-sync"
    # as seen on an H100: the Python-level rule for Tensor.backward ties the error to its call
    recorder = Recorder(CaptureReport(lane="cuda"), raise_on_first=False)
    recorder.attribute(RuntimeError("Cannot copy between CPU and CUDA tensors during CUDA "
                                    "graph capture"), "Tensor.backward", None)
    (v,) = recorder.report.violations
    assert v.op == "Tensor.backward" and "inside an autograd backward" in v.message

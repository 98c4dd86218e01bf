"""patchlane.testing.capture: would a region be legal inside a CUDA graph capture?

CPU lane: the capture rules emulated with a dispatch mode + a torch-function mode. Each rule has
a positive case (flagged once, right rule, frame on the offending test line) and the legal ops
must stay unflagged. The ``gpu`` tests run a real capture and skip without CUDA.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import (  # noqa: E402
    RULES,
    CaptureError,
    CaptureReport,
    CaptureViolation,
    capture_check,
    check_call,
)

F = torch.nn.functional
THIS_FILE = Path(__file__).name
HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


def here() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def single(report: CaptureReport) -> CaptureViolation:
    assert len(report.violations) == 1, report.format()
    return report.violations[0]


def assert_frame(violation: CaptureViolation, line: int, function: str) -> None:
    path, _, rest = violation.frame.partition(":")
    assert Path(path).name == THIS_FILE, violation.frame
    assert rest == f"{line} in {function}", violation.frame


def mode_depths() -> tuple[int, int]:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    return len(_get_current_dispatch_mode_stack()), torch._C._len_torch_function_stack()


@pytest.fixture
def x() -> Any:
    return torch.tensor([1.5, -2.0, 0.0, 3.0])


@pytest.fixture
def mask(x: Any) -> Any:
    return x > 0


# -- host-sync ------------------------------------------------------------------------------


def test_item_is_a_host_sync_at_the_calling_line(x: Any) -> None:
    with capture_check(lane="cpu") as report:
        line = here() + 1
        x[0].item()
    v = single(report)
    assert (v.op, v.rule) == ("aten._local_scalar_dense.default", "host-sync")
    assert_frame(v, line, "test_item_is_a_host_sync_at_the_calling_line")
    assert v.op in v.message and v.frame in v.message and "host-sync" in v.message
    assert not report.ok


def test_bool_and_if_on_a_tensor_are_one_host_sync_each(x: Any) -> None:
    with capture_check(lane="cpu") as report:
        first = here() + 1
        bool(x[0])
        second = here() + 1
        if x[1]:
            pass
    assert [v.rule for v in report.violations] == ["host-sync", "host-sync"], report.format()
    assert_frame(report.violations[0], first, "test_bool_and_if_on_a_tensor_are_one_host_sync_each")
    assert_frame(report.violations[1], second,
                 "test_bool_and_if_on_a_tensor_are_one_host_sync_each")


def test_tolist_is_caught_at_python_level(x: Any) -> None:
    with capture_check(lane="cpu") as report:
        line = here() + 1
        x.tolist()
    v = single(report)
    assert (v.op, v.rule) == ("Tensor.tolist", "host-sync")
    assert_frame(v, line, "test_tolist_is_caught_at_python_level")


@pytest.mark.parametrize("call", [
    lambda x: torch.equal(x, x),
    lambda x: torch.allclose(x, x),
    lambda x: print(x),
    lambda x: f"{x[0]:.2f}",
    lambda x: int(x[0]),
], ids=["equal", "allclose", "print", "format", "int"])
def test_other_host_reads_sync_once(x: Any, call: Callable[[Any], Any],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    with capture_check(lane="cpu") as report:
        call(x)
    v = single(report)
    assert v.rule == "host-sync"
    assert_frame(v, call.__code__.co_firstlineno, "<lambda>")


# -- data-dependent shapes --------------------------------------------------------------------


@pytest.mark.parametrize("call, op", [
    (lambda x, m: torch.nonzero(x), "aten.nonzero.default"),
    (lambda x, m: x.nonzero(), "aten.nonzero.default"),
    (lambda x, m: torch.where(m), "aten.nonzero.default"),
    (lambda x, m: x[m], "aten.index.Tensor"),
    (lambda x, m: torch.masked_select(x, m), "aten.masked_select.default"),
    (lambda x, m: torch.unique(x), "aten._unique2.default"),
    (lambda x, m: torch.unique_consecutive(x), "aten.unique_consecutive.default"),
    (lambda x, m: torch.repeat_interleave(m.long()), "aten.repeat_interleave.Tensor"),
    (lambda x, m: torch.bincount(m.long()), "aten.bincount.default"),
    (lambda x, m: F.one_hot(m.long()), "torch.nn.functional.one_hot"),
], ids=["torch.nonzero", "Tensor.nonzero", "where1", "mask-index", "masked_select", "unique",
        "unique_consecutive", "repeat_interleave", "bincount", "one_hot"])
def test_data_dependent_shapes_are_flagged_once(x: Any, mask: Any, call: Callable[..., Any],
                                                op: str) -> None:
    with capture_check(lane="cpu") as report:
        call(x, mask)
    v = single(report)
    assert (v.op, v.rule) == (op, "data-dependent-shape")
    assert_frame(v, call.__code__.co_firstlineno, "<lambda>")


def test_mask_assignment_syncs_unless_the_value_is_one_host_scalar(x: Any, mask: Any) -> None:
    y = x.clone()
    values = torch.zeros(int(mask.sum()))
    with capture_check(lane="cpu") as report:
        y[mask] = 0.0  # lowered to masked_fill_: legal
        y[1:3] = 1.0  # fill_: legal
        line = here() + 1
        y[mask] = values
    v = single(report)
    assert (v.op, v.rule) == ("aten.index_put_.default", "data-dependent-shape")
    assert_frame(v, line, "test_mask_assignment_syncs_unless_the_value_is_one_host_scalar")


def test_scalar_assignment_to_one_element_is_a_host_to_device_copy(x: Any) -> None:
    """On a GPU tensor ``y[0] = 1.0`` copies a 0-d CPU tensor into a 0-d slice: a synchronous
    host-to-device copy (a slice or a mask takes fill_ / masked_fill_ instead)."""
    y = x.clone()
    with capture_check(lane="cpu") as report:
        line = here() + 1
        y[0] = 1.0
    v = single(report)
    assert (v.op, v.rule) == ("aten.copy_.default", "host-to-device")
    assert "fill_" in v.message
    assert_frame(v, line, "test_scalar_assignment_to_one_element_is_a_host_to_device_copy")


# -- host data --------------------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda x: torch.tensor(1.0),
    lambda x: torch.tensor([1.0, 2.0], dtype=torch.float64),
    lambda x: torch.as_tensor([1, 2]),
    lambda x: x.new_tensor([1.0]),
    lambda x: x[[0, 1]],
], ids=["tensor", "tensor-list", "as_tensor", "new_tensor", "list-index"])
def test_host_data_is_flagged_once(x: Any, call: Callable[[Any], Any]) -> None:
    with capture_check(lane="cpu") as report:
        call(x)
    v = single(report)
    assert v.rule == "host-data"
    assert v.op in ("aten.lift_fresh.default", "aten.lift_fresh_copy.default")
    assert_frame(v, call.__code__.co_firstlineno, "<lambda>")


def test_host_data_stays_host_data_on_the_cpu_lane() -> None:
    with capture_check(lane="cpu") as report:
        t = torch.tensor([3, 4])
        t.tolist()  # a host tensor on a GPU too: reading it does not sync
        int(t[0] + 1)
    assert [v.rule for v in report.violations] == ["host-data"], report.format()


def test_list_index_assignment_flags_the_index_not_the_scalar(x: Any) -> None:
    y = x.clone()
    with capture_check(lane="cpu") as report:
        y[[0, 1]] = 2.0
    v = single(report)
    assert (v.op, v.rule) == ("aten.lift_fresh.default", "host-data")


# -- device <-> host copies -------------------------------------------------------------------


@pytest.mark.parametrize("call, op", [
    (lambda x: x.cpu(), "Tensor.cpu"),
    (lambda x: x.numpy(), "Tensor.numpy"),
    (lambda x: x.to("cpu"), "Tensor.to"),
    (lambda x: x.to(device="cpu"), "Tensor.to"),
    (lambda x: x.to("cpu", torch.float64), "Tensor.to"),
    (lambda x: x.detach().__array__(), "Tensor.__array__"),
], ids=["cpu", "numpy", "to-str", "to-kw", "to-device-dtype", "array"])
def test_moves_to_host_are_device_to_host(x: Any, call: Callable[[Any], Any], op: str) -> None:
    with capture_check(lane="cpu") as report:
        call(x)
    v = single(report)
    assert (v.op, v.rule) == (op, "device-to-host")
    assert_frame(v, call.__code__.co_firstlineno, "<lambda>")


@pytest.mark.parametrize("call, op", [
    (lambda x: x.to("meta"), "Tensor.to"),
    (lambda x: x.to(device="meta"), "Tensor.to"),
    (lambda x: torch.empty(4, device="meta").copy_(x), "aten.copy_.default"),
], ids=["to-meta", "to-device-meta", "copy_-into-meta"])
def test_moves_off_the_host_are_host_to_device(x: Any, call: Callable[[Any], Any],
                                               op: str) -> None:
    with capture_check(lane="cpu") as report:
        call(x)
    v = single(report)
    assert (v.op, v.rule) == (op, "host-to-device")
    assert_frame(v, call.__code__.co_firstlineno, "<lambda>")


@pytest.mark.parametrize("call", [lambda x: x.cuda(), lambda x: x.to("cuda")],
                         ids=["cuda", "to-cuda"])
def test_cuda_copy_is_host_to_device_and_raises_before_running(
        x: Any, call: Callable[[Any], Any]) -> None:
    with pytest.raises(CaptureError) as info, capture_check(lane="cpu", raise_on_first=True):
        call(x)
    assert info.value.violation.rule == "host-to-device"
    assert info.value.violation.op in ("Tensor.cuda", "Tensor.to")


def test_copying_region_host_data_into_a_device_tensor(x: Any) -> None:
    y = torch.empty(2)
    with capture_check(lane="cpu") as report:
        host = torch.tensor([1.0, 2.0])
        line = here() + 1
        y.copy_(host)
    assert [v.rule for v in report.violations] == ["host-data", "host-to-device"]
    assert_frame(report.violations[1], line, "test_copying_region_host_data_into_a_device_tensor")


# -- legal ops --------------------------------------------------------------------------------

SCALE = torch.tensor(0.5)
LEGAL: dict[str, Callable[[Any, Any], Any]] = {
    "empty": lambda x, m: torch.empty(3),
    "zeros": lambda x, m: torch.zeros(3, dtype=torch.long),
    "ones": lambda x, m: torch.ones(2, 2),
    "full": lambda x, m: torch.full((3,), 2.0),
    "like": lambda x, m: (torch.empty_like(x), torch.zeros_like(x), torch.ones_like(x),
                          torch.full_like(x, 7.0), torch.rand_like(x)),
    "fill": lambda x, m: (x.clone().fill_(1.0), x.clone().zero_()),
    "arith": lambda x, m: (x * 2.0 + 1) / 3 - x.exp().log1p() ** 2,
    "topk-sort": lambda x, m: (x.topk(2), x.sort(), x.argmax(), x.cumsum(0)),
    "scatter": lambda x, m: torch.zeros(4).scatter_(0, torch.arange(4), x),
    "scatter_add": lambda x, m: torch.zeros(4).scatter_add_(0, torch.zeros(4, dtype=torch.long),
                                                            x),
    "index_select-gather": lambda x, m: (x.index_select(0, torch.arange(2)),
                                         x.gather(0, torch.arange(4)),
                                         x[torch.arange(2)]),
    "softmax-logsumexp": lambda x, m: (torch.softmax(x, 0), torch.logsumexp(x, 0),
                                       F.log_softmax(x, 0)),
    "matmul-einsum": lambda x, m: (x @ x, torch.einsum("i,j->ij", x, x),
                                   torch.randn(2, 3).matmul(torch.randn(3, 2))),
    "where3": lambda x, m: (torch.where(m, x, 0.0), torch.where(m, x, torch.zeros_like(x))),
    "masked_fill": lambda x, m: (x.masked_fill(m, 0.0), x.masked_fill(m, SCALE)),
    "clone-copy_": lambda x, m: (x.clone(), torch.empty(4).copy_(x), x.to(torch.float64),
                                 x.to(x), x.double(), x.detach()),
    "to-own-device": lambda x, m: (x.to(x.device), x.to(device=x.device, dtype=torch.float16)),
    "ones_like-times-scale": lambda x, m: torch.ones_like(x) * SCALE,
    "index-put-int": lambda x, m: x.clone().index_put_((torch.arange(2),), torch.ones(2)),
    "nonzero_static": lambda x, m: torch.nonzero_static(x, size=4),
    "repeat_interleave-static": lambda x, m: torch.repeat_interleave(
        x, torch.ones(4, dtype=torch.long), output_size=4),
    "one_hot-num_classes": lambda x, m: F.one_hot(torch.arange(3), 4),
    "shape-math": lambda x, m: x.view(2, 2).t().reshape(-1)[1:3] if x.shape[0] == 4 else None,
    "cat-stack-split": lambda x, m: (torch.cat([x, x]), torch.stack([x, x]), x.split([1, 3])),
}


@pytest.mark.parametrize("name", sorted(LEGAL))
def test_legal_ops_are_not_flagged(x: Any, mask: Any, name: str) -> None:
    with capture_check(lane="cpu") as report:
        LEGAL[name](x, mask)
    assert report.ok, report.format()


def test_forward_and_backward_of_a_small_model_are_legal() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.LayerNorm(8),
                                torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.Linear(8, 5))
    ids, target = torch.arange(4), torch.tensor([0, 1, 4, -100])
    with capture_check(lane="cpu") as report:
        loss = F.cross_entropy(model(ids), target, ignore_index=-100)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    assert report.ok, report.format()
    assert model[2].weight.grad is not None


@pytest.mark.filterwarnings("ignore:.*all_gather_into_tensor.*:FutureWarning")
def test_gloo_collectives_are_legal(tmp_path: Path) -> None:
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available() or dist.is_initialized():
        pytest.skip("torch.distributed unavailable or already initialised here")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1)
    try:
        t = torch.arange(4, dtype=torch.float32)
        out = torch.empty(4)
        with capture_check(lane="cpu") as report:
            dist.all_reduce(t)
            dist.all_gather_into_tensor(out, t)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
        assert report.ok, report.format()
        assert torch.equal(out, torch.arange(4, dtype=torch.float32))
    finally:
        dist.destroy_process_group()


# -- backward ---------------------------------------------------------------------------------

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


# -- raise_on_first, report, lifecycle ------------------------------------------------------------


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


def test_frames_skip_torch_internals() -> None:
    """torch.unique is Python in torch/functional.py; the frame is still this file."""
    with capture_check(lane="cpu") as report:
        line = here() + 1
        torch.unique(torch.arange(4) % 2, return_counts=True)
    v = single(report)
    assert "torch" + os.sep not in v.frame
    assert_frame(v, line, "test_frames_skip_torch_internals")


def test_frames_skip_the_standard_library(x: Any) -> None:
    """string.Formatter formats the tensor from string.py; the frame is still this file."""
    import string

    with capture_check(lane="cpu") as report:
        line = here() + 1
        string.Formatter().format("{:.1f}", x[0])
    v = single(report)
    assert v.rule == "host-sync"
    assert_frame(v, line, "test_frames_skip_the_standard_library")


def test_importing_the_module_does_not_import_torch() -> None:
    import subprocess

    code = ("import sys, patchlane.testing.capture; "
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


# -- CUDA lane (real capture) -----------------------------------------------------------------


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
def test_cuda_lane_catches_host_data_in_backward() -> None:
    a = torch.randn(3, device="cuda", requires_grad=True)
    HostScaledIdentity.apply(a).sum().backward()  # warm-up
    a.grad = None
    with capture_check(lane="cuda") as report:
        HostScaledIdentity.apply(a).sum().backward()
    v = single(report)
    # named by the rules if the op reaches the dispatcher before CUDA refuses it, else the
    # capture error itself (the copy runs below the dispatcher's Python key): same frame
    assert v.rule in ("host-data", "host-sync"), report.format()
    assert_frame(v, BACKWARD_LINE["tensor"], "backward")


@gpu
@needs_cuda
def test_cuda_lane_device_to_host_copy() -> None:
    x = torch.randn(4, device="cuda")
    with capture_check(lane="cuda") as report:
        x.cpu()
    v = report.violations[0]
    assert (v.op, v.rule) == ("Tensor.cpu", "device-to-host")
    assert len(report.violations) == 1, report.format()


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

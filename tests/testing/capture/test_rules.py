"""The rules, one positive case each (cpu lane): flagged once, under the right rule, with the
frame on the offending test line. What must stay unflagged is in ``test_legal.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import CaptureError, capture_check  # noqa: E402

from .conftest import assert_frame, here, single  # noqa: E402

F = torch.nn.functional


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

"""Which tensors count as device tensors: on the cpu lane everything but host data made in the
region (and what is computed from it alone); on the cuda lane, what is on a GPU.
"""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import capture_check  # noqa: E402
from patchlane.testing.capture.placement import Placement  # noqa: E402

from .conftest import assert_frame, here  # noqa: E402


def test_host_data_stays_host_data_on_the_cpu_lane() -> None:
    with capture_check(lane="cpu") as report:
        t = torch.tensor([3, 4])
        t.tolist()  # a host tensor on a GPU too: reading it does not sync
        int(t[0] + 1)
    assert [v.rule for v in report.violations] == ["host-data"], report.format()


def test_copying_region_host_data_into_a_device_tensor(x: Any) -> None:
    y = torch.empty(2)
    with capture_check(lane="cpu") as report:
        host = torch.tensor([1.0, 2.0])
        line = here() + 1
        y.copy_(host)
    assert [v.rule for v in report.violations] == ["host-data", "host-to-device"]
    assert_frame(report.violations[1], line, "test_copying_region_host_data_into_a_device_tensor")


def test_cpu_lane_every_tensor_is_a_device_tensor_until_made_from_host_data() -> None:
    placement = Placement("cpu")
    device, host = torch.ones(2), torch.ones(2)
    assert placement.on_device(device) and placement.on_device(host)
    assert not placement.on_device(2.0)  # not a tensor
    placement.propagate_host(torch.ops.aten.lift_fresh.default, (host,), host)
    assert not placement.on_device(host) and placement.on_device(device)

    from_host = host + 1
    placement.propagate_host(torch.ops.aten.add.Tensor, (host, 1), from_host)
    mixed = host + device
    placement.propagate_host(torch.ops.aten.add.Tensor, (host, device), mixed)
    assert not placement.on_device(from_host)  # computed from host data alone
    assert placement.on_device(mixed)  # a device input puts it on the device

    placement.clear()
    assert placement.on_device(host)


def test_cuda_lane_a_tensor_is_where_it_is() -> None:
    placement = Placement("cuda")
    t = torch.ones(2)
    assert not placement.on_device(t)
    placement.propagate_host(torch.ops.aten.lift_fresh.default, (t,), t)
    assert not placement.on_device(t)
    assert placement.on_device(torch.ones(2, device="meta"))

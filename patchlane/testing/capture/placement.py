"""Would a tensor live on the GPU in the program being checked?

``cuda`` lane: where it is (anything but the CPU is a device).

``cpu`` lane: nothing is captured and every tensor is on the CPU, so the lane emulates the GPU
program: every tensor counts as a *device* tensor, except host data made inside the region
(the outputs of ``torch.tensor(...)`` and friends, already reported as ``host-data``, and what
is computed from them alone), which stays host data, as it would on a GPU.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from .rules import HOST_DATA_OPS

__all__ = ["Placement", "flat"]


def flat(values: Sequence[Any]) -> list[Any]:
    """Top-level values and the items of top-level lists/tuples (aten's TensorList args)."""
    out: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            out.extend(value)
        else:
            out.append(value)
    return out


class Placement:
    """One check's view of which tensors are on the device and which are host data."""

    def __init__(self, lane: str) -> None:
        self.lane = lane
        self._host: dict[int, weakref.ref[Any]] = {}
        """cpu lane: tensors made from host data in the region, by id (weak: ids get reused)."""

    def on_device(self, tensor: Any) -> bool:
        """Would this tensor live on the GPU in the program being checked?"""
        import torch

        if not isinstance(tensor, torch.Tensor):
            return False
        if self.lane == "cuda":
            return bool(tensor.device.type != "cpu")
        ref = self._host.get(id(tensor))
        return ref is None or ref() is not tensor

    def propagate_host(self, func: Any, args: Sequence[Any], out: Any) -> None:
        """cpu lane, after each aten op: data made from host values stays host data, and so does
        whatever is computed from host tensors only (a GPU program would compute it on the CPU
        too)."""
        import torch

        if func._schema.name not in HOST_DATA_OPS:
            inputs = [a for a in flat(args) if isinstance(a, torch.Tensor)]
            if not inputs or any(self.on_device(t) for t in inputs):
                return
        for tensor in flat((out,)):
            if isinstance(tensor, torch.Tensor):
                self._host[id(tensor)] = weakref.ref(tensor)

    def clear(self) -> None:
        self._host.clear()

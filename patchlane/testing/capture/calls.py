"""Python-level rules: calls that never reach the dispatcher on CPU tensors.

A ``TorchFunctionMode`` (:mod:`.modes`) sees ``.tolist()``, ``.numpy()``, ``np.asarray(t)``,
printing or formatting a tensor, ``.cpu()``, ``.cuda()``, ``.to(...)``, ``x[i] = v`` and
``F.one_hot`` before they run. A rule that fires here silences the aten ops the same call issues,
so each offending call is reported once.

An explicit move is judged by where it *asks* to go: naming the host (``.cpu()``,
``.to("cpu")``, ``.to(device="cpu")``, ``.numpy()``) is ``device-to-host``; naming any other
device (``.cuda()``, ``.to("cuda")``, ``.to("meta")``) is ``host-to-device``. ``.to(t.device)``
(a device object equal to the tensor's own device, as device-agnostic code writes it),
``.to(other_tensor)`` and dtype-only ``.to`` stay put and are legal. On a machine without CUDA
``.cuda()`` then fails as it would anyway (after being recorded; with ``raise_on_first=True``
the :class:`CaptureError` comes first).
"""

from __future__ import annotations

import functools
import numbers
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .placement import Placement
from .rules import CALL_WHAT, Rule

__all__ = ["CALL_NAMES", "Call", "CallStack", "call_name", "call_rules", "judge_call"]

CALL_NAMES: Mapping[str, str] = {
    "tolist": "Tensor.tolist", "numpy": "Tensor.numpy", "array": "Tensor.__array__",
    "repr": "Tensor.__repr__", "format": "Tensor.__format__", "cpu": "Tensor.cpu",
    "cuda": "Tensor.cuda", "to": "Tensor.to", "setitem": "Tensor.__setitem__",
    "one_hot": "torch.nn.functional.one_hot",
}
_READS_VALUES = ("tolist", "repr", "format")  # host-sync when the tensor is on the device
_TO_HOST = ("numpy", "array", "cpu")  # device-to-host when the tensor is on the device


class Call:
    """One torch-function call in flight on this thread."""

    __slots__ = ("scalar_value", "setitem", "silent")

    def __init__(self) -> None:
        self.silent = False
        """A Python-level rule decided about this call: its aten ops are not judged again."""
        self.setitem = False
        self.scalar_value = False
        """``Tensor.__setitem__`` with a Python scalar value: the 0-d tensor PyTorch wraps it
        in (``aten.lift_fresh`` on CPU) is not host data entering the graph."""


class CallStack:
    """The torch-function calls in flight, per thread (one stack per check)."""

    def __init__(self) -> None:
        self._tls = threading.local()

    def current(self) -> list[Call]:
        """This thread's stack, innermost call last."""
        calls: list[Call] | None = getattr(self._tls, "calls", None)
        if calls is None:
            calls = self._tls.calls = []
        return calls


@functools.cache
def call_rules() -> dict[Any, str]:
    """torch-function objects the Python-level rules look at, keyed by identity."""
    import torch
    import torch.nn.functional as F

    t = torch.Tensor
    return {
        t.tolist: "tolist", t.numpy: "numpy", t.__array__: "array", t.__repr__: "repr",
        t.__format__: "format", t.cpu: "cpu", t.cuda: "cuda", t.to: "to",
        t.__setitem__: "setitem", F.one_hot: "one_hot",
    }


def call_name(func: Any) -> str:
    """``Tensor.cpu``, ``torch.tensor``, ``module.qualname``: how a message names a call."""
    qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", None)
    if not isinstance(qualname, str):
        return repr(func)
    for prefix in ("TensorBase.", "Tensor."):
        if qualname.startswith(prefix):
            return "Tensor." + qualname[len(prefix):]
    if qualname.startswith("_VariableFunctionsClass."):
        return "torch." + qualname.partition(".")[2]
    module = getattr(func, "__module__", None)
    return f"{module}.{qualname}" if isinstance(module, str) and module else qualname


def judge_call(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], call: Call,
               placement: Placement) -> tuple[str, Rule, str] | None:
    """(op, rule, what) if this Python-level call breaks a rule; notes on ``call`` what the aten
    rules need to know about it (``x[i] = v``, ``F.one_hot``)."""
    kind = call_rules().get(func)
    if kind is None:
        return None
    name = CALL_NAMES[kind]
    self_ = args[0] if args else None
    if kind == "setitem":
        call.setitem = True
        call.scalar_value = len(args) > 2 and isinstance(args[2], numbers.Number)
        return None
    if kind == "one_hot":
        call.silent = True  # its CPU-only range checks are not there on a GPU
        num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
        if num_classes == -1:
            return name, "data-dependent-shape", CALL_WHAT[name]
        return None
    if kind in _READS_VALUES:
        return (name, "host-sync", CALL_WHAT[name]) if placement.on_device(self_) else None
    if kind in _TO_HOST:
        return (name, "device-to-host", CALL_WHAT[name]) if placement.on_device(self_) else None
    source = getattr(getattr(self_, "device", None), "type", None)
    if kind == "cuda":
        return (name, "host-to-device", CALL_WHAT[name]) if source == "cpu" else None
    return _judge_to(name, self_, source, args, kwargs, placement)


def _judge_to(name: str, self_: Any, source: str | None, args: Sequence[Any],
              kwargs: Mapping[str, Any], placement: Placement) -> tuple[str, Rule, str] | None:
    """``Tensor.to(...)``."""
    target, literal = _to_target(args, kwargs, placement.lane)
    if target is None or source is None:
        return None
    if target == "cpu":
        # cpu lane: only a move that names the host ("cpu") is one; .to(t.device) in
        # device-agnostic code stays where it is, on a GPU as here
        moves = literal and placement.on_device(self_) if placement.lane == "cpu" \
            else source != "cpu"
        if moves:
            return name, "device-to-host", f"moves a tensor from {source} to host memory"
        return None
    if source == "cpu":
        return name, "host-to-device", f"copies a host tensor to {target}"
    return None


def _device_type(device: Any) -> str | None:
    import torch

    if isinstance(device, torch.device):
        return str(device.type)
    if isinstance(device, str):
        return str(torch.device(device).type)
    if isinstance(device, int) and not isinstance(device, bool):
        return "cuda"  # an accelerator ordinal
    return None


def _to_target(args: Sequence[Any], kwargs: Mapping[str, Any],
               lane: str) -> tuple[str | None, bool]:
    """The device type ``Tensor.to(...)`` moves to (None: dtype only, or the same device) and
    whether it was named by a string (``"cpu"``) rather than a device object."""
    import torch

    if kwargs.get("device") is not None:
        return _device_type(kwargs["device"]), isinstance(kwargs["device"], str)
    for arg in args[1:]:
        if isinstance(arg, torch.Tensor):  # .to(other): other's device; one device on cpu lane
            return (None if lane == "cpu" else str(arg.device.type)), False
        target = _device_type(arg)
        if target is not None:
            return target, isinstance(arg, str)
    return None, False

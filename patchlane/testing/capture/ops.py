"""aten-level rules: the verdict on one aten op, forward and backward.

A ``TorchDispatchMode`` (:mod:`.modes`) sees every aten op the region issues, including those
the autograd engine runs during ``loss.backward()``. ``bool(t)`` is reported here, as its
``aten._local_scalar_dense``; ops issued by a Python-level call that :mod:`.calls` already
reported are not judged again.

Copies (``copy_``, ``_to_copy``, ``_copy_from``) are judged by their source and destination
devices: into the host is ``device-to-host``, out of it (a ``copy_`` into a meta tensor too) is
``host-to-device``. On the ``cpu`` lane, where both ends are on the CPU, by what they stand for
(:mod:`.placement`): host data made in the region copied into a device tensor, or the reverse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .calls import Call
from .placement import Placement
from .rules import (
    COPY_OPS,
    HOST_DATA_OPS,
    HOST_SYNC_OPS,
    INDEX_PUT_OPS,
    SETITEM_COPY,
    SHAPE_OPS,
    Rule,
    op_what,
)

__all__ = ["judge_op"]


def judge_op(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], call: Call | None,
             placement: Placement) -> tuple[Rule, str] | None:
    """(rule, what) if this aten op breaks a rule; ``call`` is the Python-level call it runs
    under, if any."""
    import torch

    name = func._schema.name
    what = op_what(name)
    self_ = args[0] if args else None
    tags = getattr(func, "tags", ())
    if name in HOST_DATA_OPS:
        if (call is not None and call.scalar_value and isinstance(self_, torch.Tensor)
                and self_.dim() == 0):
            call.scalar_value = False  # the value of `x[i] = 1.0`, filled on the device
            return None
        return "host-data", what
    if name in COPY_OPS:
        verdict = _judge_copy(name, args, kwargs, placement)
        if (verdict is not None and verdict[0] == "host-to-device" and call is not None
                and call.setitem and name == "aten::copy_" and args[1].dim() == 0):
            return "host-to-device", SETITEM_COPY
        return verdict
    if name in HOST_SYNC_OPS or torch.Tag.data_dependent_output in tags:
        tensors = [a for a in args[:2] if isinstance(a, torch.Tensor)]
        if any(placement.on_device(t) for t in tensors):
            return "host-sync", what or "reads a device value on the host"
        return None
    if name in SHAPE_OPS or torch.Tag.dynamic_output_shape in tags:
        if not placement.on_device(self_) or _static_after_all(name, args, kwargs, placement):
            return None
        return "data-dependent-shape", what or "has an output size that depends on values"
    return None


def _static_after_all(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                      placement: Placement) -> bool:
    """A shape op whose arguments fix its output size after all (no mask, output_size=,
    num_classes=)."""
    import torch

    if name == "aten::index":
        return not _has_mask(args)
    if name in INDEX_PUT_OPS:
        return not _mask_put_syncs(args, kwargs, placement)
    if name == "aten::repeat_interleave":
        tensor_repeats = any(isinstance(a, torch.Tensor) for a in args[:2])
        return not tensor_repeats or kwargs.get("output_size") is not None
    if name == "aten::one_hot":
        num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
        return bool(num_classes != -1)
    return False


def _judge_copy(name: str, args: Sequence[Any], kwargs: Mapping[str, Any],
                placement: Placement) -> tuple[Rule, str] | None:
    import torch

    source = args[0]
    if not isinstance(source, torch.Tensor):
        return None
    dest: Any = None
    if name == "aten::_to_copy":
        target = kwargs.get("device")
        src = str(source.device.type)
        dst = str(torch.device(target).type) if target is not None else src
    elif name == "aten::copy_":  # copy_(self=dest, src)
        dest, source = args[0], args[1]
        src, dst = str(source.device.type), str(dest.device.type)
    else:  # _copy_from(self, dst)
        dest = args[1]
        src, dst = str(source.device.type), str(dest.device.type)
    if src != dst:
        if dst == "cpu":
            return "device-to-host", f"copies a tensor from {src} to host memory"
        if src == "cpu":
            return "host-to-device", f"copies a host tensor to {dst}"
        return None
    if placement.lane == "cpu" and isinstance(dest, torch.Tensor):
        # both on the CPU: judge by what they stand for (host data vs device tensors)
        src_device, dst_device = placement.on_device(source), placement.on_device(dest)
        if src_device and not dst_device:
            return "device-to-host", "copies a device tensor into a host tensor"
        if dst_device and not src_device:
            return "host-to-device", "copies host data (made in the region) into a " \
                                     "device tensor"
    return None


def _mask_put_syncs(args: Sequence[Any], kwargs: Mapping[str, Any],
                    placement: Placement) -> bool:
    """``x[mask] = v`` syncs (nonzero) unless ATen lowers it to ``masked_fill_``: one bool
    index, no accumulation and a single-element value in host memory."""
    import torch

    if not _has_mask(args):
        return False
    indices = [i for i in args[1] if i is not None]
    value = args[2] if len(args) > 2 else kwargs.get("values")
    accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
    single_host_scalar = (isinstance(value, torch.Tensor) and value.numel() == 1
                          and not placement.on_device(value))
    return bool(accumulate) or len(indices) != 1 or not single_host_scalar


def _has_mask(args: Sequence[Any]) -> bool:
    import torch

    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
               for i in indices or ())

"""What a CUDA graph capture does not allow: the five rules, and what each flagged op does.

Rules (``CaptureViolation.rule``):

``host-sync``
    the host reads a device value: ``Tensor.item()``, ``bool(t)`` / ``if t:`` / ``int(t)`` /
    ``float(t)`` (all ``aten._local_scalar_dense``), ``torch.equal``, ``torch.allclose``,
    ``Tensor.tolist()``, printing or formatting a tensor (``Tensor.__repr__`` /
    ``Tensor.__format__``).
``data-dependent-shape``
    the output size depends on the values, so PyTorch syncs to size it: ``torch.nonzero`` /
    ``Tensor.nonzero`` / ``torch.argwhere`` / one-argument ``torch.where`` (``aten.nonzero``),
    boolean-mask indexing ``x[mask]`` (``aten.index.Tensor`` with a bool index),
    ``x[mask] = v`` unless ``v`` is a single host scalar (``aten.index_put_``),
    ``torch.masked_select``, ``torch.unique`` / ``unique_consecutive`` (``aten._unique2``, ...),
    ``torch.bincount``, ``torch.repeat_interleave`` with tensor repeats and no ``output_size``,
    ``F.one_hot`` without ``num_classes``; any other op PyTorch tags ``dynamic_output_shape``
    or ``data_dependent_output``.
``host-data``
    Python or NumPy data becomes a tensor inside the region: ``torch.tensor``,
    ``torch.as_tensor(list)``, ``Tensor.new_tensor``, ``torch.from_numpy``, a Python list used
    as an index (``aten.lift_fresh``). Under capture its value is frozen into the graph.
``device-to-host`` / ``host-to-device``
    an explicit copy between host and device: ``.cpu()``, ``.numpy()``, ``.to("cpu")``,
    ``.cuda()``, ``.to("cuda")``, any ``copy_`` / ``_to_copy`` whose source and destination
    are host and device, and ``x[i] = 1.0`` on a single element (PyTorch wraps the scalar in a
    0-d CPU tensor and copies it synchronously; ``x[a:b] = 1.0``, ``x[mask] = 1.0`` and
    ``x[i].fill_(1.0)`` fill on the device and are legal).

This module is data only: the op sets each rule looks at and the words a violation message
uses. The verdicts are taken in :mod:`.ops` (aten ops) and :mod:`.calls` (Python-level calls).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

__all__ = [
    "CALL_WHAT",
    "COPY_OPS",
    "HOST_DATA_OPS",
    "HOST_SYNC_OPS",
    "INDEX_PUT_OPS",
    "RULES",
    "SETITEM_COPY",
    "SHAPE_OPS",
    "Rule",
    "op_what",
]

Rule = Literal["host-sync", "host-data", "device-to-host", "host-to-device",
               "data-dependent-shape"]

RULES: Mapping[str, str] = {
    "host-sync": "the host waits for the device to produce a value, a stream synchronisation "
                 "that is not permitted while a stream is capturing (and a replay would never "
                 "refresh the host-side value)",
    "data-dependent-shape": "the output size depends on the tensor's values, so PyTorch copies "
                            "a count to the host and synchronises to size it; a CUDA graph "
                            "needs every shape fixed at capture time",
    "host-data": "host data is copied into a new tensor at capture time: the copy from pageable "
                 "host memory is not capturable and the value would be frozen into the graph, "
                 "so every replay silently reuses it",
    "device-to-host": "a device-to-host copy synchronises the stream, which is not permitted "
                      "while it is capturing",
    "host-to-device": "a host-to-device copy from pageable host memory is not capturable, and a "
                      "replay would re-read whatever the captured host address holds then",
}

# -- aten ops, by the rule they can break (schema names, without the overload) -------------

HOST_SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero",
                           "aten::equal", "aten::allclose"})
SHAPE_OPS = frozenset({"aten::nonzero", "aten::argwhere", "aten::masked_select",
                       "aten::_unique", "aten::_unique2", "aten::unique_dim",
                       "aten::unique_consecutive", "aten::unique_dim_consecutive",
                       "aten::bincount", "aten::repeat_interleave", "aten::one_hot",
                       "aten::index", "aten::index_put", "aten::index_put_",
                       "aten::_index_put_impl_"})
HOST_DATA_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
COPY_OPS = frozenset({"aten::_to_copy", "aten::copy_", "aten::_copy_from",
                      "aten::_copy_from_and_resize"})
INDEX_PUT_OPS = frozenset({"aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})

# -- what each op does, for the message -----------------------------------------------------

_SCALAR_READ = "reads a tensor element into a Python number (Tensor.item(), bool(t), `if t:`, " \
               "int(t), float(t))"
_UNIQUE = "returns one element per distinct value (torch.unique)"
_OP_WHAT: Mapping[str, str] = {
    "aten::_local_scalar_dense": _SCALAR_READ,
    "aten::item": _SCALAR_READ,
    "aten::is_nonzero": "evaluates a tensor as a Python bool (bool(t), `if t:`)",
    "aten::equal": "compares two tensors into a Python bool (torch.equal)",
    "aten::allclose": "compares two tensors into a Python bool (torch.allclose)",
    "aten::nonzero": "returns one row per non-zero element (torch.nonzero, Tensor.nonzero, "
                     "torch.argwhere, one-argument torch.where)",
    "aten::argwhere": "returns one row per non-zero element (torch.argwhere)",
    "aten::masked_select": "returns one element per True in the mask (torch.masked_select)",
    "aten::_unique": _UNIQUE,
    "aten::_unique2": _UNIQUE,
    "aten::unique_dim": _UNIQUE,
    "aten::unique_consecutive": "returns one element per run of equal values "
                                "(torch.unique_consecutive)",
    "aten::unique_dim_consecutive": "returns one element per run of equal values "
                                    "(torch.unique_consecutive)",
    "aten::bincount": "sizes its output from the largest input value (torch.bincount)",
    "aten::repeat_interleave": "sizes its output from the sum of tensor repeats "
                               "(torch.repeat_interleave; pass output_size= to fix it)",
    "aten::one_hot": "infers num_classes from the data (F.one_hot without num_classes)",
    "aten::index": "indexes with a boolean mask (x[mask]): one result element per True",
    "aten::index_put": "assigns through a boolean mask (x[mask] = v) with a value that is not a "
                       "single host scalar, which expands the mask with nonzero() first",
    "aten::lift_fresh": "builds a tensor from Python/NumPy data (torch.tensor, torch.as_tensor, "
                        "Tensor.new_tensor, torch.from_numpy, a list used as an index)",
}
_OP_WHAT_ALIASES: Mapping[str, str] = {
    "aten::index_put_": "aten::index_put", "aten::_index_put_impl_": "aten::index_put",
    "aten::lift_fresh_copy": "aten::lift_fresh"}


def op_what(name: str) -> str:
    """What the aten op ``name`` (``aten::nonzero``) does, for the message; "" if unknown."""
    return _OP_WHAT.get(_OP_WHAT_ALIASES.get(name, name), "")


SETITEM_COPY = ("assigns a host scalar to one element (x[i] = v on a GPU tensor copies a 0-d "
                "host tensor with a synchronous copy; x[i].fill_(v) or a slice does not)")

CALL_WHAT: Mapping[str, str] = {
    "Tensor.tolist": "converts a tensor to (nested) Python lists",
    "Tensor.numpy": "exposes a tensor as a NumPy array in host memory",
    "Tensor.__array__": "exposes a tensor as a NumPy array in host memory (np.asarray)",
    "Tensor.__repr__": "formats a tensor's values as text (print, str, repr, logging)",
    "Tensor.__format__": "formats a tensor's values as text (an f-string or str.format)",
    "Tensor.cpu": "copies a tensor to host memory",
    "Tensor.cuda": "copies a host tensor to the GPU",
    "Tensor.to": "moves a tensor between host and device",
    "torch.nn.functional.one_hot": "infers num_classes from the data "
                                   "(F.one_hot without num_classes)",
}

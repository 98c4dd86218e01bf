"""Would this region be legal inside a CUDA graph capture?

::

    from patchlane.testing.capture import capture_check

    with capture_check(lane="cpu") as report:     # "cpu" | "cuda" | None (cuda when available)
        loss = model(batch).sum()
        loss.backward()
    assert report.ok, report.format()

Each :class:`CaptureViolation` names the op, the rule it breaks, and the first frame outside
torch, this module and the standard library (the user or upstream line that issued it, also
inside an ``autograd.Function.backward`` run by ``loss.backward()``).

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

Lanes
-----
``cpu``: nothing is captured; a ``TorchDispatchMode`` (every aten op, forward and backward)
and a ``TorchFunctionMode`` (Python-level calls that never reach the dispatcher on CPU
tensors: ``.tolist()``, ``.numpy()``, ``.cpu()``, ``.to("cpu")``, ``.cuda()``, printing)
apply the rules above. Every tensor is on the CPU, so the lane emulates the GPU program:

* every tensor counts as a *device* tensor, except host data made inside the region (the
  outputs of ``torch.tensor(...)`` and friends, already reported as ``host-data``, and what
  is computed from them alone), which stays host data, as it would on a GPU;
* an explicit move is judged by where it *asks* to go: naming the host (``.cpu()``,
  ``.to("cpu")``, ``.to(device="cpu")``, ``.numpy()``) is ``device-to-host``; naming any other
  device (``.cuda()``, ``.to("cuda")``, ``.to("meta")``, a ``copy_`` into a meta tensor) is
  ``host-to-device``. ``.to(t.device)`` (a device object equal to the tensor's own device, as
  device-agnostic code writes it), ``.to(other_tensor)`` and dtype-only ``.to`` stay put and
  are legal. On a machine without CUDA ``.cuda()`` then fails as it would anyway (after being
  recorded; with ``raise_on_first=True`` the :class:`CaptureError` comes first).

Each offending call is reported once: a Python-level rule that fires silences the aten ops
that call issues, and ``bool(t)`` is reported as its ``aten._local_scalar_dense``.

``cuda``: the region runs under a real ``torch.cuda.graph(torch.cuda.CUDAGraph())`` capture on
a side stream with ``torch.cuda.set_sync_debug_mode("error")`` (restored afterwards), with
the same modes on top to name the op. A capture error (``operation not permitted when stream
is capturing``, ``called a synchronizing CUDA operation``, an invalidated capture) becomes a
violation, attributed to the op the modes were running (else to the innermost non-torch
frame of its traceback); with ``raise_on_first=False`` it ends the region early
(``report.completed`` is False) and is not re-raised. Only tensors on a GPU count as device
tensors there. Real capture needs a warm-up: run the region once eagerly before checking it,
or use :func:`check_call` with ``warmup=True``. The outermost ``cuda`` check owns the
capture; a nested one only adds its rules.

Backward: the engine runs CPU backward on the calling thread and CUDA backward on its device
threads, carrying the thread-local mode stacks with it, so the dispatch rules see every op
issued during ``loss.backward()`` (custom ``autograd.Function.backward`` code included) and the
frame is the backward's own line. PyTorch disables a torch-function mode while its handler
runs, and ``loss.backward()`` is itself such a call, so the Python-level rules (``.tolist()``,
``.cpu()``, ... on CPU tensors) do not see calls made *inside* backward on the ``cpu`` lane;
on the ``cuda`` lane those calls reach the dispatcher (or the capture) and are caught there.

The check is for the calling thread plus the autograd engine; other threads are not watched.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import sys
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any, Literal

from ..errors import PatchlaneError

__all__ = [
    "RULES",
    "CaptureCheck",
    "CaptureError",
    "CaptureReport",
    "CaptureViolation",
    "Rule",
    "capture_check",
    "check_call",
    "is_capturing",
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

_LANES = ("cpu", "cuda")
_STATE = threading.local()


def is_capturing() -> bool:
    """True inside a ``capture_check`` region on this thread (either lane), or while the current
    CUDA stream is capturing. Overlays that gate host-syncing validation use it, so the CPU
    emulation and a real capture take the same branch."""
    if getattr(_STATE, "depth", 0) > 0:
        return True
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available()
                and torch.cuda.is_current_stream_capturing())


@dataclass(frozen=True)
class CaptureViolation:
    """One call that would break (or be silently wrong in) a CUDA graph capture."""

    op: str
    """The aten overload (``aten._local_scalar_dense.default``) or the Python call
    (``Tensor.tolist``)."""
    rule: Rule
    frame: str
    """``path/file.py:123 in function``: the first frame outside torch,
    patchlane.testing.capture and
    the standard library."""
    message: str

    def as_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@dataclass
class CaptureReport:
    """What one :func:`capture_check` region did that a CUDA graph capture would not allow."""

    lane: str
    violations: list[CaptureViolation] = field(default_factory=list)
    completed: bool = True
    """False when a real capture error ended the region early (``cuda`` lane only)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "ok": self.ok,
            "completed": self.completed,
            "violations": [v.as_dict() for v in self.violations],
        }

    def format(self) -> str:
        head = f"capture check ({self.lane} lane): "
        if self.ok:
            return head + "no violations"
        lines = [head + f"{len(self.violations)} violation(s)"
                 + ("" if self.completed else ", region ended early by a capture error")]
        lines += [f"  - {v.message}" for v in self.violations]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()


class CaptureError(PatchlaneError):
    """Raised at the first violation when ``raise_on_first=True``; carries ``.violation``."""

    def __init__(self, violation: CaptureViolation) -> None:
        self.violation = violation
        super().__init__(
            f"{violation.message} Fix: move it out of the captured region, keep the value on "
            f"the device, or give the op a static shape (capture_check(raise_on_first=True))")


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
_OP_WHAT_ALIASES = {"aten::index_put_": "aten::index_put", "aten::_index_put_impl_":
                    "aten::index_put", "aten::lift_fresh_copy": "aten::lift_fresh"}
_SETITEM_COPY = ("assigns a host scalar to one element (x[i] = v on a GPU tensor copies a 0-d "
                 "host tensor with a synchronous copy; x[i].fill_(v) or a slice does not)")
_HOST_SYNC_OPS = frozenset({"aten::_local_scalar_dense", "aten::item", "aten::is_nonzero",
                            "aten::equal", "aten::allclose"})
_SHAPE_OPS = frozenset({"aten::nonzero", "aten::argwhere", "aten::masked_select",
                        "aten::_unique", "aten::_unique2", "aten::unique_dim",
                        "aten::unique_consecutive", "aten::unique_dim_consecutive",
                        "aten::bincount", "aten::repeat_interleave", "aten::one_hot",
                        "aten::index", "aten::index_put", "aten::index_put_",
                        "aten::_index_put_impl_"})
_HOST_DATA_OPS = frozenset({"aten::lift_fresh", "aten::lift_fresh_copy"})
_COPY_OPS = frozenset({"aten::_to_copy", "aten::copy_", "aten::_copy_from",
                       "aten::_copy_from_and_resize"})
_INDEX_PUT_OPS = frozenset({"aten::index_put", "aten::index_put_", "aten::_index_put_impl_"})

_CALL_WHAT: Mapping[str, str] = {
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


# -- frames ---------------------------------------------------------------------------------

_TORCH_DIR: list[str] = []


def _torch_dir() -> str:
    if not _TORCH_DIR:
        import torch

        _TORCH_DIR.append(os.path.dirname(os.path.abspath(torch.__file__)) + os.sep)
    return _TORCH_DIR[0]


def _internal(frame: FrameType) -> bool:
    """torch, this module, or the standard library: never the frame a violation is blamed on."""
    module = frame.f_globals.get("__name__")
    name = module if isinstance(module, str) else ""
    top = name.partition(".")[0]
    filename = frame.f_code.co_filename
    return (name == __name__ or top == "torch" or top in sys.stdlib_module_names
            or filename.startswith("<frozen") or filename.startswith(_torch_dir()))


def _display_path(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if rel.startswith(os.pardir) else rel


def _describe(filename: str, lineno: int | None, function: str) -> str:
    return f"{_display_path(filename)}:{lineno} in {function}"


def _caller_frame(start: FrameType | None) -> str:
    frame = start
    while frame is not None:
        if not _internal(frame):
            return _describe(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return "<no frame outside torch (autograd engine or C++)>"


def _traceback_frame(tb: TracebackType | None) -> str:
    """The innermost frame of a traceback outside torch, this module and the stdlib."""
    found = "<no frame outside torch (autograd engine or C++)>"
    while tb is not None:
        if not _internal(tb.tb_frame):
            code = tb.tb_frame.f_code
            found = _describe(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def _is_capture_error(exc: BaseException) -> bool:
    if not isinstance(exc, RuntimeError) or isinstance(exc, CaptureError):
        return False
    text = str(exc).lower()
    return "captur" in text or "synchronizing cuda operation" in text


def _rule_from_error(exc: BaseException) -> Rule:
    text = str(exc).lower()
    if "host" in text and ("device" in text or "memcpy" in text):
        return "device-to-host"
    return "host-sync"


def _call_name(func: Any) -> str:
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


# -- the check ------------------------------------------------------------------------------


class _Call:
    """One torch-function call in flight on this thread."""

    __slots__ = ("scalar_value", "setitem", "silent")

    def __init__(self) -> None:
        self.silent = False
        """A Python-level rule decided about this call: its aten ops are not judged again."""
        self.setitem = False
        self.scalar_value = False
        """``Tensor.__setitem__`` with a Python scalar value: the 0-d tensor PyTorch wraps it
        in (``aten.lift_fresh`` on CPU) is not host data entering the graph."""


class CaptureCheck:
    """The context manager behind :func:`capture_check`; ``__enter__`` returns the report."""

    def __init__(self, lane: str | None = None, raise_on_first: bool = False) -> None:
        import torch

        if lane is None:
            lane = "cuda" if torch.cuda.is_available() else "cpu"
        if lane not in _LANES:
            raise ValueError(f"capture_check: lane must be one of {_LANES} or None, "
                             f"got {lane!r}")
        if lane == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("capture_check(lane='cuda') needs a CUDA device and none is "
                               "available; use lane='cpu' (dispatch-mode emulation) or None")
        self.lane = lane
        self.raise_on_first = raise_on_first
        self.report = CaptureReport(lane=lane)
        self._tls = threading.local()
        self._host: dict[int, weakref.ref[Any]] = {}
        self._attributed: list[tuple[BaseException, CaptureViolation]] = []
        self._modes: list[Any] = []
        self._entered = False
        self._capture: _Capture | None = None
        self._call_rules = _call_rules()

    # -- recording ----------------------------------------------------------------------------

    def _record(self, op: str, rule: Rule, what: str, frame: str | None = None,
                raise_now: bool = True) -> CaptureViolation:
        if frame is None:
            frame = _caller_frame(sys._getframe(1))
        message = (f"{op} at {frame} {what}; illegal under CUDA graph capture ({rule}): "
                   f"{RULES[rule]}.")
        violation = CaptureViolation(op=op, rule=rule, frame=frame, message=message)
        self.report.violations.append(violation)
        if raise_now and self.raise_on_first:
            raise CaptureError(violation)
        return violation

    def _attribute(self, exc: BaseException, op: str, violation: CaptureViolation | None,
                   rule: Rule | None = None) -> None:
        """Tie a real capture error raised by an op to a violation (recording one if the rules
        had not), so that the region's exit does not report it a second time."""
        if self.lane != "cuda" or not _is_capture_error(exc) or self._attribution(exc):
            return
        if violation is None:
            violation = self._record(op, rule or _rule_from_error(exc),
                                     f"raised a CUDA capture error ({_first_line(exc)})",
                                     frame=_caller_frame(sys._getframe(1)), raise_now=False)
        self._attributed.append((exc, violation))

    def _attribution(self, exc: BaseException) -> CaptureViolation | None:
        for seen, violation in self._attributed:
            if seen is exc or (type(seen) is type(exc) and str(seen) == str(exc)):
                return violation
        return None

    # -- per-thread call stack, host tensors ---------------------------------------------------

    def _calls(self) -> list[_Call]:
        calls: list[_Call] | None = getattr(self._tls, "calls", None)
        if calls is None:
            calls = self._tls.calls = []
        return calls

    def _mark_host(self, tensor: Any) -> None:
        self._host[id(tensor)] = weakref.ref(tensor)

    def _propagate_host(self, func: Any, args: Sequence[Any], out: Any) -> None:
        """cpu lane: data made from host values stays host data, and so does whatever is
        computed from host tensors only (a GPU program would compute it on the CPU too)."""
        import torch

        if func._schema.name not in _HOST_DATA_OPS:
            inputs = [a for a in _flat(args) if isinstance(a, torch.Tensor)]
            if not inputs or any(self._on_device(t) for t in inputs):
                return
        for tensor in _flat((out,)):
            if isinstance(tensor, torch.Tensor):
                self._mark_host(tensor)

    def _on_device(self, tensor: Any) -> bool:
        """Would this tensor live on the GPU in the program being checked?"""
        import torch

        if not isinstance(tensor, torch.Tensor):
            return False
        if self.lane == "cuda":
            return bool(tensor.device.type != "cpu")
        ref = self._host.get(id(tensor))
        return ref is None or ref() is not tensor

    # -- Python-level rules ---------------------------------------------------------------------

    def _judge_call(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                    call: _Call) -> tuple[str, Rule, str] | None:
        kind = self._call_rules.get(func)
        if kind is None:
            return None
        name = _CALL_NAMES[kind]
        self_ = args[0] if args else None
        if kind == "setitem":
            call.setitem = True
            call.scalar_value = len(args) > 2 and isinstance(args[2], numbers.Number)
            return None
        if kind == "one_hot":
            call.silent = True  # its CPU-only range checks are not there on a GPU
            num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
            if num_classes == -1:
                return name, "data-dependent-shape", _CALL_WHAT[name]
            return None
        if kind in ("tolist", "repr", "format"):
            return (name, "host-sync", _CALL_WHAT[name]) if self._on_device(self_) else None
        if kind in ("numpy", "array"):
            return (name, "device-to-host", _CALL_WHAT[name]) if self._on_device(self_) \
                else None
        if kind == "cpu":
            return (name, "device-to-host", _CALL_WHAT[name]) if self._on_device(self_) \
                else None
        source = getattr(getattr(self_, "device", None), "type", None)
        if kind == "cuda":
            return (name, "host-to-device", _CALL_WHAT[name]) if source == "cpu" else None
        # Tensor.to
        target, literal = _to_target(args, kwargs, self.lane)
        if target is None or source is None:
            return None
        if target == "cpu":
            # cpu lane: only a move that names the host ("cpu") is one; .to(t.device) in
            # device-agnostic code stays where it is, on a GPU as here
            moves = literal and self._on_device(self_) if self.lane == "cpu" \
                else source != "cpu"
            if moves:
                return name, "device-to-host", f"moves a tensor from {source} to host memory"
            return None
        if source == "cpu":
            return name, "host-to-device", f"copies a host tensor to {target}"
        return None

    # -- aten-level rules -----------------------------------------------------------------------

    def _judge_op(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any],
                  call: _Call | None) -> tuple[Rule, str] | None:
        import torch

        name = func._schema.name
        what = _OP_WHAT.get(_OP_WHAT_ALIASES.get(name, name), "")
        self_ = args[0] if args else None
        tags = getattr(func, "tags", ())
        if name in _HOST_DATA_OPS:
            if (call is not None and call.scalar_value and isinstance(self_, torch.Tensor)
                    and self_.dim() == 0):
                call.scalar_value = False  # the value of `x[i] = 1.0`, filled on the device
                return None
            return "host-data", what
        if name in _COPY_OPS:
            verdict = self._judge_copy(name, args, kwargs)
            if (verdict is not None and verdict[0] == "host-to-device" and call is not None
                    and call.setitem and name == "aten::copy_" and args[1].dim() == 0):
                return "host-to-device", _SETITEM_COPY
            return verdict
        if name in _HOST_SYNC_OPS or torch.Tag.data_dependent_output in tags:
            tensors = [a for a in args[:2] if isinstance(a, torch.Tensor)]
            if any(self._on_device(t) for t in tensors):
                return "host-sync", what or "reads a device value on the host"
            return None
        if name in _SHAPE_OPS or torch.Tag.dynamic_output_shape in tags:
            if not self._on_device(self_):
                return None
            if name == "aten::index":
                return ("data-dependent-shape", what) if _has_mask(args) else None
            if name in _INDEX_PUT_OPS:
                return ("data-dependent-shape", what) if self._mask_put_syncs(args, kwargs) \
                    else None
            if name == "aten::repeat_interleave":
                tensor_repeats = any(isinstance(a, torch.Tensor) for a in args[:2])
                if not tensor_repeats or kwargs.get("output_size") is not None:
                    return None
            if name == "aten::one_hot":
                num_classes = args[1] if len(args) > 1 else kwargs.get("num_classes", -1)
                if num_classes != -1:
                    return None
            return "data-dependent-shape", what or "has an output size that depends on values"
        return None

    def _judge_copy(self, name: str, args: Sequence[Any],
                    kwargs: Mapping[str, Any]) -> tuple[Rule, str] | None:
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
        if self.lane == "cpu" and isinstance(dest, torch.Tensor):
            # both on the CPU: judge by what they stand for (host data vs device tensors)
            src_device, dst_device = self._on_device(source), self._on_device(dest)
            if src_device and not dst_device:
                return "device-to-host", "copies a device tensor into a host tensor"
            if dst_device and not src_device:
                return "host-to-device", "copies host data (made in the region) into a " \
                                         "device tensor"
        return None

    def _mask_put_syncs(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """``x[mask] = v`` syncs (nonzero) unless ATen lowers it to ``masked_fill_``: one bool
        index, no accumulation and a single-element value in host memory."""
        import torch

        if not _has_mask(args):
            return False
        indices = [i for i in args[1] if i is not None]
        value = args[2] if len(args) > 2 else kwargs.get("values")
        accumulate = args[3] if len(args) > 3 else kwargs.get("accumulate", False)
        single_host_scalar = (isinstance(value, torch.Tensor) and value.numel() == 1
                              and not self._on_device(value))
        return bool(accumulate) or len(indices) != 1 or not single_host_scalar

    # -- context manager ----------------------------------------------------------------------

    def __enter__(self) -> CaptureReport:
        import torch

        if self._entered:
            raise RuntimeError("a capture_check object can be entered once; make a new one")
        self._entered = True
        function_mode, dispatch_mode = _mode_classes()
        if self.lane == "cuda" and not torch.cuda.is_current_stream_capturing():
            self._capture = _Capture()
            self._capture.begin()
        try:
            self._modes = [function_mode(self), dispatch_mode(self)]
            for mode in self._modes:
                mode.__enter__()
            _STATE.depth = getattr(_STATE, "depth", 0) + 1
        except BaseException:
            self._exit_modes()
            if self._capture is not None:
                self._capture.end()
            raise
        return self.report

    def _exit_modes(self) -> None:
        while self._modes:
            self._modes.pop().__exit__(None, None, None)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        try:
            self._exit_modes()
        finally:
            _STATE.depth = max(0, getattr(_STATE, "depth", 1) - 1)
            self._host.clear()
            end_error = self._capture.end() if self._capture is not None else None
        outer = _caller_frame(sys._getframe(1))
        if exc is not None and self.lane == "cuda" and _is_capture_error(exc):
            violation = self._attribution(exc)
            if violation is None:
                violation = self._record("<CUDA capture error>", _rule_from_error(exc),
                                         f"raised a CUDA capture error ({_first_line(exc)})",
                                         frame=_traceback_frame(tb), raise_now=False)
            self.report.completed = False
            if self.raise_on_first:
                raise CaptureError(violation) from exc
            return self._capture is not None  # a nested check leaves it to the capture owner
        if end_error is not None and exc is None and not self.report.violations:
            violation = self._record(
                "torch.cuda.CUDAGraph.capture_end", _rule_from_error(end_error),
                f"failed: the capture was invalidated by an operation that did not raise where "
                f"it was issued ({_first_line(end_error)})", frame=outer, raise_now=False)
            self.report.completed = False
            if self.raise_on_first:
                raise CaptureError(violation) from end_error
        return False


def _flat(values: Sequence[Any]) -> list[Any]:
    """Top-level values and the items of top-level lists/tuples (aten's TensorList args)."""
    flat: list[Any] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            flat.extend(value)
        else:
            flat.append(value)
    return flat


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _has_mask(args: Sequence[Any]) -> bool:
    import torch

    indices = args[1] if len(args) > 1 else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8)
               for i in indices or ())


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


_CALL_NAMES: Mapping[str, str] = {
    "tolist": "Tensor.tolist", "numpy": "Tensor.numpy", "array": "Tensor.__array__",
    "repr": "Tensor.__repr__", "format": "Tensor.__format__", "cpu": "Tensor.cpu",
    "cuda": "Tensor.cuda", "to": "Tensor.to", "setitem": "Tensor.__setitem__",
    "one_hot": "torch.nn.functional.one_hot",
}
_CALL_RULES: list[dict[Any, str]] = []
_ERROR_RULE_HINTS: Mapping[str, Rule] = {
    # the rule of a capture error raised inside a call no rule had flagged (cuda lane): e.g.
    # torch.tensor(v, device="cuda") copies to the device below the dispatcher's Python key
    "torch.tensor": "host-data", "torch.as_tensor": "host-data", "torch.asarray": "host-data",
    "torch.from_numpy": "host-data", "Tensor.new_tensor": "host-data",
    "Tensor.cuda": "host-to-device", "Tensor.cpu": "device-to-host",
    "Tensor.numpy": "device-to-host", "Tensor.tolist": "host-sync", "Tensor.item": "host-sync",
    "Tensor.__bool__": "host-sync", "Tensor.nonzero": "data-dependent-shape",
    "torch.nonzero": "data-dependent-shape", "torch.unique": "data-dependent-shape",
    "torch.masked_select": "data-dependent-shape",
}


def _call_rules() -> dict[Any, str]:
    """torch-function objects the Python-level rules look at, keyed by identity."""
    if not _CALL_RULES:
        import torch
        import torch.nn.functional as F

        t = torch.Tensor
        rules: dict[Any, str] = {
            t.tolist: "tolist", t.numpy: "numpy", t.__array__: "array", t.__repr__: "repr",
            t.__format__: "format", t.cpu: "cpu", t.cuda: "cuda", t.to: "to",
            t.__setitem__: "setitem", F.one_hot: "one_hot",
        }
        _CALL_RULES.append(rules)
    return _CALL_RULES[0]


class _Capture:
    """A real CUDA graph capture on a side stream, with sync debug mode "error"."""

    stream: Any
    stream_ctx: Any
    graph: Any
    graph_ctx: Any
    sync_mode: int

    def begin(self) -> None:
        import torch

        cuda: Any = torch.cuda
        self.sync_mode = int(cuda.get_sync_debug_mode())
        self.stream = cuda.Stream()
        self.stream.wait_stream(cuda.current_stream())
        self.stream_ctx = cuda.stream(self.stream)
        self.stream_ctx.__enter__()
        try:
            self.graph = cuda.CUDAGraph()
            self.graph_ctx = cuda.graph(self.graph, stream=self.stream)
            self.graph_ctx.__enter__()
        except BaseException:
            self.stream_ctx.__exit__(None, None, None)
            raise
        cuda.set_sync_debug_mode("error")

    def end(self) -> BaseException | None:
        """End the capture and restore the stream and sync mode; the capture_end error, if any."""
        import torch

        error: BaseException | None = None
        try:
            torch.cuda.set_sync_debug_mode(self.sync_mode)
            self.graph_ctx.__exit__(None, None, None)
        except RuntimeError as exc:  # cudaErrorStreamCaptureInvalidated and friends
            error = exc
        finally:
            self.stream_ctx.__exit__(None, None, None)
            torch.cuda.current_stream().wait_stream(self.stream)
            del self.graph  # nothing replays it: this was a check
        return error


_MODE_CLASSES: list[tuple[type[Any], type[Any]]] = []


def _mode_classes() -> tuple[type[Any], type[Any]]:
    if _MODE_CLASSES:
        return _MODE_CLASSES[0]
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class _FunctionRules(TorchFunctionMode):
        def __init__(self, check: CaptureCheck) -> None:
            super().__init__()
            self.check = check

        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            check = self.check
            call = _Call()
            calls = check._calls()
            calls.append(call)
            violation = None
            try:
                verdict = check._judge_call(func, args, kwargs, call)
                if verdict is not None:
                    call.silent = True
                    op, rule, what = verdict
                    violation = check._record(op, rule, what)
                return func(*args, **kwargs)
            except BaseException as exc:
                name = _call_name(func)
                check._attribute(exc, name, violation, _ERROR_RULE_HINTS.get(name))
                raise
            finally:
                calls.pop()

    class _DispatchRules(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self, check: CaptureCheck) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.check = check

        def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            check = self.check
            calls = check._calls()
            call = calls[-1] if calls else None
            violation = None
            verdict = None
            if not any(c.silent for c in calls):
                verdict = check._judge_op(func, args, kwargs, call)
                if verdict is not None:
                    violation = check._record(str(func), verdict[0], verdict[1])
            try:
                out = func(*args, **kwargs)
            except BaseException as exc:
                check._attribute(exc, str(func), violation)
                raise
            if check.lane == "cpu":
                check._propagate_host(func, args, out)
            return out

    _MODE_CLASSES.append((_FunctionRules, _DispatchRules))
    return _MODE_CLASSES[0]


def capture_check(lane: str | None = None, raise_on_first: bool = False) -> CaptureCheck:
    """Check that the ``with`` region would be legal inside a CUDA graph capture.

    ``lane``: ``"cpu"`` (dispatch-mode emulation), ``"cuda"`` (a real capture) or None (cuda
    when available). ``raise_on_first``: raise :class:`CaptureError` at the first violation,
    before the offending op runs; otherwise record them all in the report the ``with`` gives.
    """
    return CaptureCheck(lane=lane, raise_on_first=raise_on_first)


def check_call(fn: Callable[..., Any], args: Sequence[Any] = (),
               kwargs: Mapping[str, Any] | None = None, *, lane: str | None = None,
               raise_on_first: bool = False, warmup: bool = True) -> CaptureReport:
    """Run ``fn(*args, **kwargs)`` under :func:`capture_check` and return the report.

    ``warmup=True`` first runs it once eagerly, unchecked (on a side stream on the ``cuda``
    lane), as a real capture requires: lazy initialisation (cuBLAS handles, autotuning,
    optimizer state, allocator pools) must not happen during capture. Mind its side effects
    (gradients accumulate twice unless ``fn`` zeroes them).
    """
    kwargs = dict(kwargs or {})
    check = capture_check(lane=lane, raise_on_first=raise_on_first)
    if warmup:
        if check.lane == "cuda":
            import torch

            cuda: Any = torch.cuda
            side = cuda.Stream()
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):
                fn(*args, **kwargs)
            cuda.current_stream().wait_stream(side)
        else:
            fn(*args, **kwargs)
    with check as report:
        fn(*args, **kwargs)
    return report

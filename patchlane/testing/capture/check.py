"""The entry points: :func:`capture_check` (a ``with`` region), :func:`check_call` (one call,
warmed up first), :func:`check_step` (one training step run eagerly and checked, its results
side by side) and :func:`is_capturing`; :class:`CaptureCheck` is the context manager.

On both lanes the region runs once: the ``cpu`` lane runs it eagerly under the rule modes, the
``cuda`` lane captures it and, when the capture completed with no violation, replays the graph
once before the ``with`` ends. A result read after the region is therefore the region's result
on either lane; a comparison with an eager run belongs after it (or in :func:`check_step`).

A check puts together its collaborators: a :class:`~.placement.Placement` (which tensors are
device tensors), a :class:`~.recorder.Recorder` (violations into the report), the two rule
modes of :mod:`.modes`, and on the ``cuda`` lane a :class:`~.cuda.RealCapture`.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from .calls import CallStack, call_rules
from .cuda import RealCapture, is_capture_error, warm_up_on_side_stream
from .frames import caller_frame
from .modes import rule_modes
from .placement import Placement
from .recorder import Recorder
from .violations import CaptureError, CaptureReport

__all__ = ["LANES", "CaptureCheck", "StepCheck", "capture_check", "check_call", "check_step",
           "is_capturing"]

LANES = ("cpu", "cuda")
_STATE = threading.local()  # .depth: capture_check regions open on this thread


def is_capturing() -> bool:
    """True inside a ``capture_check`` region on this thread (either lane), or while the current
    CUDA stream is capturing. Overlays that gate host-syncing validation use it, so the CPU
    emulation and a real capture take the same branch."""
    if getattr(_STATE, "depth", 0) > 0:
        return True
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available()
                and torch.cuda.is_current_stream_capturing())


def _emulate_capturing_flag(torch: Any) -> None:
    """On the cpu lane, ``torch.cuda.is_current_stream_capturing()`` answers True inside a
    ``capture_check`` region of this thread, as it does under a real capture: code that gates
    host syncs on it (megatron does, e.g. its MoE token dispatcher) takes the same branch in
    the emulation. Outside a region torch answers, except on a machine without a usable CUDA
    device, where nothing can be capturing: False (torch raises there, which GPU-only code
    never meets). Installed once, when this module is imported after torch or at the first cpu
    check, whichever comes first: a reproducer's eager warm-up runs before its check."""
    current = torch.cuda.is_current_stream_capturing
    if getattr(current, "_patchlane_emulated", False):
        return

    def is_current_stream_capturing() -> bool:
        if getattr(_STATE, "depth", 0) > 0:
            return True
        return bool(torch.cuda.is_available() and current())

    is_current_stream_capturing._patchlane_emulated = True  # type: ignore[attr-defined]
    torch.cuda.is_current_stream_capturing = is_current_stream_capturing


def _resolve_lane(lane: str | None) -> str:
    import torch

    if lane is None:
        lane = "cuda" if torch.cuda.is_available() else "cpu"
    if lane not in LANES:
        raise ValueError(f"capture_check: lane must be one of {LANES} or None, "
                         f"got {lane!r}")
    if lane == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("capture_check(lane='cuda') needs a CUDA device and none is "
                           "available; use lane='cpu' (dispatch-mode emulation) or None")
    return lane


class CaptureCheck:
    """The context manager behind :func:`capture_check`; ``__enter__`` returns the report.
    One object, one region."""

    def __init__(self, lane: str | None = None, raise_on_first: bool = False) -> None:
        self.lane = _resolve_lane(lane)
        self.raise_on_first = raise_on_first
        self.report = CaptureReport(lane=self.lane)
        self._placement = Placement(self.lane)
        self._recorder = Recorder(self.report, raise_on_first)
        self._calls = CallStack()
        self._modes: list[Any] = []
        self._entered = False
        self._capture: RealCapture | None = None
        call_rules()  # built here, outside the modes

    def __enter__(self) -> CaptureReport:
        import torch

        if self._entered:
            raise RuntimeError("a capture_check object can be entered once; make a new one")
        self._entered = True
        modes = rule_modes(self._calls, self._placement, self._recorder)
        if self.lane == "cuda" and not torch.cuda.is_current_stream_capturing():
            self._capture = RealCapture()  # the outermost cuda check owns the capture
            self._capture.begin()
        try:
            for mode in modes:
                mode.__enter__()
                self._modes.append(mode)
            if self.lane == "cpu":
                _emulate_capturing_flag(torch)
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
            self._placement.clear()
            end_error = self._capture.end() if self._capture is not None else None
        if exc is not None and self.lane == "cuda" and is_capture_error(exc):
            violation = self._recorder.region_error(exc, tb)
            self.report.completed = False
            if self.raise_on_first:
                raise CaptureError(violation) from exc
            return self._capture is not None  # a nested check leaves it to the capture owner
        if end_error is not None and exc is None and not self.report.violations:
            violation = self._recorder.capture_end_error(end_error,
                                                         caller_frame(sys._getframe(1)))
            self.report.completed = False
            if self.raise_on_first:
                raise CaptureError(violation) from end_error
        if (self._capture is not None and exc is None and end_error is None
                and self.report.ok and self.report.completed):
            # Nothing ran during the capture: run it once, so the region's tensors hold its
            # result, as on the cpu lane (a comparison right after the `with` is then true).
            self.report.graph = self._capture.graph
            self._capture.replay()
            self.report.replayed = True
        return False


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
            warm_up_on_side_stream(fn, args, kwargs)
        else:
            fn(*args, **kwargs)
    with check as report:
        fn(*args, **kwargs)
    return report


class StepCheck:
    """What :func:`check_step` found: the ``report`` of the checked run, and the step's
    results from the eager run and from the checked one (on the ``cuda`` lane, after the
    replay; None where the capture was refused before the step returned)."""

    def __init__(self, report: CaptureReport, eager: Any, checked: Any) -> None:
        self.report = report
        self.eager = eager
        self.checked = checked

    def mismatches(self, rtol: float = 0.0) -> list[str]:
        """The results (by position or key) that differ between the two runs: bitwise, or
        with ``rtol`` by more than that share of the eager result's largest magnitude (for
        ops whose CUDA kernels accumulate with atomics, in an order no two runs share)."""
        return [name for name, a, b in _pairs("", self.eager, self.checked)
                if not _same(a, b, rtol)]


def _pairs(name: str, a: Any, b: Any) -> list[tuple[str, Any, Any]]:
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return [pair for key in a for pair in _pairs(f"{name}[{key!r}]", a[key], b[key])]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [pair for i, (x, y) in enumerate(zip(a, b, strict=True))
                for pair in _pairs(f"{name}[{i}]", x, y)]
    return [(name or "result", a, b)]


def _same(a: Any, b: Any, rtol: float = 0.0) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        a, b = a.cpu(), b.cpu()
        if rtol == 0.0:
            return bool(torch.equal(a, b))
        scale = float(a.abs().max()) if a.numel() else 0.0
        return bool(((a.double() - b.double()).abs() <= rtol * scale).all())
    return bool(a == b)


def _snapshot(value: Any) -> Any:
    """A copy of the step's results that later runs cannot overwrite."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_snapshot(v) for v in value)
    return value


def check_step(step: Callable[[], Any], *, lane: str | None = None,
               reset: Callable[[], None] | None = None) -> StepCheck:
    """Run ``step()`` once eagerly (the warm-up a real capture needs; on a side stream on the
    ``cuda`` lane), then ``reset()`` (put back what a fresh step starts from: gradients,
    class state), then once under :func:`capture_check`, and return both runs' results.

    The ``cuda`` lane compares after the replay, never the captured run's untouched memory:
    ``result.mismatches()`` is empty when the checked step computed bitwise what the eager
    one did. ``step`` returns what to compare (tensors, or lists, tuples and dicts of them).
    """
    check = capture_check(lane=lane)
    if check.lane == "cuda":
        import torch

        box: list[Any] = []
        warm_up_on_side_stream(lambda: box.append(step()), (), {})
        torch.cuda.synchronize()
        eager = _snapshot(box[0])
    else:
        eager = _snapshot(step())
    if reset is not None:
        reset()
    checked: Any = None  # a capture CUDA refused ends the region before step() returns
    with check as report:
        checked = step()
    return StepCheck(report, eager, _snapshot(checked) if report.ok else checked)


if "torch" in sys.modules:  # see _emulate_capturing_flag: before any eager warm-up
    _emulate_capturing_flag(sys.modules["torch"])

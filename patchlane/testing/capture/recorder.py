"""Turning a verdict, or a real CUDA capture error, into a violation in the report.

A rule's verdict becomes a :class:`CaptureViolation` blamed on the calling line (and a
:class:`CaptureError` at once with ``raise_on_first=True``, before the op runs). On the
``cuda`` lane an op can also be refused by CUDA itself: that error is tied to the op's
violation (recording one if no rule had fired), so the region's exit reports it only once.
"""

from __future__ import annotations

import sys
from types import TracebackType

from .cuda import first_line, is_capture_error, rule_from_error
from .frames import caller_frame, through_autograd, traceback_frame
from .rules import RULES, Rule
from .violations import CaptureError, CaptureReport, CaptureViolation

__all__ = ["Recorder"]


def _autograd_note(op: str, tb: TracebackType | None) -> str:
    """What to add when the error came up through ``backward()``: on an H100 CUDA ran the
    backward on the autograd engine's device thread, where the calling thread's rule modes do
    not follow, and the error was named at the ``backward()`` call."""
    if op in ("Tensor.backward", "torch.autograd.backward") or through_autograd(tb):
        return (": raised inside an autograd backward, which CUDA runs on the engine's own "
                "thread, beyond the rules' reach; the cpu lane names the line in the backward")
    return ""


class Recorder:
    """Appends violations to one report; remembers which capture errors they explain."""

    def __init__(self, report: CaptureReport, raise_on_first: bool) -> None:
        self.report = report
        self.raise_on_first = raise_on_first
        self._attributed: list[tuple[BaseException, CaptureViolation]] = []

    def record(self, op: str, rule: Rule, what: str, frame: str | None = None,
               raise_now: bool = True) -> CaptureViolation:
        if frame is None:
            frame = caller_frame(sys._getframe(1))
        message = (f"{op} at {frame} {what}; illegal under CUDA graph capture ({rule}): "
                   f"{RULES[rule]}.")
        violation = CaptureViolation(op=op, rule=rule, frame=frame, message=message)
        self.report.violations.append(violation)
        if raise_now and self.raise_on_first:
            raise CaptureError(violation)
        return violation

    def attribute(self, exc: BaseException, op: str, violation: CaptureViolation | None,
                  rule: Rule | None = None) -> None:
        """Tie a real capture error raised by an op to a violation (recording one if the rules
        had not), so that the region's exit does not report it a second time."""
        if self.report.lane != "cuda" or not is_capture_error(exc) or self.attribution(exc):
            return
        frame = caller_frame(sys._getframe(1))
        if violation is None and self.report.violations \
                and self.report.violations[-1].frame == frame:
            # The same line's call was flagged by a Python-level rule (``x.cpu()``) and its
            # aten op then refused by CUDA: one call, one violation (seen on an H100).
            violation = self.report.violations[-1]
        if violation is None:
            violation = self.record(op, rule or rule_from_error(exc),
                                    f"raised a CUDA capture error ({first_line(exc)})"
                                    + _autograd_note(op, exc.__traceback__),
                                    frame=frame, raise_now=False)
        self._attributed.append((exc, violation))

    def attribution(self, exc: BaseException) -> CaptureViolation | None:
        """The violation an earlier :meth:`attribute` tied this error (or an equal one) to."""
        for seen, violation in self._attributed:
            if seen is exc or (type(seen) is type(exc) and str(seen) == str(exc)):
                return violation
        return None

    def region_error(self, exc: BaseException, tb: TracebackType | None) -> CaptureViolation:
        """The violation for a capture error that ended the region: the op's, if attributed,
        else one blamed on the innermost non-torch frame of its traceback."""
        violation = self.attribution(exc)
        if violation is None:
            violation = self.record("<CUDA capture error>", rule_from_error(exc),
                                    f"raised a CUDA capture error ({first_line(exc)})"
                                    + _autograd_note("", tb),
                                    frame=traceback_frame(tb), raise_now=False)
        return violation

    def capture_end_error(self, error: BaseException, frame: str) -> CaptureViolation:
        """The violation for a capture that CUDA invalidated without any op raising."""
        return self.record(
            "torch.cuda.CUDAGraph.capture_end", rule_from_error(error),
            f"failed: the capture was invalidated by an operation that did not raise where "
            f"it was issued ({first_line(error)})", frame=frame, raise_now=False)

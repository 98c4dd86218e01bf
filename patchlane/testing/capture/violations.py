"""What a check reports: one :class:`CaptureViolation` per offending call, gathered in a
:class:`CaptureReport`; :class:`CaptureError` when the check was asked to stop at the first."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...common.errors import PatchlaneError
from ...common.exit_codes import ExitCode
from .rules import Rule

__all__ = ["CaptureError", "CaptureReport", "CaptureViolation"]


@dataclass(frozen=True)
class CaptureViolation:
    """One call that would break (or be silently wrong in) a CUDA graph capture."""

    op: str
    """The aten overload (``aten._local_scalar_dense.default``) or the Python call
    (``Tensor.tolist``)."""
    rule: Rule
    frame: str
    """``path/file.py:123 in function``: the first frame outside torch,
    patchlane.testing.capture and the standard library."""
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
    replayed: bool = False
    """``cuda`` lane: the captured graph ran once at the end of the region (it does whenever
    the capture completed with no violation), so what the region wrote is its result."""
    graph: Any = field(default=None, repr=False, compare=False)
    """``cuda`` lane: the captured ``torch.cuda.CUDAGraph``, kept alive with the report (its
    private memory pool holds the tensors the region made); ``replay()`` runs it again."""

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {
            "lane": self.lane,
            "ok": self.ok,
            "completed": self.completed,
            "replayed": self.replayed,
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

    # The check's verdict on the code under test (it breaks capture), as a reproducer's failed
    # assertion is on upstream: not a fault of patchlane or of the command line.
    exit_code = ExitCode.REPRODUCER_FAILED

    def __init__(self, violation: CaptureViolation) -> None:
        self.violation = violation
        super().__init__(
            f"{violation.message} Fix: move it out of the captured region, keep the value on "
            f"the device, or give the op a static shape (capture_check(raise_on_first=True))")

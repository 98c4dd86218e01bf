"""patchlane.testing.capture: would a region be legal inside a CUDA graph capture?

CPU lane: the capture rules emulated with a dispatch mode + a torch-function mode. Each rule has
a positive case (flagged once, right rule, frame on the offending test line) and the legal ops
must stay unflagged. The ``gpu`` tests run a real capture and skip without CUDA.

One test module per module of the package; the helpers and fixtures they share are here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import CaptureReport, CaptureViolation  # noqa: E402

HAS_CUDA = torch.cuda.is_available()
gpu = pytest.mark.gpu
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")


def here() -> int:
    """The caller's line number."""
    return sys._getframe(1).f_lineno


def single(report: CaptureReport) -> CaptureViolation:
    assert len(report.violations) == 1, report.format()
    return report.violations[0]


def assert_frame(violation: CaptureViolation, line: int, function: str) -> None:
    """The violation is blamed on ``line`` in ``function`` of the calling test file."""
    this_file = Path(sys._getframe(1).f_code.co_filename).name
    path, _, rest = violation.frame.partition(":")
    assert Path(path).name == this_file, violation.frame
    assert rest == f"{line} in {function}", violation.frame


def mode_depths() -> tuple[int, int]:
    """(dispatch modes, torch-function modes) on this thread's stacks."""
    return torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack()


@pytest.fixture
def x() -> Any:
    return torch.tensor([1.5, -2.0, 0.0, 3.0])


@pytest.fixture
def mask(x: Any) -> Any:
    return x > 0

"""A violation is blamed on the first frame outside torch, this package and the standard
library.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from patchlane.testing.capture import capture_check  # noqa: E402
from patchlane.testing.capture.frames import (  # noqa: E402
    NO_FRAME,
    caller_frame,
    is_internal,
)

from .conftest import assert_frame, here, single  # noqa: E402


def test_frames_skip_torch_internals() -> None:
    """torch.unique is Python in torch/functional.py; the frame is still this file."""
    with capture_check(lane="cpu") as report:
        line = here() + 1
        torch.unique(torch.arange(4) % 2, return_counts=True)
    v = single(report)
    assert "torch" + os.sep not in v.frame
    assert_frame(v, line, "test_frames_skip_torch_internals")


def test_frames_skip_the_standard_library(x: Any) -> None:
    """string.Formatter formats the tensor from string.py; the frame is still this file."""
    import string

    with capture_check(lane="cpu") as report:
        line = here() + 1
        string.Formatter().format("{:.1f}", x[0])
    v = single(report)
    assert v.rule == "host-sync"
    assert_frame(v, line, "test_frames_skip_the_standard_library")


@pytest.mark.parametrize("module, internal", [
    ("patchlane.testing.capture", True),
    ("patchlane.testing.capture.modes", True),
    ("patchlane.testing.capture.recorder", True),
    ("torch.nn.modules.module", True),
    ("contextlib", True),
    ("patchlane.testing.capture_helpers", False),
    ("patchlane.testing.memprofile", False),
    ("megatron.core.transformer", False),
])
def test_every_module_of_the_package_is_internal(module: str, internal: bool) -> None:
    """The check is split over several modules: a frame in any of them is never blamed."""
    frame = eval("sys._getframe()", {"__name__": module, "sys": sys})
    assert is_internal(frame) is internal


def test_no_frame_outside_torch() -> None:
    assert caller_frame(None) == NO_FRAME
    assert not is_internal(sys._getframe())

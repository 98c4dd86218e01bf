"""Which line a violation is blamed on.

A violation names the first frame outside torch, this package (``patchlane.testing.capture``
and its modules) and the standard library: the user or upstream line that issued the op, also
inside an ``autograd.Function.backward`` run by ``loss.backward()``.
"""

from __future__ import annotations

import functools
import os
import sys
from types import FrameType, TracebackType

__all__ = ["NO_FRAME", "caller_frame", "is_internal", "traceback_frame"]

NO_FRAME = "<no frame outside torch (autograd engine or C++)>"
_PACKAGE = __name__.rpartition(".")[0]  # patchlane.testing.capture


@functools.cache
def _torch_dir() -> str:
    import torch

    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def is_internal(frame: FrameType) -> bool:
    """torch, this package, or the standard library: never the frame a violation is blamed on."""
    module = frame.f_globals.get("__name__")
    name = module if isinstance(module, str) else ""
    top = name.partition(".")[0]
    filename = frame.f_code.co_filename
    return (name == _PACKAGE or name.startswith(_PACKAGE + ".") or top == "torch"
            or top in sys.stdlib_module_names
            or filename.startswith("<frozen") or filename.startswith(_torch_dir()))


def _display_path(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        return filename
    return filename if rel.startswith(os.pardir) else rel


def _describe(filename: str, lineno: int | None, function: str) -> str:
    return f"{_display_path(filename)}:{lineno} in {function}"


def caller_frame(start: FrameType | None) -> str:
    """The first frame from ``start`` outward that is not :func:`is_internal`."""
    frame = start
    while frame is not None:
        if not is_internal(frame):
            return _describe(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return NO_FRAME


def traceback_frame(tb: TracebackType | None) -> str:
    """The innermost frame of a traceback outside torch, this package and the stdlib."""
    found = NO_FRAME
    while tb is not None:
        if not is_internal(tb.tb_frame):
            code = tb.tb_frame.f_code
            found = _describe(code.co_filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def through_autograd(tb: TracebackType | None) -> bool:
    """Did the exception come up through torch's autograd (``loss.backward()``)? On CUDA the
    engine runs a backward on its device thread, where the rule modes of the calling thread
    do not follow it: such an error is named at the ``backward()`` call."""
    autograd = _torch_dir() + "autograd" + os.sep
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(autograd):
            return True
        tb = tb.tb_next
    return False

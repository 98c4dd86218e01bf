"""The ``cuda`` lane: a real CUDA graph capture, replayed once, and what its errors mean.

The region runs under a real ``torch.cuda.graph(torch.cuda.CUDAGraph())`` capture on a side
stream with ``torch.cuda.set_sync_debug_mode("error")`` (restored afterwards), with the rule
modes (:mod:`.modes`) on top to name the op. A capture runs no kernel: it records them. So a
capture that completed cleanly is replayed once before the region's ``with`` ends, and the
tensors the region wrote then hold what one run of it computes, as on the ``cpu`` lane; reading
them before that replay reads whatever the allocator left there.

A capture error (``operation not permitted when stream is capturing``, ``called a synchronizing
CUDA operation``, an invalidated capture) becomes a violation, attributed to the op the modes
were running (else to the innermost non-torch frame of its traceback); with
``raise_on_first=False`` it ends the region early (``report.completed`` is False) and is not
re-raised. Only tensors on a GPU count as device tensors there. Real capture needs a warm-up:
run the region once eagerly before checking it, or use :func:`check_call` with ``warmup=True``.
The outermost ``cuda`` check owns the capture; a nested one only adds its rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .rules import Rule
from .violations import CaptureError

__all__ = [
    "ERROR_RULE_HINTS",
    "RealCapture",
    "first_line",
    "is_capture_error",
    "rule_from_error",
    "warm_up_on_side_stream",
]

ERROR_RULE_HINTS: Mapping[str, Rule] = {
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


def is_capture_error(exc: BaseException) -> bool:
    """Did CUDA refuse something because the stream is capturing (not our own CaptureError)?"""
    if not isinstance(exc, RuntimeError) or isinstance(exc, CaptureError):
        return False
    text = str(exc).lower()
    return "captur" in text or "synchronizing cuda operation" in text


def rule_from_error(exc: BaseException) -> Rule:
    """The rule a capture error most likely broke, from its text."""
    text = str(exc).lower()
    if "host" in text and ("device" in text or "memcpy" in text):
        return "device-to-host"
    return "host-sync"


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


class RealCapture:
    """A real CUDA graph capture on a side stream, with sync debug mode "error"; the graph
    is kept (its memory pool holds the region's tensors) until the owner lets it go."""

    stream: Any
    stream_ctx: Any
    graph: Any
    graph_ctx: Any
    sync_mode: int
    calls: list[str]

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
        return error

    def replay(self) -> None:
        """Run what was captured once, and wait for it: the region's results exist now."""
        import torch

        self.graph.replay()
        torch.cuda.synchronize()


def warm_up_on_side_stream(fn: Callable[..., Any], args: Sequence[Any],
                           kwargs: Mapping[str, Any]) -> None:
    """Run ``fn`` once eagerly on a side stream, as a capture's warm-up should."""
    import torch

    cuda: Any = torch.cuda
    side = cuda.Stream()
    side.wait_stream(cuda.current_stream())
    with cuda.stream(side):
        fn(*args, **kwargs)
    cuda.current_stream().wait_stream(side)

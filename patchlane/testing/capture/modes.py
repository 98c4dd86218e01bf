"""The two torch modes that apply the rules to everything a region runs, on both lanes.

``FunctionRules`` (a ``TorchFunctionMode``) applies the Python-level rules of :mod:`.calls`;
``DispatchRules`` (a ``TorchDispatchMode``) applies the aten-level rules of :mod:`.ops` to every
aten op, forward and backward, and on the ``cpu`` lane tracks host data (:mod:`.placement`).
On the ``cuda`` lane they run on top of the real capture, to name the op CUDA refuses.

Backward: the engine runs CPU backward on the calling thread and CUDA backward on its device
threads, carrying the thread-local mode stacks with it, so the dispatch rules see every op
issued during ``loss.backward()`` (custom ``autograd.Function.backward`` code included) and the
frame is the backward's own line. PyTorch disables a torch-function mode while its handler
runs, and ``loss.backward()`` is itself such a call, so the Python-level rules (``.tolist()``,
``.cpu()``, ... on CPU tensors) do not see calls made *inside* backward on the ``cpu`` lane;
on the ``cuda`` lane those calls reach the dispatcher (or the capture) and are caught there.

The check is for the calling thread plus the autograd engine; other threads are not watched.

The mode classes subclass torch's, so they are built on first use: importing this package
does not import torch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from .calls import Call, CallStack, call_name, judge_call
from .cuda import ERROR_RULE_HINTS
from .ops import judge_op
from .placement import Placement
from .recorder import Recorder

__all__ = ["rule_modes"]


def rule_modes(calls: CallStack, placement: Placement, recorder: Recorder) -> list[Any]:
    """A new (function mode, dispatch mode) pair for one check, not yet entered, in the order
    they are entered."""
    function_rules, dispatch_rules = _mode_classes()
    return [function_rules(calls, placement, recorder),
            dispatch_rules(calls, placement, recorder)]


@functools.cache
def _mode_classes() -> tuple[type[Any], type[Any]]:
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class FunctionRules(TorchFunctionMode):
        def __init__(self, calls: CallStack, placement: Placement, recorder: Recorder) -> None:
            super().__init__()
            self.calls = calls
            self.placement = placement
            self.recorder = recorder

        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            call = Call()
            calls = self.calls.current()
            calls.append(call)
            violation = None
            try:
                verdict = judge_call(func, args, kwargs, call, self.placement)
                if verdict is not None:
                    call.silent = True
                    op, rule, what = verdict
                    violation = self.recorder.record(op, rule, what)
                return func(*args, **kwargs)
            except BaseException as exc:
                name = call_name(func)
                self.recorder.attribute(exc, name, violation, ERROR_RULE_HINTS.get(name))
                raise
            finally:
                calls.pop()

    class DispatchRules(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self, calls: CallStack, placement: Placement, recorder: Recorder) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.calls = calls
            self.placement = placement
            self.recorder = recorder

        def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (),
                               kwargs: Mapping[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            calls = self.calls.current()
            call = calls[-1] if calls else None
            violation = None
            if not any(c.silent for c in calls):
                verdict = judge_op(func, args, kwargs, call, self.placement)
                if verdict is not None:
                    violation = self.recorder.record(str(func), verdict[0], verdict[1])
            try:
                out = func(*args, **kwargs)
            except BaseException as exc:
                self.recorder.attribute(exc, str(func), violation)
                raise
            if self.placement.lane == "cpu":
                self.placement.propagate_host(func, args, out)
            return out

    return FunctionRules, DispatchRules

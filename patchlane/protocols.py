"""What the files a registry names must provide, as typing Protocols.

``patches/<id>.py`` (an overlay), ``reproducers/<id>.py`` (a reproducer) and a compat gate's
check file are plain modules loaded by path (:func:`patchlane.loading.load_file`) under a
module name that carries the entry id: ``ENTRY_ID = entry_id(__name__)`` (from
``patchlane.loading``) gives a file its id, so no file repeats it. Type an overlay
module against :class:`OverlayModule` in tests, or check one at run time with
``isinstance(module, OverlayModule)`` (``runtime_checkable``: attribute presence only).
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

__all__ = ["OverlayFn", "OverlayModule", "ProbeFn", "ReproducerModule"]


class OverlayFn(Protocol):
    """wrapt's wrapper signature: the original, the bound instance (or class), the call."""

    def __call__(self, wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any: ...


class ProbeFn(Protocol):
    """True when upstream (the imported target module) already behaves correctly."""

    def __call__(self, module: ModuleType) -> bool: ...


@runtime_checkable
class OverlayModule(Protocol):
    """``patches/<id>.py`` for a function or method target: ``overlay`` replaces it; ``probe``
    is optional (a module without one is never ``upstream-fixed`` by probe). Another shape of
    target (a property, a class, a value) has its own names: ``Shape.overlay_names`` in
    :mod:`patchlane.targets`."""

    overlay: OverlayFn


@runtime_checkable
class ReproducerModule(Protocol):
    """``reproducers/<id>.py``: ``run(ctx)`` raises ``AssertionError`` when the bug shows;
    ``setup(ctx)`` is optional. ``ctx`` is a :class:`patchlane.reproducer.ReproContext`."""

    LANES: Sequence[str]
    WORLD_SIZES: Sequence[int]

    def run(self, ctx: Any) -> None: ...

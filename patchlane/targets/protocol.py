"""What every target shape provides, and the layers an overlay leaves where it sits.

A *shape* is how a target is stored on its owner (a function, a method, a property, a class
...); each is one module of :mod:`patchlane.targets` behind :class:`Shape`, listed once in
``SHAPES`` there. The startup walk never looks at a shape's details: it asks the shape what to
set where (:meth:`Shape.build`), sets it, checks that a lookup through the owner now reaches
it, and keeps a :class:`Placement` per attribute so that revert puts back the very object that
was there.

*Layers.* Two entries may overlay one target (a team registry on top of the catalog); the
later one is built on what the earlier one left, so what sits at ``owner.attribute`` is a stack.
:func:`layers_at` lists it, outermost first, whatever the shapes: a wrapt function wrapper's
layer below is its ``__wrapped__``; a placed descriptor (:class:`Layer`) keeps its own; a value
has no room for a mark, so the values placed are remembered here by identity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, NamedTuple, Protocol

import wrapt

from .find import Found

__all__ = [
    "Hit",
    "Layer",
    "LayerView",
    "Placement",
    "Shape",
    "below_of",
    "comment",
    "disown",
    "forget_value",
    "innermost",
    "layers_at",
    "mark",
    "remember_value",
]

Hit = Callable[[], bool]
"""Counts one use of the overlay (``patchlane.hits``) and says whether it runs: False once its
entry was reverted, and the use goes straight to upstream's code, uncounted. A reference to
the overlaid target taken before the revert (another library's wrapper around it, a table, a
saved attribute put back later) reaches the overlay's wrapper still; it passes through."""


class Shape(Protocol):
    """One way a target can be stored, and how an overlay is put there."""

    name: str
    """As the registry's ``target.shape`` and the reports spell it."""
    described: str
    """``a property``: for messages."""
    counts_hits: bool
    """Whether a use of the target runs code patchlane can count (a value is read, not called)."""
    off_when_reverted: bool
    """Whether what it placed passes straight through to upstream's code once the entry is
    reverted, wherever it is still reached (:data:`Hit`): a function's wrapper and a property's
    or descriptor's do; a class's grafted members and a value do not."""
    overlay_names: tuple[str, ...]
    """What the overlay file may define for this shape (at least one of them)."""

    def matches(self, found: Found, inner: Any) -> bool:
        """Whether ``found`` has this shape; ``inner`` is what it holds under any layers."""

    def build(self, found: Found, overlay: ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        """``(owner, attribute, new object)`` to set, one per attribute the overlay replaces.
        Raise :class:`~patchlane.targets.find.Refused` (with the fix) when ``overlay`` does not
        fit this target; nothing is set until every part is built."""

    def stub(self, target: str) -> str:
        """The overlay file's body ``patchlane new`` writes for a target of this shape."""


class Layer:
    """Mixin of the objects a shape places that are not wrapt wrappers (a property, another
    descriptor): which entry placed it (None once reverted: :func:`disown`) and what it was
    built on."""

    _patchlane_id: str | None
    _patchlane_below: Any


def comment(text: str, indent: str = "    ") -> str:
    """``text`` as ``# `` comment lines of a stub, wrapped to 96 columns (a long dotted name
    stays whole)."""
    import textwrap

    return textwrap.fill(text, width=96, initial_indent=indent + "# ",
                         subsequent_indent=indent + "# ", break_long_words=False,
                         break_on_hyphens=False) + "\n"


def mark(obj: Any, entry_id: str, below: Any) -> Any:
    obj._patchlane_id = entry_id
    obj._patchlane_below = below
    return obj


def disown(obj: Any) -> None:
    """``obj``, placed for an entry since reverted, is no layer of that entry any more. A lookup
    that still reaches it (another library put it back, or wraps it) passes through it to
    upstream's code (:data:`Hit`), and applying the entry again places a new layer rather than
    taking this one for it: it would read "applied" where the overlay no longer runs."""
    if isinstance(obj, wrapt.FunctionWrapper):
        inner: Any = getattr(obj, "_self_wrapper", None)
        if hasattr(inner, "__patchlane_id__"):
            inner.__patchlane_id__ = None
    elif isinstance(obj, Layer):
        obj._patchlane_id = None


class LayerView(NamedTuple):
    obj: Any
    entry_id: str | None
    """The entry that placed it (None: someone else's wrapt wrapper, or one reverted)."""
    below: Any


_values: dict[tuple[int, str], list[LayerView]] = {}
_values_lock = threading.Lock()


def remember_value(owner: Any, attribute: str, view: LayerView) -> None:
    with _values_lock:
        _values.setdefault((id(owner), attribute), []).append(view)


def forget_value(owner: Any, attribute: str, placed: Any) -> None:
    with _values_lock:
        kept = [v for v in _values.get((id(owner), attribute), []) if v.obj is not placed]
        _values[(id(owner), attribute)] = kept


def _view(obj: Any, owner: Any, attribute: str) -> LayerView | None:
    if isinstance(obj, wrapt.FunctionWrapper):
        inner = getattr(obj, "_self_wrapper", None)
        return LayerView(obj, getattr(inner, "__patchlane_id__", None), obj.__wrapped__)
    if isinstance(obj, Layer):
        return LayerView(obj, obj._patchlane_id, obj._patchlane_below)
    with _values_lock:
        placed = _values.get((id(owner), attribute), ())
        return next((v for v in placed if v.obj is obj), None)


def layers_at(owner: Any, attribute: str, current: Any) -> Iterator[LayerView]:
    """The layers stacked at ``owner.attribute`` (whose value is ``current``), outermost
    first."""
    for _ in range(1000):
        view = _view(current, owner, attribute)
        if view is None:
            return
        yield view
        current = view.below


def below_of(obj: Any) -> Any:
    """What ``obj`` was built on, or None when it is no layer."""
    view = _view(obj, None, "")
    return None if view is None else view.below


def innermost(obj: Any) -> Any:
    """What a stack of layers holds at the bottom (the upstream object)."""
    for _ in range(1000):
        below = below_of(obj)
        if below is None:
            return obj
        obj = below
    return obj


class Placement(NamedTuple):
    """One attribute an applied overlay set: what revert needs to put back exactly what was
    there."""

    owner: Any
    attribute: str
    had_own: bool
    """Whether the owner's own ``__dict__`` held the attribute (else it was inherited and
    revert deletes it again)."""
    original: Any
    """What the owner's own ``__dict__`` held (None when it held nothing)."""
    below: Any
    """What a lookup through the owner found before (own or inherited): what a layer stacked
    on this one is re-linked to when this one is reverted from under it."""
    placed: Any

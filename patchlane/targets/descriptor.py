"""Properties and other descriptors (``functools.cached_property``, a library's own):
whatever a class stores that Python calls ``__get__`` on when it is read.

The overlay file defines any of ``overlay`` (the read), ``overlay_setter`` (an assignment) and
``overlay_deleter`` (a ``del``), each in wrapt's protocol: ``overlay(wrapped, instance, args,
kwargs)`` with ``wrapped`` the original accessor bound to the instance (``wrapped()`` reads
upstream's value, ``wrapped(value)`` sets it), ``instance`` the object (None when a descriptor
is read on the class), ``args`` ``()`` for a read or a delete and ``(value,)`` for an
assignment.

A property is placed as a property (a subclass of it), built from the original's accessors:
code that looks for ``property`` objects (``inspect``, ``abc``, dataclasses) still finds one,
and the accessors the overlay does not name are upstream's own. Another descriptor is placed as
a descriptor that delegates to it, a data descriptor exactly when the original is one, so an
instance's ``__dict__`` shadows it exactly when it shadowed the original (what
``cached_property`` relies on).
"""

from __future__ import annotations

import functools
import types
from typing import Any

from .find import Found, Refused
from .protocol import Hit, Layer, comment, mark

__all__ = ["DESCRIPTOR", "PROPERTY", "PatchProperty"]

_ACCESSORS = (("overlay", "fget", "read"), ("overlay_setter", "fset", "assignment"),
              ("overlay_deleter", "fdel", "deletion"))


class PatchProperty(property, Layer):
    """A property an overlay placed: still a ``property``; what it was built on is kept for
    revert and for the entries stacked on it."""


def _overlays(overlay: types.ModuleType, target: str, what: str) -> dict[str, Any]:
    given = {name: getattr(overlay, name) for name, _, _ in _ACCESSORS
             if getattr(overlay, name, None) is not None}
    for name, fn in given.items():
        if not callable(fn):
            raise Refused(f"{overlay.__file__}: `{name}` is a {type(fn).__name__}, not a "
                          "function(wrapped, instance, args, kwargs)")
    if not given:
        raise Refused(f"{overlay.__file__} defines none of overlay, overlay_setter, "
                      f"overlay_deleter: {target} is {what}; define `overlay` for its read, "
                      "`overlay_setter` for an assignment, `overlay_deleter` for a del")
    return given


def _accessor(original: Any, fn: Any, hit: Hit) -> Any:
    @functools.wraps(original)
    def accessor(instance: Any, *args: Any) -> Any:
        if not hit():  # reverted: upstream's accessor
            return original(instance, *args)
        return fn(types.MethodType(original, instance), instance, args, {})

    return accessor


class _Property:
    name = "property"
    described = "a property"
    counts_hits = True
    off_when_reverted = True
    overlay_names: tuple[str, ...] = tuple(name for name, _, _ in _ACCESSORS)

    def matches(self, found: Found, inner: Any) -> bool:
        return isinstance(inner, property)

    def build(self, found: Found, overlay: types.ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        prop = found.raw
        target = f"{found.owner_path}.{found.attribute}"
        given = _overlays(overlay, target, self.described)
        parts = {}
        for name, slot, what in _ACCESSORS:
            original = getattr(prop, slot)
            if name in given and original is None:
                # An overlay on an accessor the property lacks would never run: refused, never
                # reported as applied.
                raise Refused(f"{overlay.__file__} defines `{name}`, but {target} has no "
                              f"{what} accessor ({slot} is None): it would never run. Fix: "
                              f"remove `{name}`, or target the code that handles the {what}")
            parts[slot] = _accessor(original, given[name], hit) if name in given else original
        placed = PatchProperty(parts["fget"], parts["fset"], parts["fdel"], prop.__doc__)
        return [(found.owner, found.attribute, mark(placed, entry_id, prop))]

    def stub(self, target: str) -> str:
        return _stub(target, "a property", "upstream's getter bound to instance (the object "
                     "read)", "overlay_setter (args == (value,)) or overlay_deleter")


class _Descriptor(Layer):
    """Delegates to the descriptor it was built on; the overlay sees each use."""

    def __init__(self, below: Any, given: dict[str, Any], hit: Hit):
        self._below = below
        self._given = given
        self._hit = hit
        self.__wrapped__ = below
        self.__doc__ = getattr(below, "__doc__", None)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        fn = self._given.get("overlay")
        if fn is None or not self._hit():
            return self._below.__get__(instance, owner)
        return fn(functools.partial(self._below.__get__, instance, owner), instance, (), {})

    def __getattr__(self, name: str) -> Any:
        # `.func`, `.attrname` and the like: what the original carries, read through.
        if name.startswith("_") and name in ("_below", "_given", "_hit"):
            raise AttributeError(name)
        return getattr(self._below, name)


class _DataDescriptor(_Descriptor):
    def __set__(self, instance: Any, value: Any) -> None:
        fn = self._given.get("overlay_setter")
        if fn is None or not self._hit():
            self._below.__set__(instance, value)
            return
        fn(functools.partial(self._below.__set__, instance), instance, (value,), {})

    def __delete__(self, instance: Any) -> None:
        fn = self._given.get("overlay_deleter")
        if fn is None or not self._hit():
            self._below.__delete__(instance)
            return
        fn(functools.partial(self._below.__delete__, instance), instance, (), {})


class _OtherDescriptor:
    name = "descriptor"
    described = "a descriptor"
    counts_hits = True
    off_when_reverted = True
    overlay_names: tuple[str, ...] = _Property.overlay_names

    def matches(self, found: Found, inner: Any) -> bool:
        return isinstance(found.owner, type) and hasattr(type(inner), "__get__")

    def build(self, found: Found, overlay: types.ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        raw = found.raw
        target = f"{found.owner_path}.{found.attribute}"
        given = _overlays(overlay, target, f"a descriptor ({type(raw).__qualname__})")
        kind = type(raw)
        is_data = hasattr(kind, "__set__") or hasattr(kind, "__delete__")
        for name, method in (("overlay_setter", "__set__"), ("overlay_deleter", "__delete__")):
            if name in given and not hasattr(kind, method):
                raise Refused(f"{overlay.__file__} defines `{name}`, but {target} (a "
                              f"{kind.__qualname__}) has no {method}: it would never run. Fix: "
                              f"remove `{name}`")
        placed = (_DataDescriptor if is_data else _Descriptor)(raw, given, hit)
        return [(found.owner, found.attribute, mark(placed, entry_id, raw))]

    def stub(self, target: str) -> str:
        return _stub(target, "a descriptor", "what upstream's __get__ returns for instance "
                     "(None when read on the class)", "overlay_setter / overlay_deleter for a "
                     "data descriptor's __set__ / __delete__")


def _stub(target: str, described: str, wrapped: str, others: str) -> str:
    from .function import PASS_THROUGH

    return (
        "def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...],\n"
        "            kwargs: dict[str, Any]) -> Any:\n"
        + comment(f"{target} is {described}; this overlays its read. wrapped() is {wrapped}. "
                  f"Define {others} the same way.")
        + comment(PASS_THROUGH)
        + "    return wrapped(*args, **kwargs)\n")


PROPERTY = _Property()
DESCRIPTOR = _OtherDescriptor()

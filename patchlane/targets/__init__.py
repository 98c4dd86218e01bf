"""Targets: where an overlay goes, and in what shape.

``target.object`` names an attribute of a module (``module:Qual.name``). What is stored there
decides how an overlay is put in its place; each way is a *shape*, one module here behind one
protocol (:class:`~patchlane.targets.protocol.Shape`), listed once in :data:`SHAPES`:

=============== ====================================== =======================================
shape           what is stored                         what the overlay file defines
=============== ====================================== =======================================
``function``    a module's function (or other          ``overlay(wrapped, instance, args,
                callable)                              kwargs)``, wrapt's protocol
``method``      a class's function                     the same; ``instance`` is the object
``classmethod`` a ``classmethod``                      the same; ``instance`` is the class
``staticmethod`` a ``staticmethod``                    the same; ``instance`` is None
``property``    a ``property``                         ``overlay`` (read), ``overlay_setter``,
                                                       ``overlay_deleter``
``descriptor``  any other descriptor (a                the same three
                ``cached_property``, a slot)
``class``       a class                                ``class Overlay``: members replacing
                                                       upstream's in place
``attribute``   any other value (a constant, a table)  ``overlay(original)`` returning the value
=============== ====================================== =======================================

One resolver (:func:`resolve`) answers for every reader: the startup walk, ``patchlane new``,
the fingerprint. Adding a shape: a module here with one object satisfying the protocol, and
its place in :data:`SHAPES` (first match wins).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, NamedTuple

from .attribute import ATTRIBUTE
from .descriptor import DESCRIPTOR, PROPERTY
from .find import Found, Refused, find, lookup
from .function import CLASSMETHOD, FUNCTION, METHOD, STATICMETHOD
from .protocol import Placement, Shape, innermost
from .whole_class import WHOLE_CLASS

__all__ = ["SHAPES", "SHAPE_NAMES", "Found", "Placement", "Refused", "Resolved", "Shape",
           "find", "lookup", "resolve", "shape_named"]

SHAPES: tuple[Shape, ...] = (CLASSMETHOD, STATICMETHOD, PROPERTY, WHOLE_CLASS, FUNCTION, METHOD,
                             DESCRIPTOR, ATTRIBUTE)
"""Every shape, in the order they are tried (the first that matches is the target's)."""

SHAPE_NAMES = tuple(shape.name for shape in SHAPES)


class Resolved(NamedTuple):
    found: Found
    shape: Shape

    @property
    def target(self) -> str:
        sep = "." if isinstance(self.found.owner, type) else ":"
        return f"{self.found.owner_path}{sep}{self.found.attribute}"


def shape_named(name: str) -> Shape:
    for shape in SHAPES:
        if shape.name == name:
            return shape
    raise KeyError(name)


def resolve(module: ModuleType, qualname: str, declared: str | None = None) -> Resolved:
    """Where ``qualname`` of ``module`` lives and its shape. AttributeError when it does not
    exist; :class:`Refused` when it cannot be carried, or when ``declared`` (the registry's
    ``target.shape``) names another shape than the one found."""
    found = find(module, qualname)
    inner: Any = innermost(found.raw)
    shape = next(s for s in SHAPES if s.matches(found, inner))
    if declared is not None and declared != shape.name:
        raise Refused(f"{module.__name__}:{qualname} is {shape.described} ({shape.name}), but "
                      f"the registry's target.shape says {declared}: upstream changed what "
                      "the target is, so the overlay written for it does not fit. Fix: check "
                      f"the overlay against this release, then set target.shape: {shape.name}")
    return Resolved(found, shape)

"""Where a target lives: the one resolver every reader of ``target.object`` uses.

Two questions, two functions:

* :func:`lookup` is what calling code sees: ``getattr`` part by part, so a method comes back
  bound to its class and a property as the property object. Unpickling a patched function and
  reading a value use it.
* :func:`find` is where an overlay must go: the object that holds the attribute (a module or a
  class), the attribute's name, and the object stored there as it is stored (the
  ``classmethod``, ``staticmethod`` or ``property`` object, not what ``getattr`` binds it to),
  looked up through the class's MRO as Python does. The startup walk, ``patchlane new`` and the
  fingerprint read it.

A target that cannot be carried is refused here with why and the fix (:class:`Refused`): an
accessor of a property (``Cls.prop.fget``), an attribute of something that is neither a module
nor a class, a type built in C whose attributes cannot be set, a module, a name the module
computes in its ``__getattr__``, a method bound to an object. Only the standard library is
imported: the fingerprint loads this in a bare interpreter.
"""

from __future__ import annotations

import types
from typing import Any, NamedTuple

__all__ = ["Found", "Refused", "defining_module", "find", "holder_of", "lookup",
           "source_qualname"]

# Py_TPFLAGS_HEAPTYPE: a class created by a class statement. A static type (int, a C
# extension's type) lacks it and refuses setattr; Py_TPFLAGS_IMMUTABLETYPE marks heap types
# made immutable (3.10+).
_HEAPTYPE = 1 << 9
_IMMUTABLETYPE = 1 << 8


class Refused(LookupError):
    """A target that no shape can carry (or an overlay that does not fit it): the message says
    why, then ``Fix:`` and what to do instead."""

    @property
    def problem(self) -> str:
        return str(self).partition(". Fix: ")[0]

    @property
    def fix(self) -> str | None:
        return str(self).partition(". Fix: ")[2] or None


class Found(NamedTuple):
    owner: Any
    """The module or class whose ``__dict__`` the overlay is set in."""
    attribute: str
    raw: Any
    """The object as stored: in the owner's own ``__dict__``, or in the first base class on the
    MRO that holds it (``own`` is then False and the overlay is set on the owner, shadowing it
    for the owner and its subclasses only)."""
    own: bool
    owner_path: str
    """``module:Qual`` of the owner, for messages."""


def lookup(module: Any, qualname: str) -> Any:
    """``module.A.b`` for ``"A.b"``, as calling code sees it (``getattr``): AttributeError
    names the missing part."""
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def holder_of(owner: Any, attribute: str) -> Any:
    """What stores ``attribute`` as a lookup through ``owner`` finds it: the module itself, or
    the first class on the MRO whose own ``__dict__`` holds it; None when none does."""
    for holder in getattr(owner, "__mro__", (owner,)):
        if attribute in vars(holder):
            return holder
    return None


def _describe(obj: object) -> str:
    if isinstance(obj, property):
        return "a property"
    if isinstance(obj, types.ModuleType):
        return "a module"
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)):
        return "a function"
    if isinstance(obj, types.MethodType):
        return "a bound method"
    return f"a {type(obj).__name__}"


def find(module: types.ModuleType, qualname: str) -> Found:
    """Where ``qualname`` of ``module`` lives and what is stored there (see the module doc).
    AttributeError when a part does not exist; :class:`Refused` when it exists but cannot be
    carried."""
    *parents, attribute = qualname.split(".")
    owner: Any = module
    path = module.__name__
    sep = ":"
    for part in parents:
        owner = getattr(owner, part)
        path = f"{path}{sep}{part}"
        sep = "."
    target = f"{module.__name__}:{qualname}"
    if isinstance(owner, property) and attribute in ("fget", "fset", "fdel", "getter", "setter",
                                                     "deleter"):
        prop = target.rpartition(".")[0]
        raise Refused(f"{target} is an accessor of the property {prop}: an accessor is no "
                      f"attribute of the class, so nothing would call an overlay set there. "
                      f"Fix: target the property itself ({prop}); its overlay wraps the getter "
                      "(`overlay`), the setter (`overlay_setter`) and the deleter "
                      "(`overlay_deleter`)")
    if not isinstance(owner, (type, types.ModuleType)):
        raise Refused(f"{target}: {path} is {_describe(owner)}, not a class or module, so "
                      f"nothing holds {attribute!r} as an attribute an overlay can replace. "
                      f"Fix: target {path} itself, or the class or module attribute the calls "
                      "go through")
    if isinstance(owner, type) and (not owner.__flags__ & _HEAPTYPE
                                    or owner.__flags__ & _IMMUTABLETYPE):
        raise Refused(f"{target}: {path} is a type built in C ({owner.__module__}."
                      f"{owner.__qualname__}); its attributes cannot be set. Fix: overlay the "
                      "Python function or method that calls it")
    if isinstance(owner, types.ModuleType):
        namespace = vars(owner)
        if attribute not in namespace:
            getattr(owner, attribute)  # AttributeError when it does not exist at all
            raise Refused(f"{target}: {path} computes {attribute!r} in its module-level "
                          "__getattr__ (nothing is stored under that name to replace). Fix: "
                          "target the function or class it returns, where that is defined")
        raw, own = namespace[attribute], True
    else:
        holder = holder_of(owner, attribute)
        if holder is None:
            getattr(owner, attribute)  # AttributeError, or a metaclass attribute
            raise Refused(f"{target}: {attribute!r} comes from {path}'s metaclass "
                          f"{type(owner).__qualname__}, not from {path} or its bases. Fix: "
                          "target it on the metaclass")
        raw, own = vars(holder)[attribute], holder is owner
    if isinstance(raw, types.ModuleType):
        raise Refused(f"{target} is the module {raw.__name__}: a module is imported, not "
                      f"looked up through {path}. Fix: target an attribute of it "
                      f"({raw.__name__}:NAME)")
    if isinstance(raw, types.MethodType):
        bound_to = raw.__self__
        where = bound_to.__qualname__ if isinstance(bound_to, type) else \
            f"an instance of {type(bound_to).__qualname__}"
        raise Refused(f"{target} is a method bound to {where}: the calls go through that "
                      f"object's class, not through {path}. Fix: target the method on its "
                      f"class ({raw.__func__.__module__}:{raw.__func__.__qualname__})")
    return Found(owner, attribute, raw, own, path)


def defining_module(found: Found) -> str:
    """The module whose source defines the owner (a class re-exported elsewhere is read where
    its class statement is)."""
    if isinstance(found.owner, types.ModuleType):
        return found.owner.__name__
    return str(found.owner.__module__)


def source_qualname(found: Found) -> str:
    """The attribute's qualified name inside :func:`defining_module`'s source."""
    if isinstance(found.owner, types.ModuleType):
        return found.attribute
    return f"{found.owner.__qualname__}.{found.attribute}"

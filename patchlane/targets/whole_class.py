"""A whole class, overridden in place.

The overlay file defines ``class Overlay``, a plain class (the target module's import is
what loads the overlay file, so the file cannot import it at its top), whose own members
replace the members of the same name on upstream's class, written in full as a subclass would
override them: a method, a ``property``, a classmethod, a value.

Why in place rather than a replacement class bound to the module's name: every
``from module import Cls`` taken earlier, every existing subclass and every existing instance
holds upstream's class object; a new class would reach none of them, and ``isinstance`` checks
against the old one would keep passing for objects the fix never touched. Grafting the members
onto the class object itself reaches all of them at once, and revert puts each original member
back.

So that nothing is ever reported applied that does not run:
* a member upstream's class does not have is refused (a misspelt override would be dead code),
* a member whose kind differs from upstream's is refused (a function where upstream has a
  property would change how it is read: a forgotten ``@property``),
* a member that calls ``super()`` is refused: grafted onto upstream's class it is no longer in
  ``Overlay``, and its ``super()`` would not reach upstream's member. Write it in full.

Calls of each method and accessor grafted are counted.
"""

from __future__ import annotations

import difflib
import types
from typing import Any

from .descriptor import PatchProperty
from .find import Found, Refused, holder_of
from .function import wrap_callable
from .protocol import Hit, LayerView, comment, innermost, layers_at, mark, remember_value

__all__ = ["WHOLE_CLASS"]

_BOOKKEEPING = frozenset({
    "__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__abstractmethods__",
    "_abc_impl", "__orig_bases__", "__parameters__", "__annotations__", "__slots__",
    "__static_attributes__", "__firstlineno__", "__annotate__", "__type_params__",
})


def _passthrough(wrapped: Any, instance: Any, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> Any:
    return wrapped(*args, **kwargs)


def _uses_super(member: Any) -> bool:
    functions = [member]
    if isinstance(member, (classmethod, staticmethod)):
        functions = [member.__func__]
    elif isinstance(member, property):
        functions = [f for f in (member.fget, member.fset, member.fdel) if f is not None]
    return any("__class__" in getattr(getattr(f, "__code__", None), "co_freevars", ())
               for f in functions)


def _kind(obj: Any) -> str:
    obj = innermost(obj)
    for kind in (property, classmethod, staticmethod):
        if isinstance(obj, kind):
            return kind.__name__
    if isinstance(obj, types.FunctionType):
        return "function"
    if hasattr(type(obj), "__get__"):
        return "descriptor"
    return "value"


class _WholeClass:
    name = "class"
    described = "a class"
    counts_hits = True
    # A grafted member runs the override itself (its wrapper wraps the override, not
    # upstream's member): a reference to it taken before a revert keeps running the override.
    off_when_reverted = False
    overlay_names: tuple[str, ...] = ("Overlay",)

    def matches(self, found: Found, inner: Any) -> bool:
        return isinstance(inner, type)

    def build(self, found: Found, overlay: types.ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        cls = found.raw
        target = f"{found.owner_path}.{found.attribute}" if isinstance(found.owner, type) \
            else f"{found.owner_path}:{found.attribute}"
        given = getattr(overlay, "Overlay", None)
        if not isinstance(given, type):
            raise Refused(f"{overlay.__file__} defines no class `Overlay`: {target} is a "
                          "class, overridden in place by the members of `class Overlay`")
        members = {n: m for n, m in vars(given).items() if n not in _BOOKKEEPING}
        if not members:
            raise Refused(f"{overlay.__file__}: `Overlay` defines no member: nothing to "
                          f"override on {target}")
        parts = []
        for name, member in members.items():
            where = f"{overlay.__file__}: Overlay.{name}"
            holder = holder_of(cls, name)
            if holder is None or holder is object:
                close = difflib.get_close_matches(name, [n for n in dir(cls)
                                                         if not n.startswith("__")], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise Refused(f"{where}: {target} has no member {name!r}{hint}; an override "
                              "replaces what upstream has (a new member would be dead code "
                              "upstream never calls)")
            upstream = vars(holder)[name]
            others = sorted({view.entry_id for view in layers_at(holder, name, upstream)
                             if view.entry_id not in (None, entry_id)})
            if others:
                # Grafted over it, the override would replace that entry's layer: its fix
                # would no longer run while it still read "applied".
                raise Refused(f"{where}: {target}.{name} is already patched by "
                              f"{', '.join(others)}; overriding it would replace that entry's "
                              "layer, and its fix would no longer run. Fix: leave the member "
                              "out of Overlay and carry the change in that entry, or make it "
                              "a method entry of its own with depends_on: [that entry] (a "
                              "method entry stacks on the other's layer)")
            if _kind(member) != _kind(upstream):
                raise Refused(f"{where} is a {_kind(member)}, {target}.{name} is a "
                              f"{_kind(upstream)}: the override would change how it is used "
                              f"(a forgotten @property?). Fix: make it a {_kind(upstream)}")
            if _uses_super(member):
                raise Refused(f"{where} calls super(): grafted onto {target} it is no longer "
                              f"in Overlay, so super() would not reach upstream's {name}. Fix: "
                              "write the member in full")
            parts.append((cls, name, _placed(cls, name, member, upstream, entry_id, hit)))
        return parts

    def stub(self, target: str) -> str:
        return (
            "class Overlay:\n"
            + comment(f"{target} is a class. Each member defined here replaces the member of "
                      "the same name on upstream's class, in place (every import, subclass and "
                      "instance sees it), written in full: no super(). A name upstream lacks, "
                      "or another kind of member (a function for a property), is refused. "
                      "Until a member is written the entry is refused, never reported applied. "
                      "A plain class: importing the target module at the top of this file "
                      "would be a circular import (its import is what loads this file).")
            + "    pass\n")


def _placed(cls: type, name: str, member: Any, upstream: Any, entry_id: str, hit: Hit) -> Any:
    if isinstance(member, property):
        # Each accessor the override defines is counted (its own accessors, not upstream's).
        placed = PatchProperty(_counted(member.fget, hit), _counted(member.fset, hit),
                               _counted(member.fdel, hit), member.__doc__)
        return mark(placed, entry_id, upstream)
    if isinstance(member, (types.FunctionType, classmethod, staticmethod)):
        # wrapt binds the override as it binds itself; the wrapper counts its calls.
        return wrap_callable(member, _passthrough, entry_id, hit)
    # A value, or a descriptor of the override's own: set as written, not counted.
    remember_value(cls, name, LayerView(member, entry_id, upstream))
    return member


def _counted(fn: Any, hit: Hit) -> Any:
    if fn is None:
        return None
    import functools

    @functools.wraps(fn)
    def accessor(*args: Any) -> Any:
        hit()
        return fn(*args)

    return accessor


WHOLE_CLASS = _WholeClass()

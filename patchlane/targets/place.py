"""Setting what a shape built, checking that calls reach it, and taking it back.

All or nothing: every attribute a shape builds is set, then each is looked up through its
owner (``inspect.getattr_static``: the MRO and the metaclass as Python walks them, without
running a descriptor); if any lookup does not reach the object just set (a metaclass data
descriptor of that name, a ``__slots__`` conflict, an owner that swallowed the assignment),
everything set is put back and the entry is refused with what the lookup found. "Applied"
never means less than "the overlay sits where the calls go".
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

from .find import Found, Refused, holder_of
from .protocol import Placement, forget_value, layers_at

__all__ = ["copies_left", "current", "defined_elsewhere", "defining_module", "ours_at", "place",
           "reaches", "still_placed", "unplace"]

_MISSING = object()


def current(owner: Any, attribute: str) -> Any:
    """What the owner's own ``__dict__`` holds under ``attribute`` (None when nothing)."""
    try:
        return vars(owner).get(attribute)
    except TypeError:
        return None


def _looked_up(owner: Any, attribute: str) -> Any:
    try:
        return inspect.getattr_static(owner, attribute)
    except AttributeError:
        return _MISSING


def reaches(placement: Placement) -> bool:
    """Whether a lookup through the owner still reaches this placement: it is what the owner
    holds, or a layer under what it holds (another entry stacked on top)."""
    found = _looked_up(placement.owner, placement.attribute)
    return any(view.obj is placement.placed
               for view in layers_at(placement.owner, placement.attribute, found)) or \
        found is placement.placed


def copies_left(placements: Sequence[Placement], most: int = 3) -> list[str]:
    """Where the module that holds a target still holds upstream's function itself, as a
    global or in a table (a dict's value, a list's or tuple's item), one level deep:
    ``ops.DISPATCH['f']``; and, for a function a module re-exports (a package's ``__init__``),
    the module that defines it, under its own name. Taken while the module ran, before the
    overlay was placed, those calls skip the overlay, whatever a lookup through the owner
    finds. Only plain functions are looked for (a value, a small int or a string, may be the
    same object by chance).

    It only reads: exact types, and a dict subclass's own storage (``dict.items``), never its
    ``items()`` (transformers' lazy mappings import a module per key there) nor a proxy's
    ``__class__``. Whatever a module's globals do, the answer is what was found before it went
    wrong, never an exception at the target's import."""
    import sys
    import types

    places: list[str] = []
    try:
        for placement in placements:
            owner = placement.owner
            module = owner if type(owner) is types.ModuleType else \
                sys.modules.get(vars(owner).get("__module__", "")) if isinstance(owner, type) \
                else None
            originals = {id(fn): fn for fn in (_function(placement.original),
                                               _function(placement.below)) if fn is not None}
            if module is None or not originals:
                continue
            # only a function stored on a module can be a re-export of another module's
            holders = _modules_holding(module, originals.values()) \
                if type(owner) is types.ModuleType else [module]
            for holder in holders:
                places.extend(_copies_in(holder, owner, placement.attribute, originals))
                if len(places) >= most:
                    return places[:most]
    except Exception:  # a module's odd global is no reason to fail its import
        return places[:most]
    return places


def _modules_holding(module: Any, originals: Any) -> list[Any]:
    """The module whose globals to read: the owner's, and where a module re-exports a function
    defined in another (a package's ``__init__`` importing it from a submodule), that defining
    module too, which holds upstream's function under its own name."""
    found = [module]
    for fn in originals:
        defining = defining_module(fn)
        if defining is not None and all(defining is not m for m in found):
            found.append(defining)
    return found


def _copies_in(module: Any, owner: Any, attribute: str, originals: dict[int, Any]) -> list[str]:
    """Where ``module``'s globals hold one of ``originals`` (see :func:`copies_left`)."""
    places: list[str] = []
    name_of = getattr(module, "__name__", "?")
    for name, value in list(vars(module).items()):
        if module is owner and name == attribute:
            continue
        kind = type(value)
        if id(value) in originals:
            places.append(f"{name_of}.{name}")
        elif issubclass(kind, dict):
            places.extend(f"{name_of}.{name}[{key!r}]"
                          for key, item in list(dict.items(value)) if id(item) in originals)
        elif kind is list or kind is tuple:
            places.extend(f"{name_of}.{name}[{at}]"
                          for at, item in enumerate(value) if id(item) in originals)
    return places


def defining_module(fn: Any) -> Any:
    """The module whose file defines the plain function ``fn`` (unwrapped through
    ``__wrapped__``, as a decorator leaves it) and that holds ``fn`` itself under its name;
    None when none does. ``__module__`` is only a claim: torch sets ``"torch.func"`` on
    ``vmap``, which ``torch._functorch.apis`` defines, so the file decides."""
    import inspect
    import sys
    import types

    code = getattr(inspect.unwrap(fn), "__code__", None)
    name = getattr(fn, "__name__", None)
    if code is None or name is None:
        return None

    def defines(module: Any) -> bool:
        return type(module) is types.ModuleType and \
            getattr(module, "__file__", None) == code.co_filename and \
            vars(module).get(name) is fn

    claimed = sys.modules.get(getattr(fn, "__module__", None) or "")
    if defines(claimed):
        return claimed
    if getattr(claimed, "__file__", None) == code.co_filename:
        return None  # its own module's file, not under its name there: a method, a closure
    # `__module__` names another module than the file's (a public re-exporter): the file's
    return next((m for m in list(sys.modules.values()) if defines(m)), None)


def defined_elsewhere(placements: Sequence[Placement]) -> str | None:
    """``module:name`` where a function placed on a module that only re-exports it is defined,
    or None: named there, the target would be patched when that module is imported, before
    the modules that import the function from it take their copy."""
    import types

    for placement in placements:
        fn: types.FunctionType | None = _function(placement.original)
        if type(placement.owner) is not types.ModuleType or fn is None:
            continue
        home = defining_module(fn)
        if home is not None and home is not placement.owner:
            return f"{home.__name__}:{placement.original.__qualname__}"
    return None


def _function(obj: Any) -> Any:
    """The plain function ``obj`` is or holds (a classmethod's, a staticmethod's); None for
    anything else, another entry's wrapper included (a proxy passes ``isinstance`` checks for
    the function it wraps: the exact type is read)."""
    import types

    if type(obj) in (classmethod, staticmethod):
        obj = obj.__func__
    return obj if type(obj) is types.FunctionType else None


def still_placed(found: Found, placements: Sequence[Placement]) -> bool:
    """Whether what an entry placed is still where its target is now (``found``): each
    placement reaches, on the target's owner (or, for a class, on the class). A reload builds
    fresh classes and functions: then the entry is decided (and placed) again."""
    return all((p.owner is found.owner or p.owner is found.raw) and reaches(p)
               for p in placements)


def ours_at(owner: Any, attribute: str, entry_id: str) -> bool:
    """Whether a layer of ``entry_id`` already sits at ``owner.attribute`` (placed by another
    decider in this process: a second registry load)."""
    found = _looked_up(owner, attribute)
    return any(view.entry_id == entry_id for view in layers_at(owner, attribute, found))


def _stored(owner: Any, attribute: str) -> Any:
    """What is stored for ``attribute`` on the owner or, for a class, its first base that
    holds it (the raw object, as a lookup would find it)."""
    holder = holder_of(owner, attribute)
    return None if holder is None else vars(holder)[attribute]


def place(parts: Sequence[tuple[Any, str, Any]], target: str) -> list[Placement]:
    """Set each ``(owner, attribute, object)``; check each lookup reaches it; all or
    nothing."""
    done: list[Placement] = []
    try:
        for owner, attribute, obj in parts:
            had_own = attribute in vars(owner)
            placement = Placement(owner, attribute, had_own, vars(owner).get(attribute),
                                  _stored(owner, attribute), obj)
            try:
                setattr(owner, attribute, obj)
            except (AttributeError, TypeError) as exc:
                raise Refused(f"{target}: {owner!r} refuses the assignment of "
                              f"{attribute!r} ({type(exc).__name__}: {exc}). Fix: target "
                              "where the calls go") from None
            done.append(placement)
        for placement in done:
            if not reaches(placement):
                seen = _looked_up(placement.owner, placement.attribute)
                raise Refused(f"{target}: after the overlay was set, a lookup of "
                              f"{placement.attribute!r} through {placement.owner!r} finds "
                              f"{seen!r}, not the overlay: calls would not reach it (a "
                              "metaclass attribute or __getattr__ of that name). Fix: target "
                              "where the calls go")
    except BaseException:
        for placement in reversed(done):
            unplace(placement)
        raise
    return done


def unplace(placement: Placement) -> None:
    """Put back exactly what the owner held before ``placement``."""
    if placement.had_own:
        setattr(placement.owner, placement.attribute, placement.original)
    elif placement.attribute in vars(placement.owner):
        delattr(placement.owner, placement.attribute)
    forget_value(placement.owner, placement.attribute, placement.placed)

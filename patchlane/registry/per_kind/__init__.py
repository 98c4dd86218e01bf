"""One module per entry kind, registered in one table.

:data:`PARTS` maps each :class:`~patchlane.registry.kinds.Kind` to its module, which provides
every part of :class:`~patchlane.registry.per_kind.protocol.KindParts`: what it reads from the
registry, how the ledger decides it, what ``patchlane new`` takes and writes for it. The schema,
the ledger, the startup's ledger hook and ``patchlane new`` read a kind's parts here and never
compare its name.

Adding a kind: its member and its row of facts in :mod:`patchlane.registry.kinds`, its module
here and its row below (:func:`register` holds it to every part, in its shape, when the table is
built), and its line in ``docs/adding-an-entry.md``.
"""

from __future__ import annotations

from types import ModuleType
from typing import cast

from ..kinds import Kind
from . import compat_gate, config, packaging_pin, source_patch, version_floor
from .compat_gate import CompatGate
from .config import ConfigSettings
from .packaging_pin import PackagingPin
from .protocol import Drafting, KindParts, NewOption, Release
from .version_floor import VersionFloor

__all__ = ["PARTS", "CompatGate", "ConfigSettings", "Drafting", "KindParts", "KindPartsError",
           "NewOption", "PackagingPin", "Release", "VersionFloor", "new_options", "register"]

_FUNCTIONS = {"parse": ("fields", "data", "target"), "decide": ("entry",),
              "judge": ("entry", "config"), "write": ("draft",)}
"""Each function part of :class:`KindParts` and its parameters, as a kind's module names them
(checked without ``inspect``: this table loads with every registry that is parsed)."""


class KindPartsError(TypeError):
    """A kind's module registered without a part, or with one of another shape: a defect in
    the code that adds the kind, caught when it is registered, never at an entry's decision."""


def register(kind: Kind, module: ModuleType) -> KindParts:
    """``module`` as ``kind``'s parts, once every part is there in its shape (as pluggy checks a
    plugin's hooks against their specifications when the plugin is registered)."""
    where = f"{module.__name__} (the {kind.value} kind's parts)"
    fix = ("fix: define it as patchlane/registry/per_kind/protocol.py's KindParts says (a "
           "part a kind has no use for returns None)")
    options = getattr(module, "OPTIONS", None)
    if not isinstance(options, tuple) or not all(isinstance(o, NewOption) for o in options):
        raise KindPartsError(f"{where}: OPTIONS: found {options!r}, expected a tuple of "
                             f"NewOption; {fix}")
    for name, parameters in _FUNCTIONS.items():
        part = getattr(module, name, None)
        code = getattr(part, "__code__", None)
        if code is None:
            raise KindPartsError(f"{where}: {name}: found {part!r}, expected a function "
                                 f"({', '.join(parameters)}); {fix}")
        found = code.co_varnames[:code.co_argcount]
        if found != parameters:
            raise KindPartsError(f"{where}: {name}({', '.join(found)}): expected the "
                                 f"parameters ({', '.join(parameters)}); {fix}")
    return cast("KindParts", module)


PARTS: dict[Kind, KindParts] = {
    Kind.SOURCE_PATCH: register(Kind.SOURCE_PATCH, source_patch),
    Kind.VERSION_FLOOR: register(Kind.VERSION_FLOOR, version_floor),
    Kind.PACKAGING_PIN: register(Kind.PACKAGING_PIN, packaging_pin),
    Kind.COMPAT_GATE: register(Kind.COMPAT_GATE, compat_gate),
    Kind.CONFIG: register(Kind.CONFIG, config),
}


def new_options() -> dict[str, tuple[NewOption, tuple[Kind, ...]]]:
    """Every kind's own ``patchlane new`` option by name, with the kinds that take it."""
    found: dict[str, tuple[NewOption, tuple[Kind, ...]]] = {}
    for kind, parts in PARTS.items():
        for option in parts.OPTIONS:
            known = found.get(option.name)
            found[option.name] = (option, (*known[1], kind) if known else (kind,))
    return found

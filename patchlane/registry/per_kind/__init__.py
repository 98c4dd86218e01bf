"""One module per entry kind, registered in one table.

:data:`PARTS` maps each :class:`~patchlane.registry.kinds.Kind` to its module, which provides
every part of :class:`~patchlane.registry.per_kind.protocol.KindParts`: what it reads from the
registry, how the ledger decides it, what ``patchlane new`` takes and writes for it. The schema,
the ledger, the startup's ledger hook and ``patchlane new`` read a kind's parts here and never
compare its name.

Adding a kind: its member and its row of facts in :mod:`patchlane.registry.kinds`, its module
here and its row below (``tests/startup/test_kinds.py`` holds it to every part), and its line in
``docs/adding-an-entry.md``.
"""

from __future__ import annotations

from ..kinds import Kind
from . import compat_gate, config, packaging_pin, source_patch, version_floor
from .compat_gate import CompatGate
from .config import ConfigSettings
from .packaging_pin import PackagingPin
from .protocol import Drafting, KindParts, NewOption, Release
from .version_floor import VersionFloor

__all__ = ["PARTS", "CompatGate", "ConfigSettings", "Drafting", "KindParts", "NewOption",
           "PackagingPin", "Release", "VersionFloor", "new_options"]

PARTS: dict[Kind, KindParts] = {
    Kind.SOURCE_PATCH: source_patch,
    Kind.VERSION_FLOOR: version_floor,
    Kind.PACKAGING_PIN: packaging_pin,
    Kind.COMPAT_GATE: compat_gate,
    Kind.CONFIG: config,
}


def new_options() -> dict[str, tuple[NewOption, tuple[Kind, ...]]]:
    """Every kind's own ``patchlane new`` option by name, with the kinds that take it."""
    found: dict[str, tuple[NewOption, tuple[Kind, ...]]] = {}
    for kind, parts in PARTS.items():
        for option in parts.OPTIONS:
            known = found.get(option.name)
            found[option.name] = (option, (*known[1], kind) if known else (kind,))
    return found

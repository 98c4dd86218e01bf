"""What each entry kind is, in one record per kind: every part of patchlane that treats kinds
differently reads it here instead of comparing kind names.

A kind's record says which registry keys it takes (:mod:`patchlane.registry.schema`), which
options ``patchlane new`` accepts for it (:mod:`patchlane.authoring.new`), how the startup
decides it (:class:`DecidedBy`: wrapped at its target's import, checked at its module's import,
settings assigned at their modules' import, or checked on demand), and whether the sweep runs
its reproducer with an overlay. :class:`patchlane.registry.StartupRow` carries the startup part
as plain text, so the lazy start reads it from its watch list and never a kind's name.

Adding a kind: its member in :class:`Kind`, its record in :data:`KINDS`, its module in
:mod:`patchlane.registry.per_kind` (every part of its ``KindParts``: the keys it reads, its
ledger decision, what ``patchlane new`` offers and writes), and its row in
``docs/adding-an-entry.md``.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

__all__ = ["KINDS", "DecidedBy", "Kind", "KindRules"]


class Kind(str, enum.Enum):
    SOURCE_PATCH = "source_patch"
    VERSION_FLOOR = "version_floor"
    COMPAT_GATE = "compat_gate"
    PACKAGING_PIN = "packaging_pin"
    CONFIG = "config"


class DecidedBy(str, enum.Enum):
    """How the startup decides an entry of a kind."""

    WRAP = "wrap"
    """An overlay wraps its target when the target's module is imported (a disabled one still
    waits for that import, so its audit names the installed release)."""
    LEDGER = "ledger"
    """The installed environment is checked when the entry's module is imported."""
    CONFIG = "config"
    """Settings are assigned when their modules are imported."""
    ON_DEMAND = "on demand"
    """Nothing at import: checked when the job asks (``patchlane.check_config(config)``)."""


class KindRules(NamedTuple):
    """One kind's record. (A NamedTuple: `import patchlane` defines it on every start.)"""

    required: tuple[str, ...]
    """Registry keys it must have, on top of every entry's."""
    optional: tuple[str, ...]
    """Registry keys it may have, on top of every entry's."""
    new_options: frozenset[str]
    """What ``patchlane new`` accepts for it; any other option is refused, not ignored."""
    decided_by: DecidedBy
    """How the startup decides an entry of this kind."""
    with_overlay: bool
    """Whether it carries an overlay: its target names a function, its gate needs an upper
    bound, an unforwarded fix needs a draft, other entries may depend on it or continue it, and
    the sweep's ``with`` case is the overlay's (the other kinds' ``with`` case is the entry
    decided as the registry says)."""
    own_probe: bool = False
    """Whether ``retire_when.probe`` may stand without an overlay: the startup itself can tell
    that upstream behaves (a config entry's setting is already upstream's default)."""
    new_required: tuple[str, ...] = ()
    """What ``patchlane new`` must be given for it (``requires`` for a floor)."""


KINDS: dict[Kind, KindRules] = {
    Kind.SOURCE_PATCH: KindRules(
        ("target", "applies_to", "overlay", "reproducer", "fingerprint"),
        ("depends_on", "continued_by"),
        frozenset({"target", "distribution", "version_from", "applies_to", "retire_release"}),
        DecidedBy.WRAP, True, new_required=("target",)),
    Kind.VERSION_FLOOR: KindRules(
        ("target", "requires", "policy"), ("when",),
        frozenset({"target", "distribution", "requires", "policy", "retire_release"}),
        DecidedBy.LEDGER, False, new_required=("requires",)),
    Kind.COMPAT_GATE: KindRules(
        ("check",), ("policy",),
        frozenset({"distribution", "version_from", "check", "policy", "applies_to",
                   "retire_release"}),
        DecidedBy.ON_DEMAND, False),
    Kind.PACKAGING_PIN: KindRules(
        ("target", "pin"), ("source", "policy", "when"),
        frozenset({"target", "distribution", "pin", "policy", "retire_release"}),
        DecidedBy.LEDGER, False, new_required=("pin", "distribution")),
    Kind.CONFIG: KindRules(
        ("settings",), (),
        frozenset({"distribution", "version_from", "settings", "applies_to",
                   "retire_release"}),
        DecidedBy.CONFIG, False, own_probe=True, new_required=("settings",)),
}

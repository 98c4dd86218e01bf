"""A value a module or class holds (a constant, a table, a default): replaced by what the
overlay returns for it.

The overlay file defines ``overlay(original)``, which returns the value to hold instead
(``original`` is upstream's, unchanged: copy a table before changing it, so revert can put
upstream's back as it was). A read of a value runs no code, so its uses cannot be counted: an
applied value reports no hits, and the sweep does not ask a reproducer to hit it.

``from module import NAME`` done before the overlay was applied keeps upstream's value: a value
has no identity to patch in place (two unrelated names may hold the same small int), so no
other module's copy is rebound. Targets imported as a module attribute at use
(``module.NAME``) see the overlay; the entry's reproducer is what shows a copy is not used.
"""

from __future__ import annotations

import types
from typing import Any

from .find import Found, Refused
from .protocol import Hit, LayerView, comment, remember_value

__all__ = ["ATTRIBUTE"]


class _Attribute:
    name = "attribute"
    described = "a value (a module or class attribute)"
    counts_hits = False
    off_when_reverted = False
    overlay_names: tuple[str, ...] = ("overlay",)

    def matches(self, found: Found, inner: Any) -> bool:
        return True  # the last shape: what is neither called nor a descriptor is read as it is

    def build(self, found: Found, overlay: types.ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        fn = getattr(overlay, "overlay", None)
        if not callable(fn):
            raise Refused(f"{overlay.__file__} defines no callable `overlay`: "
                          f"{found.owner_path}.{found.attribute} is {self.described}, "
                          "overlaid by overlay(original) returning the value to hold")
        value = fn(found.raw)
        if value is found.raw:
            raise Refused(f"{overlay.__file__}: overlay(original) returned upstream's own "
                          f"object for {found.owner_path}.{found.attribute}: nothing would "
                          "change (a table changed in place cannot be reverted). Fix: return "
                          "a changed copy")
        remember_value(found.owner, found.attribute, LayerView(value, entry_id, found.raw))
        return [(found.owner, found.attribute, value)]

    def stub(self, target: str) -> str:
        return (
            "def overlay(original: Any) -> Any:\n"
            + comment(f"{target} is a value: return the value to hold instead (a copy of a "
                      "table, changed; revert puts upstream's object back). Reads are not "
                      "counted. Until the fix is written the entry is refused (nothing would "
                      "change), never reported applied.")
            + "    return original\n")


ATTRIBUTE = _Attribute()

"""How a ``PATCHLANE_*`` value is read: one reading for :mod:`patchlane.deciding.controls` and
for the lazy start (:mod:`patchlane.lazy.arm`), which decides at every interpreter start, before
anything else of patchlane is imported, whether the settings let it stay lazy.

Only ``os`` here, on purpose: this module is part of what a process that imports no target
pays for (the lazy start's import budget is a few milliseconds, less than ``pathlib`` or
``logging`` alone cost to import). Functions answer ``None`` for a value they cannot read and
never raise; :mod:`patchlane.deciding.controls` turns that into the :class:`ControlsError`
naming the variable.
"""

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # collections.abc would cost more to import than the lazy path itself
    from collections.abc import Mapping

__all__ = ["FALSE", "FLAGS", "TRUE", "disabled_reason", "flag", "ids", "registry_cache_dir",
           "unreadable"]

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off")

FLAGS = {"PATCHLANE_STRICT": False, "PATCHLANE_DEFAULT_REGISTRY": True,
         "PATCHLANE_ENTRY_POINTS": True, "PATCHLANE_VERIFY_RANKS": True,
         "PATCHLANE_REQUIRE_EVIDENCE": False, "PATCHLANE_LAZY": True}
"""Every yes/no setting the startup reads at start-up, with its default (unset or empty).
``PATCHLANE_LAZY`` is read first, at ``import patchlane`` (patchlane.lazy.arm); the startup
checks it with the others, so that a value neither yes nor no is refused as theirs are."""


def flag(raw: str | None, default: bool) -> bool | None:
    """A yes/no setting: unset or empty is ``default``; None when it is neither."""
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    return None


def unreadable(name: str, raw: str | None, default: bool) -> str:
    """What to say of ``name=raw`` that :func:`flag` cannot read: the accepted spellings and
    what unset means."""
    return (f"{name}={raw!r}: expected one of {', '.join(TRUE)} or {', '.join(FALSE)}, or "
            f"unset ({'on' if default else 'off'}); fix or unset it")


def ids(raw: str | None) -> frozenset[str]:
    """A comma-separated id list (``PATCHLANE_DISABLE``, ``PATCHLANE_ONLY``)."""
    if not raw:
        return frozenset()
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


def only_ids(raw: str | None) -> frozenset[str] | None:
    """``PATCHLANE_ONLY``: None (no restriction) when unset, or set to nothing but spaces and
    commas: ``PATCHLANE_ONLY=$IDS`` with ``IDS`` empty must not leave out every entry in
    silence (the controls warn that it was ignored)."""
    found = ids(raw)
    return found or None


def disabled_reason(entry_id: str, disable: frozenset[str],
                    only: frozenset[str] | None) -> str | None:
    """Why ``PATCHLANE_DISABLE`` (``disable``) or ``PATCHLANE_ONLY`` (``only``; None when
    unset) leave ``entry_id`` out, or None when they do not."""
    if entry_id in disable:
        return "listed in PATCHLANE_DISABLE"
    if only is not None and entry_id not in only:
        return "not listed in PATCHLANE_ONLY"
    return None


def registry_cache_dir(env: "Mapping[str, str]") -> tuple[str | None, bool]:
    """``(directory, refused)``: where the validated-registry cache (and the lazy start's index
    beside it) lives, None when it is off; ``refused`` when it is off because
    ``PATCHLANE_REGISTRY_CACHE`` is a relative path (:mod:`patchlane.deciding.controls` says
    why, once).
    The default is ``$XDG_CACHE_HOME/patchlane/registry``, else ``~/.cache/...``."""
    raw = (env.get("PATCHLANE_REGISTRY_CACHE") or "").strip()
    if raw.lower() in FALSE:
        return None, False
    if raw and raw.lower() not in TRUE:
        path = os.path.expanduser(raw)
        return (path, False) if os.path.isabs(path) else (None, True)
    base = env.get("XDG_CACHE_HOME")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        home = os.path.expanduser("~")
        if home == "~" or not os.path.isabs(home):  # no HOME and no passwd entry
            return None, False
        base = os.path.join(home, ".cache")
    return os.path.join(base, "patchlane", "registry"), False

"""Every environment switch patchlane reads, documented in one place.

``PATCHLANE_DISABLE=id,...``   never apply these entries (decision ``skipped: disabled``).
``PATCHLANE_ONLY=id,...``      apply only these entries; every other one is ``skipped: disabled``.
``PATCHLANE_STRICT=1``         every refusal (drift), failure, ledger violation, and gate that
                               cannot be evaluated raises :class:`StrictModeError`. Explicit
                               ``DISABLE``/``ONLY`` choices, ``upstream-fixed``, and a gate that
                               excludes the installed release do not: they are requested, good, or
                               the registry declaring entries for other releases.
``PATCHLANE_REGISTRY=a.yaml:b.yaml``  extra registry files (``os.pathsep``-separated).
``PATCHLANE_DEFAULT_REGISTRY=0``      do not load the registry bundled with patchlane.
``PATCHLANE_ENTRY_POINTS=0``          do not load registries from the ``patchlane.registries``
                               entry-point group.
``PATCHLANE_VERIFY_RANKS=0``          do not compare patch sets across ranks right after
                               ``torch.distributed.init_process_group`` (patchlane.ranks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Controls"]

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _ids(value: str | None) -> frozenset[str]:
    if not value:
        return frozenset()
    return frozenset(part.strip() for part in value.split(",") if part.strip())


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    low = raw.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r}: expected one of {_TRUE + _FALSE}")


@dataclass(frozen=True)
class Controls:
    disable: frozenset[str]
    only: frozenset[str] | None
    strict: bool
    registries: tuple[Path, ...]
    default_registry: bool
    entry_points: bool
    verify_ranks: bool = True

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Controls:
        env = os.environ if env is None else env
        only = env.get("PATCHLANE_ONLY")
        extra = env.get("PATCHLANE_REGISTRY", "")
        return cls(
            disable=_ids(env.get("PATCHLANE_DISABLE")),
            only=_ids(only) if only is not None else None,
            strict=_flag(env, "PATCHLANE_STRICT", False),
            registries=tuple(Path(p) for p in extra.split(os.pathsep) if p),
            default_registry=_flag(env, "PATCHLANE_DEFAULT_REGISTRY", True),
            entry_points=_flag(env, "PATCHLANE_ENTRY_POINTS", True),
            verify_ranks=_flag(env, "PATCHLANE_VERIFY_RANKS", True),
        )

    def disabled_reason(self, entry_id: str) -> str | None:
        if entry_id in self.disable:
            return "listed in PATCHLANE_DISABLE"
        if self.only is not None and entry_id not in self.only:
            return "not listed in PATCHLANE_ONLY"
        return None

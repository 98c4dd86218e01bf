"""Which upstream release does an imported tree match? (base + patch + canary)

A Megatron-LM checkout on ``PYTHONPATH`` has no distribution metadata, and its declared
version (``package_info.py``) says what it was cut from, not what was edited since. The
registry records, per entry, the fingerprint each upstream release's target had when it ran
(``fingerprint.releases``). Fingerprinting the imported tree's targets and comparing names the
nearest release (the base) and the targets that differ from it (the local patch surface); the
entry's reproducer is the canary.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..common.versions import parse_version
from ..installed.fingerprint import compute
from ..installed.gates import resolve_version
from ..registry import KINDS, Entry

__all__ = ["ReleaseMatch", "nearest_release"]


@dataclass(frozen=True)
class ReleaseMatch:
    distribution: str
    declared: str | None
    """The version the imported copy declares (metadata or source tree)."""
    source: str
    nearest: str | None
    """The recorded release whose fingerprints match the most targets."""
    matched: tuple[str, ...] = ()
    differ: tuple[str, ...] = ()
    """Entry ids whose target differs from ``nearest``'s recorded fingerprint."""
    unknown: tuple[str, ...] = ()
    """Entry ids with no fingerprint recorded for ``nearest``, or whose target is absent."""
    found: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {"distribution": self.distribution, "declared": self.declared,
                "source": self.source, "nearest": self.nearest, "matched": list(self.matched),
                "differ": list(self.differ), "unknown": list(self.unknown),
                "found": dict(self.found)}


def _distance(release: str, declared: str | None) -> tuple[int, ...]:
    a, b = parse_version(release), parse_version(declared or "0")
    if a is None or b is None:
        return (1 << 30,)
    return tuple(abs(x - y) for x, y in zip(
        (*a.release, 0, 0, 0)[:3], (*b.release, 0, 0, 0)[:3], strict=True))


def nearest_release(entries: Iterable[Entry], distribution: str) -> ReleaseMatch:
    """Import each source-patch target of ``distribution`` (as a training job would) and name
    the recorded release its code matches best."""
    relevant = [e for e in entries if KINDS[e.kind].with_overlay and e.fingerprint is not None
                and e.fingerprint.releases and e.target.distribution == distribution
                and e.target.module and e.target.qualname]
    found: dict[str, str] = {}
    module = None
    for entry in relevant:
        assert entry.fingerprint is not None and entry.target.module is not None
        try:
            module = importlib.import_module(entry.target.module)
            found[entry.id] = compute(module, entry.fingerprint.qualnames(
                entry.target.qualname or ""))
        except (ImportError, AttributeError, LookupError, OSError, TypeError):
            continue  # this tree has no such target: it counts as unknown below
    declared, source = resolve_version(distribution, module,
                                       relevant[0].target.version_from if relevant else None)
    recorded = {e.id: dict(e.fingerprint.releases) for e in relevant if e.fingerprint}
    releases = sorted({r for table in recorded.values() for r in table},
                      key=lambda r: _distance(r, declared))
    best: str | None = None
    best_score = -1
    for release in releases:  # nearest to the declared version first: it wins a tie
        score = len([i for i, table in recorded.items()
                     if i in found and table.get(release) == found[i]])
        if score > best_score:
            best, best_score = release, score
    matched, differ, unknown = [], [], []
    for entry_id, table in recorded.items():
        value = table.get(best or "")
        if entry_id not in found or value is None:
            unknown.append(entry_id)
        elif value == found[entry_id]:
            matched.append(entry_id)
        else:
            differ.append(entry_id)
    return ReleaseMatch(distribution, declared, source, best, tuple(matched), tuple(differ),
                        tuple(unknown), found)

"""The release radar: which upstream releases nobody has run the registry against yet.

Per target distribution of the registry's active entries that have a reproducer: the releases
with run evidence (each entry's ``fingerprint.releases``, recorded when a release ran, and
the sets of ``matrix.yaml``), the newest of them, and the releases on PyPI newer than that
which install on this interpreter. Each such release is to be swept for the entries on that
distribution. ``--sweep`` (:func:`sweep_release`) installs it side by side and sweeps those
entries there, so a new release gets ``guarding`` / ``still-affected`` / ``upstream-fixed``
per entry without anyone editing ``matrix.yaml``, and each verdict comes with the registry
edit it proposes (extend the gate, record the release, retire).

Only releases newer than the newest with evidence are listed: an older release nobody ran is
``patchlane bisect``'s question (the range), not the radar's (what is new).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import Version

from ..common.exit_codes import sweep_exit_code
from ..common.versions import parse_version
from ..registry import Entry, Registry
from ..runs.index import RunIndex
from ..runs.verdicts import EXIT_BITS, MEANING, SEVERITY, Verdict
from .bisect import Listing, next_minor

__all__ = ["RadarRow", "ReleaseSweep", "evidence_releases", "proposal", "radar"]


_version = parse_version  # None for a release that cannot be compared (never an exception)


def _newer(text: str, floor: Version | None) -> bool:
    version = parse_version(text)
    return floor is not None and version is not None and version > floor


@dataclass(frozen=True)
class RadarRow:
    """One target distribution: its newest release with evidence and the newer ones."""

    distribution: str
    newest_with_evidence: str | None
    evidence_from: tuple[str, ...]
    """Where the newest release's evidence is recorded."""
    new: tuple[str, ...]
    """Releases on PyPI newer than that, installable here, oldest first."""
    entries: tuple[str, ...]
    """The entries each new release must be swept for."""
    left_out: tuple[tuple[str, str], ...] = ()
    """Newer releases that do not install here, with why."""

    def as_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution,
                "newest_with_evidence": self.newest_with_evidence,
                "evidence_from": list(self.evidence_from), "new": list(self.new),
                "entries": list(self.entries),
                "left_out": [{"release": v, "reason": why} for v, why in self.left_out]}


def _sweepable(entry: Entry) -> bool:
    return entry.active and entry.reproducer is not None and bool(entry.target.distribution)


def evidence_releases(registry: Registry,
                      matrix_installs: Iterable[tuple[str, Sequence[str]]] = ()
                      ) -> dict[str, dict[str, list[str]]]:
    """distribution (canonical) -> release -> where a run of it is recorded."""
    found: dict[str, dict[str, list[str]]] = {}

    def add(distribution: str, release: str, source: str) -> None:
        if _version(release) is not None:
            found.setdefault(canonicalize_name(distribution), {}).setdefault(
                release, []).append(source)

    for entry in registry.entries:
        if entry.fingerprint is not None:
            for release in entry.fingerprint.releases:
                add(entry.target.distribution, release, f"{entry.id} fingerprint.releases")
    for name, specs in matrix_installs:
        for spec in specs:
            dist, _, release = spec.partition("==")
            add(dist, release, f"matrix.yaml set {name}")
    return found


def radar(registry: Registry, listing_for: Callable[[str], Listing],
          matrix_installs: Iterable[tuple[str, Sequence[str]]] = ()) -> list[RadarRow]:
    """One row per target distribution of the entries the sweep runs."""
    evidence = evidence_releases(registry, matrix_installs)
    by_dist: dict[str, tuple[str, list[str]]] = {}
    for entry in registry.entries:
        if _sweepable(entry):
            by_dist.setdefault(canonicalize_name(entry.target.distribution),
                               (entry.target.distribution, []))[1].append(entry.id)
    rows = []
    for canonical, (name, entry_ids) in sorted(by_dist.items()):
        known = evidence.get(canonical, {})
        # evidence_releases keeps only releases that parse: every key compares
        parsed = [(v, r) for r in known if (v := parse_version(r)) is not None]
        floor, newest = max(parsed, key=lambda p: p[0]) if parsed else (None, None)
        listing = listing_for(name)
        new = tuple(c.version for c in listing.candidates
                    if floor is None or c.parsed > floor)
        left_out = tuple((v, why) for v, why in listing.skipped if _newer(v, floor))
        rows.append(RadarRow(name, newest, tuple(known.get(newest, [])) if newest else (),
                             new if newest is not None else (), tuple(entry_ids), left_out))
    return rows


def proposal(entry: Entry, verdict: Verdict, release: str, covered_by: str | None = None) -> str:
    """The registry edit a verdict on a new ``release`` proposes for ``entry`` (each verdict's
    :attr:`~patchlane.runs.verdicts.Meaning.proposes`)."""
    text = MEANING[verdict].proposes
    return text.format(
        release=release, id=entry.id,
        next_minor=next_minor(release) if "{next_minor}" in text else "",
        covered_by=covered_by or "its continued_by entry")


@dataclass
class ReleaseSweep:
    """A new release swept for the entries on its distribution."""

    distribution: str
    release: str
    run_dir: Path
    exit_code: int
    verdicts: dict[str, list[Verdict]] = field(default_factory=dict)
    proposals: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"distribution": self.distribution, "release": self.release,
                "run_dir": str(self.run_dir), "exit_code": self.exit_code,
                "verdicts": {e: [v.value for v in vs] for e, vs in self.verdicts.items()},
                "proposals": self.proposals}


def failed_sweep(distribution: str, release: str, run_dir: Path, entries: Sequence[str],
                 why: str) -> ReleaseSweep:
    """A release that could not be swept: an ``error`` for each of its entries, saying why."""
    out = ReleaseSweep(distribution, release, run_dir, sweep_exit_code(EXIT_BITS[Verdict.ERROR]))
    for entry_id in entries:
        out.verdicts[entry_id] = [Verdict.ERROR]
        out.proposals[entry_id] = f"not swept: {why}; nothing to record (try again later)"
    return out


def read_sweep(registry: Registry, distribution: str, release: str, index: RunIndex,
               run_dir: Path, exit_code: int) -> ReleaseSweep:
    """What one release's sweep says per entry, and the edit each verdict proposes."""
    out = ReleaseSweep(distribution, release, run_dir, exit_code)
    covered = {r.entry_id: r.reason for r in index.rows if r.verdict is Verdict.COVERED}
    worst: dict[str, Verdict] = {}
    for row in index.rows:
        out.verdicts.setdefault(row.entry_id, []).append(row.verdict)
        if row.entry_id not in worst or SEVERITY.index(row.verdict) < \
                SEVERITY.index(worst[row.entry_id]):
            worst[row.entry_id] = row.verdict
    for entry_id, verdict in worst.items():
        entry = registry.get(entry_id)
        out.proposals[entry_id] = proposal(entry, verdict, release,
                                           entry.continued_by if entry_id in covered else None)
    return out

"""What :func:`patchlane.report` returns: everything one decider decided, as typed JSON-ready data.

The shape is written down as TypedDicts so that its readers (``patchlane status --json``,
``doctor``, ``show``, the reproducer runner, ``patchlane run --reports``) are checked against
it instead of against ``dict[str, Any]``. Kept out of ``patchlane/__init__.py`` so the package
module stays the list of public calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict

from .._version import __version__
from ..common.errors import PatchlaneError
from .audit import AuditLog, DecisionRecord, Outcome

if TYPE_CHECKING:
    from ..registry import Entry, Registry
    from .controls import Controls

__all__ = ["Decided", "EntryReport", "EvidenceSummary", "ProofRecord", "Report", "build_report"]


class ProofRecord(TypedDict):
    """Whether a passing run proved an applied entry on this process's own stack
    (patchlane.deciding.proof says what counts and what a class is)."""

    answer: str
    """``proven here``, ``stale``, ``proven elsewhere`` or ``never run``."""
    text: str
    """The answer in one phrase, with the nearest proof's differences or the rows seen."""
    here: dict[str, str | None]
    """This process's class: python, torch, cuda, arch, distribution, release."""
    proof: dict[str, object] | None
    """The proof of this class, else the nearest of another (run, receipt, its class)."""
    differs: list[str]
    seen: dict[str, int]
    """The entry's rows read, per verdict."""
    changed: list[str]
    """The content parts changed since the proof ran (``stale``): overlay, reproducer, check,
    entry."""
    refused: list[str]
    """Runs that claimed a pass and were not verified, each with why."""


class EvidenceSummary(TypedDict):
    """What was read to answer: the runs roots, how many runs, and what was left out."""

    roots: list[str]
    runs_read: int
    not_read: int
    """Older run directories past the cap."""
    unreadable: list[str]
    """``where: why`` for each run or receipt left out."""


class _Answer(Protocol):
    def as_dict(self) -> ProofRecord: ...


class _Evidence(Protocol):
    def answer(self, entry: Entry, release: str | None) -> _Answer: ...

    def summary(self) -> EvidenceSummary: ...


class Decided(Protocol):
    """What a report reads of a decider (:class:`patchlane.deciding.decider.Decider` is one):
    written as a protocol so this module, which the proof check imports for its records, never
    imports the decider that imports the proof check."""

    audit: AuditLog
    registry: Registry
    controls: Controls
    unknown_control_ids: dict[str, list[str]]

    def evidence(self, roots: tuple[Path, ...] = ()) -> _Evidence | None: ...

    def is_applied(self, entry_id: str) -> bool: ...

    def summary(self, settled: bool = False) -> str: ...


class EntryReport(TypedDict):
    """One registry entry: what it is, what was decided for it, and how often it ran."""

    id: str
    kind: str
    status: str
    target: str
    """``module:qualname`` of the target object, else its distribution."""
    registry: str
    """The registry file that declares it (the catalog's, a team's)."""
    decision: DecisionRecord | None
    """The decision that holds now; None before the first."""
    applied: bool
    hits: int
    paths: dict[str, int]
    """Calls per branch the overlay recorded with :func:`patchlane.hit_path`."""
    path_reasons: dict[str, str]
    """Why each branch was taken, where the overlay said (its latest call's reason)."""
    evidence: ProofRecord | None
    """For an applied entry when evidence is asked for (``PATCHLANE_EVIDENCE``, ``patchlane
    status --evidence``): proven here, elsewhere, or never run. None otherwise."""


class Report(TypedDict):
    patchlane: str
    strict: bool
    registries: list[str]
    registry_digest: str
    startup_error: str | None
    rejected_registries: list[dict[str, str]]
    """Registry files refused on their own (``path``, ``error``): their entries are not in
    ``entries``; the other files' are."""
    unknown_control_ids: list[str]
    """PATCHLANE_DISABLE / PATCHLANE_ONLY ids that name no loaded entry (a typo, or an id of
    another registry set): they changed nothing here."""
    entries: list[EntryReport]
    history: list[DecisionRecord]
    summary: str
    evidence: EvidenceSummary | None
    """What was read to answer the entries' ``evidence``; None when not asked for."""


def build_report(decider: Decided, startup_error: PatchlaneError | None = None,
                 evidence: Sequence[Path] = ()) -> Report:
    """The report of ``decider``; ``startup_error`` is the registry error it started without.
    ``evidence``: runs roots to answer "proven here?" from for each applied entry (default:
    ``PATCHLANE_EVIDENCE``; neither: the evidence is not read)."""
    latest = decider.audit.latest()
    hits, paths = decider.audit.counts()  # other threads may be counting: iterate copies
    reasons = dict.copy(decider.audit.path_reasons)
    found = decider.evidence(tuple(evidence))
    entries: list[EntryReport] = []
    for entry in decider.registry.entries:
        decision = latest.get(entry.id)
        applied = decider.is_applied(entry.id)
        proof = None
        if found is not None and applied and decision is not None \
                and decision.outcome is Outcome.APPLIED:
            proof = found.answer(entry, decision.installed).as_dict()
        entries.append({
            "id": entry.id,
            "kind": entry.kind.value,
            "status": entry.status.value,
            "target": entry.target.object_path or entry.target.distribution,
            "registry": str(entry.source),
            "decision": decision.as_dict() if decision else None,
            "applied": applied,
            "hits": hits.get(entry.id, 0),
            "paths": {p: n for (e, p), n in paths.items() if e == entry.id},
            "path_reasons": {p: r for (e, p), r in reasons.items() if e == entry.id},
            "evidence": proof,
        })
    return {
        "patchlane": __version__,
        "strict": decider.controls.strict,
        "registries": [str(p) for p in decider.registry.sources],
        "registry_digest": decider.registry.digest,
        "startup_error": str(startup_error) if startup_error else None,
        "rejected_registries": [{"path": e.path, "error": str(e)}
                                for e in decider.registry.rejected],
        "unknown_control_ids": sorted(decider.unknown_control_ids),
        "entries": entries,
        "history": [d.as_dict() for d in decider.audit.history()],
        "summary": decider.summary(),
        "evidence": found.summary() if found is not None else None,
    }

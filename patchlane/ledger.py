"""The typed ledger: workarounds that are not source patches, kept visible and checked.

``version_floor``  the installed release must satisfy ``requires`` (checked at startup; with
                   ``policy: error`` importing ``target.object``'s module raises).
``packaging_pin``  the installed release must satisfy ``pin`` and, when ``source`` is given,
                   have been installed from that URL (its ``direct_url.json``).
``compat_gate``    a check on the run's configuration (Megatron args or TransformerConfig),
                   run by :func:`patchlane.check_config`; raises with the upstream link.
``config``         settings assigned as soon as their module is imported, recorded in the
                   audit with the value they replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from .errors import PatchlaneError
from .gates import check_gate
from .registry import Entry, Kind

__all__ = ["CompatGateError", "LedgerError", "LedgerResult", "check", "check_config",
           "run_compat_gate"]


class LedgerError(PatchlaneError):
    """A ledger entry with ``policy: error`` is violated."""

    exit_code = 9

    def __init__(self, result: LedgerResult) -> None:
        self.result = result
        super().__init__(result.message)


class CompatGateError(LedgerError):
    """The run's configuration hits a known-bad combination."""


@dataclass(frozen=True)
class LedgerResult:
    entry_id: str
    kind: str
    ok: bool
    policy: str
    message: str
    found: str | None = None
    expected: str | None = None

    @property
    def blocking(self) -> bool:
        return not self.ok and self.policy == "error"

    def as_dict(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "kind": self.kind, "ok": self.ok,
                "policy": self.policy, "message": self.message, "found": self.found,
                "expected": self.expected}


def _link(entry: Entry) -> str:
    return entry.upstream.issue or entry.upstream.pr or "no upstream link"


def _version_floor(entry: Entry) -> LedgerResult:
    dist = entry.target.distribution
    gate = check_gate(dist, entry.extra["requires"])
    expected = f"{dist}{entry.extra['requires']}"
    if gate.found is None:
        return LedgerResult(entry.id, entry.kind.value, True, entry.extra["policy"],
                            f"{dist} not installed: floor not applicable", None, expected)
    if gate.open:
        return LedgerResult(entry.id, entry.kind.value, True, entry.extra["policy"],
                            f"{dist} {gate.found} meets {expected}", gate.found, expected)
    return LedgerResult(
        entry.id, entry.kind.value, False, entry.extra["policy"],
        f"{entry.id}: {dist} {gate.found} is below the floor {expected} ({entry.summary}; "
        f"{_link(entry)}). Fix: install {expected}", gate.found, expected)


def _direct_url(dist: str) -> str | None:
    try:
        text = metadata.distribution(dist).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        return str(json.loads(text).get("url"))
    except (json.JSONDecodeError, AttributeError):
        return "<unreadable direct_url.json>"


def _packaging_pin(entry: Entry) -> LedgerResult:
    dist = entry.target.distribution
    pin = entry.extra["pin"]
    policy = entry.extra["policy"]
    gate = check_gate(dist, pin)
    expected = f"{dist}{pin}"
    if gate.found is None:
        return LedgerResult(entry.id, entry.kind.value, True, policy,
                            f"{dist} not installed: pin not applicable", None, expected)
    if not gate.open:
        return LedgerResult(entry.id, entry.kind.value, False, policy,
                            f"{entry.id}: {dist} {gate.found} does not match the pin {expected} "
                            f"({entry.summary}; {_link(entry)}). Fix: pip install '{expected}'",
                            gate.found, expected)
    source = entry.extra.get("source")
    if source is not None:
        url = _direct_url(dist)
        if url != source:
            return LedgerResult(entry.id, entry.kind.value, False, policy,
                                f"{entry.id}: {dist} {gate.found} was installed from "
                                f"{url or 'an index (no direct_url.json)'}, the pin requires "
                                f"{source}. Fix: pip install '{source}'", url, source)
    return LedgerResult(entry.id, entry.kind.value, True, policy,
                        f"{dist} {gate.found} matches {expected}", gate.found, expected)


def check(entry: Entry) -> LedgerResult | None:
    """The installed-environment checks (floors and pins); None for other kinds."""
    if entry.kind is Kind.VERSION_FLOOR:
        return _version_floor(entry)
    if entry.kind is Kind.PACKAGING_PIN:
        return _packaging_pin(entry)
    return None


def _load_check(entry: Entry) -> Callable[[Any], str | None]:
    from .importer import _load_file

    module = _load_file(entry.id, "check", entry.extra["check_file"])
    fn = getattr(module, entry.extra["check_function"], None)
    if not callable(fn):
        raise PatchlaneError(f"{entry.id}: {entry.extra['check_file']} defines no callable "
                             f"{entry.extra['check_function']!r}")
    return fn  # type: ignore[no-any-return]


def run_compat_gate(entry: Entry, config: Any) -> LedgerResult:
    """Run one compat gate on ``config``: the check returns None when the combination is safe,
    else a sentence describing the problem."""
    policy = entry.extra["policy"]
    if entry.target.distribution and entry.applies_to is not None:
        gate = check_gate(entry.target.distribution, entry.applies_to)
        if not gate.open:
            return LedgerResult(entry.id, entry.kind.value, True, policy,
                                f"not applicable: {gate.reason}")
    problem = _load_check(entry)(config)
    if problem is None:
        return LedgerResult(entry.id, entry.kind.value, True, policy, "configuration is safe")
    return LedgerResult(entry.id, entry.kind.value, False, policy,
                        f"{entry.id}: {problem} ({entry.summary}; {_link(entry)})")


def check_config(config: Any, entries: list[Entry]) -> list[LedgerResult]:
    results = [run_compat_gate(e, config) for e in entries
               if e.kind is Kind.COMPAT_GATE and e.active]
    blocking = [r for r in results if r.blocking]
    if blocking:
        if len(blocking) == 1:
            raise CompatGateError(blocking[0])
        first = blocking[0]
        merged = LedgerResult(first.entry_id, first.kind, False, "error",
                              "\n".join(r.message for r in blocking))
        raise CompatGateError(merged)
    return results

"""The typed ledger: workarounds that are not source patches, kept visible and checked.

``version_floor``  the installed release must satisfy ``requires`` (checked when its module is
                   imported; with ``policy: error`` that import raises).
``packaging_pin``  the installed release must satisfy ``pin`` and, when ``source`` is given,
                   have been installed from that URL (its ``direct_url.json``).
``compat_gate``    a check on the run's configuration (Megatron args or TransformerConfig),
                   run by :func:`patchlane.check_config`; raises with the upstream link.
``config``         settings assigned as soon as their module is imported, recorded in the
                   audit with the value they replaced.

Floors and pins are decided in a post-import hook (:meth:`patchlane.importer.Decider
.decide_ledger`) on the module ``when.imported`` names (default: ``target.object``'s module,
else the distribution's import name), and only if ``when.env`` holds then; no distribution
metadata is read at ``import patchlane``. :func:`evaluate` is the one sequence both that hook
and the CLI (``patchlane doctor``) run: controls, then ``when``, then the check.
``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` skip every kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING, Any, Literal

from .controls import Controls
from .errors import OverlayError, PatchlaneError
from .exit_codes import ExitCode
from .gates import GateResult, check_gate
from .loading import load_file
from .registry import CompatGate, Entry, Kind, PackagingPin, Policy, VersionFloor, When

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

__all__ = ["CompatGateError", "LedgerError", "LedgerResult", "check", "check_config",
           "evaluate", "run_compat_gate"]


class LedgerError(PatchlaneError):
    """A ledger entry with ``policy: error`` is violated."""

    exit_code = ExitCode.LEDGER_VIOLATION

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
    policy: Policy
    message: str
    found: str | None = None
    expected: str | None = None
    skipped: Literal["disabled", "not applicable"] | None = None
    """Why the check did not run; None when it ran."""
    skip_reason: str | None = None
    """For a skip, the reason alone (``listed in PATCHLANE_DISABLE``, the unmet condition):
    the audit records it beside its outcome, where ``message`` says it in a sentence."""

    @property
    def blocking(self) -> bool:
        return not self.ok and self.policy is Policy.ERROR

    def as_dict(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "kind": self.kind, "ok": self.ok,
                "policy": self.policy.value, "message": self.message, "found": self.found,
                "expected": self.expected, "skipped": self.skipped}


def _link(entry: Entry) -> str:
    return entry.upstream.issue or entry.upstream.pr or "no upstream link"


def _version_floor(entry: Entry, floor: VersionFloor) -> LedgerResult:
    dist = entry.target.distribution
    gate = check_gate(dist, floor.requires)
    expected = f"{dist}{floor.requires}"
    if gate.found is None:
        return LedgerResult(entry.id, entry.kind.value, True, floor.policy,
                            f"{dist} not installed: floor not applicable", None, expected)
    if gate.open:
        return LedgerResult(entry.id, entry.kind.value, True, floor.policy,
                            f"{dist} {gate.found} meets {expected}", gate.found, expected)
    return LedgerResult(
        entry.id, entry.kind.value, False, floor.policy,
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


def _packaging_pin(entry: Entry, spec: PackagingPin) -> LedgerResult:
    dist = entry.target.distribution
    pin = spec.pin
    policy = spec.policy
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
    source = spec.source
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
    """The installed-environment checks (floors and pins), unconditionally; None for other
    kinds. :func:`evaluate` applies the controls and the ``when`` condition first."""
    if entry.floor is not None:
        return _version_floor(entry, entry.floor)
    if entry.pin is not None:
        return _packaging_pin(entry, entry.pin)
    return None


def _skipped(entry: Entry, why: Literal["disabled", "not applicable"], message: str,
             reason: str) -> LedgerResult:
    return LedgerResult(entry.id, entry.kind.value, True, entry.policy or Policy.WARN,
                        message, skipped=why, skip_reason=reason)


def installed_outside(when: When) -> Iterator[tuple[str, SpecifierSet, GateResult]]:
    """Each ``when.installed`` distribution whose installed release is outside its range (or
    not installed: ``found`` is None), with the gate that said so."""
    for name, spec in when.installed.items():
        gate = check_gate(name, spec)
        if not gate.open:
            yield name, spec, gate


def evaluate(entry: Entry, controls: Controls | None = None,
             environ: Mapping[str, str] | None = None) -> LedgerResult | None:
    """A floor or pin decided as a run decides it once its module is imported (the decider's hook,
    :meth:`patchlane.importer.Decider.decide_ledger`, calls this), or eagerly by ``patchlane
    doctor``: skipped when ``controls`` disable it or ``when.env`` does not hold in
    ``environ`` (``os.environ`` by default), else checked. None for other kinds."""
    when = entry.when
    if when is None:
        return None
    reason = controls.disabled_reason(entry.id) if controls is not None else None
    if reason is not None:
        return _skipped(entry, "disabled", f"skipped: disabled ({reason})", reason)
    unmet = when.unmet(os.environ if environ is None else environ)
    if unmet is None:
        name, spec, gate = next(installed_outside(when), (None, None, None))
        if gate is not None:
            unmet = (f"{name} {gate.found} is outside {str(spec)!r}" if gate.found is not None
                     else f"{name} is not installed")
    if unmet is not None:
        return _skipped(entry, "not applicable",
                        f"not applicable: checked only on {when.describe()}; {unmet}", unmet)
    return check(entry)


def _load_check(entry: Entry, gate: CompatGate) -> Callable[[Any], str | None]:
    module = load_file(entry.id, "check", gate.check_file)
    fn = getattr(module, gate.check_function, None)
    if not callable(fn):
        # The registry's `check: FILE:FUNCTION` names code the file does not have: the same
        # fault as an overlay file without `overlay`.
        raise OverlayError(entry.id, f"{gate.check_file} defines no callable "
                                     f"{gate.check_function!r} (found "
                                     f"{type(fn).__name__ if fn is not None else 'nothing'}); "
                                     "fix: define it there, or correct the entry's `check`")
    return fn  # type: ignore[no-any-return]


def run_compat_gate(entry: Entry, config: Any) -> LedgerResult:
    """Run one compat gate on ``config``: the check returns None when the combination is safe,
    else a sentence describing the problem."""
    spec = entry.compat_gate
    assert spec is not None, f"{entry.id} is not a compat gate"
    policy = spec.policy
    if entry.target.distribution and entry.applies_to is not None:
        gate = check_gate(entry.target.distribution, entry.applies_to)
        if not gate.open:
            return LedgerResult(entry.id, entry.kind.value, True, policy,
                                f"not applicable: {gate.reason}")
    problem = _load_check(entry, spec)(config)
    if problem is None:
        return LedgerResult(entry.id, entry.kind.value, True, policy, "configuration is safe")
    return LedgerResult(entry.id, entry.kind.value, False, policy,
                        f"{entry.id}: {problem} ({entry.summary}; {_link(entry)})")


def check_config(config: Any, entries: list[Entry],
                 controls: Controls | None = None) -> list[LedgerResult]:
    """Every active compat gate on ``config``; a gate ``controls`` disable is skipped (its
    result says so) and never raises."""
    results = []
    for entry in entries:
        if entry.kind is not Kind.COMPAT_GATE or not entry.active:
            continue
        reason = controls.disabled_reason(entry.id) if controls is not None else None
        if reason is not None:
            results.append(_skipped(entry, "disabled", f"skipped: disabled ({reason})",
                                    reason))
            continue
        results.append(run_compat_gate(entry, config))
    blocking = [r for r in results if r.blocking]
    if blocking:
        if len(blocking) == 1:
            raise CompatGateError(blocking[0])
        first = blocking[0]
        merged = LedgerResult(first.entry_id, first.kind, False, Policy.ERROR,
                              "\n".join(r.message for r in blocking))
        raise CompatGateError(merged)
    return results

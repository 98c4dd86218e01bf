"""The typed ledger: workarounds that are not source patches, kept visible and checked. Each
kind's own check is in its module (:mod:`patchlane.registry.per_kind`); this module runs them
in order (whether the controls leave the entry out, ``when``, the check) and raises for a
violated ``policy: error``.

``version_floor``  the installed release must satisfy ``requires`` (checked when its module is
                   imported; with ``policy: error`` that import raises).
``packaging_pin``  the installed release must satisfy ``pin`` and, when ``source`` is given,
                   have been installed from that URL (its ``direct_url.json``).
``compat_gate``    a check on the run's configuration (Megatron args or TransformerConfig),
                   run by :func:`patchlane.check_config`; raises with the upstream link.
``config``         settings assigned as soon as their module is imported, recorded in the
                   audit with the value they replaced.

Floors and pins are decided in a post-import hook (:meth:`patchlane.deciding.decider.Decider
.decide_ledger`) on the module ``when.imported`` names (default: ``target.object``'s module,
else the distribution's import name), and only if ``when.env`` holds then; no distribution
metadata is read at ``import patchlane``. :func:`evaluate` is the one sequence both that hook
and the CLI (``patchlane doctor``) run: whether the controls leave the entry out (the decider's
answer), then ``when``, then the check.
``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` skip every kind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from ..installed.gates import GateResult, check_gate
from ..registry import KINDS, DecidedBy, Entry, LedgerResult, Policy, When
from ..registry.per_kind import PARTS

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


def check(entry: Entry) -> LedgerResult | None:
    """The installed-environment check of the entry's kind (a floor's, a pin's: its module's
    ``decide``), unconditionally; None for a kind not decided that way. :func:`evaluate`
    first skips an entry the controls leave out (the decider's answer), then applies the
    ``when`` condition."""
    return PARTS[entry.kind].decide(entry)


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


def evaluate(entry: Entry, left_out_reason: str | None = None,
             environ: Mapping[str, str] | None = None) -> LedgerResult | None:
    """A floor or pin decided as a run decides it once its module is imported (the decider's hook,
    :meth:`patchlane.deciding.decider.Decider.decide_ledger`, calls this), or eagerly by ``patchlane
    doctor``: skipped when the controls leave it out (``left_out_reason``: why, as the decider's
    :meth:`~patchlane.deciding.decider.Decider.left_out` says) or ``when.env`` does not hold in
    ``environ`` (``os.environ`` by default), else checked. None for other kinds."""
    when = entry.when
    if when is None:
        return None
    if left_out_reason is not None:
        return _skipped(entry, "disabled", f"skipped: disabled ({left_out_reason})",
                        left_out_reason)
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


def run_compat_gate(entry: Entry, config: Any) -> LedgerResult:
    """Run one on-demand check (a compat gate's) on ``config``."""
    result = PARTS[entry.kind].judge(entry, config)
    assert result is not None, f"{entry.id}: a {entry.kind.value} entry judges no configuration"
    return result


def check_config(config: Any, entries: list[Entry],
                 left_out: Callable[[str], str | None] | None = None) -> list[LedgerResult]:
    """Every active compat gate on ``config``; a gate the controls leave out (``left_out``:
    the decider's :meth:`~patchlane.deciding.decider.Decider.left_out`, which says why) is
    skipped (its result says so) and never raises."""
    results = []
    for entry in entries:
        if KINDS[entry.kind].decided_by is not DecidedBy.ON_DEMAND or not entry.active:
            continue
        reason = left_out(entry.id) if left_out is not None else None
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

"""A sweep's planned rows (entry x lane x world size), each with a named rule that owns which
modes run and how their outcomes turn into a verdict.

=====================  ===================  ==============================================
rule                   modes                verdicts
=====================  ===================  ==============================================
``both-ways``          without, with        guarding / upstream-fixed / broken / error
``past-gate``          without              upstream-fixed / still-affected / error: the
                                            overlay never applies outside its gate
``past-gate-covered``  without              upstream-fixed / covered / error: past the
                                            gate, and ``continued_by`` guards the bug here
``regression-guard``   without              upstream-fixed / broken / error: a retired
                                            entry's reproducer, the guard that upstream
                                            stays fixed
``skipped``            (none)               skipped, with the reason
=====================  ===================  ==============================================

The manifest keeps each row as JSON (``rule`` beside the ``skip`` / ``beyond`` /
``covered_by`` text the reports show); a manifest written before rows had a rule is read back
by what its cases say (:meth:`PlannedRow.from_manifest`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..common.errors import clipped
from ..reproducer import Lane, Mode, RunOutcome, parse_lane
from .manifest import CaseResult
from .verdicts import Verdict

__all__ = ["OLDER_ROWS_READ_UNTIL", "CaseView", "PlannedRow", "RowRule", "verdict_of"]

OLDER_ROWS_READ_UNTIL = "0.2.0"
"""The release that stops reading a manifest's rows as older sweeps wrote them: the rule under
the key ``kind``, or no rule at all (taken from the row's fields and cases). A test fails from
that version on while these readings are still here."""


class RowRule(str, enum.Enum):
    BOTH_WAYS = "both-ways"
    PAST_GATE = "past-gate"
    PAST_GATE_COVERED = "past-gate-covered"
    REGRESSION_GUARD = "regression-guard"
    SKIPPED = "skipped"

    @property
    def modes(self) -> tuple[Mode, ...]:
        if self is RowRule.SKIPPED:
            return ()
        if self is RowRule.BOTH_WAYS:
            return (Mode.WITHOUT, Mode.WITH)
        return (Mode.WITHOUT,)


class CaseView(NamedTuple):
    """What a verdict needs of one case: a :class:`CaseResult`, or a manifest case record."""

    outcome: RunOutcome
    stage: str
    message: str

    @classmethod
    def of(cls, case: CaseView | CaseResult | Mapping[str, Any]) -> CaseView:
        if isinstance(case, CaseView):
            return case
        if isinstance(case, CaseResult):
            return cls(case.outcome, case.stage, case.message)
        try:
            outcome = RunOutcome(case.get("outcome"))
        except ValueError:
            # A finished case always records its outcome: this manifest was edited by hand.
            return cls(RunOutcome.ERROR, str(case.get("stage") or "verify"),
                       f"the case records no valid outcome ({case.get('outcome')!r})")
        return cls(outcome, str(case.get("stage") or ""), str(case.get("message", "")))


Case = CaseView | CaseResult | Mapping[str, Any]


MESSAGE_LIMIT = 400
"""Characters of a reproducer's failure message a row's reason repeats, cut with an ellipsis
that says how much more there is: the receipt keeps the whole message. Reproducers put the
symptom first (docs/adding-an-entry.md), so the cut loses detail, not the point."""


def verdict_of(without: Case, with_: Case) -> tuple[Verdict, str]:
    """``both-ways``: the reproducer without and with the overlay."""
    w, o = CaseView.of(without), CaseView.of(with_)
    if w.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"without overlay: {w.stage}: {w.message}"
    if o.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"with overlay: {o.stage}: {o.message}"
    if o.outcome is RunOutcome.FAIL:
        return Verdict.BROKEN, f"fails with the overlay: {o.message}"
    if w.outcome is RunOutcome.PASS:
        return (Verdict.UPSTREAM_FIXED,
                "passes without the overlay: retirement candidate (reproducer stays as a guard)")
    return Verdict.GUARDING, f"fails without ({clipped(w.message, MESSAGE_LIMIT)}), passes with"


def _guard_verdict(without: Case) -> tuple[Verdict, str]:
    """``regression-guard``: a retired entry, only the run without the overlay."""
    w = CaseView.of(without)
    if w.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"without overlay: {w.stage}: {w.message}"
    if w.outcome is RunOutcome.FAIL:
        return Verdict.BROKEN, f"retired entry regressed: fails without the overlay again: " \
                               f"{w.message}"
    return Verdict.UPSTREAM_FIXED, "retired; the regression guard passes without the overlay"


def _beyond_verdict(without: Case, why: str, covered_by: str | None) -> tuple[Verdict, str]:
    """``past-gate`` and ``past-gate-covered``: an active entry past its gate, only the run
    without the overlay."""
    w = CaseView.of(without)
    symptom = clipped(w.message, MESSAGE_LIMIT)
    if w.outcome is RunOutcome.ERROR:
        return Verdict.ERROR, f"without overlay (past the gate): {w.stage}: {w.message}"
    if w.outcome is RunOutcome.FAIL and covered_by:
        return (Verdict.COVERED,
                f"still fails without the overlay past the gate ({symptom}): the bug "
                f"continues on this release, and {covered_by} (continued_by) guards it here. "
                + why)
    if w.outcome is RunOutcome.FAIL:
        return (Verdict.STILL_AFFECTED,
                f"still fails without the overlay past the gate ({symptom}): the bug "
                "outlives the gate; review and extend applies_to. " + why)
    return (Verdict.UPSTREAM_FIXED,
            "passes without the overlay past the gate: retirement candidate (reproducer stays "
            "as a guard). " + why)


@dataclass(frozen=True)
class PlannedRow:
    """One row of a sweep's plan: what runs for it (its rule's modes) and why."""

    entry_id: str
    lane: Lane
    world_size: int
    rule: RowRule
    """How the row is run and judged: its modes and its verdict's rule."""
    installed: str | None = None
    skip: str | None = None
    """Why a ``skipped`` row does not run."""
    beyond: str | None = None
    """Why a past-gate row runs without the overlay only."""
    covered_by: str | None = None
    """The entry guarding a ``past-gate-covered`` row's bug on this release."""

    @property
    def modes(self) -> tuple[Mode, ...]:
        return self.rule.modes

    def verdict(self, cases: Mapping[Mode, Case]) -> tuple[Verdict, str]:
        """The verdict of this row's finished cases (every mode of its rule present)."""
        without = cases[Mode.WITHOUT]
        if self.rule is RowRule.BOTH_WAYS:
            return verdict_of(without, cases[Mode.WITH])
        if self.rule is RowRule.REGRESSION_GUARD:
            return _guard_verdict(without)
        return _beyond_verdict(without, self.beyond or "", self.covered_by)

    def case_verdict(self, mode: Mode, case: Case) -> tuple[Verdict, str] | None:
        """What one finished case of this row already decides, by the same rules as
        :meth:`verdict` (a pytest run judges each case on its own): None while it is what a
        guarding row expects and the row's other case decides."""
        if self.rule is not RowRule.BOTH_WAYS:
            return self.verdict({Mode.WITHOUT: case})
        # The other case as a guarding row has it: only this case can move the verdict off it.
        expected = {Mode.WITHOUT: CaseView(RunOutcome.FAIL, "", ""),
                    Mode.WITH: CaseView(RunOutcome.PASS, "", "")}
        expected[mode] = CaseView.of(case)
        verdict, reason = verdict_of(expected[Mode.WITHOUT], expected[Mode.WITH])
        return None if verdict is Verdict.GUARDING else (verdict, reason)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"entry_id": self.entry_id, "lane": self.lane,
                               "world_size": self.world_size, "rule": self.rule.value,
                               "installed": self.installed, "skip": self.skip,
                               "beyond": self.beyond}
        if self.covered_by:
            out["covered_by"] = self.covered_by
        return out

    @classmethod
    def from_manifest(cls, row: Mapping[str, Any], where: str,
                      has_with_case: bool = True) -> PlannedRow:
        """A row read back from a manifest; one written before rows had a rule gets the rule
        its fields and cases say (``has_with_case``: the manifest planned the run with the
        overlay, which only a both-ways row has)."""
        lane = parse_lane(row["lane"], where)
        # "kind": the key's name in manifests written before 2026-11-28, as the runs kept in
        # gpu-runs/ were. Read until OLDER_ROWS_READ_UNTIL (those runs recorded again by then);
        # so is a row with no rule (written before 2026-11-27), taken from its fields below.
        raw = row.get("rule", row.get("kind"))
        if raw is not None:
            try:
                rule = RowRule(raw)
            except ValueError:
                raise ValueError(f"{where}: {raw!r} is not a row rule; expected one of "
                                 f"{[k.value for k in RowRule]}") from None
        elif row.get("skip"):
            rule = RowRule.SKIPPED
        elif row.get("covered_by"):
            rule = RowRule.PAST_GATE_COVERED
        elif row.get("beyond"):
            rule = RowRule.PAST_GATE
        else:
            rule = RowRule.BOTH_WAYS if has_with_case else RowRule.REGRESSION_GUARD
        return cls(str(row["entry_id"]), lane, int(row["world_size"]), rule,
                   row.get("installed"), row.get("skip"), row.get("beyond"),
                   row.get("covered_by"))

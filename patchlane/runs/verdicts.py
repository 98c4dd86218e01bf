"""The sweep's verdict per (entry, lane, world size): one enum for the sweep, its reports, the
command line and the release matrix.

``guarding``        fails without the overlay, passes with it: the patch is needed and works.
``upstream-fixed``  passes without the overlay: a retirement candidate (not a failure). Also
                    past the gate: a release above ``applies_to`` (or inside
                    ``retire_when.release``) runs without the overlay only, and passing there
                    is the evidence ``patchlane retire`` needs.
``still-affected``  past the gate, the reproducer still fails without the overlay: the bug
                    outlives the gate. Not an error of the lane; a maintainer reviews the entry
                    and extends ``applies_to`` (and records the new fingerprint), or tightens
                    ``retire_when``.
``covered``         past the gate, the reproducer still fails without the overlay, and the
                    entry's ``continued_by`` guards that bug on the installed release (its gate
                    admits it): the bug moved with upstream's code and is carried onward by the
                    named entry. Nothing to do; the named entry's own row is the one to read.
``broken``          fails with the overlay.
``error``           a case could not give a verdict (bootstrap, import, setup, run, verify,
                    timeout, crash, oom).
``skipped``         the gate excludes the installed release, or the lane is unavailable.

Run directories and ``matrix.yaml`` carry the values as strings; :meth:`Verdict.parse` is the
one way back from a string, with an error that lists the known verdicts.

:class:`Finding` is not a sweep verdict: what one run *without* the overlay says of one upstream
release, the answer ``patchlane bisect`` builds a gate from (``affected``, ``not-affected``,
``absent``, ``error``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["ACTION", "ASKS", "EXIT_BITS", "MEANING", "SECTIONS", "SEVERITY", "Finding", "Meaning",
           "Verdict", "action", "exit_bits", "sections"]


class Verdict(str, enum.Enum):
    GUARDING = "guarding"
    UPSTREAM_FIXED = "upstream-fixed"
    STILL_AFFECTED = "still-affected"
    COVERED = "covered"
    BROKEN = "broken"
    ERROR = "error"
    SKIPPED = "skipped"

    @classmethod
    def parse(cls, value: object, where: str = "verdict") -> Verdict:
        """``value`` as a member; ValueError naming ``where`` and the known verdicts."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"{where}: {value!r} is not a verdict; expected one of "
                             f"{[v.value for v in cls]}") from None


SECTIONS: dict[str, str] = {"errors": "Errors", "broken": "Broken",
                           "maintainer": "For a maintainer"}
"""The report sections that list rows whole, in the order reports print them (a run that gave
no verdict is read before anything it says): the page's anchor, then the title."""


@dataclass(frozen=True)
class Meaning:
    """Everything a verdict means, in one record that every report and command reads: adding
    a verdict is its enum member and its record here, the row rule that gives it
    (:mod:`patchlane.runs.rows`), and, if it owns an exit bit, that bit's name in
    :data:`patchlane.common.exit_codes.SWEEP_BITS` (and docs/sweep.md's and the README's tables)."""

    rank: int
    """Its place worst first: the order reports list rows in, and what a history cell shows."""
    asks: str
    """What it asks, in two words (the summary table's column)."""
    action: str
    """What it asks, whole (``ID`` and ``RUN`` are filled in with a row's entry and run)."""
    colour: str
    """Its colour on the page (chips, cells, cards)."""
    junit: Literal["passed", "failure", "error", "skipped"]
    """What a CI system's JUnit view shows for its row."""
    exit_bit: int
    """Its bit of the sweep's exit status ``32 | bits``
    (:data:`patchlane.common.exit_codes.SWEEP_BITS`); 0 for a verdict that asks nobody to act."""
    section: str | None
    """The report section that lists its rows whole (a key of :data:`SECTIONS`); None: the
    table only."""
    shows: str
    """What the reproducer showed on its release, as an upstream draft says it."""
    affected: bool
    """Whether its release has the bug (a draft lists it among the affected releases)."""
    proposes: str
    """The registry edit it proposes for a new release (``patchlane radar``): ``{release}``,
    ``{id}``, ``{next_minor}`` and ``{covered_by}`` are filled in."""
    about: tuple[str, ...] = ()
    """The cases (``without``, ``with``) whose failure it is about, in the order its reason
    looks: the log tail a report shows beside it. Empty: no failure to show."""


MEANING: dict[Verdict, Meaning] = {
    Verdict.BROKEN: Meaning(
        0, "fix the overlay", "fix the overlay: the reproducer fails with it applied",
        "#c62828", "failure", 1, "broken", "the overlay does not fix it there", True,
        "fix the overlay: it does not fix the bug on {release} (see the run's report)",
        about=("with",)),
    Verdict.ERROR: Meaning(
        1, "investigate", "fix the lane or the reproducer: no verdict (see the log tail)",
        "#ef6c00", "error", 2, "errors", "no verdict (the run errored)", False,
        "investigate: no verdict on this release (see the run's report)",
        about=("without", "with")),
    Verdict.STILL_AFFECTED: Meaning(
        2, "extend the gate", "review the entry: the bug outlives its gate; extend applies_to "
        "and the fingerprints to this release (with a run), or fix the reproducer",
        "#6a1b9a", "failure", 4, "maintainer",
        "fails without the overlay (past the entry's gate: no overlay there)", True,
        "extend applies_to past {release} (e.g. <{next_minor}) once its change is read, and "
        "record the fingerprint (`patchlane bisect {id} --write`)",
        about=("without",)),
    Verdict.UPSTREAM_FIXED: Meaning(
        3, "retire candidate", "retirement candidate once no one runs a release the gate "
        "still admits (`patchlane usage` over the jobs' reports says which run): until then "
        "the entry guards them; then `patchlane retire ID --evidence RUN` (the reproducer "
        "stays as a guard)", "#1565c0", "passed", 0, "maintainer",
        "passes without the overlay: not affected", False,
        "retirement candidate: retire_when.release '>={release}', then `patchlane retire {id} "
        "--evidence RUN`"),
    Verdict.GUARDING: Meaning(
        4, "nothing", "nothing: the patch is needed and works", "#2e7d32", "passed", 0, None,
        "fails without the overlay, passes with it", True,
        "the gate admits {release} and the bug is there: record it (`patchlane bisect {id} "
        "--write` adds fingerprint.releases)"),
    Verdict.COVERED: Meaning(
        5, "nothing", "nothing: past this entry's gate the bug is guarded by the entry its "
        "continued_by names (see that entry's row)", "#00695c", "passed", 0, None,
        "fails without the overlay (past the entry's gate: another entry guards it there)",
        True, "nothing: {covered_by} guards it on {release}",
        about=("without",)),
    Verdict.SKIPPED: Meaning(
        6, "nothing", "nothing: the gate or the lane keeps the case out", "#757575",
        "skipped", 0, None, "not run there (the gate or the lane kept it out)", False,
        "nothing: the gate or the lane keeps it out"),
}
"""One :class:`Meaning` per verdict (``tests/evidence/test_verdict_meaning.py`` checks every
verdict has one, and runs every report and consumer once per verdict)."""

SEVERITY: tuple[Verdict, ...] = tuple(sorted(MEANING, key=lambda v: MEANING[v].rank))
"""Worst first: the order reports list rows in, and the verdict a history cell shows."""

ACTION: dict[Verdict, str] = {v: m.action for v, m in MEANING.items()}
"""What each verdict asks a maintainer to do: the summary, JUnit and HTML reports say it."""

ASKS: dict[Verdict, str] = {v: m.asks for v, m in MEANING.items()}
"""What a verdict asks, in two words (the whole sentence is :data:`ACTION`)."""


def action(verdict: Verdict, entry_id: str | None = None, run_dir: str | None = None) -> str:
    """:data:`ACTION` for ``verdict`` with a row's entry id (``ID``) and run directory
    (``RUN``) filled in where given: the sentence every report prints."""
    text = ACTION[verdict]
    if entry_id:
        text = re.sub(r"\bID\b", entry_id, text)
    if run_dir:
        text = re.sub(r"\bRUN\b", run_dir, text)
    return text


EXIT_BITS: dict[Verdict, int] = {v: m.exit_bit for v, m in MEANING.items() if m.exit_bit}
"""The sweep exits ``32 | bits`` (:func:`patchlane.common.exit_codes.sweep_exit_code`): each verdict
that asks someone to act owns a bit; the others (covered among them) own none."""


def exit_bits(verdicts: Iterable[Verdict]) -> int:
    """The bits of ``verdicts`` together (:data:`EXIT_BITS`)."""
    bits = 0
    for v in verdicts:
        bits |= EXIT_BITS.get(v, 0)
    return bits


def sections() -> list[tuple[str, str, tuple[Verdict, ...]]]:
    """(anchor, title, verdicts worst first) of each report section, in :data:`SECTIONS`'s
    order; a section no verdict names is left out."""
    out = []
    for anchor, title in SECTIONS.items():
        chosen = tuple(v for v in SEVERITY if MEANING[v].section == anchor)
        if chosen:
            out.append((anchor, title, chosen))
    return out


class Finding(str, enum.Enum):
    """What one run of a reproducer, without its overlay, says of one upstream release."""

    AFFECTED = "affected"
    """The reproducer's own assertion failed: the bug shows."""
    NOT_AFFECTED = "not-affected"
    """It passed."""
    ABSENT = "absent"
    """The target does not exist in this release: below the bug's start, not evidence of it."""
    ERROR = "error"
    """The run said nothing about the bug (an install that failed, an unrelated exception)."""

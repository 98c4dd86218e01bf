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

__all__ = ["ACTION", "ASKS", "EXIT_BITS", "SEVERITY", "Finding", "Verdict", "action",
           "exit_bits"]


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


SEVERITY: tuple[Verdict, ...] = (Verdict.BROKEN, Verdict.ERROR, Verdict.STILL_AFFECTED,
                                 Verdict.UPSTREAM_FIXED, Verdict.GUARDING, Verdict.COVERED,
                                 Verdict.SKIPPED)
"""Worst first: the order reports list rows in, and the verdict a history cell shows."""

ACTION: dict[Verdict, str] = {
    Verdict.GUARDING: "nothing: the patch is needed and works",
    Verdict.UPSTREAM_FIXED: "retirement candidate: `patchlane retire ID --evidence RUN` (the "
                            "reproducer stays as a guard)",
    Verdict.STILL_AFFECTED: "review the entry: the bug outlives its gate; extend applies_to "
                            "and the fingerprints to this release (with a run), or fix the "
                            "reproducer",
    Verdict.COVERED: "nothing: past this entry's gate the bug is guarded by the entry its "
                     "continued_by names (see that entry's row)",
    Verdict.BROKEN: "fix the overlay: the reproducer fails with it applied",
    Verdict.ERROR: "fix the lane or the reproducer: no verdict (see the log tail)",
    Verdict.SKIPPED: "nothing: the gate or the lane keeps the case out",
}
"""What each verdict asks a maintainer to do: the summary, JUnit and HTML reports say it."""

ASKS: dict[Verdict, str] = {
    Verdict.GUARDING: "nothing", Verdict.UPSTREAM_FIXED: "retire candidate",
    Verdict.STILL_AFFECTED: "extend the gate", Verdict.COVERED: "nothing",
    Verdict.BROKEN: "fix the overlay", Verdict.ERROR: "investigate", Verdict.SKIPPED: "nothing",
}
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


EXIT_BITS: dict[Verdict, int] = {Verdict.BROKEN: 1, Verdict.ERROR: 2, Verdict.STILL_AFFECTED: 4}
"""The sweep exits ``32 | bits`` (:func:`patchlane.exit_codes.sweep_exit_code`): each verdict
that asks someone to act owns a bit; the others (covered among them) own none."""


def exit_bits(verdicts: Iterable[Verdict]) -> int:
    """The bits of ``verdicts`` together (:data:`EXIT_BITS`)."""
    bits = 0
    for v in verdicts:
        bits |= EXIT_BITS.get(v, 0)
    return bits


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

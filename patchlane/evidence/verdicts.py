"""The sweep's verdict per (entry, lane, world size): one enum for the sweep, its reports, the
command line and the release matrix.

``guarding``        fails without the overlay, passes with it: the patch is needed and works.
``upstream-fixed``  passes without the overlay: a retirement candidate (not a failure).
``broken``          fails with the overlay.
``error``           a case could not give a verdict (bootstrap, import, setup, run, verify,
                    timeout, crash, oom).
``skipped``         the gate excludes the installed release, or the lane is unavailable.

Run directories and ``matrix.yaml`` carry the values as strings; :meth:`Verdict.parse` is the
one way back from a string, with an error that lists the known verdicts.
"""

from __future__ import annotations

import enum

__all__ = ["SEVERITY", "Verdict"]


class Verdict(str, enum.Enum):
    GUARDING = "guarding"
    UPSTREAM_FIXED = "upstream-fixed"
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


SEVERITY: tuple[Verdict, ...] = (Verdict.BROKEN, Verdict.ERROR, Verdict.UPSTREAM_FIXED,
                                 Verdict.GUARDING, Verdict.SKIPPED)
"""Worst first: the order reports list rows in, and the verdict a history cell shows."""

"""Helpers shared by the commands: the process's decider (its registry error surfaced), tables."""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

from .. import startup
from ..importer import Decider

__all__ = ["decider", "positive_int", "positive_seconds", "table"]


def decider() -> Decider:
    current = startup.current()
    error = startup.startup_error()
    if error is not None:
        raise error  # the CLI never shows a table built from a registry it rejected
    return current


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = 60) -> str:
    cells = [[str(c) if len(str(c)) <= width else str(c)[: width - 1] + "…" for c in row]
             for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in cells]
    return "\n".join(lines)


def positive_int(text: str) -> int:
    """argparse type for a count (``--world-size``, ``--jobs``): refused at parsing, as a
    usage error, before anything runs."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer (1, 2, ...)")
    return value


def positive_seconds(text: str) -> float:
    """argparse type for ``--timeout``: a finite number of seconds above 0. ``nan`` compares
    false with everything, so a deadline of nan would never come: no timeout at all."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number of seconds above 0 "
                                         "(e.g. 600)")
    return value

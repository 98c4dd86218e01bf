"""Helpers shared by the commands: the process's decider (its registry error surfaced), tables."""

from __future__ import annotations

from collections.abc import Sequence

from .. import startup
from ..importer import Decider


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

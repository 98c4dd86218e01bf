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
    """Rows under ``headers``, one line each. Every column but the last is cut to ``width``;
    the last (a reason, a why: the column each table puts last) is printed whole and unpadded.
    Whole rather than wrapped: a wrapped row is several lines, and a row must stay one line
    that ``grep ENTRY`` finds with its reason and that a CI log shows as it is; a terminal
    soft-wraps a long line by itself. Line breaks inside a cell become spaces for the same
    reason."""
    last = len(headers) - 1
    cells = [[_cell(c, None if i == last else width) for i, c in enumerate(row)]
             for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    widths[last:] = [len(headers[last])] if headers else []  # never padded, so never wider

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in cells])


def _cell(value: object, width: int | None) -> str:
    text = " ".join(str(value).splitlines())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"

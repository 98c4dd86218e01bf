"""Helpers shared by the commands: the process's decider (its registry error surfaced), tables."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .. import startup
from ..common.errors import RegistryError, UnknownEntryError, UsageError
from ..deciding.controls import RANK_STARTS
from ..deciding.decider import Decider
from ..registry import Entry, Registry

if TYPE_CHECKING:
    from ..sweep.wheelhouse_manifest import Wheelhouse

__all__ = [
    "add_comparison_options",
    "decider",
    "import_for_output",
    "positive_int",
    "positive_seconds",
    "stdout_for_output",
    "table",
    "upstream_fixed_advice",
]


def decider(refused_ok: bool = False) -> Decider:
    """The process's decider. A registry set with a refused file is an error for the commands
    over the whole set (a sweep, doctor or constraints reading a partial set would leave
    entries out silently); not for those that show it (``refused_ok``: ``status`` lists what
    loaded and names what was refused) or are about one entry that loaded
    (:func:`one_entry`)."""
    current = startup.current()
    error = startup.startup_error()
    if error is not None:
        raise error  # the CLI never shows a table built from a registry it rejected
    if current.registry.rejected and not refused_ok:
        raise current.registry.rejected[0]
    return current


def entry_of(registry: Registry, entry_id: str) -> Entry:
    """One entry, for a command about it alone (``show``, ``reproduce``, ``draft``,
    ``bisect``, ``fingerprint``, ``retire``...): a refused registry file beside it does not stop
    the command (the startup said the refusal on stderr); an id not found while a file was
    refused may be in that file, so the refusal is the error then."""
    try:
        return registry.get(entry_id)
    except UnknownEntryError as unknown:
        if not registry.rejected:
            raise
        close = unknown.closest
        hint = f" (the closest that loaded: {close!r})" if close else ""
        refused = "; ".join(str(r) for r in registry.rejected)
        files = ", ".join(r.path for r in registry.rejected)
        # Exit 3, not 2: the id is unknown only to the registries that loaded
        raise RegistryError(
            files, f"no registry that loaded has entry {entry_id!r}{hint}, and the refused "
            f"file(s) may hold it: {refused}") from None


def one_entry(entry_id: str) -> tuple[Decider, Entry]:
    """The process's decider and ``entry_id``'s entry (:func:`entry_of`)."""
    current = decider(refused_ok=True)
    return current, entry_of(current.registry, entry_id)


def registry_label(path: str | None) -> str:
    """Whose entry, in a table: ``catalog`` for the registry installed with patchlane (or this
    checkout's own), else the registry file's path."""
    if path is None:
        return "-"
    if shipped_with_patchlane(Path(path)) or startup.is_default_registry(path):
        return "catalog"
    return path if len(path) <= 48 else "…" + path[-47:]  # the file's name stays in view


def shipped_with_patchlane(registry: Path | None) -> bool:
    """Whether ``registry`` is the catalog installed with patchlane (inside its package, in
    site-packages): no one edits it there, and a patchlane release is what changes it."""
    return registry is not None and "_bundle" in registry.parts


def upstream_fixed_advice(entry_id: str, release: str | None, applies_to: str | None,
                          guarding: Sequence[str] = (), registry: Path | None = None) -> str:
    """What an ``upstream-fixed`` row asks, true for every release the entry's gate still
    serves: fixed on one release is not "retire" while the gate admits releases that are still
    run (``guarding``: where the matrix runs one, and the entry still guards); and true for
    where the entry lives (``registry``): the catalog installed with patchlane is retired by
    a patchlane release, not by its users."""
    on = f" on {release}" if release else ""
    if shipped_with_patchlane(registry):
        return (f"{entry_id} is fixed upstream{on}; it is an entry of the catalog installed "
                f"with patchlane ({registry}): a patchlane release retires it once no release "
                "its gate admits needs it. Nothing to edit here; to stop applying it to a job "
                f"that runs only fixed releases, PATCHLANE_DISABLE={entry_id}")
    if guarding:
        return (f"{entry_id} is fixed upstream{on}, but still guards {', '.join(guarding)}, "
                f"which its gate ({applies_to}) admits: keep it; retire only once no one runs "
                "those (`patchlane usage` over the jobs' reports)")
    if applies_to:
        return (f"{entry_id} is fixed upstream{on}; its gate ({applies_to}) still admits "
                "other releases: keep it while any job runs one (`patchlane usage` over the "
                f"jobs' reports), then `patchlane retire {entry_id} --evidence RUN`")
    return f"{entry_id} is fixed upstream{on}: `patchlane retire {entry_id} --evidence RUN`"


def import_for_output(module_name: str) -> ModuleType:
    """``module_name`` imported for a command whose stdout is its output (a fingerprint to
    record, ``status --json``): what the import prints goes to stderr, and a logging handler it
    puts on stdout is moved there (:func:`stdout_for_output`). Megatron-LM's training code does
    both."""
    import contextlib
    import importlib

    try:
        with contextlib.redirect_stdout(sys.stderr):
            return importlib.import_module(module_name)
    finally:
        stdout_for_output()


def stdout_for_output() -> None:
    """After the targets are imported, before a command prints: a logging handler an imported
    module put on stdout is moved to stderr, so what it logs later cannot land in the command's
    output (``status --json`` must parse)."""
    from ..deciding.logs import off_stdout

    off_stdout()


def add_comparison_options(p: argparse.ArgumentParser) -> None:
    """``--compare`` and ``--history``: what a sweep's and a merged night's reports are read
    against (one declaration for both commands)."""
    p.add_argument("--compare", type=Path, metavar="PREV_RUN",
                   help="report verdict changes against this run directory (default: the "
                   "newest earlier run of the same comparison class under the runs root)")
    p.add_argument("--history", type=Path, action="append", metavar="RUN_DIR",
                   help="earlier run directories for the HTML page's history (repeatable)")


def add_rank_start_option(p: argparse.ArgumentParser) -> None:
    """``--rank-start``: how a sweep's CPU ranks start (one declaration for ``sweep`` and
    ``matrix``; None when not given: ``PATCHLANE_RANK_START`` decides)."""
    p.add_argument("--rank-start", choices=RANK_STARTS, default=None,
                   help="how each CPU rank starts: fresh (a new interpreter; the default, "
                   "unless PATCHLANE_RANK_START says warm) or warm (forked from a server that "
                   "imported torch once: several times less CPU a rank; only for entries it "
                   "proves the same for, and each receipt says so; docs/sweep.md)")


FULL_WIDTH_ENV = "PATCHLANE_FULL_WIDTH"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = 60) -> str:
    """Rows under ``headers``, one line each. Every column but the last is cut to ``width``;
    the last (a reason, a why: the column each table puts last) is unpadded, and cut to the
    terminal's width on a terminal (``…`` at the cut), whole when the output is piped or
    logged, or with ``--full-width``. Never wrapped: a row must stay one line that ``grep
    ENTRY`` finds with its reason and that a CI log shows as it is. Line breaks inside a cell
    become spaces for the same reason."""
    last = len(headers) - 1
    cells = [[_cell(c, None if i == last else width) for i, c in enumerate(row)]
             for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    widths[last:] = [len(headers[last])] if headers else []  # never padded, so never wider
    columns = terminal_columns()
    if columns is not None and headers:
        # the widest columns give way first (never below their header or 12), then the last
        # takes what is left (at least 20)
        while sum(widths[:last]) + 2 * last + 20 > columns:
            i = max(range(last), key=lambda k: widths[k], default=None)
            if i is None or widths[i] <= max(12, len(headers[i])):
                break
            widths[i] -= 1
        room = max(20, columns - sum(widths[:last]) - 2 * last)
        cells = [[*(_cell(c, w) for c, w in zip(r[:last], widths, strict=False)),
                  _cell(r[last], room)] for r in cells]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    return "\n".join([line(headers), "  ".join("-" * w for w in widths)]
                     + [line(r) for r in cells])


def full_width() -> bool:
    """``PATCHLANE_FULL_WIDTH``, read as every ``PATCHLANE_*`` yes/no setting is
    (:mod:`patchlane.switch_values`): a value that is neither is a usage error naming them."""
    from .. import switch_values

    raw = os.environ.get(FULL_WIDTH_ENV)
    value = switch_values.flag(raw, False)
    if value is None:
        raise UsageError(switch_values.unreadable(FULL_WIDTH_ENV, raw, False))
    return value


def terminal_columns() -> int | None:
    """The width of the terminal stdout is; None when it is none (piped, a log) or the full
    width was asked for (``--full-width``, ``PATCHLANE_FULL_WIDTH=1``)."""
    if full_width() or not sys.stdout.isatty():
        return None
    return shutil.get_terminal_size().columns


def _cell(value: object, width: int | None) -> str:
    text = " ".join(str(value).splitlines())
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def given_path(text: str) -> Path:
    """argparse type for a path option: an empty one (``--evidence ""``, an unset variable
    in a script) is refused, never read as the working directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"found {text!r}, expected a path; fix: give the path, or leave the option out")
    return Path(text)


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


def release_cache(given: Path | None) -> Path:
    """``--cache`` of ``matrix``, ``bisect`` and ``radar``, else the one default every
    side-by-side install shares (ledger reproducers' bad sides included)."""
    from ..sweep.installs import default_cache

    return (given or default_cache()).resolve()


def use_wheelhouse(given: Path) -> Wheelhouse:
    """``--wheelhouse DIR`` of ``sweep`` and ``matrix``: this interpreter's wheelhouse there,
    trusted, and made the one every side-by-side install of this command and of the processes
    it starts comes from (``PATCHLANE_WHEELHOUSE``): nothing asks the package index."""
    from ..sweep.wheelhouse_manifest import WheelhouseError, in_use

    house = in_use(given)
    assert house is not None
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if house.python != here:
        raise WheelhouseError(f"{given}: its wheels are for Python {house.python}, this is "
                              f"{here}; fix: run it with python{house.python}, or prepare one "
                              f"with `patchlane wheelhouse DIR --python {here}`")
    os.environ["PATCHLANE_WHEELHOUSE"] = str(house.root.absolute())
    return house

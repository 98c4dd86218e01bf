"""Where ``import patchlane`` decides whether its startup may wait for a target's import.

It may when all of these hold; else the startup loads at once, exactly as before (and the full
start writes a fresh watch list for the next process):

- ``PATCHLANE_LAZY`` is not off;
- every setting the startup reads at start-up reads as
  :class:`patchlane.deciding.controls.Controls` would read it (a setting that cannot be read
  is the full start's to report, once, as it always did), and the validated-registry cache is
  on (the watch list lives beside it);
- the watch list for this registry set and ``sys.path`` is fresh and trusted
  (:mod:`patchlane.lazy.watchlist`);
- every id in ``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` names an entry of it (an unknown id is
  the full start's to warn about, at ``import patchlane``, as it always did);
- logging does not already say INFO for the ``patchlane`` logger (the start-up summary line
  is logged at ``import patchlane``, as before, for a process that asked to hear it);
- no watched module is one the startup may import itself (:data:`STARTUP_IMPORTS`): its import
  would load the startup in the middle of the startup's own import;
- no watched module is imported yet (then its entries are decided now, as before).

Why it did not is kept for ``patchlane status`` and ``patchlane doctor``.
"""

import os
import sys

from .. import switch_values
from . import watch, watchlist

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LAZY_ENV", "arm", "untouched_report", "why_not"]

LAZY_ENV = "PATCHLANE_LAZY"
RANK_CHECK_MODULE = "torch"
"""The rank check waits for ``torch.distributed`` (patchlane.training.ranks)."""
STARTUP_IMPORTS = frozenset({"packaging", "wrapt", "yaml"})
"""Top-level modules beyond the standard library that the startup imports itself: patchlane's
dependencies (PyYAML's module is ``yaml``). A team's pin or floor on one of them watched lazily
would have the startup's own ``import packaging`` load the startup again, half-imported."""

_State = tuple[watchlist.WatchList, frozenset[str], "frozenset[str] | None", set[str]]
"""A lazy start's watch list, PATCHLANE_DISABLE and PATCHLANE_ONLY ids, and the names to watch."""

_why_not: list[str] = []
_info_at_import: list[bool] = []
"""Whether the ``patchlane`` logger said INFO at ``import patchlane`` (:func:`arm`)."""
_start_paths: dict[bool, tuple[tuple[str, int], ...]] = {}
_index: list[watchlist.WatchList] = []
_disabled: list[tuple[frozenset[str], frozenset[str] | None]] = []


def _info_enabled() -> bool:
    logging = sys.modules.get("logging")  # never imported here: only read if already there
    return logging is not None and logging.getLogger("patchlane").isEnabledFor(logging.INFO)


def arm(load: "Callable[[], object]") -> bool:
    """Install the import hook and return True when the startup may wait (module docstring);
    False, with the reason kept, when the caller must ``load()`` it now."""
    _info_at_import[:] = [_info_enabled()]
    try:
        reason, state = _reason(imported=True)
    except Exception as exc:  # never a reason to fail `import patchlane`: the eager start decides
        reason, state = f"the lazy start could not check ({type(exc).__name__}: {exc})", None
    _why_not[:] = [reason] if reason else []
    if state is None:
        return False
    found, disable, only, names = state
    _index[:] = [found]
    _disabled[:] = [(disable, only)]
    watch.install(names, load)
    return True


def check() -> tuple[str | None, tuple[str, ...]]:
    """``(why not, watched names)``: whether a process started now with this environment, which
    imports no target, would take the lazy path (``patchlane status`` and ``doctor`` ask;
    nothing is installed). What this process imported is not held against it."""
    try:
        reason, state = _reason(imported=False)
    except Exception as exc:
        return f"the lazy start could not check ({type(exc).__name__}: {exc})", ()
    return reason, tuple(sorted(state[3])) if state is not None else ()


def _reason(imported: bool) -> tuple[str | None, _State | None]:
    why = _why(imported)
    return (why, None) if isinstance(why, str) else (None, why)


def _why(imported: bool) -> str | _State:
    env = os.environ
    lazy = switch_values.flag(env.get(LAZY_ENV), True)
    if lazy is not True:
        return f"{LAZY_ENV}={env.get(LAZY_ENV)!r}" if lazy is False else \
            f"{LAZY_ENV}={env.get(LAZY_ENV)!r} cannot be read"
    flags = {}
    for name, default in switch_values.FLAGS.items():
        value = switch_values.flag(env.get(name), default)
        if value is None:
            return f"{name}={env.get(name)!r} cannot be read"
        flags[name] = value
    evidence = [p for p in (env.get("PATCHLANE_EVIDENCE") or "").split(os.pathsep) if p.strip()]
    if flags["PATCHLANE_REQUIRE_EVIDENCE"] and not evidence:
        return "PATCHLANE_REQUIRE_EVIDENCE is set without PATCHLANE_EVIDENCE"
    directory, refused = switch_values.registry_cache_dir(env)
    if directory is None:
        return ("PATCHLANE_REGISTRY_CACHE is a relative path" if refused else
                "the registry cache is off (PATCHLANE_REGISTRY_CACHE=0, or no home directory)")
    from ..common import private_files

    try:
        real = os.path.realpath(directory)
        shared = private_files.shared(real)
    except (OSError, ValueError):
        return f"no watch list yet (the registry cache directory {directory} does not exist)"
    if shared is not None:
        return f"the registry cache directory is not private: {shared}"
    registries = [p for p in (env.get("PATCHLANE_REGISTRY") or "").split(os.pathsep) if p]
    settings = watchlist.registry_set(flags["PATCHLANE_DEFAULT_REGISTRY"], registries,
                                  flags["PATCHLANE_ENTRY_POINTS"])
    entry_points = flags["PATCHLANE_ENTRY_POINTS"]
    if imported or entry_points not in _start_paths:
        # A later check (status) keys on sys.path as it was at start-up: imports since then
        # (megatron's own FSDP package adds a folder) are not what a new process starts with.
        _start_paths[entry_points] = watchlist.path_key(entry_points)
    found = watchlist.read(real, settings, _start_paths[entry_points])
    if found is None:
        return ("no fresh watch list for this registry set and sys.path (a registry file is "
                "refused, and every start reads it again to say so; or a registry file, an "
                "overlay's folder, an installed distribution or patchlane changed; or none was "
                "written yet)")
    disable = switch_values.ids(env.get("PATCHLANE_DISABLE"))
    only = switch_values.only_ids(env.get("PATCHLANE_ONLY"))
    if disable or only:
        rows = found.rows()
        if rows is None:
            return "the watch list's rows cannot be read"
        unknown = (disable | (only or frozenset())) - {row[0] for row in rows}
        if unknown:
            return f"PATCHLANE_DISABLE / PATCHLANE_ONLY name ids no entry has: " \
                f"{', '.join(sorted(unknown))}"
    # As logging stood at `import patchlane`: what a command's own imports set up since
    # (megatron-core's INFO) is no more a new process's than the targets it imported.
    info = _info_at_import[0] if _info_at_import else _info_enabled()
    if info:
        # This process asked to hear what the startup decided (its summary line, at
        # INFO, at `import patchlane`): it gets it, from the startup run now.
        return "the patchlane logger is enabled at INFO (the start-up summary is logged)"
    names = set(found.watch)
    own = sorted(name for name in names
                 if name in STARTUP_IMPORTS or name in sys.stdlib_module_names)
    if own:
        return f"an entry's module is one the startup imports itself ({', '.join(own)})"
    if flags["PATCHLANE_VERIFY_RANKS"]:
        names.add(RANK_CHECK_MODULE)
    already = sorted(name for name in names if name in sys.modules)
    if imported and already:
        return f"{', '.join(already)} already imported"
    return found, disable, only, names


def why_not() -> str | None:
    """Why this process's ``import patchlane`` loaded the startup at once (None: it was lazy, or
    ``import patchlane`` has not run)."""
    return _why_not[0] if _why_not else None


def untouched_report() -> dict[str, object] | None:
    """For a process that took the lazy path and never ran its startup: what each entry was
    decided at start (:func:`patchlane.lazy.untouched.report`); None otherwise."""
    if not _index or not watch.armed():
        return None
    rows = _index[0].rows()
    if rows is None:
        return None
    from .untouched import report

    disable, only = _disabled[0]
    return report(rows, lambda entry_id: switch_values.disabled_reason(entry_id, disable, only))

"""Every environment switch patchlane reads, documented in one place.

``PATCHLANE_DISABLE=id,...``   never apply these entries (decision ``skipped: disabled``).
``PATCHLANE_ONLY=id,...``      apply only these entries; every other one is ``skipped: disabled``.
                               Both govern every kind: source patches, config settings, version
                               floors and packaging pins (never checked), compat gates (skipped
                               by ``patchlane.check_config``). An id that names no loaded entry
                               is logged at WARNING with the closest known id and listed under
                               ``unknown_control_ids`` in ``patchlane.report()``; it does not
                               raise, since it may target another registry set. Strict mode
                               raises for an unknown id in ``PATCHLANE_ONLY`` (a
                               :class:`ControlsError`, exit 2): the entry meant is left out.
``PATCHLANE_STRICT=1``         every refusal (drift), failure, ledger violation, and gate that
                               cannot be evaluated raises a :class:`StrictModeError` (drift:
                               ``DriftError``, exit 4; a failed overlay:
                               ``StrictOverlayError``, exit 5; the rest exit 6). Explicit
                               ``DISABLE``/``ONLY`` choices, ``upstream-fixed``, and a gate that
                               excludes the installed release do not: they are requested, good, or
                               the registry declaring entries for other releases.
``PATCHLANE_REGISTRY=a.yaml:b.yaml``  extra registry files (``os.pathsep``-separated).
``PATCHLANE_DEFAULT_REGISTRY=0``      do not load the registry bundled with patchlane.
``PATCHLANE_ENTRY_POINTS=0``          do not load registries from the ``patchlane.registries``
                               entry-point group.
``PATCHLANE_REGISTRY_CACHE=0|DIR``    where the validated registry is cached between processes
                               (default ``$XDG_CACHE_HOME/patchlane/registry``, ``~/.cache``);
                               ``0`` parses and validates every file at every start. ``DIR``
                               must be absolute (a relative one turns the cache off, with a
                               WARNING) and writable by this user alone
                               (patchlane.registry.cache says why).
``PATCHLANE_LAZY=0``                  run the whole startup at ``import patchlane`` even if a fresh
                               index says which imports matter (patchlane.lazy: by default a
                               process that imports no target loads only that index and one
                               import hook; the startup loads at the first target import).
``PATCHLANE_VERIFY_RANKS=0``          do not compare patch sets across ranks right after
                               ``torch.distributed.init_process_group`` (patchlane.training.ranks).
``PATCHLANE_EVIDENCE=DIR:DIR``        runs roots (``os.pathsep``-separated; what ``patchlane sweep
                               --runs-root`` wrote, or one run directory): ``patchlane.report()``
                               and each rank's ``patchlane run`` line say, per applied entry,
                               whether a passing run proved it on this process's own stack
                               (``proven here``, ``stale``, ``proven elsewhere``, ``never
                               run``: patchlane.deciding.proof, verified and tied to
                               content). Read only when asked for (a report, or the next
                               switch), never at ``import patchlane``; ``patchlane run
                               --evidence DIR`` sets it.
``PATCHLANE_REQUIRE_EVIDENCE=1``      refuse to apply an entry that no passing run under
                               ``PATCHLANE_EVIDENCE`` proved on this stack: the decision is
                               ``refused: evidence``, the target stays unpatched, and strict mode
                               raises (:class:`StrictModeError`, exit 6). Without
                               ``PATCHLANE_EVIDENCE`` it is a setting that cannot be read.

Read by the command line only (:class:`ToolSettings`), never at ``import patchlane``:

``PATCHLANE_RUNS=DIR``                where sweep run directories go (default ``./runs``).
``PATCHLANE_SCHEDULE=longest-first|registry``  the order a sweep starts its cases in: longest
                               first by the durations of earlier runs beside it (default), or
                               registry order (patchlane.sweep.schedule).
``PATCHLANE_RELEASE_CACHE=DIR``       releases installed side by side (a ledger reproducer's bad
                               side; default ``$XDG_CACHE_HOME/patchlane/releases``).
``PATCHLANE_WHEELHOUSE=DIR``          install every release side by side from this wheelhouse
                               alone, with no package index (``patchlane wheelhouse`` fills
                               it; ``sweep --wheelhouse`` / ``matrix --wheelhouse`` set it for
                               themselves and their children): a release it lacks is a
                               skipped row, ``needs X, not in the wheelhouse``.
``PATCHLANE_CACHE=DIR``               the upstream tracker's HTTP cache (default
                               ``$XDG_CACHE_HOME/patchlane/upstream``, ``~/.cache``).
``PATCHLANE_GITHUB_API=URL``          GitHub API base URL (default ``https://api.github.com``;
                               tests point it at loopback).
``PATCHLANE_PYPI_URL=URL``            PyPI JSON API base URL (default ``https://pypi.org``).
                               The defaults of these three are the tracker's own
                               (``patchlane.upstream``): unset here means None.

Values that cannot be read raise :class:`patchlane.common.errors.ControlsError` naming the variable.
At ``import patchlane`` that is the startup error, as a rejected registry is: nothing applied,
an ERROR line, raised in strict mode (:meth:`Controls.unreadable`); every command refuses it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .. import switch_values
from ..common.errors import ControlsError

__all__ = ["Controls", "EntryControls", "ToolSettings", "describe_unknown"]

_TRUE = switch_values.TRUE
_FALSE = switch_values.FALSE
_ids = switch_values.ids


def _flag(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name)
    default = switch_values.FLAGS[name]
    value = switch_values.flag(raw, default)
    if value is None:
        raise ControlsError(f"{name}={raw!r}: expected one of {', '.join(_TRUE + _FALSE)}; fix: "
                            f"set it to one of them, or unset it (default: "
                            f"{_TRUE[0] if default else _FALSE[0]})")
    return value


def _cache_dir(env: Mapping[str, str]) -> Path | None:
    directory, refused = switch_values.registry_cache_dir(env)
    if refused:
        # Refused rather than resolved: every process would resolve it against its own
        # working directory (ranks, data-loader workers and tools each start elsewhere),
        # leaving a cache in each. A cache only saves time, so a job never stops for it:
        # said at WARNING and turned off, never raised.
        logging.getLogger("patchlane").warning(
            "PATCHLANE_REGISTRY_CACHE=%r is a relative path, which would put a "
            "registry cache in every working directory; the cache is off. Fix: give an "
            "absolute path (e.g. $HOME/.cache/patchlane/registry), or 0 to turn it off",
            (env.get("PATCHLANE_REGISTRY_CACHE") or "").strip())
    return Path(directory) if directory is not None else None


def _evidence_roots(env: Mapping[str, str]) -> tuple[Path, ...]:
    raw = env.get("PATCHLANE_EVIDENCE") or ""
    # Absolute now, against this process's working directory: a relative root would otherwise
    # be read again against wherever the report is asked for (os.path.abspath: no file access).
    return tuple(Path(os.path.abspath(os.path.expanduser(p)))
                 for p in raw.split(os.pathsep) if p.strip())


@dataclass(frozen=True)
class Controls:
    disable: frozenset[str]
    only: frozenset[str] | None
    strict: bool
    registries: tuple[Path, ...]
    default_registry: bool
    entry_points: bool
    verify_ranks: bool = True
    registry_cache: Path | None = None
    """Directory of the validated-registry cache (patchlane.registry.cache); None: off."""
    evidence: tuple[Path, ...] = ()
    """Runs roots to answer "proven here?" from (absolute); empty: not asked."""
    require_evidence: bool = False
    """Refuse an entry no passing run proved on this stack (needs :attr:`evidence`)."""
    only_ignored: bool = False
    """``PATCHLANE_ONLY`` was set to nothing (no id): ignored, and said so."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Controls:
        env = os.environ if env is None else env
        only = env.get("PATCHLANE_ONLY")
        extra = env.get("PATCHLANE_REGISTRY", "")
        evidence = _evidence_roots(env)
        _flag(env, "PATCHLANE_LAZY")  # read at `import patchlane`; refused here if unreadable
        require = _flag(env, "PATCHLANE_REQUIRE_EVIDENCE")
        if require and not evidence:
            # Nothing to prove it with: every entry would be refused. Said as a setting that
            # cannot be read (nothing applied, every command refuses it) rather than guessed.
            raise ControlsError(
                f"PATCHLANE_REQUIRE_EVIDENCE={env.get('PATCHLANE_REQUIRE_EVIDENCE')!r} needs "
                "PATCHLANE_EVIDENCE, which is unset or empty: no runs root to look for proof "
                "in; fix: set PATCHLANE_EVIDENCE=RUNS_ROOT (what `patchlane sweep --runs-root` "
                "wrote), or unset PATCHLANE_REQUIRE_EVIDENCE")
        return cls(
            disable=_ids(env.get("PATCHLANE_DISABLE")),
            only=switch_values.only_ids(only),
            only_ignored=only is not None and not switch_values.only_ids(only),
            strict=_flag(env, "PATCHLANE_STRICT"),
            registries=tuple(Path(p) for p in extra.split(os.pathsep) if p),
            default_registry=_flag(env, "PATCHLANE_DEFAULT_REGISTRY"),
            entry_points=_flag(env, "PATCHLANE_ENTRY_POINTS"),
            verify_ranks=_flag(env, "PATCHLANE_VERIFY_RANKS"),
            registry_cache=_cache_dir(env),
            evidence=evidence,
            require_evidence=require,
        )

    @classmethod
    def unreadable(cls, env: Mapping[str, str] | None = None) -> Controls:
        """The controls of a process whose settings cannot be read (:meth:`from_env` raised):
        no registry, so nothing is applied. Strict unless ``PATCHLANE_STRICT`` is plainly
        off: a job that asked for strict mode, with a typo in that very variable or another
        one, must not start unchecked (fail closed). The rank check stays on unless
        ``PATCHLANE_VERIFY_RANKS`` is plainly off: the check is a collective, and a rank that
        left it out while the others joined hung the whole job until the process group's
        timeout; joined, its empty patch set and its startup error stop every rank (exit 8)."""
        env = os.environ if env is None else env
        strict = (env.get("PATCHLANE_STRICT") or "").strip().lower() not in ("", *_FALSE)
        verify = (env.get("PATCHLANE_VERIFY_RANKS") or "").strip().lower() not in _FALSE
        return cls(disable=frozenset(), only=None, strict=strict, registries=(),
                   default_registry=False, entry_points=False, verify_ranks=verify)

    def disabled_reason(self, entry_id: str) -> str | None:
        return switch_values.disabled_reason(entry_id, self.disable, self.only)

    def left_out(self, ids: Iterable[str]) -> dict[str, str]:
        """Each of ``ids`` these controls leave out, with why (:meth:`disabled_reason`)."""
        return {entry_id: reason for entry_id in ids
                if (reason := self.disabled_reason(entry_id)) is not None}

    def for_entries(self, ids: Iterable[str]) -> EntryControls:
        """What these controls say of the entries ``ids`` (a process's registries), read in
        one go: which they leave out, the ids they list that name none of them, and the
        warnings the startup logs about those."""
        known = list(ids)
        unknown = self.unknown_ids(known)
        warnings = []
        if unknown:
            # A warning, not an error: the id may belong to a registry this process does not
            # load (one PATCHLANE_DISABLE exported for several jobs).
            warnings.append(describe_unknown(unknown, known, self.only))
        if self.only_ignored:
            warnings.append("PATCHLANE_ONLY is set but names no id: ignored (no entry is left "
                            "out by it); unset it, or list the ids to keep")
        refusal = None
        if self.strict and any("PATCHLANE_ONLY" in where for where in unknown.values()):
            # A test run asked for strict mode: an id it keeps that names no entry leaves the
            # entry it meant out (every entry, when it names none), and the tests would pass
            # without the fix. An unknown PATCHLANE_DISABLE id changes nothing: only logged.
            refusal = ControlsError(
                f"{describe_unknown(unknown, known, self.only)}; strict mode refuses an unknown "
                "id in PATCHLANE_ONLY: fix: correct it to a known id, or drop it")
        return EntryControls(self.left_out(known), unknown, tuple(warnings), refusal)

    def unknown_ids(self, known: Collection[str]) -> dict[str, list[str]]:
        """Ids in PATCHLANE_DISABLE / PATCHLANE_ONLY that name no entry in ``known``, each with
        the variable(s) that list it. A typo there would otherwise disable nothing, silently
        (or, in ONLY, disable everything without saying which id was meant)."""
        unknown: dict[str, list[str]] = {}
        for name, ids in (("PATCHLANE_DISABLE", self.disable),
                          ("PATCHLANE_ONLY", self.only or frozenset())):
            for entry_id in sorted(ids - set(known)):
                unknown.setdefault(entry_id, []).append(name)
        return unknown


class EntryControls(NamedTuple):
    """What a process's controls say of the entries its registries declare
    (:meth:`Controls.for_entries`)."""

    left_out: dict[str, str]
    """Entry id -> why ``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` leave it out."""
    unknown_ids: dict[str, list[str]]
    """Ids those variables list that name no entry -> the variables that list each."""
    warnings: tuple[str, ...]
    """What the startup logs at WARNING about them (an unknown id, an empty ONLY)."""
    refusal: ControlsError | None = None
    """In strict mode, the error an unknown ``PATCHLANE_ONLY`` id raises at the start."""


def readable_with_evidence(env: Mapping[str, str], root: str) -> bool:
    """Whether the settings read as ``patchlane run --evidence ROOT``'s command will read them,
    with ``PATCHLANE_EVIDENCE`` set to ``root`` (``PATCHLANE_REQUIRE_EVIDENCE`` needs it)."""
    try:
        Controls.from_env({**env, "PATCHLANE_EVIDENCE": os.path.abspath(root)})
    except ControlsError:
        return False
    return True


def describe_unknown(unknown: Mapping[str, list[str]], known: Collection[str],
                     only: frozenset[str] | None = None) -> str:
    """One WARNING line for :meth:`Controls.unknown_ids`: each id, where it is listed, the
    closest known id, what the ids do here, and every known id. ``only``: the
    ``PATCHLANE_ONLY`` ids: when none of them is known, every entry is left out, and the
    line says so (it used to say they changed nothing)."""
    import difflib  # only when an id is unknown: not on the common path of `import patchlane`

    parts = []
    folded = {k.lower(): k for k in known}  # a shell's TEAM_SCALE_ZERO is team_scale_zero
    for entry_id, where in sorted(unknown.items()):
        close = difflib.get_close_matches(entry_id.lower(), list(folded), n=1, cutoff=0.6)
        hint = f" (did you mean {folded[close[0]]!r}?)" if close else ""
        parts.append(f"{entry_id!r} in {' and '.join(where)}{hint}")
    listing = ", ".join(sorted(known)) or "(none)"
    if only and not (only & set(known)):
        effect = ("PATCHLANE_ONLY names no loaded entry, so every entry is left out (skipped: "
                  "disabled)")
    elif any("PATCHLANE_ONLY" in where for where in unknown.values()):
        effect = ("PATCHLANE_ONLY's other ids still apply, and every entry it does not name "
                  "is left out")
    else:
        effect = "PATCHLANE_DISABLE's unknown ids change nothing here"
    # No "patchlane:" of its own: the logger's name says whose it is (patchlane.deciding.logs)
    return (f"unknown entry id(s) {'; '.join(parts)}: no loaded registry declares "
            f"them; {effect}. Known ids: {listing}")


SCHEDULE_POLICIES = ("longest-first", "registry")
"""The sweep's case orders, the default first (defined here, below the evidence side, so that
both this module and patchlane.sweep.schedule can name them)."""
RANK_STARTS = ("fresh", "warm")
"""How a sweep's ranks may start, the default first (``patchlane.sweep.rank_start.RankStart``
has these values)."""


@dataclass(frozen=True)
class ToolSettings:
    """The ``PATCHLANE_*`` settings of the command line (sweep, upstream tracking)."""

    runs_root: Path
    upstream_cache: Path | None
    github_api: str | None
    pypi_url: str | None
    schedule: str = SCHEDULE_POLICIES[0]
    release_cache: Path | None = None
    """Where releases installed side by side are kept (a ledger reproducer's bad side, a
    release-matrix set, a bisection step); None: ``$XDG_CACHE_HOME/patchlane/releases``."""
    wheelhouse: Path | None = None
    """The wheelhouse every side-by-side install comes from, with no package index; None: the
    index."""
    rank_start: str = RANK_STARTS[0]
    """How a sweep's ranks start when ``--rank-start`` does not say (``PATCHLANE_RANK_START``:
    fresh or warm, :mod:`patchlane.sweep.rank_start`)."""

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ToolSettings:
        env = os.environ if env is None else env
        cache = env.get("PATCHLANE_CACHE")
        schedule = (env.get("PATCHLANE_SCHEDULE") or SCHEDULE_POLICIES[0]).strip().lower()
        if schedule not in SCHEDULE_POLICIES:
            raise ControlsError(f"PATCHLANE_SCHEDULE={env.get('PATCHLANE_SCHEDULE')!r}: "
                                f"expected one of {SCHEDULE_POLICIES}")
        rank_start = (env.get("PATCHLANE_RANK_START") or RANK_STARTS[0]).strip().lower()
        if rank_start not in RANK_STARTS:
            raise ControlsError(f"PATCHLANE_RANK_START={env.get('PATCHLANE_RANK_START')!r}: "
                                f"expected one of {RANK_STARTS}")
        return cls(runs_root=Path(env.get("PATCHLANE_RUNS") or "runs"),
                   upstream_cache=Path(cache) if cache else None,
                   github_api=env.get("PATCHLANE_GITHUB_API") or None,
                   pypi_url=env.get("PATCHLANE_PYPI_URL") or None, schedule=schedule,
                   release_cache=Path(env["PATCHLANE_RELEASE_CACHE"])
                   if env.get("PATCHLANE_RELEASE_CACHE") else None,
                   wheelhouse=Path(env["PATCHLANE_WHEELHOUSE"])
                   if env.get("PATCHLANE_WHEELHOUSE") else None, rank_start=rank_start)

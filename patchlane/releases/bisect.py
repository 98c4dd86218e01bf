"""``patchlane bisect ID``: an entry's gate from runs, not from reading.

Which releases of the target distribution have the bug? The reproducer answers, run *without*
the overlay against one release at a time (how one release is installed, run and judged is
:mod:`patchlane.releases.release_runs`; this module decides which releases to run):

* the releases: every release of the distribution on PyPI that installs on this interpreter
  (a wheel whose tags this interpreter accepts, or only an sdist, which is built and tried),
  prereleases only when asked (:func:`list_candidates`);
* each run is one :class:`~patchlane.runs.verdicts.Finding`: ``affected``,
  ``not-affected``, ``absent`` (the target does not exist there: below the bug's start, not
  evidence of it) or ``error`` (reported, never guessed);
* the search (:func:`bisect`): the affected releases form one contiguous range. From a release
  known to be affected (the installed one if its run fails, else one recorded in the entry's
  ``fingerprint.releases`` inside ``applies_to``, checked by a run) it searches downward for
  the first affected release and upward for the first fixed one, several probes a round when
  runs are parallel; a release whose run errors is stepped over, never counted as either side.
  Then it checks that each boundary has a run on both sides and runs every release the entry
  records a fingerprint for; a result that breaks contiguity is reported, not smoothed over;
* the proposed gate: ``>=FIRST_AFFECTED,<NEXT`` where NEXT is the release after the last
  affected one (the first fixed one when the runs between are clean), or, still affected at
  the newest release, the next minor release after it;
* :func:`write_bisection` records it in the registry in place (``--write``): ``applies_to``,
  ``retire_when.release``, the fingerprints of the releases that ran and an ``evidence``
  line, rewriting only the entry's own lines, under the registry's edit lock, validated before
  the file is replaced.

The search knows nothing of PyPI, pip or reproducers: :func:`bisect` takes the releases and a
:data:`Runner` (version, how -> a :class:`RunRecord`), so a ledger entry's reproducer over its
``target.distribution``, or a test's made-up outcomes, are bisected the same way.
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
import textwrap
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag, sys_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from ..common.errors import PatchlaneError, RegistryError, ReproducerError, UsageError
from ..common.files import atomic_write
from ..common.versions import in_range, parse_range, parse_version
from ..registry import Entry, parse_registry
from ..registry.editor import (
    child_end,
    child_indent,
    entry_block,
    inline_value,
    key_line,
    read_as_stored,
    record_fingerprints,
    registry_lock,
    set_value,
    stored_lines,
)
from ..runs.verdicts import Finding
from ..upstream.pypi import pypi_releases

if TYPE_CHECKING:
    from ..upstream.http import Client
    from ..upstream.records import Release

__all__ = [
    "BisectError",
    "Bisection",
    "Bounds",
    "Candidate",
    "Listing",
    "RunRecord",
    "Runner",
    "beyond_here",
    "bisect",
    "bisect_entry",
    "bounds",
    "combine",
    "installs_here",
    "list_candidates",
    "next_minor",
    "next_probes",
    "one_side",
    "plan",
    "write_bisection",
]


class BisectError(UsageError):
    """``patchlane bisect`` cannot do what it was asked: no release to run, no release known
    to be affected to start from, a run directory in use, a result ``--write`` must not
    record. The message says what was found and the fix."""


# -- the releases ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One release to run: its version and how it gets here."""

    version: str
    how: str
    """``wheel`` or ``sdist`` (installed from PyPI into the release cache), ``installed`` (the
    copy this interpreter already has: run as it is, nothing installed)."""

    @property
    def parsed(self) -> Version:
        return Version(self.version)


@dataclass(frozen=True)
class Listing:
    """The releases of a distribution that can run here, oldest first, and the ones left out
    with why."""

    candidates: tuple[Candidate, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    """(version, reason)."""


def _admits(requires_python: str | None, python: str) -> bool:
    if not requires_python:
        return True
    spec = parse_range(requires_python)
    # a malformed constraint on PyPI constrains nothing pip obeys
    return spec is None or spec.contains(python, prereleases=True)


def installs_here(release: Release, tags: frozenset[Tag], python: str) -> tuple[str | None, str]:
    """(``wheel`` / ``sdist`` / None, why): whether ``release`` installs on an interpreter
    accepting ``tags`` at Python ``python``. A wheel with a matching tag wins; only an sdist
    is built from source (and may fail: that run is then an error)."""
    wheels: list[str] = []
    interpreters: set[str] = set()
    refused: set[str] = set()
    sdist = False
    for file in release.files:
        if not _admits(file.requires_python, python):
            refused.add(str(file.requires_python).strip())
            continue
        name = file.filename
        if name.endswith(".whl"):
            try:
                wheel_tags = parse_wheel_filename(name)[3]
            except InvalidWheelFilename:
                continue
            wheels.append(name)
            if wheel_tags & tags:
                return "wheel", name
            interpreters |= {t.interpreter for t in wheel_tags}
        elif name.endswith((".tar.gz", ".zip")):
            sdist = True
    if sdist:
        return "sdist", "no wheel for this interpreter: built from the sdist"
    if wheels:
        return None, (f"no wheel for this interpreter (wheels for "
                      f"{', '.join(sorted(interpreters))} only) and no sdist")
    if refused:
        return None, f"needs Python {' or '.join(sorted(refused))} (Requires-Python)"
    return None, "no file that installs on this Python"


def list_candidates(client: Client, distribution: str, *, pre: bool = False,
                    tags: Iterable[Tag] | None = None,
                    python: str | None = None) -> Listing:
    """Releases of ``distribution`` on PyPI (through ``client``; yanked files skipped) that
    install on this interpreter (or on ``tags`` / ``python``, for tests), oldest first."""
    accepted = frozenset(sys_tags() if tags is None else tags)
    python = python or platform.python_version()
    found: list[Candidate] = []
    skipped: list[tuple[str, str]] = []
    prereleases = 0
    for release in pypi_releases(client, distribution):
        if release.parsed.is_prerelease and not pre:
            prereleases += 1
            continue
        how, why = installs_here(release, accepted, python)
        if how is None:
            skipped.append((release.version, why))
        else:
            found.append(Candidate(release.version, how))
    if prereleases:
        skipped.append(("*", f"{prereleases} prerelease(s): --pre runs them"))
    return Listing(tuple(found), tuple(skipped))


# -- the search ------------------------------------------------------------------------------


class RunRecord(Protocol):
    """What a run reports back (:class:`patchlane.releases.release_runs.ReleaseRun` is one)."""

    @property
    def release(self) -> str: ...
    @property
    def finding(self) -> Finding: ...
    @property
    def message(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def how(self) -> str: ...
    @property
    def receipt(self) -> Path | None: ...
    @property
    def fingerprint(self) -> str | None: ...
    @property
    def overlay(self) -> str | None: ...
    def as_dict(self) -> dict[str, Any]: ...


Runner = Callable[[str, str], RunRecord]
"""Runs the reproducer, without the overlay, against one release: ``runner(version, how)``
(``how``: ``wheel``, ``sdist`` or ``installed``, as :class:`Candidate` says). What the run
shows is never raised (an install that fails is an ``error`` run)."""


@dataclass(frozen=True)
class Bounds:
    """What the runs so far say, as indices into the releases (oldest first)."""

    low: int | None
    """The oldest affected release (None: no run showed the bug)."""
    high: int | None
    """The newest affected release."""
    below: int
    """The newest release under ``low`` whose run passed or found the target absent (-1:
    none). The bug starts somewhere in ``(below, low]``."""
    above: int
    """The oldest release over ``high`` whose run passed or found the target absent (the
    number of releases: none). The bug ends somewhere in ``[high, above)``."""
    contradictions: tuple[str, ...] = ()
    """Runs inside the affected range that did not show the bug: the range is not contiguous,
    and no bound drawn from these runs holds."""


_CLEAR = (Finding.NOT_AFFECTED, Finding.ABSENT)


def bounds(found: Sequence[Finding | None], versions: Sequence[str] | None = None) -> Bounds:
    """The bounds ``found`` (one finding per release, None where nothing ran) supports."""
    affected = [i for i, f in enumerate(found) if f is Finding.AFFECTED]
    if not affected:
        return Bounds(None, None, -1, len(found))
    low, high = affected[0], affected[-1]
    below = max((i for i in range(low) if found[i] in _CLEAR), default=-1)
    above = min((i for i in range(high + 1, len(found)) if found[i] in _CLEAR),
                default=len(found))
    names = versions or [str(i) for i in range(len(found))]
    contradictions = tuple(
        f"{names[i]} is {f.value} between affected {names[low]} and {names[high]}"
        for i, f in enumerate(found) if low < i < high and f in _CLEAR and f is not None)
    return Bounds(low, high, below, above, contradictions)


def _spread(candidates: Sequence[int], k: int) -> list[int]:
    """``k`` probes splitting ``candidates`` into ``k + 1`` near-equal parts (k = 1: the
    middle one, a binary search)."""
    m = len(candidates)
    return sorted({candidates[min(m - 1, (i + 1) * m // (k + 1))] for i in range(min(k, m))})


def next_probes(found: Sequence[Finding | None], jobs: int = 1) -> list[int]:
    """The releases to run next (at most ``jobs``): probes into the releases not run yet
    between each bound and the affected range, downward for the first affected, upward for
    the first fixed. Empty when both boundaries are found (or there is no affected run to
    search from, or the runs contradict each other)."""
    b = bounds(found)
    if b.low is None or b.high is None or b.contradictions:
        return []
    down = [i for i in range(b.below + 1, b.low) if found[i] is None]
    up = [i for i in range(b.high + 1, b.above) if found[i] is None]
    searches = [c for c in (down, up) if c]
    shares = [0] * len(searches)
    for _ in range(max(1, jobs)):
        # each parallel slot to the search with the most releases left per probe
        open_ = [i for i, c in enumerate(searches) if shares[i] < len(c)]
        if not open_:
            break
        best = max(open_, key=lambda i: len(searches[i]) / (shares[i] + 1))
        shares[best] += 1
    return sorted(p for c, k in zip(searches, shares, strict=True) for p in _spread(c, k))


def _to_verify(found: Sequence[Finding | None], recorded: Iterable[int]) -> list[int]:
    """Releases that must have a run once the search is done: each boundary's neighbours
    (the release before the first affected, the first affected; the last affected, the one
    after it) and every release the entry records a fingerprint for."""
    b = bounds(found)
    need = set(recorded)
    if b.low is not None and b.high is not None:
        need |= {b.low, b.high, *([b.low - 1] if b.low > 0 else []),
                 *([b.high + 1] if b.high + 1 < len(found) else [])}
    return sorted(i for i in need if found[i] is None)


def _interpreter() -> str:
    """This interpreter's ``major.minor``: a bisection holds for the interpreter it ran on."""
    return ".".join(platform.python_version_tuple()[:2])


@dataclass
class Bisection:
    """The outcome of :func:`bisect`: the boundaries, the proposed gate, every run."""

    entry_id: str
    distribution: str
    releases: tuple[Candidate, ...]
    runs: list[tuple[str, RunRecord]] = field(default_factory=list)
    """(phase, run) in the order they finished: ``pivot``, ``bisect``, ``verify``."""
    skipped: tuple[tuple[str, str], ...] = ()
    pivot: str | None = None
    first_affected: str | None = None
    last_affected: str | None = None
    first_fixed: str | None = None
    absent_after: str | None = None
    """The target is gone from this release on (the code moved): the gate ends there, but it
    is no evidence of a fix."""
    applies_to: str | None = None
    lower_certain: bool = False
    upper_certain: bool = False
    consistent: bool = True
    notes: list[str] = field(default_factory=list)
    python: str = field(default_factory=_interpreter)
    seconds: float = 0.0
    run_dir: Path | None = None
    older_elsewhere: tuple[str, ...] = ()
    """Releases older than every one run here that do not install on this interpreter: the
    bug may start among them (another interpreter's bisect runs them: ``--python``)."""
    newer_elsewhere: tuple[str, ...] = ()
    """Releases newer than every one run here that do not install on this interpreter: the
    fix may be among them."""

    @property
    def runs_taken(self) -> int:
        return len(self.runs)

    def run_of(self, version: str) -> RunRecord | None:
        return next((r for _, r in self.runs if r.release == version), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry": self.entry_id, "distribution": self.distribution, "python": self.python,
            "first_affected": self.first_affected, "first_fixed": self.first_fixed,
            "applies_to": self.applies_to,
            "runs": [{**run.as_dict(), "phase": phase} for phase, run in self.runs],
            "releases_considered": len(self.releases), "runs_taken": self.runs_taken,
            "last_affected": self.last_affected, "absent_after": self.absent_after,
            "pivot": self.pivot, "lower_certain": self.lower_certain,
            "upper_certain": self.upper_certain, "consistent": self.consistent,
            "notes": self.notes,
            "releases": [{"release": c.version, "how": c.how} for c in self.releases],
            "skipped": [{"release": v, "reason": why} for v, why in self.skipped],
            "older_elsewhere": list(self.older_elsewhere),
            "newer_elsewhere": list(self.newer_elsewhere),
            "seconds": round(self.seconds, 1),
            "run_dir": None if self.run_dir is None else str(self.run_dir),
        }

    def summary(self, date: _dt.date) -> str:
        """The registry's ``evidence.bisected`` line."""
        fixed = self.first_fixed or (f"none (still affected at {self.last_affected})"
                                     if self.absent_after is None else
                                     f"none (the target is absent from {self.absent_after})")
        text = (f"{date.isoformat()}: {self.runs_taken} runs on Python {self.python}: first "
                f"affected {self.first_affected}, first fixed {fixed}")
        doubts = []
        for side, ok, elsewhere in (("the lower bound", self.lower_certain, self.older_elsewhere),
                                    ("the upper bound", self.upper_certain, self.newer_elsewhere)):
            if not ok:
                doubts.append(f"{side} next to releases that install only on another Python"
                              if elsewhere else f"{side} next to releases whose runs errored")
        if doubts:
            text += "; " + ", ".join(doubts)
        return text


def combine(here: Bisection, there: Mapping[str, Any]) -> Bisection:
    """One bisection from this interpreter's ``here`` and another interpreter's result
    ``there`` (its ``bisect --json``): every release either ran, in version order, read as
    one search (the same bounds, gate, certainty and notes as if one interpreter had
    installed them all). A release both ran with different findings is a contradiction."""
    python = str(there.get("python", "?"))
    if there.get("entry") != here.entry_id or there.get("distribution") != here.distribution:
        raise BisectError(f"{here.entry_id}: the Python {python} bisect answered for "
                          f"{there.get('entry')!r} ({there.get('distribution')!r}): its "
                          "registry differs from this one; fix: give both interpreters the same "
                          "registry (PATCHLANE_REGISTRY, the same patchlane checkout)")
    from .release_runs import ReleaseRun

    foreign = [(f"{phase} (Python {python})", ReleaseRun.from_dict(run, python))
               for run in there.get("runs", []) for phase in [run.get("phase", "bisect")]]
    how = {c.version: c.how for c in here.releases}
    for item in there.get("releases", []):
        how.setdefault(str(item["release"]), str(item.get("how", "wheel")))
    versions = sorted(how, key=Version)
    runs = here.runs + foreign
    found: list[Finding | None] = [None] * len(versions)
    notes: list[str] = []
    for _, run in runs:
        i = versions.index(run.release)
        before = found[i]
        if before is not None and before is not run.finding and Finding.ERROR not in (
                before, run.finding):
            notes.append(f"{run.release} ran on both interpreters: {before.value} and "
                         f"{run.finding.value}")
        if before is None or before is Finding.ERROR:
            found[i] = run.finding
    ran_there = set(how) - {c.version for c in here.releases}
    skipped = tuple((v, why) for v, why in here.skipped if v not in ran_there)
    both = Bisection(here.entry_id, here.distribution,
                     tuple(Candidate(v, how[v]) for v in versions), runs=runs, skipped=skipped,
                     pivot=here.pivot, python=f"{here.python}, {python}",
                     seconds=here.seconds + float(there.get("seconds", 0.0)),
                     run_dir=here.run_dir)
    _conclude(both, found, versions)
    if notes:
        both.consistent = False
    both.notes[:0] = notes
    return both


def beyond_here(result: Bisection) -> list[tuple[str, str]]:
    """(pivot, side) for another interpreter's bisect when ``result`` stops at releases that
    do not install here: from the last affected release ``up`` (for the fix), from the first
    affected one ``down`` (for the start). Empty when nothing lies beyond."""
    searches: list[tuple[str, str]] = []
    if result.newer_elsewhere and result.last_affected:
        searches.append((result.last_affected, "up"))
    if result.older_elsewhere and result.first_affected:
        searches.append((result.first_affected, "down"))
    return searches


def one_side(listing: Listing, pivot: str, side: str) -> Listing:
    """``listing`` cut to the pivot and the releases on one ``side`` of it (``up``: newer,
    ``down``: older): another interpreter's part of a bisection searches only where this one
    could not."""
    keep = [c for c in listing.candidates
            if c.version == pivot or _older(pivot, c.version) == (side == "up")]
    skipped = [(v, why) for v, why in listing.skipped
               if v == "*" or _older(pivot, v) == (side == "up")]
    return Listing(tuple(keep), tuple(skipped))


def next_minor(version: str) -> str:
    """The next minor release after ``version`` (``0.19.2`` -> ``0.20.0``)."""
    major, minor = (*Version(version).release, 0)[:2]
    return f"{major}.{minor + 1}.0"


def _index(releases: Sequence[Candidate], version: str) -> int | None:
    wanted = parse_version(version)
    if wanted is None:
        return None
    return next((i for i, c in enumerate(releases) if c.parsed == wanted), None)


def bisect(entry_id: str, distribution: str, releases: Sequence[Candidate], runner: Runner, *,
           pivots: Sequence[str], recorded: Sequence[str] = (), jobs: int = 1,
           skipped: Sequence[tuple[str, str]] = (),
           progress: Callable[[str, RunRecord], None] | None = None) -> Bisection:
    """Find where the bug starts and ends among ``releases`` (oldest first) by running
    ``runner`` on as few of them as the search needs, up to ``jobs`` at a time.

    ``pivots``: releases to try, in order, until one is affected (the search starts there);
    ``recorded``: releases that must run whatever the search needs (the entry's
    ``fingerprint.releases``); ``skipped``: (version, why) of releases left out, reported.
    Raises :class:`BisectError` when no pivot is affected and
    :class:`ReproducerError` when every pivot's run errored."""
    started = time.monotonic()
    result = Bisection(entry_id, distribution, tuple(releases), skipped=tuple(skipped))
    if not releases:
        raise BisectError(f"{entry_id}: no release of {distribution} to run on this "
                          "interpreter; fix: run it on an interpreter the releases install on "
                          "(--pre includes prereleases)")
    versions = [c.version for c in releases]
    found: list[Finding | None] = [None] * len(releases)
    pivot_idx = list(dict.fromkeys(i for i in (_index(releases, v) for v in pivots)
                                   if i is not None))
    recorded_idx = [i for i in (_index(releases, v) for v in recorded) if i is not None]
    jobs = max(1, jobs)

    with ThreadPoolExecutor(max_workers=jobs) as pool:

        def run_all(indices: Sequence[int], phase: str) -> None:
            done = pool.map(lambda i: runner(releases[i].version, releases[i].how), indices)
            for i, run in zip(indices, done, strict=True):
                found[i] = run.finding
                result.runs.append((phase, run))
                if progress is not None:
                    progress(phase, run)

        for start in range(0, len(pivot_idx), jobs):
            run_all(pivot_idx[start:start + jobs], "pivot")
            hit = next((i for i in pivot_idx[start:start + jobs]
                        if found[i] is Finding.AFFECTED), None)
            if hit is not None:
                result.pivot = versions[hit]
                break
        if result.pivot is None:
            _no_pivot(entry_id, distribution, result, pivots)
        while True:
            while probes := next_probes(found, jobs):
                run_all(probes, "bisect")
            missing = _to_verify(found, recorded_idx)
            if not missing:
                break
            run_all(missing, "verify")
    _conclude(result, found, versions)
    result.seconds = time.monotonic() - started
    return result


def _no_pivot(entry_id: str, distribution: str, result: Bisection,
              pivots: Sequence[str]) -> None:
    ran = "; ".join(f"{r.release}: {r.finding.value} ({_first_line(r.message)})"
                    for _, r in result.runs) or "none of " + (", ".join(pivots) or "(none)") + \
        " is a release considered here"
    if result.runs and all(r.finding is Finding.ERROR for _, r in result.runs):
        raise ReproducerError(entry_id, f"could not run against any release to start the "
                              f"bisection from ({ran}); fix what the receipts say "
                              f"({result.runs[0][1].receipt}) and run again")
    raise BisectError(f"{entry_id}: no release of {distribution} known to be affected to "
                      f"start from: ran {ran}; expected the installed release or a release "
                      f"recorded under fingerprint.releases inside applies_to to fail; fix: "
                      f"--pivot RELEASE naming a release where the reproducer fails")


def _first_line(text: str, limit: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _conclude(result: Bisection, found: Sequence[Finding | None],
              versions: Sequence[str]) -> None:
    b = bounds(found, versions)
    assert b.low is not None and b.high is not None  # a pivot was affected
    n = len(versions)
    result.first_affected, result.last_affected = versions[b.low], versions[b.high]
    if b.above < n:
        if found[b.above] is Finding.NOT_AFFECTED:
            result.first_fixed = versions[b.above]
        else:
            result.absent_after = versions[b.above]
            result.notes.append(f"the target is absent from {versions[b.above]} (the code moved "
                                "or was removed): no evidence of a fix; if the bug moved with "
                                "the code, a new entry carries it (continued_by)")
    upper = versions[b.high + 1] if b.high + 1 < n else next_minor(versions[b.high])
    result.applies_to = f">={versions[b.low]},<{upper}"
    result.lower_certain = b.below == b.low - 1
    result.upper_certain = b.above == b.high + 1
    result.consistent = not b.contradictions
    result.notes += [f"not contiguous: {c}" for c in b.contradictions]
    # Each bound in turn, the lower first: the releases beside it whose runs errored.
    for errored, may in (
            (versions[b.below + 1:b.low], f"start before {versions[b.low]} (the proposed gate "
             "starts where a run showed it)"),
            (versions[b.high + 1:b.above], f"end after {versions[b.high]} (the proposed gate "
             f"ends before {upper}, the first release no run showed affected)")):
        if errored:
            result.notes.append(f"the runs of {', '.join(errored)} errored: the bug may {may}")
    inside = [r for _, r in result.runs if r.finding is Finding.ERROR
              and b.low < versions.index(r.release) < b.high]
    for run in inside:
        result.notes.append(f"the run of {run.release} errored inside the affected range "
                            f"({_first_line(run.message)}): no evidence either way; the range "
                            "is taken as contiguous across it")
    older = tuple(v for v, _ in result.skipped if _older(v, versions[0]))
    newer = tuple(v for v, _ in result.skipped if _older(versions[-1], v))
    if b.high + 1 >= n and not newer:
        result.notes.append(f"still affected at the newest release {versions[b.high]}: "
                            f"the proposed upper bound <{upper} is the next minor "
                            "release, which no run has seen")
    if b.high + 1 >= n and newer:
        result.upper_certain = False
        result.newer_elsewhere = newer
        result.notes.append(_beyond_note(result, "still affected at the newest",
                                         versions[b.high], newer, "the fix may be", "newer"))
    if b.low == 0 and older:
        result.lower_certain = False
        result.older_elsewhere = older
        result.notes.append(_beyond_note(result, "affected at the oldest", versions[0], older,
                                         "the bug may start", "older"))
    absent = [versions[i] for i, f in enumerate(found) if f is Finding.ABSENT]
    if absent:
        result.notes.append(f"absent (the target does not exist yet, or no more): "
                            f"{', '.join(absent)}")


def _beyond_note(result: Bisection, at: str, release: str, beyond: Sequence[str], what: str,
                 side: str) -> str:
    """Why a bound is uncertain: ``beyond`` (newer or older than every release run here) do
    not install on this interpreter, e.g. ``3 release(s) (0.17.0 … 0.19.2: needs Python
    >=3.12 (Requires-Python))``, and what runs them."""
    versions = sorted(beyond, key=Version)
    reasons = sorted({why for v, why in result.skipped if v in beyond})
    span = versions[0] if len(versions) == 1 else f"{versions[0]} … {versions[-1]}"
    return (f"{at} release that installs on Python {result.python} ({release}); "
            f"{len(versions)} release(s) ({span}: {'; '.join(reasons)}) do not install here, "
            f"and {what} among them: `patchlane bisect {result.entry_id} --python PYTHON` runs "
            f"the {side} ones on another interpreter (its venv's python, with patchlane "
            "installed) and draws one gate from both")


def _older(version: str, than: str) -> bool:
    a, b = parse_version(version), parse_version(than)
    return a is not None and b is not None and a < b


# -- an entry --------------------------------------------------------------------------------


def _middle_first(versions: Sequence[str]) -> list[str]:
    # A pivot in the middle of the recorded range leaves two searches of similar size.
    ordered = sorted(versions, key=Version)
    mid = (len(ordered) - 1) / 2
    return sorted(ordered, key=lambda v: abs(ordered.index(v) - mid))


def plan(entry: Entry, listing: Listing, *, installed: str | None = None,
         pivot: str | None = None, also_run: Iterable[str] = (),
         ) -> tuple[list[Candidate], list[str], list[str], list[str]]:
    """(releases, pivots, recorded, notes) for bisecting ``entry`` over ``listing``: the
    installed release runs as it is; the pivots are ``pivot`` alone when given, else the
    installed release, then the releases recorded under ``fingerprint.releases`` inside
    ``applies_to``; every recorded release that installs here must run, and so must each of
    ``also_run`` that installs here (``--write``: the releases the team's matrix runs, so each
    has the fingerprint a strict start there needs)."""
    releases = list(listing.candidates)
    notes: list[str] = []
    at = _index(releases, installed) if installed else None
    if at is not None:
        releases[at] = Candidate(releases[at].version, "installed")
    elif installed:
        notes.append(f"the installed {entry.target.distribution} {installed} is not among the "
                     "releases considered here: not run")
    recorded_all = list(entry.fingerprint.releases) if entry.fingerprint is not None else []
    recorded = [v for v in recorded_all if _index(releases, v) is not None]
    for version in recorded_all:
        if version not in recorded:
            notes.append(f"fingerprint.releases records {version}, which does not install "
                         "here: not run")
    recorded += [v for v in also_run if v not in recorded and _index(releases, v) is not None]
    if pivot is not None:
        if _index(releases, pivot) is None:
            near = ", ".join(c.version for c in releases[-8:])
            raise BisectError(f"{entry.id}: --pivot {pivot} is not a release of "
                              f"{entry.target.distribution} that installs here (the newest "
                              f"that do: {near}); fix: name one of them")
        return releases, [pivot], recorded, notes
    gate = entry.applies_to
    in_gate = [v for v in recorded if gate is None or in_range(gate, v)]
    pivots = ([releases[at].version] if at is not None else []) + _middle_first(in_gate)
    return releases, pivots, recorded, notes


def bisect_entry(entry: Entry, listing: Listing, runner: Runner, *, jobs: int = 1,
                 installed: str | None = None, pivot: str | None = None,
                 also_run: Iterable[str] = (),
                 progress: Callable[[str, RunRecord], None] | None = None) -> Bisection:
    """:func:`bisect` for a registry entry over its ``target.distribution`` (see
    :func:`plan`). A ``--pivot`` that is not affected is refused: the search needs one."""
    releases, pivots, recorded, notes = plan(entry, listing, installed=installed, pivot=pivot,
                                             also_run=also_run)
    try:
        result = bisect(entry.id, entry.target.distribution, releases, runner, pivots=pivots,
                        recorded=recorded, jobs=jobs, skipped=listing.skipped,
                        progress=progress)
    except BisectError:
        if pivot is not None:
            raise BisectError(f"{entry.id}: --pivot {pivot}: the reproducer does not fail "
                              "there without the overlay (see the run's receipt); fix: name a "
                              "release where it does") from None
        raise
    built = [r.release for _, r in result.runs if r.how == "sdist"]
    if built:
        notes.append(f"built from the sdist (no wheel for this interpreter): {', '.join(built)}")
    result.notes[:0] = notes
    return result


# -- recording it: --write -------------------------------------------------------------------


def _flow(mapping: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in mapping.items()) + "}"


# Comments the tools write above applies_to, which a later --write replaces: `patchlane new`'s
# ("... not yet verified by runs") and --write's own.
_GATE_COMMENT = "gate drawn by `patchlane bisect --write`"
_TOOL_COMMENTS = ("not yet verified by runs", _GATE_COMMENT)


@dataclass
class _Block:
    """An entry's lines in a registry file being rewritten: ``lines[start:end]``, its keys
    at ``key`` columns; ``insert`` keeps ``end`` right."""

    lines: list[str]
    start: int
    end: int
    key: int
    nl: str
    where: str
    """``FILE: entry 'ID'``, for the messages."""

    def line_of(self, name: str, required: bool = False) -> int | None:
        at = key_line(self.lines, self.start, self.end, self.key, name)
        if at is None and required:
            raise BisectError(f"{self.where} has no `{name}:` line at the expected "
                              "indentation; edit by hand")
        return at

    def insert(self, at: int, new: Sequence[str]) -> None:
        self.lines[at:at] = new
        self.end += len(new)


def _edit(entry: Entry, raw: str, result: Bisection, date: _dt.date,
          checked: Collection[str] | None = None) -> str:
    """``raw`` with ``entry``'s block rewritten to record ``result``; every other byte kept."""
    stored = stored_lines(raw)  # the file's line endings, its last line's (or none) too
    start, end, indent = entry_block(stored.lines, entry.id, entry.source, BisectError)
    block = _Block(stored.lines, start, end, indent + 2, stored.newline,
                   f"{entry.source}: entry {entry.id!r}")
    _record_gate(block, result, date)
    if result.first_fixed is not None:
        _record_retirement(block, f">={result.first_fixed}")
    _record_prints(block, result, checked)
    _record_evidence(block, f"bisected: {json.dumps(result.summary(date))}")
    return stored.text()


def _record_gate(block: _Block, result: Bisection, date: _dt.date) -> None:
    """``applies_to``, and the comment above it when a tool wrote it: `patchlane new`'s (or
    an earlier --write's) says where the gate came from, which is these runs now. A
    maintainer's own comment stays."""
    lines, key = block.lines, block.key
    at = block.line_of("applies_to", required=True)
    assert at is not None
    lines[at] = set_value(lines[at], json.dumps(result.applies_to), BisectError)
    above = at
    while above > block.start + 1 and lines[above - 1].lstrip().startswith("#") and \
            len(lines[above - 1]) - len(lines[above - 1].lstrip()) == key:
        above -= 1
    said = " ".join(line.strip().lstrip("#").strip() for line in lines[above:at])
    if said and any(mark in said for mark in _TOOL_COMMENTS):
        why = textwrap.wrap(f"{_GATE_COMMENT} on {date.isoformat()}: "
                            f"{result.summary(date).split(': ', 1)[1]}", width=96 - key - 2)
        lines[above:at] = [f"{' ' * key}# {text}{block.nl}" for text in why]
        block.end += len(why) - (at - above)


def _record_retirement(block: _Block, spec: str) -> None:
    """``retire_when.release: SPEC``, in the flow or block mapping the entry has."""
    lines, release = block.lines, json.dumps(spec)
    at = block.line_of("retire_when", required=True)
    assert at is not None
    inline = inline_value(lines[at])
    if isinstance(inline, dict):
        inline = {"release": yaml.safe_load(release), **{k: v for k, v in inline.items()
                                                        if k != "release"}}
        lines[at] = set_value(lines[at], _flow(inline), BisectError)
        return
    stop = child_end(lines, at, block.end, block.key)
    sub = child_indent(lines, at, stop, block.key + 2)
    there = key_line(lines, at + 1, stop, sub, "release")
    if there is not None:
        lines[there] = set_value(lines[there], release, BisectError)
    else:
        block.insert(at + 1, [f"{' ' * sub}release: {release}{block.nl}"])


def _record_prints(block: _Block, result: Bisection, checked: Collection[str] | None) -> None:
    """Each value the runs saw, in ``sha256`` and, for the releases ``checked`` names (the
    team's matrix runs them, so every value recorded there stays checked by a run), under
    ``fingerprint.releases``: the two agree, or the next strict start on that release would
    stop with a drift error. The `patchlane new` comment "(not a run)" goes."""
    prints = {r.release: r.fingerprint for _, r in result.runs if r.fingerprint}
    if not prints or block.line_of("fingerprint") is None:
        return
    lines = block.lines
    block.end = record_fingerprints(
        lines, block.start, block.end, block.key, block.nl,
        [(version if checked is None or version in checked else None, value,
          f"{version} (bisect run)") for version, value in
         sorted(prints.items(), key=lambda kv: Version(kv[0]))], BisectError)
    at = block.line_of("fingerprint")
    assert at is not None
    stop = child_end(lines, at, block.end, block.key)
    rel = key_line(lines, at + 1, stop, child_indent(lines, at, stop, block.key + 2),
                   "releases")
    if rel is not None and "(not a run)" in lines[rel]:
        lines[rel] = (lines[rel][:lines[rel].index("#")].rstrip()
                      + "  # seen at run time (bisect), or read at `patchlane new`" + block.nl)


def _record_evidence(block: _Block, line: str) -> None:
    """``evidence.bisected``: the newest bisection replaces the one before (and its lines)."""
    lines, pad, nl = block.lines, " " * block.key, block.nl
    at = block.line_of("evidence")
    if at is None:
        owner = block.line_of("owner")
        block.insert(owner if owner is not None else block.end,
                     [f"{pad}evidence:{nl}", f"{pad}  {line}{nl}"])
        return
    if inline_value(lines[at]) is not None:
        raise BisectError(f"{block.where} has an inline `evidence:` value; make it a block "
                          "mapping first")
    stop = child_end(lines, at, block.end, block.key)
    sub = child_indent(lines, at, stop, block.key + 2)
    there = key_line(lines, at + 1, stop, sub, "bisected")
    if there is not None:
        lines[there:child_end(lines, there, stop, sub)] = [f"{' ' * sub}{line}{nl}"]
    else:
        block.insert(stop, [f"{' ' * sub}{line}{nl}"])


def _guards_where_it_widens(entry: Entry, result: Bisection) -> None:
    """A gate widens only where the sweep would say ``guarding``: each affected release that
    ran outside the entry's present ``applies_to`` must also pass with the overlay (the
    runner's overlay leg); otherwise the entry would apply where it does not fix anything."""
    gate = entry.applies_to
    outside = [run for _, run in result.runs if run.finding is Finding.AFFECTED
               and gate is not None and not in_range(gate, run.release)]
    bad = list(dict.fromkeys(f"{run.release}: {run.overlay or 'not run with the overlay'}"
                             for run in outside if run.overlay != "guarding"))
    if bad:
        raise BisectError(f"{entry.id}: the proposed gate {result.applies_to!r} widens "
                          f"applies_to ({gate}) to releases where the overlay does not guard ("
                          + "; ".join(bad) + "); nothing written. Fix: make the overlay work "
                          "there (its probe, a branch for that release), run bisect --write "
                          "again, or set applies_to by hand to where it guards")


def write_bisection(entry: Entry, result: Bisection, *, date: _dt.date,
                    checked: Collection[str] | None = None) -> str:
    """Record ``result`` in ``entry``'s registry file, in place, under its edit lock:
    ``applies_to``, ``retire_when.release`` (``>=FIRST_FIXED`` when there is one), a
    ``fingerprint.releases`` line for each release that ran with a fingerprint, and
    ``evidence.bisected`` (``checked``: the releases to record under ``fingerprint.releases``,
    the others' values going to ``sha256`` alone; None: all). Refused, with nothing
    written, for a result that is not one contiguous range, one that widens the gate to a
    release where the overlay does not guard, and a file the loader would not accept
    afterwards. Returns the
    new text."""
    if not result.consistent:
        raise BisectError(f"{entry.id}: the runs do not form one contiguous affected range ("
                          + "; ".join(result.notes) + "): no gate follows from them; nothing "
                          "written. Fix: read the receipts of those runs (a flaky reproducer, "
                          "a regression?) and set applies_to by hand")
    _guards_where_it_widens(entry, result)
    path = entry.source

    def locked(message: str) -> PatchlaneError:
        return BisectError(message)

    with registry_lock(path, locked):
        raw = read_as_stored(path)
        text = _edit(entry, raw, result, date, checked)
        try:
            written = next(e for e in parse_registry(path, text) if e.id == entry.id)
        except (RegistryError, StopIteration) as exc:
            raise BisectError(f"{path}: the registry would not validate with {entry.id}'s new "
                              f"gate ({exc}); nothing written. Fix: edit the entry by hand "
                              f"(proposed applies_to {result.applies_to!r})") from None
        if str(written.applies_to) != str(SpecifierSet(result.applies_to or "")):
            raise BisectError(f"{path}: {entry.id}'s applies_to did not read back as "
                              f"{result.applies_to!r}; nothing written. Fix: edit it by hand")
        if text != raw:
            atomic_write(path, text)
    return text

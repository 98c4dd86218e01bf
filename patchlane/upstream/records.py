"""What upstream tracking finds: the issue, the pull request, the releases, and the state.

Plain frozen dataclasses, each with ``as_dict()`` for JSON. :class:`UpstreamState` is where the
fix stands upstream; it is *not* the sweep's :class:`patchlane.sweep.engine.Verdict` (what a
reproducer run showed), though retirement reads both.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from packaging.version import Version

__all__ = ["IssueState", "PullState", "Release", "ReleaseFile", "TrackReport",
           "UpstreamState"]


def _iso(moment: _dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@dataclass(frozen=True)
class PullState:
    number: int
    state: Literal["open", "closed"]
    merged: bool
    merged_at: _dt.datetime | None
    merge_commit_sha: str | None
    """Only set when merged (GitHub also reports a test-merge sha for open PRs; it is dropped).
    From a git repository (:mod:`~patchlane.upstream.gitrepo`): the commit that landed the PR on
    the default branch (else the first one found elsewhere); ``merged_at`` is its commit time."""
    milestone: str | None
    title: str
    url: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number, "state": self.state, "merged": self.merged,
            "merged_at": _iso(self.merged_at), "merge_commit_sha": self.merge_commit_sha,
            "milestone": self.milestone, "title": self.title, "url": self.url,
        }


@dataclass(frozen=True)
class IssueState:
    number: int
    state: Literal["open", "closed"]
    closed_at: _dt.datetime | None
    title: str
    url: str
    state_reason: str | None = None
    """GitHub's ``completed`` / ``not_planned`` / ``reopened``, when it says."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "number": self.number, "state": self.state, "closed_at": _iso(self.closed_at),
            "title": self.title, "url": self.url, "state_reason": self.state_reason,
        }


class ReleaseFile(NamedTuple):
    """One file of a release on PyPI, as its JSON API lists it."""

    filename: str
    """A wheel (``name-version-tags.whl``, whose tags say where it installs) or an sdist."""
    requires_python: str | None = None


@dataclass(frozen=True)
class Release:
    version: str
    """As PyPI spells it; :attr:`parsed` orders it."""
    upload_time: _dt.datetime
    """Earliest upload of a non-yanked file of this release (UTC)."""
    files: tuple[ReleaseFile, ...] = ()
    """Its files that are not yanked: which interpreters can install it."""

    @property
    def parsed(self) -> Version:
        return Version(self.version)

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "upload_time": self.upload_time.isoformat()}


class UpstreamState(str, enum.Enum):
    """Where an entry's fix stands upstream (``TrackReport.state``)."""

    NO_UPSTREAM_LINK = "no-upstream-link"
    """The entry links no upstream PR: nothing to track."""
    OPEN = "open"
    CLOSED_UNMERGED = "closed-unmerged"
    MERGED_UNRELEASED = "merged-unreleased"
    RELEASED = "released"
    """Merged, and a release of the distribution contains the merge commit."""


@dataclass(frozen=True)
class TrackReport:
    entry_id: str
    issue: IssueState | None
    pr: PullState | None
    released_in: str | None
    """First release (in version order) of the target distribution whose tag contains the
    PR's merge commit (from a git repository: any commit that landed it, cherry-picks
    included)."""
    latest_release: str | None
    """Newest final release of the target distribution (only looked up for merged PRs)."""
    state: UpstreamState
    reason: str
    gate_names_release: bool
    """Whether ``retire_when.release`` contains ``released_in``: the retirement evidence needs a
    release the gate can name. Always False when the fix ships in another distribution
    (``upstream.distribution``) than the one the gate reads."""
    stale: bool = False
    """Some answer came from a cache past its TTL (rate limit or offline); never from git."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "issue": None if self.issue is None else self.issue.as_dict(),
            "pr": None if self.pr is None else self.pr.as_dict(),
            "released_in": self.released_in,
            "latest_release": self.latest_release,
            "state": self.state.value,
            "reason": self.reason,
            "gate_names_release": self.gate_names_release,
            "stale": self.stale,
        }

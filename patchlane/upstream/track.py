"""Has the fix a registry entry carries landed upstream, and in which release?

For one :class:`~patchlane.registry.Entry`, :func:`track` reads the linked GitHub issue and pull
request (:mod:`~patchlane.upstream.github`), the distribution's releases on PyPI
(:mod:`~patchlane.upstream.pypi`), and asks GitHub's compare API which release tag first contains
the PR's merge commit. The answer is a :class:`~patchlane.upstream.records.TrackReport` whose
:class:`~patchlane.upstream.records.UpstreamState` says what to do next (wait, chase a closed
PR, or retire the patch) and whether the entry's ``retire_when.release`` gate can name the
release that carries the fix.

:mod:`~patchlane.upstream.gitrepo` answers the same question from a local git clone or mirror
(no GitHub API); both build their report's release reasoning with :func:`gate_names_release`
and :func:`release_note`, so the two cannot disagree on what ``retire_when.release`` names.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from ..common.versions import in_range, parse_version
from .answers import Trace
from .display import display_url
from .errors import MalformedResponse, TagTemplateError, UpstreamError
from .github import MAX_COMPARES, issue_state, pr_state, require_kind, scan_tags, tag_names
from .pypi import pypi_releases
from .records import PullState, TrackReport, UpstreamState

if TYPE_CHECKING:
    from ..registry import Entry
    from .http import Client

__all__ = ["DEFAULT_TAG_TEMPLATES", "gate_names_release", "release_note", "tag_name", "track"]

DEFAULT_TAG_TEMPLATES: Mapping[str, str] = {
    # How each target's PyPI version maps to the git tag of its upstream repository.
    "megatron-core": "core_v{version}",
    "torch": "v{version}",
    "triton": "v{version}",
}


def track(entry: Entry, client: Client, *, tag_template: str,
          include_prereleases: bool = False) -> TrackReport:
    """Where the fix ``entry`` carries stands upstream.

    Method, kept simple on purpose:

    1. read ``upstream.issue`` (if any) and ``upstream.pr``; no PR link -> ``no-upstream-link``;
       PR open -> ``open``; closed without merge -> ``closed-unmerged``;
    2. merged: list the final releases on PyPI (prereleases only with
       ``include_prereleases``) of ``entry.upstream.distribution`` if set, else of
       ``entry.target.distribution``, uploaded at or after the merge time (a wheel uploaded
       before the merge cannot carry it);
    3. in version order, map each to a tag with ``tag_template.format(version=v)`` and ask
       GitHub's compare API (in the PR's repository) whether the tag contains the merge commit;
       the first that does is ``released_in`` -> ``released``; none -> ``merged-unreleased``.

    A fix cherry-picked to a release branch lands there as a different commit, so such
    backports are not detected: the report then names the first release *from the branch the
    PR merged into*, which errs on the side of retiring later
    (:func:`~patchlane.upstream.gitrepo.track_git` finds such backports by patch-id).
    """
    tag_name(tag_template, "0")  # fail on a bad template before any request
    trace = Trace()
    issue = (issue_state(client, entry.upstream.issue, trace=trace) if entry.upstream.issue
             else None)

    def report(state: UpstreamState, reason: str, pr: PullState | None = None,
               released_in: str | None = None, latest: str | None = None) -> TrackReport:
        return TrackReport(entry_id=entry.id, issue=issue, pr=pr, released_in=released_in,
                           latest_release=latest, state=state, reason=reason,
                           gate_names_release=gate_names_release(entry, released_in),
                           stale=trace.stale)

    if not entry.upstream.pr:
        issue_note = (f"; issue #{issue.number} is {issue.state}" if issue is not None else "")
        return report(UpstreamState.NO_UPSTREAM_LINK,
                      f"the entry links no upstream pull request{issue_note}. Fix: add "
                      "upstream.pr once a fix is proposed upstream, so it can be tracked")
    pr = pr_state(client, entry.upstream.pr, trace=trace)
    if pr.state == "open":
        return report(UpstreamState.OPEN, f"PR #{pr.number} is open; keep carrying the patch",
                      pr)
    if not pr.merged:
        return report(UpstreamState.CLOSED_UNMERGED,
                      f"PR #{pr.number} was closed without merging; keep carrying the patch and "
                      "point upstream.pr at the change that replaced it (or re-propose it)", pr)
    owner, repo, _ = require_kind(entry.upstream.pr, "pull")
    if pr.merge_commit_sha is None:
        raise MalformedResponse(
            display_url(client.github_url(f"repos/{owner}/{repo}/pulls/{pr.number}")),
            "the pull request is merged but has no merge_commit_sha")
    dist = carrier_distribution(entry)
    releases = [r for r in pypi_releases(client, dist, trace=trace)
                if include_prereleases or not r.parsed.is_prerelease]
    latest = releases[-1].version if releases else None
    merged_at = pr.merged_at
    candidates = [r for r in releases if merged_at is None or r.upload_time >= merged_at]
    sha = pr.merge_commit_sha
    tag_of = {tag_name(tag_template, r.version): r.version for r in candidates}
    # The repository's tags the template can make, listed once: a tag it lacks costs no
    # compare request, and a template that matches no tag costs none at all. The scan is
    # bounded (MAX_COMPARES) whatever PyPI lists.
    existing = (tag_names(client, owner, repo, _tag_prefix(tag_template), trace=trace)
                if tag_of else None)
    scan = scan_tags(client, owner, repo, sha, list(tag_of), trace=trace, existing=existing)
    found, missing = scan.found, scan.missing
    merged_note = f"PR #{pr.number} merged {_day(merged_at)} as {sha[:12]}"
    if found is None:
        why = _not_released(entry.id, dist, [r.version for r in candidates], missing,
                            scan.unchecked, f"{owner}/{repo}", tag_template)
        return report(UpstreamState.MERGED_UNRELEASED,
                      f"{merged_note}; {why}. Keep carrying the patch until a release has it",
                      pr, latest=latest)
    released_in = tag_of[found]
    unknown = {tag_of[tag] for tag in missing}
    reason = (f"{merged_note}; first released in {dist} {released_in} (tag {found})"
              + release_note(entry, released_in,
                             [r.version for r in releases if r.version not in unknown],
                             dist=dist, carrier="the merge commit"))
    return report(UpstreamState.RELEASED, reason, pr, released_in=released_in, latest=latest)


def carrier_distribution(entry: Entry) -> str:
    """The distribution whose releases carry the fix: ``upstream.distribution`` when the fix
    ships elsewhere than the gated one (a numpy pin fixed in triton), else the target's."""
    dist = entry.upstream.distribution or entry.target.distribution
    if not dist:
        raise UpstreamError(f"entry {entry.id!r} has no target.distribution: nothing says "
                            "which PyPI releases could carry the fix. Fix: add target:"
                            " {distribution: ...} (or upstream.distribution) to the entry")
    return dist


def _not_released(entry_id: str, dist: str, candidates: list[str], missing: list[str],
                  unchecked: list[str], repository: str, tag_template: str) -> str:
    """Why no release carries a merged fix: none uploaded since, or none of those contains
    the merge commit (with the tags not found, and those a bounded scan left unchecked)."""
    if not candidates:
        return f"no release of {dist} was uploaded since"
    why = f"none of the {dist} releases uploaded since ({_listed(candidates)}) contains it"
    if missing:
        why += (f"; tags not found in {repository}: {_listed(missing)} (check the tag template "
                f"{tag_template!r})")
    if unchecked:
        why += (f"; {len(unchecked)} later release tags were not compared (at most "
                f"{MAX_COMPARES} compare requests per entry: {_listed(unchecked, 3)}). Fix: "
                f"track it from a local mirror (`patchlane upstream {entry_id} --git MIRROR`), "
                "which reads every tag")
    return why


def gate_names_release(entry: Entry, released_in: str | None) -> bool:
    """Whether ``entry.retire_when.release`` names ``released_in``
    (:attr:`TrackReport.gate_names_release <patchlane.upstream.records.TrackReport>`): never
    when the fix ships in another distribution (``upstream.distribution``) than the gate's."""
    spec = entry.retire_when.release
    same_dist = entry.upstream.distribution in (None, entry.target.distribution)
    return (released_in is not None and spec is not None and same_dist
            and bool(in_range(spec, released_in)))


def release_note(entry: Entry, released_in: str, releases: Iterable[str], *, dist: str,
                 carrier: str) -> str:
    """The tail of a ``released`` reason: what ``entry.retire_when.release`` makes of
    ``released_in``, and the fix when it names too little or too much.

    ``releases`` are the versions the tracker could look in (a tag it found for each); the
    earlier ones the gate also names are listed as not carrying ``carrier`` (what was looked
    for: "the merge commit", "a landing commit")."""
    spec = entry.retire_when.release
    if entry.upstream.distribution not in (None, entry.target.distribution):
        return (f"; retire_when.release is about {entry.target.distribution}, so no gate "
                f"can name a {dist} release (retire_when.upstream_released covers this)")
    if spec is None:
        return f"; retire_when has no release specifier. Fix: add release: '>={released_in}'"
    fixed = parse_version(released_in)
    if fixed is None or not spec.contains(fixed, prereleases=True):
        return (f"; retire_when.release {str(spec)!r} does not name it, so the patch never "
                f"retires on it. Fix: set release: '>={released_in}'")
    note = f", which retire_when.release {str(spec)!r} names"
    earlier = [v for v in releases if (parsed := parse_version(v)) is not None
               and parsed < fixed and spec.contains(parsed, prereleases=True)]
    if earlier:
        note += (f"; but it also names earlier releases ({', '.join(earlier)}) that do not "
                 f"carry {carrier}. Fix: narrow it to '>={released_in}' unless they carry a "
                 "backport")
    return note


def tag_name(template: str, version: str) -> str:
    """``template.format(version=version)``: the git tag of a release. A template that
    cannot format, or has no ``{version}`` field, raises :class:`TagTemplateError`."""
    try:
        tag = template.format(version=version)
    except (KeyError, IndexError, ValueError) as exc:
        raise TagTemplateError(template, f"cannot format it ({type(exc).__name__}: {exc})") \
            from None
    if tag == template:
        raise TagTemplateError(template, "it has no '{version}' field")
    return tag


def _tag_prefix(template: str) -> str:
    """What every tag ``template`` makes starts with (``core_v`` for ``core_v{version}``)."""
    marker = "\x00VERSION\x00"
    return tag_name(template, marker).partition(marker)[0]


def _listed(items: list[str], shown: int = 10) -> str:
    """``items`` joined, the first ``shown`` of them and how many more: a reason stays one
    readable line when PyPI lists thousands of releases."""
    head = ", ".join(items[:shown])
    return head + (f" and {len(items) - shown} more" if len(items) > shown else "")


def _day(moment: _dt.datetime | None) -> str:
    return "an unknown date" if moment is None else moment.date().isoformat()

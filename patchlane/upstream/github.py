"""GitHub: registry links, pull requests, issues, and which release tag contains a commit.

Every reader takes a :class:`~patchlane.upstream.http.Client` (the API base URL is its
``github_api``) and, optionally, a :class:`~patchlane.upstream.answers.Trace` that collects the
answers behind a larger question (:func:`patchlane.upstream.track.track` passes one).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, urlsplit

from packaging.version import Version

from ..common.versions import parse_version
from .answers import Trace, get_field, parse_timestamp
from .display import display_url
from .errors import MalformedResponse, NotFound, UpstreamError, UpstreamURLError
from .records import IssueState, PullState

if TYPE_CHECKING:
    from .http import Client

__all__ = [
    "MAX_COMPARES",
    "TagScan",
    "first_tag_containing",
    "issue_state",
    "parse_github_url",
    "pr_state",
    "release_containing",
    "require_kind",
    "scan_tags",
    "tag_names",
]

log = logging.getLogger(__name__)

_GITHUB_HOSTS = ("github.com", "www.github.com")
_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
_KINDS = {"issues": "issues", "pull": "pull", "pulls": "pull"}
_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,64}$")


# -- links ------------------------------------------------------------------------------------


def parse_github_url(url: str) -> tuple[str, str, Literal["issues", "pull"], int]:
    """``https://github.com/O/R/pull/N`` -> ``("O", "R", "pull", N)``; issues likewise.

    A trailing slash, a ``/files``-style tab, a query or a fragment are accepted and dropped.
    Anything else raises :class:`UpstreamURLError` quoting the input.
    """
    if not isinstance(url, str):
        raise UpstreamURLError(repr(url), "not a string")
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http"):
        raise UpstreamURLError(url, "not an http(s) URL")
    if (parts.hostname or "").lower() not in _GITHUB_HOSTS:
        raise UpstreamURLError(url, f"host {parts.hostname!r} is not github.com")
    segments = [s for s in parts.path.split("/") if s]
    if len(segments) < 4:
        raise UpstreamURLError(url, "too few path segments")
    owner, repo, kind_raw, number_raw = segments[:4]
    if len(segments) > 5:
        raise UpstreamURLError(url, "unexpected path after the number")
    if not _NAME_RE.match(owner) or not _NAME_RE.match(repo):
        raise UpstreamURLError(url, "invalid owner or repository name")
    kind = _KINDS.get(kind_raw)
    if kind is None:
        raise UpstreamURLError(url, f"{kind_raw!r} is neither 'issues' nor 'pull'")
    if not number_raw.isdigit() or int(number_raw) == 0:
        raise UpstreamURLError(url, f"{number_raw!r} is not an issue or pull request number")
    if repo.endswith(".git"):
        repo = repo[: -len(".git")]
    return owner, repo, "pull" if kind == "pull" else "issues", int(number_raw)


def require_kind(url: str, kind: Literal["issues", "pull"]) -> tuple[str, str, int]:
    """``(owner, repo, number)`` of a link that must be a pull request (``"pull"``) or an issue
    (``"issues"``); :class:`UpstreamURLError` otherwise."""
    owner, repo, found, number = parse_github_url(url)
    if found != kind:
        want = "a pull request (/pull/N)" if kind == "pull" else "an issue (/issues/N)"
        raise UpstreamURLError(url, f"expected {want} link")
    return owner, repo, number


# -- pull requests and issues -----------------------------------------------------------------


def pr_state(client: Client, url: str, *, trace: Trace | None = None) -> PullState:
    """The pull request behind a ``https://github.com/O/R/pull/N`` link."""
    trace = trace if trace is not None else Trace()
    owner, repo, number = require_kind(url, "pull")
    api = client.github_url(f"repos/{owner}/{repo}/pulls/{number}")
    data = trace.get(client, api)
    what = "the pull request"
    merged_at = parse_timestamp(get_field(data, "merged_at", str, api, what, optional=True),
                                api, "merged_at")
    merged_flag = data.get("merged") if isinstance(data, dict) else None
    merged = bool(merged_flag) if isinstance(merged_flag, bool) else merged_at is not None
    milestone = get_field(data, "milestone", dict, api, what, optional=True)
    return PullState(
        number=get_field(data, "number", int, api, what),
        state=_state(get_field(data, "state", str, api, what), api),
        merged=merged,
        merged_at=merged_at,
        merge_commit_sha=(get_field(data, "merge_commit_sha", str, api, what, optional=True)
                          if merged else None),
        milestone=None if milestone is None else get_field(milestone, "title", str, api,
                                                           "the milestone"),
        title=get_field(data, "title", str, api, what),
        url=get_field(data, "html_url", str, api, what, optional=True) or url,
    )


def issue_state(client: Client, url: str, *, trace: Trace | None = None) -> IssueState:
    """The issue behind a ``https://github.com/O/R/issues/N`` link."""
    trace = trace if trace is not None else Trace()
    owner, repo, number = require_kind(url, "issues")
    api = client.github_url(f"repos/{owner}/{repo}/issues/{number}")
    data = trace.get(client, api)
    what = "the issue"
    return IssueState(
        number=get_field(data, "number", int, api, what),
        state=_state(get_field(data, "state", str, api, what), api),
        closed_at=parse_timestamp(get_field(data, "closed_at", str, api, what, optional=True),
                                  api, "closed_at"),
        title=get_field(data, "title", str, api, what),
        url=get_field(data, "html_url", str, api, what, optional=True) or url,
        state_reason=get_field(data, "state_reason", str, api, what, optional=True),
    )


def _state(value: str, url: str) -> Literal["open", "closed"]:
    if value == "open":
        return "open"
    if value == "closed":
        return "closed"
    raise MalformedResponse(display_url(url), f"state {value!r} is neither 'open' nor 'closed'")


# -- which release tag contains a commit ------------------------------------------------------


MAX_COMPARES = 16
"""Compare requests one scan sends at most (one entry's tracking): a PyPI project with
thousands of releases since the merge must not cost thousands of requests. The scan goes in
version order from the first release uploaded after the merge, which is where a fix lands."""


@dataclass(frozen=True)
class TagScan:
    """Which of the tags scanned first contains a commit, and what the scan could not tell."""

    found: str | None
    missing: list[str]
    """Tags the repository does not have (from its tag list, or a compare answering 404), in
    scan order."""
    unchecked: list[str]
    """Tags not compared: past :data:`MAX_COMPARES`, in scan order."""


def tag_names(client: Client, owner: str, repo: str, prefix: str, *,
              trace: Trace | None = None) -> set[str] | None:
    """The repository's tags whose names start with ``prefix``, in one request (GitHub's
    ``git/matching-refs``); None when GitHub cannot list them (the scan then asks per tag)."""
    trace = trace if trace is not None else Trace()
    api = client.github_url(f"repos/{owner}/{repo}/git/matching-refs/"
                            f"{quote('tags/' + prefix, safe='/')}")
    try:
        data = trace.get(client, api)
    except (NotFound, MalformedResponse) as exc:  # an older server, an answer over the cap
        log.info("%s/%s: cannot list the tags starting %r (%s); comparing tag by tag", owner,
                 repo, prefix, exc)
        return None
    if not isinstance(data, list):
        raise MalformedResponse(display_url(api), f"expected a JSON list of refs, got "
                                f"{type(data).__name__}")
    names = set()
    for item in data:
        ref = get_field(item, "ref", str, api, "a ref")
        if ref.startswith("refs/tags/"):
            names.add(ref[len("refs/tags/"):])
    return names


def release_containing(client: Client, owner: str, repo: str, sha: str,
                       tags: Sequence[str]) -> str | None:
    """The first of ``tags`` in version order (the version is read from the end of the tag
    name) that contains commit ``sha``, by GitHub's compare API; ``None`` if none does.

    Tags GitHub does not know are skipped. The scan stops at the first hit, so later tags cost
    no request."""
    found, _ = first_tag_containing(client, owner, repo, sha, tags)
    return found


def first_tag_containing(client: Client, owner: str, repo: str, sha: str, tags: Iterable[str],
                         *, trace: Trace | None = None) -> tuple[str | None, list[str]]:
    """:func:`release_containing`, and also the tags GitHub does not know (in scan order)."""
    scan = scan_tags(client, owner, repo, sha, tags, trace=trace, limit=None)
    return scan.found, scan.missing


def scan_tags(client: Client, owner: str, repo: str, sha: str, tags: Iterable[str], *,
              trace: Trace | None = None, existing: Collection[str] | None = None,
              limit: int | None = MAX_COMPARES) -> TagScan:
    """The first of ``tags`` in version order that contains commit ``sha`` (GitHub's compare
    API), asking only about the tags in ``existing`` when given (the repository's tag list:
    the others are missing without a request), and at most ``limit`` of them (None: all)."""
    trace = trace if trace is not None else Trace()
    if not _SHA_RE.match(sha):
        raise UpstreamError(f"{sha!r} is not a commit sha; expected 7-64 hex digits")
    missing: list[str] = []
    ordered = _in_version_order(tags)
    asked = 0
    for at, tag in enumerate(ordered):
        if existing is not None and tag not in existing:
            missing.append(tag)
            continue
        if limit is not None and asked >= limit:
            rest = ordered[at:]
            return TagScan(None, missing + [t for t in rest if existing is not None
                                             and t not in existing],
                           [t for t in rest if existing is None or t in existing])
        asked += 1
        api = client.github_url(
            f"repos/{owner}/{repo}/compare/{quote(tag, safe='')}...{sha}")
        try:
            data = trace.get(client, api)
        except NotFound:
            log.info("%s/%s: tag %r (or commit %s) not found; skipping it", owner, repo, tag,
                     sha[:12])
            missing.append(tag)
            continue
        status = get_field(data, "status", str, api, "the comparison")
        # compare/BASE...HEAD: "behind" means HEAD (the commit) is an ancestor of BASE (the tag).
        if status in ("behind", "identical"):
            return TagScan(tag, missing, [])
        if status not in ("ahead", "diverged"):
            raise MalformedResponse(display_url(api), f"comparison status {status!r} is not "
                                    "one of ahead, behind, diverged, identical")
    return TagScan(None, missing, [])


def _tag_version(tag: str) -> Version | None:
    match = re.search(r"(\d+(?:\.\d+)*(?:[._-]?(?:a|b|rc|post|dev)\.?\d+)*)$", tag)
    if match is None:
        return None
    return parse_version(match.group(1))


def _in_version_order(tags: Iterable[str]) -> list[str]:
    indexed = list(enumerate(tags))

    def key(item: tuple[int, str]) -> tuple[int, Version, int]:
        version = _tag_version(item[1])
        # Tags without a version keep their given order, after the versioned ones.
        return (0, version, 0) if version is not None else (1, Version("0"), item[0])

    return [tag for _, tag in sorted(indexed, key=key)]

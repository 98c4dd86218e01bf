"""Upstream tracking: has the fix a registry entry carries landed upstream, and in which release?

For one :class:`~patchlane.registry.Entry` :func:`track` reads the linked GitHub issue and pull
request, the target distribution's releases on PyPI, and asks GitHub's compare API which release
tag first contains the PR's merge commit. The answer is a :class:`TrackReport` whose
:class:`Verdict` says what to do next (wait, chase a closed PR, or retire the patch) and whether
the entry's ``retire_when.release`` gate can name the release that carries the fix.

Only the CLI imports this module, and ``requests`` is imported inside the functions that send a
request, so ``import patchlane`` never pays for an HTTP stack.

HTTP behaviour (:class:`Client`):

* every JSON answer is cached on disk, one file per URL (named by the URL's sha256), written
  atomically; within ``ttl`` seconds the cache answers without a request, after that a
  conditional request (``If-None-Match`` / ``If-Modified-Since``) revalidates it. A cache file
  that cannot be read is ignored and replaced;
* connection errors, timeouts and 5xx answers are retried with exponential backoff;
* a rate limit (GitHub's 403 with ``X-RateLimit-Remaining: 0``, or 429 / ``Retry-After``) raises
  :class:`RateLimited` naming the reset time, unless a stale cached copy exists: that copy is
  returned marked ``stale=True``;
* ``offline`` answers from the cache only, whatever its age;
* a GitHub token is read from ``$GITHUB_TOKEN`` (configurable) at request time and sent only to
  the GitHub API base URL. It is never logged, cached, or put in an exception message.
"""

from __future__ import annotations

import datetime as _dt
import enum
import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, urlsplit, urlunsplit

from packaging.version import InvalidVersion, Version

from .._version import __version__
from ..errors import PatchlaneError
from ..evidence.manifest import atomic_write_json
from ..registry import Entry

if TYPE_CHECKING:
    import requests

__all__ = [
    "DEFAULT_TAG_TEMPLATES",
    "Client",
    "Fetched",
    "IssueState",
    "MalformedResponse",
    "NotFound",
    "OfflineMiss",
    "PullState",
    "RateLimited",
    "Release",
    "ServerError",
    "TagTemplateError",
    "TrackReport",
    "TrackerConfig",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamURLError",
    "UpstreamUnreachable",
    "Verdict",
    "default_cache_dir",
    "issue_state",
    "parse_github_url",
    "pr_state",
    "pypi_releases",
    "release_containing",
    "track",
]

log = logging.getLogger("patchlane.upstream.tracking")

CACHE_SCHEMA = 1

DEFAULT_TAG_TEMPLATES: Mapping[str, str] = {
    # How each target's PyPI version maps to the git tag of its upstream repository.
    "megatron-core": "core_v{version}",
    "torch": "v{version}",
    "triton": "v{version}",
}


# -- errors ------------------------------------------------------------------------------------


class UpstreamError(PatchlaneError):
    """Upstream could not answer a question. ``url`` is the request URL (never carries a token)."""

    exit_code = 14

    def __init__(self, message: str, *, url: str | None = None) -> None:
        self.url = url
        super().__init__(message)


class UpstreamURLError(UpstreamError, ValueError):
    """A registry link is not a GitHub issue or pull request URL."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(
            f"upstream link {url!r}: {problem}; expected "
            "'https://github.com/OWNER/REPO/issues/N' or 'https://github.com/OWNER/REPO/pull/N'. "
            "Fix: correct upstream.issue / upstream.pr in the registry",
            url=url,
        )


class TagTemplateError(UpstreamError, ValueError):
    """A tag template cannot turn a version into a tag name."""

    def __init__(self, template: str, problem: str) -> None:
        self.template = template
        super().__init__(
            f"tag template {template!r}: {problem}; expected a str.format template with one "
            "'{version}' field, such as 'core_v{version}' (megatron-core) or 'v{version}' (torch)"
        )


class NotFound(UpstreamError):
    """HTTP 404/410: the issue, PR, tag, commit or project does not exist (or is private)."""

    def __init__(self, url: str, status: int, hint: str) -> None:
        self.status = status
        super().__init__(f"GET {url}: HTTP {status} (not found). Fix: {hint}", url=url)


class RateLimited(UpstreamError):
    """The server refuses more requests until ``reset_at`` (UTC; None when it did not say)."""

    def __init__(self, url: str, status: int, reset_at: _dt.datetime | None, hint: str) -> None:
        self.status = status
        self.reset_at = reset_at
        when = (
            f"the limit resets at {_format_time(reset_at)}"
            if reset_at is not None
            else "the server did not say when the limit resets"
        )
        super().__init__(f"GET {url}: rate limited (HTTP {status}); {when}. Fix: {hint}", url=url)


class ServerError(UpstreamError):
    """The server kept answering 5xx through every retry."""

    def __init__(self, url: str, status: int, attempts: int) -> None:
        self.status = status
        self.attempts = attempts
        super().__init__(
            f"GET {url}: server error HTTP {status} {_tries(attempts)}. Fix: the service "
            "is having trouble; try again later, or use offline mode to answer from the cache",
            url=url,
        )


class UpstreamTimeout(UpstreamError):
    """Every attempt timed out."""

    def __init__(self, url: str, timeout: float, attempts: int) -> None:
        self.timeout = timeout
        self.attempts = attempts
        super().__init__(
            f"GET {url}: no answer within {timeout:g} s {_tries(attempts)}. Fix: check "
            "the network, raise the timeout, or use offline mode to answer from the cache",
            url=url,
        )


class UpstreamUnreachable(UpstreamError):
    """Every attempt failed to connect (DNS, refused, reset...)."""

    def __init__(self, url: str, reason: str, attempts: int) -> None:
        self.attempts = attempts
        super().__init__(
            f"GET {url}: cannot connect ({reason}) {_tries(attempts)}. Fix: check the "
            "network and the configured base URL, or use offline mode to answer from the cache",
            url=url,
        )


class MalformedResponse(UpstreamError):
    """The answer is not the JSON (or not the JSON shape) this module expects; never cached."""

    def __init__(self, url: str, problem: str) -> None:
        super().__init__(
            f"GET {url}: malformed response: {problem}. Fix: retry later; if it persists the "
            "API changed or the base URL points at something else (a proxy or login page)",
            url=url,
        )


class OfflineMiss(UpstreamError):
    """Offline mode was asked for something the cache does not hold."""

    def __init__(self, url: str, cache_file: Path) -> None:
        self.cache_file = cache_file
        super().__init__(
            f"GET {url}: offline and not in the cache ({cache_file}). Fix: run once without "
            "offline mode to fill the cache, or point the cache directory at a filled one",
            url=url,
        )


def _tries(attempts: int) -> str:
    return "on the only attempt (retries are off)" if attempts == 1 else \
        f"on all {attempts} attempts"


# -- configuration and the HTTP client --------------------------------------------------------


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/patchlane/upstream`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "patchlane" / "upstream"


@dataclass(frozen=True)
class TrackerConfig:
    github_api: str = "https://api.github.com"
    pypi: str = "https://pypi.org"
    cache_dir: Path = field(default_factory=default_cache_dir)
    ttl: float = 3600.0
    """Seconds a cached answer is used without asking the server again."""
    timeout: float = 10.0
    """Seconds for connecting and for each read, per attempt."""
    retries: int = 3
    """Extra attempts after the first for connection errors, timeouts and 5xx answers."""
    backoff: float = 0.5
    """Sleep before retry *n* (1-based) is ``backoff * 2 ** (n - 1)`` seconds."""
    offline: bool = False
    token_env: str = "GITHUB_TOKEN"
    """Environment variable holding a GitHub token; read at request time, never stored."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    """Seconds since the epoch; injectable so tests can age the cache without waiting."""

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.ttl < 0 or self.timeout <= 0 or self.backoff < 0:
            raise ValueError(
                f"ttl and backoff must be >= 0 and timeout > 0, got ttl={self.ttl}, "
                f"timeout={self.timeout}, backoff={self.backoff}"
            )


@dataclass(frozen=True)
class Fetched:
    """One JSON answer and where it came from."""

    url: str
    data: Any
    from_cache: bool
    """True when the body came from the cache (fresh hit, 304 revalidation, fallback, offline)."""
    stale: bool
    """True when the cached copy is older than the TTL and upstream did not confirm it
    (rate-limit fallback, or an old entry answered offline)."""
    fetched_at: _dt.datetime
    """When upstream last confirmed this body (UTC)."""
    stale_reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "data": self.data,
            "from_cache": self.from_cache,
            "stale": self.stale,
            "fetched_at": self.fetched_at.isoformat(),
            "stale_reason": self.stale_reason,
        }


@dataclass(frozen=True)
class _CacheEntry:
    data: Any
    fetched_at: float
    etag: str | None
    last_modified: str | None


class Client:
    """JSON over HTTP with an on-disk cache, retries and rate-limit handling.

    Use as a context manager (or call :meth:`close`) to release the connection pool.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config if config is not None else TrackerConfig()
        self._session: requests.Session | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    # -- URLs --------------------------------------------------------------------------------

    def github_url(self, path: str) -> str:
        return self.config.github_api.rstrip("/") + "/" + path.lstrip("/")

    def pypi_url(self, path: str) -> str:
        return self.config.pypi.rstrip("/") + "/" + path.lstrip("/")

    def cache_path(self, url: str) -> Path:
        return self.config.cache_dir / (hashlib.sha256(url.encode("utf-8")).hexdigest() + ".json")

    # -- the one entry point -----------------------------------------------------------------

    def get_json(self, url: str) -> Fetched:
        """GET ``url`` and decode its JSON body, through the cache.

        Raises :class:`OfflineMiss`, :class:`NotFound`, :class:`RateLimited` (only when no
        cached copy exists), :class:`ServerError`, :class:`UpstreamTimeout`,
        :class:`UpstreamUnreachable`, :class:`MalformedResponse` or :class:`UpstreamError`.
        """
        shown = _display_url(url)
        cached = self._read_cache(url)
        now = self.config.clock()
        if self.config.offline:
            if cached is None:
                raise OfflineMiss(shown, self.cache_path(url))
            stale = not self._fresh(cached, now)
            return self._from_cache(url, cached, stale=stale,
                                    reason="offline: cached copy older than the TTL"
                                    if stale else None)
        if cached is not None and self._fresh(cached, now):
            log.debug("cache hit for %s", shown)
            return self._from_cache(url, cached, stale=False)
        return self._request(url, shown, cached)

    # -- cache -------------------------------------------------------------------------------

    def _fresh(self, cached: _CacheEntry, now: float) -> bool:
        # A timestamp in the future (clock moved back) is not trusted as fresh.
        return 0 <= now - cached.fetched_at < self.config.ttl

    def _read_cache(self, url: str) -> _CacheEntry | None:
        path = self.cache_path(url)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("upstream cache file %s unreadable (%s); ignoring it", path,
                        exc.strerror or type(exc).__name__)
            return None
        try:
            record = json.loads(raw)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both
            record = None
        entry = _cache_entry(record, url)
        if entry is None:
            log.warning("upstream cache file %s for %s is corrupt; ignoring it, the next "
                        "successful fetch replaces it", path, _display_url(url))
        return entry

    def _write_cache(self, url: str, entry: _CacheEntry) -> None:
        path = self.cache_path(url)
        record = {
            "schema": CACHE_SCHEMA,
            "url": _display_url(url),  # never userinfo; the file name keys the full URL
            "fetched_at": entry.fetched_at,
            "etag": entry.etag,
            "last_modified": entry.last_modified,
            "data": entry.data,
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, record)
        except OSError as exc:
            # The answer is good; only its reuse is lost. Say so rather than fail the fetch.
            log.warning("cannot write upstream cache file %s (%s); continuing without caching",
                        path, exc.strerror or type(exc).__name__)

    def _from_cache(self, url: str, cached: _CacheEntry, *, stale: bool,
                    reason: str | None = None) -> Fetched:
        return Fetched(url=_display_url(url), data=cached.data, from_cache=True, stale=stale,
                       fetched_at=_utc(cached.fetched_at), stale_reason=reason)

    # -- HTTP --------------------------------------------------------------------------------

    def _headers(self, url: str, cached: _CacheEntry | None) -> dict[str, str]:
        headers = {"User-Agent": f"patchlane/{__version__}", "Accept": "application/json"}
        if _under(url, self.config.github_api):
            headers["Accept"] = "application/vnd.github+json"
            headers["X-GitHub-Api-Version"] = "2022-11-28"
            token = self._token()
            if token:
                headers["Authorization"] = f"Bearer {token}"
        if cached is not None:
            if cached.etag:
                headers["If-None-Match"] = cached.etag
            if cached.last_modified:
                headers["If-Modified-Since"] = cached.last_modified
        return headers

    def _get_session(self) -> requests.Session:
        if self._session is None:
            import requests

            self._session = requests.Session()
        return self._session

    def _request(self, url: str, shown: str, cached: _CacheEntry | None) -> Fetched:
        import requests

        cfg = self.config
        session = self._get_session()
        attempts = cfg.retries + 1
        failure: tuple[str, Any] = ("none", None)
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                delay = cfg.backoff * 2 ** (attempt - 2)
                log.info("retrying %s in %.2f s (attempt %d of %d)", shown, delay, attempt,
                         attempts)
                cfg.sleep(delay)
            log.debug("GET %s%s", shown, " (conditional)" if cached is not None else "")
            # Only the outcome leaves the except blocks: a requests exception references the
            # prepared request and its Authorization header, so none may be chained or kept.
            response = None
            try:
                response = session.get(url, headers=self._headers(url, cached),
                                       timeout=cfg.timeout, allow_redirects=True)
            except requests.Timeout:
                failure = ("timeout", None)
            except requests.ConnectionError as exc:
                failure = ("connection", _scrub(_describe(exc), self._token()))
            except requests.RequestException as exc:
                failure = ("request", _scrub(_describe(exc), self._token()))
            if response is None:
                if failure[0] == "request":
                    raise UpstreamError(f"GET {shown}: request failed ({failure[1]}). Fix: "
                                        "check the configured base URL", url=shown)
                continue
            with response:
                status = response.status_code
                if 500 <= status < 600:
                    failure = ("server", status)
                    continue
                return self._handle(url, shown, cached, response)
        kind, detail = failure
        if kind == "timeout":
            raise UpstreamTimeout(shown, cfg.timeout, attempts)
        if kind == "server":
            raise ServerError(shown, int(detail), attempts)
        raise UpstreamUnreachable(shown, str(detail), attempts)

    def _token(self) -> str:
        return os.environ.get(self.config.token_env, "").strip()

    def _handle(self, url: str, shown: str, cached: _CacheEntry | None,
                response: requests.Response) -> Fetched:
        status = response.status_code
        now = self.config.clock()
        if status == 304:
            if cached is None:
                raise MalformedResponse(shown, "HTTP 304 Not Modified to an unconditional "
                                        "request")
            refreshed = _CacheEntry(
                data=cached.data,
                fetched_at=now,
                etag=response.headers.get("ETag") or cached.etag,
                last_modified=response.headers.get("Last-Modified") or cached.last_modified,
            )
            self._write_cache(url, refreshed)
            log.debug("%s not modified; cache revalidated", shown)
            return self._from_cache(url, refreshed, stale=False)
        if status in (403, 429):
            limited, reset_at = _rate_limit(response, now)
            if limited:
                return self._rate_limited(url, shown, cached, status, reset_at)
        if status in (404, 410):
            raise NotFound(shown, status, self._not_found_hint(url))
        if 200 <= status < 300:
            try:
                data = json.loads(response.content)
            except ValueError as exc:
                snippet = response.content[:60].decode("utf-8", "replace")
                raise MalformedResponse(
                    shown, f"body is not JSON ({type(exc).__name__} at {_where(exc)}; starts "
                    f"{snippet!r})") from None
            fresh = _CacheEntry(data=data, fetched_at=now, etag=response.headers.get("ETag"),
                                last_modified=response.headers.get("Last-Modified"))
            self._write_cache(url, fresh)
            return Fetched(url=_display_url(url), data=data, from_cache=False, stale=False,
                           fetched_at=_utc(now))
        if status == 401:
            hint = (f"the token in ${self.config.token_env} was rejected; renew it or unset it"
                    if self._token() else "this resource needs authentication")
        elif status == 403:
            hint = f"access denied; a token in ${self.config.token_env} may lack a scope"
        else:
            hint = "unexpected status; check the URL and the configured base URL"
        raise UpstreamError(f"GET {shown}: HTTP {status} {response.reason or ''}".rstrip()
                            + f". Fix: {hint}", url=shown)

    def _rate_limited(self, url: str, shown: str, cached: _CacheEntry | None, status: int,
                      reset_at: _dt.datetime | None) -> Fetched:
        if _under(url, self.config.github_api) and not self._token():
            hint = (f"wait until then, or set ${self.config.token_env} to a GitHub token "
                    "(authenticated requests get a much higher limit)")
        else:
            hint = "wait until then, or use offline mode to answer from the cache"
        error = RateLimited(shown, status, reset_at, hint)
        if cached is None:
            raise error
        log.warning("%s; using the cached copy from %s", error, _format_time(
            _utc(cached.fetched_at)))
        return self._from_cache(url, cached, stale=True, reason=str(error))

    def _not_found_hint(self, url: str) -> str:
        if _under(url, self.config.github_api):
            extra = "" if self._token() else (
                f"; a private repository also answers 404 without a token in "
                f"${self.config.token_env}")
            return f"check the owner, repository, number, tag or commit in the URL{extra}"
        return "check the distribution name (as on PyPI) and the configured base URL"


def _rate_limit(response: requests.Response, now: float) -> tuple[bool, _dt.datetime | None]:
    """Whether a 403/429 is a rate limit, and when it resets (``None``: the server did not say).

    GitHub's primary limit is 403/429 with ``X-RateLimit-Remaining: 0`` and an epoch
    ``X-RateLimit-Reset``; its secondary limits and most other services send ``Retry-After``."""
    headers = response.headers
    retry_after = headers.get("Retry-After")
    if retry_after is not None:
        return True, _retry_after(retry_after, now)
    if headers.get("X-RateLimit-Remaining") == "0":
        try:
            return True, _utc(float(headers.get("X-RateLimit-Reset", "")))
        except (ValueError, OverflowError, OSError):
            return True, None
    return response.status_code == 429, None


def _cache_entry(record: object, url: str) -> _CacheEntry | None:
    """Validate a decoded cache record; ``None`` for anything not written by this module."""
    if not isinstance(record, dict) or record.get("schema") != CACHE_SCHEMA:
        return None
    if record.get("url") != _display_url(url) or "data" not in record:
        return None
    fetched_at = record.get("fetched_at")
    if not isinstance(fetched_at, (int, float)):
        return None
    etag, modified = record.get("etag"), record.get("last_modified")
    if not all(v is None or isinstance(v, str) for v in (etag, modified)):
        return None
    return _CacheEntry(data=record["data"], fetched_at=float(fetched_at), etag=etag,
                       last_modified=modified)


def _under(url: str, base: str) -> bool:
    base = base.rstrip("/")
    return url == base or url.startswith(base + "/")


def _display_url(url: str) -> str:
    """The URL without userinfo (``user:secret@``), for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _scrub(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def _describe(exc: BaseException) -> str:
    # Walk to the innermost cause: "Connection refused" beats urllib3's pool preamble.
    inner: BaseException = exc
    while True:
        nxt = inner.__cause__ or (inner.args[0] if inner.args and
                                  isinstance(inner.args[0], BaseException) else None)
        if nxt is None or nxt is inner:
            break
        inner = nxt
    reason = getattr(inner, "reason", None)
    if isinstance(reason, BaseException):
        inner = reason
    text = str(inner)
    return f"{type(inner).__name__}: {text}" if text else type(inner).__name__


def _where(exc: ValueError) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"line {exc.lineno} column {exc.colno}"
    return "decoding"


def _utc(seconds: float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)


def _format_time(moment: _dt.datetime) -> str:
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _retry_after(value: str, now: float) -> _dt.datetime | None:
    value = value.strip()
    if value.isdigit():
        return _utc(now + int(value))
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)


# -- GitHub links -----------------------------------------------------------------------------

_GITHUB_HOSTS = ("github.com", "www.github.com")
_NAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
_KINDS = {"issues": "issues", "pull": "pull", "pulls": "pull"}


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


# -- records ----------------------------------------------------------------------------------


def _iso(moment: _dt.datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


@dataclass(frozen=True)
class PullState:
    number: int
    state: Literal["open", "closed"]
    merged: bool
    merged_at: _dt.datetime | None
    merge_commit_sha: str | None
    """Only set when merged (GitHub also reports a test-merge sha for open PRs; it is dropped)."""
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


@dataclass(frozen=True)
class Release:
    version: str
    """As PyPI spells it; :attr:`parsed` orders it."""
    upload_time: _dt.datetime
    """Earliest upload of a non-yanked file of this release (UTC)."""

    @property
    def parsed(self) -> Version:
        return Version(self.version)

    def as_dict(self) -> dict[str, Any]:
        return {"version": self.version, "upload_time": self.upload_time.isoformat()}


class Verdict(str, enum.Enum):
    NO_UPSTREAM_LINK = "no-upstream-link"
    """The entry links no upstream PR: nothing to track."""
    OPEN = "open"
    CLOSED_UNMERGED = "closed-unmerged"
    MERGED_UNRELEASED = "merged-unreleased"
    RELEASED = "released"


@dataclass(frozen=True)
class TrackReport:
    entry_id: str
    issue: IssueState | None
    pr: PullState | None
    released_in: str | None
    """First release (in version order) of the target distribution whose tag contains the
    PR's merge commit."""
    latest_release: str | None
    """Newest final release of the target distribution (only looked up for merged PRs)."""
    verdict: Verdict
    reason: str
    gate_names_release: bool
    """Whether ``retire_when.release`` contains ``released_in``: the retirement evidence needs a
    release the gate can name. Always False when the fix ships in another distribution
    (``upstream.distribution``) than the one the gate reads."""
    stale: bool = False
    """Some answer came from a cache past its TTL (rate limit or offline)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "issue": None if self.issue is None else self.issue.as_dict(),
            "pr": None if self.pr is None else self.pr.as_dict(),
            "released_in": self.released_in,
            "latest_release": self.latest_release,
            "verdict": self.verdict.value,
            "reason": self.reason,
            "gate_names_release": self.gate_names_release,
            "stale": self.stale,
        }


# -- reading answers --------------------------------------------------------------------------


class _Trace:
    """Collects every :class:`Fetched` behind one answer, so reports can say it was stale."""

    def __init__(self) -> None:
        self.fetched: list[Fetched] = []

    def get(self, client: Client, url: str) -> Any:
        fetched = client.get_json(url)
        self.fetched.append(fetched)
        return fetched.data

    @property
    def stale(self) -> bool:
        return any(f.stale for f in self.fetched)


def _field(data: Any, key: str, types: type | tuple[type, ...], url: str, what: str,
           *, optional: bool = False) -> Any:
    if not isinstance(data, dict):
        raise MalformedResponse(_display_url(url), f"expected a JSON object ({what}), got "
                                f"{type(data).__name__}")
    value = data.get(key)
    if value is None and optional:
        return None
    wrong_bool = isinstance(value, bool) and bool not in (
        types if isinstance(types, tuple) else (types,))
    if wrong_bool or not isinstance(value, types):
        raise MalformedResponse(_display_url(url), f"{what} has no valid {key!r} "
                                f"(found {value!r})")
    return value


def _timestamp(value: str | None, url: str, key: str) -> _dt.datetime | None:
    if value is None:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):  # fromisoformat only learned 'Z' in 3.11
        text = text[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise MalformedResponse(_display_url(url), f"{key} {value!r} is not an ISO 8601 "
                                "timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)


def _state(value: str, url: str) -> Literal["open", "closed"]:
    if value == "open":
        return "open"
    if value == "closed":
        return "closed"
    raise MalformedResponse(_display_url(url), f"state {value!r} is neither 'open' nor 'closed'")


def _expect_kind(url: str, kind: str) -> tuple[str, str, int]:
    owner, repo, found, number = parse_github_url(url)
    if found != kind:
        want = "a pull request (/pull/N)" if kind == "pull" else "an issue (/issues/N)"
        raise UpstreamURLError(url, f"expected {want} link")
    return owner, repo, number


def _pr_state(client: Client, url: str, trace: _Trace) -> PullState:
    owner, repo, number = _expect_kind(url, "pull")
    api = client.github_url(f"repos/{owner}/{repo}/pulls/{number}")
    data = trace.get(client, api)
    what = "the pull request"
    merged_at = _timestamp(_field(data, "merged_at", str, api, what, optional=True), api,
                           "merged_at")
    merged_flag = data.get("merged") if isinstance(data, dict) else None
    merged = bool(merged_flag) if isinstance(merged_flag, bool) else merged_at is not None
    milestone = _field(data, "milestone", dict, api, what, optional=True)
    return PullState(
        number=_field(data, "number", int, api, what),
        state=_state(_field(data, "state", str, api, what), api),
        merged=merged,
        merged_at=merged_at,
        merge_commit_sha=(_field(data, "merge_commit_sha", str, api, what, optional=True)
                          if merged else None),
        milestone=None if milestone is None else _field(milestone, "title", str, api,
                                                        "the milestone"),
        title=_field(data, "title", str, api, what),
        url=_field(data, "html_url", str, api, what, optional=True) or url,
    )


def _issue_state(client: Client, url: str, trace: _Trace) -> IssueState:
    owner, repo, number = _expect_kind(url, "issues")
    api = client.github_url(f"repos/{owner}/{repo}/issues/{number}")
    data = trace.get(client, api)
    what = "the issue"
    return IssueState(
        number=_field(data, "number", int, api, what),
        state=_state(_field(data, "state", str, api, what), api),
        closed_at=_timestamp(_field(data, "closed_at", str, api, what, optional=True), api,
                             "closed_at"),
        title=_field(data, "title", str, api, what),
        url=_field(data, "html_url", str, api, what, optional=True) or url,
        state_reason=_field(data, "state_reason", str, api, what, optional=True),
    )


def _pypi_releases(client: Client, distribution: str, trace: _Trace) -> list[Release]:
    api = client.pypi_url(f"pypi/{quote(distribution, safe='')}/json")
    data = trace.get(client, api)
    releases = _field(data, "releases", dict, api, "the PyPI project")
    found: list[Release] = []
    for version, files in releases.items():
        try:
            Version(version)
        except InvalidVersion:
            log.debug("%s: skipping non-PEP 440 version %r", distribution, version)
            continue
        if not isinstance(files, list):
            raise MalformedResponse(_display_url(api), f"release {version!r} files are "
                                    f"{type(files).__name__}, expected a list")
        times = []
        for file in files:
            if not isinstance(file, dict) or file.get("yanked"):
                continue
            stamp = file.get("upload_time_iso_8601") or file.get("upload_time")
            if isinstance(stamp, str):
                moment = _timestamp(stamp, api, f"release {version} upload_time")
                if moment is not None:
                    times.append(moment)
        if times:  # a release with no files, or only yanked ones, cannot be installed
            found.append(Release(version=version, upload_time=min(times)))
    found.sort(key=lambda r: r.parsed)
    return found


def _tag_version(tag: str) -> Version | None:
    match = re.search(r"(\d+(?:\.\d+)*(?:[._-]?(?:a|b|rc|post|dev)\.?\d+)*)$", tag)
    if match is None:
        return None
    try:
        return Version(match.group(1))
    except InvalidVersion:
        return None


def _in_version_order(tags: Iterable[str]) -> list[str]:
    indexed = list(enumerate(tags))

    def key(item: tuple[int, str]) -> tuple[int, Version, int]:
        version = _tag_version(item[1])
        # Tags without a version keep their given order, after the versioned ones.
        return (0, version, 0) if version is not None else (1, Version("0"), item[0])

    return [tag for _, tag in sorted(indexed, key=key)]


_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,64}$")


def _scan_tags(client: Client, owner: str, repo: str, sha: str, tags: Iterable[str],
               trace: _Trace) -> tuple[str | None, list[str]]:
    """The first tag (version order) containing ``sha``, and the tags GitHub does not know."""
    if not _SHA_RE.match(sha):
        raise UpstreamError(f"{sha!r} is not a commit sha; expected 7-64 hex digits")
    missing: list[str] = []
    for tag in _in_version_order(tags):
        api = client.github_url(
            f"repos/{owner}/{repo}/compare/{quote(tag, safe='')}...{sha}")
        try:
            data = trace.get(client, api)
        except NotFound:
            log.info("%s/%s: tag %r (or commit %s) not found; skipping it", owner, repo, tag,
                     sha[:12])
            missing.append(tag)
            continue
        status = _field(data, "status", str, api, "the comparison")
        # compare/BASE...HEAD: "behind" means HEAD (the commit) is an ancestor of BASE (the tag).
        if status in ("behind", "identical"):
            return tag, missing
        if status not in ("ahead", "diverged"):
            raise MalformedResponse(_display_url(api), f"comparison status {status!r} is not "
                                    "one of ahead, behind, diverged, identical")
    return None, missing


def pr_state(client: Client, url: str) -> PullState:
    """The pull request behind a ``https://github.com/O/R/pull/N`` link."""
    return _pr_state(client, url, _Trace())


def issue_state(client: Client, url: str) -> IssueState:
    """The issue behind a ``https://github.com/O/R/issues/N`` link."""
    return _issue_state(client, url, _Trace())


def pypi_releases(client: Client, distribution: str) -> list[Release]:
    """Installable releases of ``distribution`` on PyPI, oldest first (PEP 440 order).

    Yanked files are skipped; a release whose files are all yanked is left out. Prereleases are
    included (``Release.parsed.is_prerelease`` tells them apart)."""
    return _pypi_releases(client, distribution, _Trace())


def release_containing(client: Client, owner: str, repo: str, sha: str,
                       tags: Sequence[str]) -> str | None:
    """The first of ``tags`` in version order (the version is read from the end of the tag
    name) that contains commit ``sha``, by GitHub's compare API; ``None`` if none does.

    Tags GitHub does not know are skipped. The scan stops at the first hit, so later tags cost
    no request."""
    found, _ = _scan_tags(client, owner, repo, sha, tags, _Trace())
    return found


# -- the verdict ------------------------------------------------------------------------------


def _tag(template: str, version: str) -> str:
    try:
        tag = template.format(version=version)
    except (KeyError, IndexError, ValueError) as exc:
        raise TagTemplateError(template, f"cannot format it ({type(exc).__name__}: {exc})") \
            from None
    if tag == template:
        raise TagTemplateError(template, "it has no '{version}' field")
    return tag


def _day(moment: _dt.datetime | None) -> str:
    return "an unknown date" if moment is None else moment.date().isoformat()


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
    PR merged into*, which errs on the side of retiring later.
    """
    _tag(tag_template, "0")  # fail on a bad template before any request
    trace = _Trace()
    issue = _issue_state(client, entry.upstream.issue, trace) if entry.upstream.issue else None

    same_dist = entry.upstream.distribution in (None, entry.target.distribution)

    def report(verdict: Verdict, reason: str, pr: PullState | None = None,
               released_in: str | None = None, latest: str | None = None) -> TrackReport:
        spec = entry.retire_when.release
        names = (released_in is not None and spec is not None and same_dist
                 and spec.contains(released_in, prereleases=True))
        return TrackReport(entry_id=entry.id, issue=issue, pr=pr, released_in=released_in,
                           latest_release=latest, verdict=verdict, reason=reason,
                           gate_names_release=names, stale=trace.stale)

    if not entry.upstream.pr:
        issue_note = (f"; issue #{issue.number} is {issue.state}" if issue is not None else "")
        return report(Verdict.NO_UPSTREAM_LINK,
                      f"the entry links no upstream pull request{issue_note}. Fix: add "
                      "upstream.pr once a fix is proposed upstream, so it can be tracked")
    pr = _pr_state(client, entry.upstream.pr, trace)
    if pr.state == "open":
        return report(Verdict.OPEN, f"PR #{pr.number} is open; keep carrying the patch", pr)
    if not pr.merged:
        return report(Verdict.CLOSED_UNMERGED,
                      f"PR #{pr.number} was closed without merging; keep carrying the patch and "
                      "point upstream.pr at the change that replaced it (or re-propose it)", pr)
    owner, repo, _ = _expect_kind(entry.upstream.pr, "pull")
    if pr.merge_commit_sha is None:
        raise MalformedResponse(
            _display_url(client.github_url(f"repos/{owner}/{repo}/pulls/{pr.number}")),
            "the pull request is merged but has no merge_commit_sha")
    # The fix may ship in another distribution than the one the entry gates (a numpy pin
    # fixed in triton): upstream.distribution names it.
    dist = entry.upstream.distribution or entry.target.distribution
    if not dist:
        raise UpstreamError(f"entry {entry.id!r} has no target.distribution: nothing says "
                            "which PyPI releases could carry the fix. Fix: add target:"
                            " {distribution: ...} (or upstream.distribution) to the entry")
    releases = [r for r in _pypi_releases(client, dist, trace)
                if include_prereleases or not r.parsed.is_prerelease]
    latest = releases[-1].version if releases else None
    merged_at = pr.merged_at
    candidates = [r for r in releases if merged_at is None or r.upload_time >= merged_at]
    sha = pr.merge_commit_sha
    tag_of = {_tag(tag_template, r.version): r.version for r in candidates}
    found, missing = _scan_tags(client, owner, repo, sha, list(tag_of), trace)
    merged_note = f"PR #{pr.number} merged {_day(merged_at)} as {sha[:12]}"
    if found is None:
        if not candidates:
            why = f"no release of {dist} was uploaded since"
        else:
            names = ", ".join(r.version for r in candidates)
            why = f"none of the {dist} releases uploaded since ({names}) contains it"
            if missing:
                why += (f"; tags not found in {owner}/{repo}: {', '.join(missing)} (check the "
                        f"tag template {tag_template!r})")
        return report(Verdict.MERGED_UNRELEASED,
                      f"{merged_note}; {why}. Keep carrying the patch until a release has it",
                      pr, latest=latest)
    released_in = tag_of[found]
    reason = f"{merged_note}; first released in {dist} {released_in} (tag {found})"
    spec = entry.retire_when.release
    if not same_dist:
        reason += (f"; retire_when.release is about {entry.target.distribution}, so no gate "
                   f"can name a {dist} release (retire_when.upstream_released covers this)")
    elif spec is None:
        reason += (f"; retire_when has no release specifier. Fix: add release: "
                   f"'>={released_in}'")
    elif spec.contains(released_in, prereleases=True):
        reason += f", which retire_when.release {str(spec)!r} names"
        unknown = {tag_of[tag] for tag in missing}
        earlier = [r.version for r in releases
                   if r.parsed < Version(released_in) and r.version not in unknown
                   and spec.contains(r.version, prereleases=True)]
        if earlier:
            reason += (f"; but it also names earlier releases ({', '.join(earlier)}) that do "
                       "not carry the merge commit. Fix: narrow it to "
                       f"'>={released_in}' unless they carry a backport")
    else:
        reason += (f"; retire_when.release {str(spec)!r} does not name it, so the patch never "
                   f"retires on it. Fix: set release: '>={released_in}'")
    return report(Verdict.RELEASED, reason, pr, released_in=released_in, latest=latest)

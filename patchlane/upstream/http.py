"""The HTTP client upstream tracking asks GitHub and PyPI through: JSON over GET, cached.

:meth:`Client.get_json` is the one entry point. It returns a :class:`Fetched` (the decoded body
and where it came from) or raises one of :mod:`patchlane.upstream.errors`:

* every JSON answer is cached on disk (:mod:`patchlane.upstream.cache`); within ``ttl``
  seconds the cache answers without a request, after that a conditional request
  (``If-None-Match`` / ``If-Modified-Since``) revalidates it. A "not found" answer (404, 410)
  is cached under the same rules and raises :class:`NotFound` again from the cache (offline
  too);
* connection errors, timeouts and 5xx answers are retried with exponential backoff by urllib3's
  ``Retry`` (:mod:`patchlane.upstream.retries`);
* a rate limit (GitHub's 403 with ``X-RateLimit-Remaining: 0``, or 429 / ``Retry-After``) raises
  :class:`RateLimited` naming the reset time, unless a stale cached copy exists: that copy is
  returned marked ``stale=True``;
* ``offline`` answers from the cache only, whatever its age;
* a GitHub token is read from ``$GITHUB_TOKEN`` (configurable) at request time and sent only to
  the GitHub API base URL. It is never logged, cached, or put in an exception message.

``requests`` is imported when the first request is sent, so importing this module (and
``import patchlane``) never pays for an HTTP stack.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from .cache import NOT_FOUND, CacheEntry, ResponseCache, default_cache_dir
from .display import display_url, format_time, utc
from .errors import (
    MalformedResponse,
    NotFound,
    OfflineMiss,
    RateLimited,
    ServerError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
)

if TYPE_CHECKING:
    import requests

__all__ = ["Client", "Fetched", "TrackerConfig"]

log = logging.getLogger(__name__)


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
    """Sleep before retry *n* (1-based) is ``backoff * 2 ** (n - 1)`` seconds (a 5xx answer's
    ``Retry-After`` instead, up to ``retries.RETRY_AFTER_MAX``)."""
    offline: bool = False
    token_env: str = "GITHUB_TOKEN"
    """Environment variable holding a GitHub token; read at request time, never stored."""
    deadline: float = 60.0
    """Seconds one answer may take in all (connecting, every redirect, the whole body): a
    server that trickles a byte every few seconds never trips the per-read timeout."""
    max_body: int = 8 * 2**20
    """Bytes of one answer at most (GitHub's and PyPI's JSON are far smaller); more is refused
    and never cached."""
    max_redirects: int = 5
    """Redirects followed, each only within the same scheme, host and port."""
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    clock: Callable[[], float] = field(default=time.time, repr=False, compare=False)
    """Seconds since the epoch; injectable so tests can age the cache without waiting."""

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, got {self.retries}")
        if self.deadline <= 0 or self.max_body <= 0 or self.max_redirects < 0:
            raise ValueError(f"deadline and max_body must be > 0 and max_redirects >= 0, got "
                             f"{self.deadline}, {self.max_body}, {self.max_redirects}")
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


class Client:
    """JSON over HTTP with an on-disk cache, retries and rate-limit handling.

    Use as a context manager (or call :meth:`close`) to release the connection pool.
    """

    def __init__(self, config: TrackerConfig | None = None) -> None:
        self.config = config if config is not None else TrackerConfig()
        self.cache = ResponseCache(self.config.cache_dir)
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
        return self.cache.path(url)

    # -- the one entry point -----------------------------------------------------------------

    def get_json(self, url: str) -> Fetched:
        """GET ``url`` and decode its JSON body, through the cache.

        Raises :class:`OfflineMiss`, :class:`NotFound`, :class:`RateLimited` (only when no
        cached copy exists), :class:`ServerError`, :class:`UpstreamTimeout`,
        :class:`UpstreamUnreachable`, :class:`MalformedResponse` or :class:`UpstreamError`.
        """
        shown = display_url(url)
        cached = self.cache.read(url)
        if cached is not None and cached.not_found and not cached.authenticated \
                and self._sends_token(url):
            cached = None  # "not found" without a token may be a private repository: ask
        now = self.config.clock()
        if self.config.offline:
            if cached is None:
                raise OfflineMiss(shown, self.cache_path(url))
            stale = not cached.is_fresh(now, self.config.ttl)
            return self._from_cache(url, cached, stale=stale,
                                    reason="offline: cached copy older than the TTL"
                                    if stale else None)
        if cached is not None and cached.is_fresh(now, self.config.ttl):
            log.debug("cache hit for %s", shown)
            return self._from_cache(url, cached, stale=False)
        return self._request(url, shown, cached)

    def _from_cache(self, url: str, cached: CacheEntry, *, stale: bool,
                    reason: str | None = None) -> Fetched:
        if cached.not_found:
            raise NotFound(display_url(url), cached.status,
                           self._not_found_hint(url) + " (a cached answer, from "
                           f"{format_time(utc(cached.fetched_at))}; asked again once it is "
                           f"{self.config.ttl:g} s old, or with another cache directory)")
        return Fetched(url=display_url(url), data=cached.data, from_cache=True, stale=stale,
                       fetched_at=utc(cached.fetched_at), stale_reason=reason)

    # -- HTTP --------------------------------------------------------------------------------

    def _headers(self, url: str, cached: CacheEntry | None) -> dict[str, str]:
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
            from .retries import retrying_session  # imports requests: only when needed

            self._session = retrying_session(self.config.retries, self.config.backoff,
                                             self.config.sleep)
        return self._session

    def _request(self, url: str, shown: str, cached: CacheEntry | None) -> Fetched:
        import requests

        from .retries import attempts_made, classify_failure

        cfg = self.config
        session = self._get_session()
        log.debug("GET %s%s", shown, " (conditional)" if cached is not None else "")
        # Only the outcome leaves the except block: a requests exception references the
        # prepared request and its Authorization header, so none may be chained or kept.
        failure, detail = "request", ""
        deadline = time.monotonic() + cfg.deadline
        target = url
        for _hop in range(cfg.max_redirects + 1):
            response = None
            try:
                response = session.get(target, headers=self._headers(url, cached),
                                       timeout=cfg.timeout, allow_redirects=False, stream=True)
            except requests.RequestException as exc:
                failure, detail = classify_failure(exc), _scrub(_describe(exc), self._token())
            if response is None:
                attempts = cfg.retries + 1  # urllib3 gives up on an error only when all spent
                if failure == "timeout":
                    raise UpstreamTimeout(shown, cfg.timeout, attempts)
                if failure == "connection":
                    raise UpstreamUnreachable(shown, detail, attempts)
                raise UpstreamError(f"GET {shown}: request failed ({detail}). Fix: "
                                    "check the configured base URL", url=shown)
            with response:
                status = response.status_code
                if status in (301, 302, 303, 307, 308) and response.headers.get("Location"):
                    target = _same_origin_redirect(target, response.headers["Location"], shown)
                    continue
                if 500 <= status < 600:  # retried by urllib3 already: this is the last answer
                    raise ServerError(shown, status, attempts_made(response, cfg.retries + 1))
                body = _read_body(response, shown, deadline, cfg)
                return self._handle(url, shown, cached, response, body)
        raise UpstreamError(f"GET {shown}: more than {cfg.max_redirects} redirects. Fix: "
                            "check the configured base URL", url=shown)

    def _token(self) -> str:
        return os.environ.get(self.config.token_env, "").strip()

    def _sends_token(self, url: str) -> bool:
        return _under(url, self.config.github_api) and bool(self._token())

    def _handle(self, url: str, shown: str, cached: CacheEntry | None,
                response: requests.Response, body: bytes) -> Fetched:
        status = response.status_code
        now = self.config.clock()
        if status == 304:
            if cached is None:
                raise MalformedResponse(shown, "HTTP 304 Not Modified to an unconditional "
                                        "request")
            refreshed = CacheEntry(
                data=cached.data,
                fetched_at=now,
                etag=response.headers.get("ETag") or cached.etag,
                last_modified=response.headers.get("Last-Modified") or cached.last_modified,
                status=cached.status, authenticated=cached.authenticated,
            )
            self.cache.write(url, refreshed)
            log.debug("%s not modified; cache revalidated", shown)
            return self._from_cache(url, refreshed, stale=False)
        if status in (403, 429):
            limited, reset_at = _rate_limit(response, now)
            if limited:
                return self._rate_limited(url, shown, cached, status, reset_at)
        if status in NOT_FOUND:
            # Cached like any answer: the same missing tag (a tag template that matches no
            # release) is then asked about once per TTL, not once per run.
            self.cache.write(url, CacheEntry(data=None, fetched_at=now,
                                             etag=response.headers.get("ETag"),
                                             last_modified=response.headers.get("Last-Modified"),
                                             status=status,
                                             authenticated=self._sends_token(url)))
            raise NotFound(shown, status, self._not_found_hint(url))
        if 200 <= status < 300:
            try:
                data = json.loads(body)
            except ValueError as exc:
                snippet = body[:60].decode("utf-8", "replace")
                raise MalformedResponse(
                    shown, f"body is not JSON ({type(exc).__name__} at {_where(exc)}; starts "
                    f"{snippet!r})") from None
            except RecursionError:
                raise MalformedResponse(shown, "body is JSON nested too deeply to read "
                                        f"({len(body)} bytes)") from None
            fresh = CacheEntry(data=data, fetched_at=now, etag=response.headers.get("ETag"),
                               last_modified=response.headers.get("Last-Modified"))
            self.cache.write(url, fresh)
            return Fetched(url=display_url(url), data=data, from_cache=False, stale=False,
                           fetched_at=utc(now))
        if status == 401:
            hint = (f"the token in ${self.config.token_env} was rejected; renew it or unset it"
                    if self._token() else "this resource needs authentication")
        elif status == 403:
            hint = f"access denied; a token in ${self.config.token_env} may lack a scope"
        else:
            hint = "unexpected status; check the URL and the configured base URL"
        raise UpstreamError(f"GET {shown}: HTTP {status} {response.reason or ''}".rstrip()
                            + f". Fix: {hint}", url=shown)

    def _rate_limited(self, url: str, shown: str, cached: CacheEntry | None, status: int,
                      reset_at: _dt.datetime | None) -> Fetched:
        if _under(url, self.config.github_api) and not self._token():
            hint = (f"wait until then, or set ${self.config.token_env} to a GitHub token "
                    "(authenticated requests get a much higher limit)")
        else:
            hint = "wait until then, or use offline mode to answer from the cache"
        error = RateLimited(shown, status, reset_at, hint)
        if cached is None:
            raise error
        log.warning("%s; using the cached copy from %s", error,
                    format_time(utc(cached.fetched_at)))
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
            return True, utc(float(headers.get("X-RateLimit-Reset", "")))
        except (ValueError, OverflowError, OSError):
            return True, None
    return response.status_code == 429, None


def _same_origin_redirect(current: str, location: str, shown: str) -> str:
    """The absolute redirect target, when it stays on ``current``'s scheme, host and port: an
    answer from another host must never be cached under the URL that was asked."""
    from urllib.parse import urljoin, urlsplit

    target = urljoin(current, location)
    here, there = urlsplit(current), urlsplit(target)
    if (here.scheme, here.hostname, here.port) != (there.scheme, there.hostname, there.port):
        raise UpstreamError(f"GET {shown}: redirected to another host ({display_url(target)}); "
                            "not followed. Fix: point the base URL at the server that answers",
                            url=shown)
    return target


def _read_body(response: requests.Response, shown: str, deadline: float,
               cfg: TrackerConfig) -> bytes:
    """The whole body within the request's deadline and size cap."""
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > cfg.max_body:
        raise MalformedResponse(shown, f"body of {declared} bytes is over the "
                                f"{cfg.max_body}-byte cap; not read")
    chunks: list[bytes] = []
    size = 0
    import requests

    raw = response.raw
    try:
        while True:
            # read1: whatever has arrived (each socket read bounded by the per-read timeout),
            # so the deadline is checked between arrivals however slowly they come.
            chunk = raw.read1(65536, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if size > cfg.max_body:
                raise MalformedResponse(shown, f"body over the {cfg.max_body}-byte cap; "
                                        "not read further")
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise UpstreamTimeout(shown, cfg.deadline, 1)
    except (requests.RequestException, OSError, urllib3_errors()) as exc:
        raise UpstreamError(f"GET {shown}: reading the body failed ({type(exc).__name__}). "
                            "Fix: retry later", url=shown) from None
    return b"".join(chunks)


def urllib3_errors() -> type[BaseException]:
    from urllib3.exceptions import HTTPError

    return HTTPError


_LATEST_WAIT = 366 * 24 * 3600.0
"""A Retry-After further away than a year is not a wait: treated as unknown."""


def _retry_after(value: str, now: float) -> _dt.datetime | None:
    value = value.strip()
    if value.isdigit():
        seconds = int(value) if len(value) < 12 else None
        return None if seconds is None or seconds > _LATEST_WAIT else utc(now + seconds)
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)


def _under(url: str, base: str) -> bool:
    base = base.rstrip("/")
    return url == base or url.startswith(base + "/")


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

"""What can go wrong asking upstream, one class per way it fails.

Every class is an :class:`UpstreamError`, itself a
:class:`patchlane.common.errors.PatchlaneError` whose exit code is
:attr:`ExitCode.UPSTREAM_UNREACHABLE <patchlane.common.exit_codes.ExitCode>`. Each message
names the URL (never with a token or userinfo: callers pass it through
:func:`~patchlane.upstream.display.display_url`), what happened, and the fix.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ..common.errors import PatchlaneError
from ..common.exit_codes import ExitCode
from .display import format_time

__all__ = [
    "MalformedResponse",
    "NotFound",
    "OfflineMiss",
    "RateLimited",
    "ServerError",
    "TagTemplateError",
    "UpstreamError",
    "UpstreamTimeout",
    "UpstreamURLError",
    "UpstreamUnreachable",
]


class UpstreamError(PatchlaneError):
    """Upstream could not answer a question. ``url`` is the request URL (never carries a token)."""

    exit_code = ExitCode.UPSTREAM_UNREACHABLE

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
            f"the limit resets at {format_time(reset_at)}"
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
    """The answer is not the JSON (or not the JSON shape) this package expects; never cached."""

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

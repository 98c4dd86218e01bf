"""Retrying GET requests: urllib3's ``Retry``, mounted on a ``requests`` session.

This module imports ``requests`` and ``urllib3``; :class:`~patchlane.upstream.http.Client`
imports it only when it sends its first request, so importing the rest of
``patchlane.upstream`` never loads an HTTP stack.

What is retried (``TrackerConfig.retries`` extra attempts, counted together):

* connection errors and timeouts;
* answers with a 5xx status. A ``Retry-After`` on such an answer is honoured, up to
  :data:`RETRY_AFTER_MAX` seconds; otherwise retry *n* (1-based) waits
  ``backoff * 2 ** (n - 1)`` seconds (0.5, 1, 2 s by default).

What is not: only ``GET`` is sent. A rate limit (429, or GitHub's 403) is never waited out,
even with ``Retry-After``: the client answers it from a cached copy or raises ``RateLimited``
naming the reset time, which is better than blocking a command for an hour.

Every wait goes through the client's injectable ``sleep``, so tests never wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InvalidHeader, NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3TimeoutError
from urllib3.util.retry import Retry

if TYPE_CHECKING:
    from typing import Self

    from urllib3.response import BaseHTTPResponse

__all__ = [
    "RETRY_AFTER_MAX",
    "RETRY_STATUSES",
    "ClientRetry",
    "Failure",
    "attempts_made",
    "classify_failure",
    "retrying_session",
]

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset(range(500, 600))
RETRY_AFTER_MAX = 60
"""Seconds: a longer ``Retry-After`` on a 5xx is cut to this (urllib3's default is 6 hours)."""

Failure = Literal["timeout", "connection", "request"]


class ClientRetry(Retry):
    """urllib3's ``Retry`` with three changes, each for behaviour the client promises:

    * :meth:`sleep` waits through ``pause`` (the injectable ``TrackerConfig.sleep``) and logs
      the retry;
    * :meth:`get_backoff_time` waits ``backoff_factor`` seconds before the first retry too
      (urllib3 retries the first time at once), doubling after;
    * :meth:`is_retry` retries only :data:`RETRY_STATUSES`, never a rate limit.
    """

    def __init__(self, *args: Any, pause: Callable[[float], None] = time.sleep,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pause = pause

    def new(self, **kw: Any) -> Self:
        # urllib3 makes a new Retry after every attempt; carry the pause function over.
        retry = super().new(**kw)
        retry.pause = self.pause
        return retry

    def get_backoff_time(self) -> float:
        attempts_failed = len(self.history)
        if attempts_failed == 0 or self.backoff_factor <= 0:
            return 0.0
        return float(min(self.backoff_max, self.backoff_factor * 2 ** (attempts_failed - 1)))

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # urllib3 would also retry a 413/429/503 carrying Retry-After whatever the forcelist.
        if status_code not in RETRY_STATUSES:
            return False
        return super().is_retry(method, status_code, has_retry_after)

    def sleep(self, response: BaseHTTPResponse | None = None) -> None:
        delay: float | None = None
        if response is not None and self.respect_retry_after_header:
            try:
                delay = self.get_retry_after(response)  # capped at retry_after_max
            except InvalidHeader:
                delay = None  # an unreadable Retry-After: fall back to the backoff
        if not delay:
            delay = self.get_backoff_time()
        if delay <= 0:
            return
        last = self.history[-1]  # urllib3 sleeps after recording the failed attempt
        cause = f"HTTP {last.status}" if last.status is not None else type(last.error).__name__
        attempt = len(self.history) + 1
        remaining = self.total if isinstance(self.total, int) else 0
        log.info("retrying GET %s in %.2f s after %s (attempt %d of %d)", last.url, delay,
                 cause, attempt, attempt + remaining)
        self.pause(delay)


def retrying_session(retries: int, backoff: float,
                     pause: Callable[[float], None]) -> requests.Session:
    """A session that retries as this module's docstring says, for http and https."""
    retry = ClientRetry(
        total=retries,
        allowed_methods=frozenset({"GET"}),
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff,
        respect_retry_after_header=True,
        retry_after_max=RETRY_AFTER_MAX,
        raise_on_status=False,  # the last 5xx comes back as a response: ServerError says so
        pause=pause,
    )
    session = requests.Session()
    adapter = HTTPAdapter(max_retries=retry)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    return session


def classify_failure(exc: requests.RequestException) -> Failure:
    """What a request that raised ``exc`` (after every retry) ran into.

    When retries run out on a read timeout, requests raises a ``ConnectionError`` around
    urllib3's ``MaxRetryError``; its ``reason`` tells a timeout from a refused connection
    (urllib3's ``NewConnectionError`` is a subclass of its ``TimeoutError``, but not one)."""
    if isinstance(exc, requests.Timeout):
        return "timeout"
    if isinstance(exc, requests.ConnectionError):
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        if isinstance(reason, Urllib3TimeoutError) and not isinstance(reason,
                                                                      NewConnectionError):
            return "timeout"
        return "connection"
    return "request"


def attempts_made(response: requests.Response, default: int) -> int:
    """How many attempts led to ``response`` (the Retry urllib3 attached to it counts the
    failed ones); ``default`` when the response does not say."""
    retry = getattr(response.raw, "retries", None)
    if isinstance(retry, Retry):
        return len(retry.history) + 1
    return default

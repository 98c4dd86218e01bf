"""The on-disk cache of upstream's JSON answers: one file per URL, with its ETag / Last-Modified.

:class:`ResponseCache` only stores and reads; :class:`~patchlane.upstream.http.Client` decides
when an entry is fresh (younger than ``TrackerConfig.ttl``), when to revalidate it with a
conditional request, and when a stale one may answer (offline mode, or a rate limit).

A file is ``<sha256 of the URL>.json`` holding ``{"schema", "url", "fetched_at", "etag",
"last_modified", "data"}``: the decoded JSON body and the validators, nothing else. A "not
found" answer (HTTP 404 or 410) is cached too, under the same lifetime rules, as ``"status"``
(the code) with ``"data": null``: a tag that does not exist is asked about once per TTL, not
once per run. It is
written with :func:`patchlane.common.files.atomic_write_json` (temp file, fsync, rename, directory
fsync). A file that cannot be read, or was not written by this module, is ignored with a warning
and replaced by the next successful fetch.

Why our own ~100 lines and not a library (both ``requests-cache`` 1.3 and ``CacheControl`` 0.14
install here):

* **The token must never reach the disk.** By construction this cache stores neither request
  nor response headers. CacheControl writes the value of every request header the response's
  ``Vary`` names into the cache entry, and GitHub's API answers ``Vary: Accept, Authorization,
  Cookie, X-GitHub-OTP``: the bearer token would be on disk. requests-cache stores whole
  request/response objects and only redacts the names in its ``ignored_parameters`` list, so
  the guarantee would rest on a setting rather than on what is stored.
* **Offline and stale answers are ours to define.** ``--offline`` answers from an entry of any
  age, a rate limit falls back to a stale entry, and either is reported
  (``Fetched.stale`` / ``stale_reason``, ``TrackReport.stale``). The TTL is ours too, not the
  server's ``Cache-Control: max-age=60``. Both libraries can be bent to most of this (expiry
  overrides, ``only_if_cached``, ``stale_if_error``), but the stale marking would still be ours.
* **A malformed body is never cached**: the body is stored only after it decoded as JSON; an
  HTTP-level cache stores it before anyone looks at it.
* The format is plain JSON a person can read, and its tests pin it; a library would add four
  (requests-cache: attrs, cattrs, platformdirs, url-normalize) or one (msgpack) dependencies
  to save code that does not change.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..common.files import atomic_write_json
from .display import display_url

__all__ = ["CACHE_SCHEMA", "NOT_FOUND", "CacheEntry", "ResponseCache", "default_cache_dir"]

log = logging.getLogger(__name__)

CACHE_SCHEMA = 1
NOT_FOUND = (404, 410)
"""The answers cached as "not found"."""


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/patchlane/upstream`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "patchlane" / "upstream"


@dataclass(frozen=True)
class CacheEntry:
    """One cached answer: the decoded body and what a conditional request needs."""

    data: Any
    fetched_at: float
    """When upstream last confirmed this body (seconds since the epoch)."""
    etag: str | None
    last_modified: str | None
    status: int = 200
    """200 for a body; 404 or 410 for a "not found" answer (``data`` is None then)."""
    authenticated: bool = False
    """For a "not found" answer: whether the request carried a token (GitHub answers 404 for
    a private repository without one, so that answer does not stand once a token is set)."""

    @property
    def not_found(self) -> bool:
        return self.status in NOT_FOUND

    def is_fresh(self, now: float, ttl: float) -> bool:
        """Younger than ``ttl``. A timestamp in the future (the clock moved back) is not
        trusted as fresh."""
        return 0 <= now - self.fetched_at < ttl


class ResponseCache:
    """The cache files under ``directory`` (created on the first write)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, url: str) -> Path:
        return self.directory / (hashlib.sha256(url.encode("utf-8")).hexdigest() + ".json")

    def read(self, url: str) -> CacheEntry | None:
        """The entry for ``url``; ``None`` when there is none or it cannot be trusted."""
        path = self.path(url)
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
        entry = _entry_from_record(record, url)
        if entry is None:
            log.warning("upstream cache file %s for %s is corrupt; ignoring it, the next "
                        "successful fetch replaces it", path, display_url(url))
        return entry

    def write(self, url: str, entry: CacheEntry) -> None:
        """Store ``entry`` for ``url``. A failure is logged, never raised: the answer in hand
        is good, only its reuse is lost."""
        path = self.path(url)
        record = {
            "schema": CACHE_SCHEMA,
            "url": display_url(url),  # never userinfo; the file name keys the full URL
            "fetched_at": entry.fetched_at,
            "etag": entry.etag,
            "last_modified": entry.last_modified,
            "data": entry.data,
        }
        if entry.not_found:  # written only then: a body's file keeps its shape
            record["status"] = entry.status
            record["authenticated"] = entry.authenticated  # whether, never the token
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(path, record)
        except OSError as exc:
            log.warning("cannot write upstream cache file %s (%s); continuing without caching",
                        path, exc.strerror or type(exc).__name__)


def _entry_from_record(record: object, url: str) -> CacheEntry | None:
    """Validate a decoded cache record; ``None`` for anything not written by this module."""
    if not isinstance(record, dict) or record.get("schema") != CACHE_SCHEMA:
        return None
    if record.get("url") != display_url(url) or "data" not in record:
        return None
    fetched_at = record.get("fetched_at")
    if not isinstance(fetched_at, (int, float)):
        return None
    etag, modified = record.get("etag"), record.get("last_modified")
    if not all(v is None or isinstance(v, str) for v in (etag, modified)):
        return None
    status, authenticated = record.get("status", 200), record.get("authenticated", False)
    if status not in (200, *NOT_FOUND) or isinstance(status, bool) \
            or (status != 200 and record["data"] is not None) \
            or not isinstance(authenticated, bool):
        return None
    return CacheEntry(data=record["data"], fetched_at=float(fetched_at), etag=etag,
                      last_modified=modified, status=status, authenticated=authenticated)

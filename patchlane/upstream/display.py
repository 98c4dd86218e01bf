"""How upstream URLs and times appear in messages, logs and cache files.

A URL is shown without its userinfo (``user:secret@``); a time is shown in UTC. Every message
in this package goes through these two, so neither a credential nor a local time zone leaks
into an error, a log line or the cache.
"""

from __future__ import annotations

import datetime as _dt
from urllib.parse import urlsplit, urlunsplit

__all__ = ["display_url", "format_time", "utc"]


def display_url(url: str) -> str:
    """The URL without userinfo (``user:secret@``), for messages and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def utc(seconds: float) -> _dt.datetime:
    """Seconds since the epoch as an aware UTC datetime."""
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc)


def format_time(moment: _dt.datetime) -> str:
    """``2027-01-15 08:00:00 UTC``."""
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")

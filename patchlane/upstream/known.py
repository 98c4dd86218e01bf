"""What is already known about each entry's upstream issue and pull request, without asking.

The sweep's report shows an entry's upstream links with their state (open, closed, merged),
but a nightly run must neither depend on the network nor spend GitHub's rate limit: the state
shown is the one ``patchlane upstream`` last fetched, read from its on-disk cache through an
offline :class:`~patchlane.upstream.http.Client` (so the URL, the cache key and the parsing are
exactly the tracker's own). An entry never tracked on this machine, a link that is not a GitHub
one, or a cache file that cannot be trusted simply has no known state; nothing here raises.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..registry import Entry
from .answers import Trace
from .cache import default_cache_dir
from .errors import UpstreamError
from .github import issue_state, pr_state
from .http import Client, TrackerConfig

__all__ = ["known_states"]


def known_states(entries: Iterable[Entry], *, cache_dir: Path | None = None,
                 github_api: str | None = None) -> dict[str, dict[str, Any]]:
    """Per entry id, the cached state of its issue and PR (each key present only when known)
    and ``fetched_at``, when the oldest of those answers was last confirmed upstream (ISO)."""
    config = TrackerConfig(github_api=github_api or "https://api.github.com",
                           cache_dir=cache_dir or default_cache_dir(), offline=True)
    known: dict[str, dict[str, Any]] = {}
    with Client(config) as client:
        for entry in entries:
            state: dict[str, Any] = {}
            trace = Trace()
            if entry.upstream.issue:
                # Not cached here, not a GitHub link, or a malformed answer: not known.
                with contextlib.suppress(UpstreamError):
                    state["issue"] = issue_state(client, entry.upstream.issue,
                                                 trace=trace).as_dict()
            if entry.upstream.pr:
                with contextlib.suppress(UpstreamError):
                    state["pr"] = pr_state(client, entry.upstream.pr, trace=trace).as_dict()
            if state:
                oldest = min(f.fetched_at for f in trace.fetched)
                state["fetched_at"] = oldest.astimezone(_dt.timezone.utc).isoformat(
                    timespec="seconds")
                known[entry.id] = state
    return known

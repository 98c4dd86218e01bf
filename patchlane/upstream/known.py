"""What is already known about each entry's upstream issue and pull request, without asking.

The sweep's report shows an entry's upstream links with their state (open, closed, merged),
but a nightly run must neither depend on the network nor spend GitHub's rate limit: the state
shown is the one ``patchlane upstream`` last fetched, read from its on-disk cache through an
offline :class:`~patchlane.upstream.http.Client` (so the URL, the cache key and the parsing are
exactly the tracker's own). An entry never tracked on this machine, a link that is not a GitHub
one, or a cache file that cannot be trusted simply has no known state; nothing here raises.
What ``patchlane upstream --git MIRROR`` last answered (:mod:`~patchlane.upstream.gitanswers`,
in the same cache directory) counts too; each state says where it came from (``source``).
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
from .gitanswers import answered_at, read_git_answers
from .github import issue_state, pr_state
from .http import Client, TrackerConfig

__all__ = ["known_states"]


def known_states(entries: Iterable[Entry], *, cache_dir: Path | None = None,
                 github_api: str | None = None) -> dict[str, dict[str, Any]]:
    """Per entry id, the cached state of its issue and PR (each key present only when known),
    ``fetched_at``, when the oldest of those answers was last confirmed upstream (ISO), and
    ``source``: ``"github"`` (the HTTP cache) or ``"git"`` (a ``--git`` answer, which also
    carries ``mirror``, ``state`` and ``released_in``; git reads no issue)."""
    entries = list(entries)
    cache_dir = cache_dir or default_cache_dir()
    config = TrackerConfig(github_api=github_api or "https://api.github.com",
                           cache_dir=cache_dir, offline=True)
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
                state["source"] = "github"
                known[entry.id] = state
    ids = {entry.id for entry in entries}
    for entry_id, answer in read_git_answers(cache_dir).items():
        when = answered_at(answer)
        if entry_id not in ids or when is None:
            continue
        cached = known.get(entry_id)
        # Where GitHub and a mirror both answered, the newer answer wins: both read the same
        # upstream, so the later one has seen more of it (a PR merged or a release tagged since),
        # and whichever tracker the maintainer ran last is the one they expect the page to show.
        if cached is not None and _dt.datetime.fromisoformat(cached["fetched_at"]) >= when:
            continue
        state = {"source": "git", "mirror": answer["mirror"], "state": answer["state"],
                 "reason": answer["reason"], "released_in": answer.get("released_in"),
                 "fetched_at": when.astimezone(_dt.timezone.utc).isoformat(timespec="seconds")}
        if answer.get("pr") is not None:
            state["pr"] = answer["pr"]
        known[entry_id] = state
    return known

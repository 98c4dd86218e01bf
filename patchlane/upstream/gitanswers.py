"""What ``patchlane upstream --git MIRROR`` last answered, kept for the sweep's page.

The GitHub tracker leaves its answers in the HTTP cache, which the page reads offline
(:mod:`~patchlane.upstream.known`); a git mirror has no such cache, so each ``--git`` run records
its per-entry answers (state, reason, PR state, first release, the mirror, when) in one small
JSON file in the same cache directory, replaced atomically. Reading never raises: a missing,
corrupt, oversized or foreign file, or a malformed record in it, is simply not known.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..common.files import atomic_write_json, read_regular
from .records import TrackReport

__all__ = ["ANSWERS_FILE", "answered_at", "read_git_answers", "record_git_answers"]

ANSWERS_FILE = "git-answers.json"
_FORMAT = "patchlane-git-answers"
_VERSION = 2
_LIMIT = 4 * 1024 * 1024


def _parse_time(text: object) -> _dt.datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def _valid(answer: object) -> bool:
    return (isinstance(answer, dict) and isinstance(answer.get("state"), str)
            and isinstance(answer.get("reason"), str) and isinstance(answer.get("mirror"), str)
            and _parse_time(answer.get("answered_at")) is not None
            and (answer.get("pr") is None or isinstance(answer.get("pr"), dict))
            and (answer.get("released_in") is None or isinstance(answer.get("released_in"), str)))


def read_git_answers(cache_dir: Path) -> dict[str, dict[str, Any]]:
    """Per entry id, the last ``--git`` answer recorded in ``cache_dir`` (well-formed ones only)."""
    try:
        raw = read_regular(Path(cache_dir) / ANSWERS_FILE, limit=_LIMIT)
        data = json.loads(raw) if len(raw) <= _LIMIT else None
    except (OSError, ValueError):  # absent, unreadable, not a file, not JSON (or not UTF-8)
        return {}
    if not isinstance(data, dict) or data.get("format") != _FORMAT \
            or data.get("version") != _VERSION or not isinstance(data.get("entries"), dict):
        return {}  # not ours, or a version this code does not read
    return {eid: answer for eid, answer in data["entries"].items()
            if isinstance(eid, str) and _valid(answer)}


def record_git_answers(cache_dir: Path, reports: Iterable[TrackReport], mirror: Path, *,
                       now: _dt.datetime | None = None) -> Path:
    """Record each report as its entry's latest git answer, keeping the other entries' answers
    (a run over some ids leaves the rest as they were). Returns the file written."""
    when = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    entries = read_git_answers(cache_dir)
    for report in reports:
        entries[report.entry_id] = {
            "state": report.state.value, "reason": report.reason,
            "pr": None if report.pr is None else report.pr.as_dict(),
            "released_in": report.released_in,
            "mirror": str(Path(mirror).absolute()),
            "answered_at": when.isoformat(timespec="seconds"),
        }
    path = Path(cache_dir) / ANSWERS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"format": _FORMAT, "version": _VERSION, "entries": entries})
    return path


def answered_at(answer: dict[str, Any]) -> _dt.datetime | None:
    """When an answer :func:`read_git_answers` returned was recorded."""
    return _parse_time(answer.get("answered_at"))

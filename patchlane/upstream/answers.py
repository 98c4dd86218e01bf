"""Reading GitHub's and PyPI's JSON answers: a field of the expected type, or an error naming it.

:class:`Trace` remembers every :class:`~patchlane.upstream.http.Fetched` behind one question, so
a report built from several answers can say that one of them was stale.
"""

from __future__ import annotations

import datetime as _dt
from typing import TYPE_CHECKING, Any

from .display import display_url
from .errors import MalformedResponse

if TYPE_CHECKING:
    from .http import Client, Fetched

__all__ = ["Trace", "get_field", "parse_timestamp"]


class Trace:
    """Collects every :class:`Fetched` behind one answer, so reports can say it was stale."""

    def __init__(self) -> None:
        self.fetched: list[Fetched] = []

    def get(self, client: Client, url: str) -> Any:
        """``client.get_json(url).data``, remembered."""
        fetched = client.get_json(url)
        self.fetched.append(fetched)
        return fetched.data

    @property
    def stale(self) -> bool:
        return any(f.stale for f in self.fetched)


def get_field(data: Any, key: str, types: type | tuple[type, ...], url: str, what: str,
              *, optional: bool = False) -> Any:
    """``data[key]`` when ``data`` is a JSON object and the value has one of ``types`` (a
    ``bool`` only where ``bool`` is named); ``None`` for a missing or null ``optional`` field.
    Anything else raises :class:`MalformedResponse` naming ``what`` and ``key``."""
    if not isinstance(data, dict):
        raise MalformedResponse(display_url(url), f"expected a JSON object ({what}), got "
                                f"{type(data).__name__}")
    value = data.get(key)
    if value is None and optional:
        return None
    wrong_bool = isinstance(value, bool) and bool not in (
        types if isinstance(types, tuple) else (types,))
    if wrong_bool or not isinstance(value, types):
        raise MalformedResponse(display_url(url), f"{what} has no valid {key!r} "
                                f"(found {value!r})")
    return value


def parse_timestamp(value: str | None, url: str, key: str) -> _dt.datetime | None:
    """An ISO 8601 timestamp (``Z`` accepted; naive means UTC); ``None`` stays ``None``."""
    if value is None:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):  # fromisoformat only learned 'Z' in 3.11
        text = text[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise MalformedResponse(display_url(url), f"{key} {value!r} is not an ISO 8601 "
                                "timestamp") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=_dt.timezone.utc)

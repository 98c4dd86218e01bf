"""PyPI: which releases of a distribution exist, and when each was first installable."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import quote

from ..common.versions import shown, why_not_version
from .answers import Trace, get_field, parse_timestamp
from .display import display_url
from .errors import MalformedResponse
from .records import Release, ReleaseFile

if TYPE_CHECKING:
    from .http import Client

__all__ = ["pypi_releases"]

log = logging.getLogger(__name__)


def pypi_releases(client: Client, distribution: str, *,
                  trace: Trace | None = None) -> list[Release]:
    """Installable releases of ``distribution`` on PyPI, oldest first (PEP 440 order).

    Yanked files are skipped; a release whose files are all yanked is left out. Prereleases are
    included (``Release.parsed.is_prerelease`` tells them apart). Each release keeps its file
    names, which say the interpreters it installs on."""
    trace = trace if trace is not None else Trace()
    api = client.pypi_url(f"pypi/{quote(distribution, safe='')}/json")
    data = trace.get(client, api)
    releases = get_field(data, "releases", dict, api, "the PyPI project")
    found: list[Release] = []
    for version, files in releases.items():
        why = why_not_version(version)
        if why is not None:  # never compared, never installed: a release nothing can order
            log.debug("%s: skipping release %r: it %s", distribution, shown(version), why)
            continue
        if not isinstance(files, list):
            raise MalformedResponse(display_url(api), f"release {version!r} files are "
                                    f"{type(files).__name__}, expected a list")
        times = []
        kept: list[ReleaseFile] = []
        for file in files:
            if not isinstance(file, dict) or file.get("yanked"):
                continue
            stamp = file.get("upload_time_iso_8601") or file.get("upload_time")
            if isinstance(stamp, str):
                moment = parse_timestamp(stamp, api, f"release {version} upload_time")
                if moment is not None:
                    times.append(moment)
            name, needs = file.get("filename"), file.get("requires_python")
            if isinstance(name, str):
                kept.append(ReleaseFile(name, needs if isinstance(needs, str) else None))
        if times:  # a release with no files, or only yanked ones, cannot be installed
            found.append(Release(version=version, upload_time=min(times), files=tuple(kept)))
    found.sort(key=lambda r: r.parsed)
    return found

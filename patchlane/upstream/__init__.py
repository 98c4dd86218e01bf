"""Upstream: has a carried fix landed upstream, in which release, and retiring the patch then.

One module per concept; read them in this order:

* :mod:`.track` -- :func:`track`, the question this package answers for one registry entry;
* :mod:`.records` -- what it finds: :class:`PullState`, :class:`IssueState`, :class:`Release`,
  :class:`TrackReport` and its :class:`UpstreamState`;
* :mod:`.github` and :mod:`.pypi` -- the readers, one per service;
* :mod:`.gitrepo` -- :func:`~.gitrepo.track_git`, the same question answered from a local git
  clone or mirror of the upstream repository, with no network (``--git DIR``);
* :mod:`.http` -- the :class:`Client` they share (:class:`TrackerConfig`, :class:`Fetched`),
  with its on-disk :mod:`.cache` and its urllib3 :mod:`.retries`;
* :mod:`.answers` and :mod:`.display` -- reading JSON fields, showing URLs and times;
* :mod:`.errors` -- every way asking upstream fails (all :class:`UpstreamError`);
* :mod:`.retire` -- weighing tracking and sweep evidence, and recording a retirement in
  ``registry.yaml`` (not re-exported here: it reads the sweep's evidence types);
* :mod:`.draft` -- the public-ready draft of a fix not forwarded yet (``patchlane draft``).
* :mod:`.authoring` -- a new entry started from the installed release (``patchlane new``):
  the registry block appended in place, an overlay and a reproducer to fill in.

Only the CLI imports this package; nothing here imports ``requests`` until a request is sent.
"""

from __future__ import annotations

from .cache import default_cache_dir
from .errors import (
    MalformedResponse,
    NotFound,
    OfflineMiss,
    RateLimited,
    ServerError,
    TagTemplateError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
    UpstreamURLError,
)
from .github import issue_state, parse_github_url, pr_state, release_containing
from .http import Client, Fetched, TrackerConfig
from .pypi import pypi_releases
from .records import IssueState, PullState, Release, TrackReport, UpstreamState
from .track import DEFAULT_TAG_TEMPLATES, track

__all__ = [
    "DEFAULT_TAG_TEMPLATES",
    "Client",
    "Fetched",
    "IssueState",
    "MalformedResponse",
    "NotFound",
    "OfflineMiss",
    "PullState",
    "RateLimited",
    "Release",
    "ServerError",
    "TagTemplateError",
    "TrackReport",
    "TrackerConfig",
    "UpstreamError",
    "UpstreamState",
    "UpstreamTimeout",
    "UpstreamURLError",
    "UpstreamUnreachable",
    "default_cache_dir",
    "issue_state",
    "parse_github_url",
    "pr_state",
    "pypi_releases",
    "release_containing",
    "track",
]

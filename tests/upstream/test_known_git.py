"""What ``patchlane upstream --git MIRROR`` answered reaches the sweep's page: recorded in the
upstream cache directory, read by ``known_states`` beside the GitHub cache (the newer answer
wins), shown with where it came from; a corrupt or foreign answers file is ignored. The mirror
is a real git repository built here."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pytest

from patchlane.registry import Registry, load_registries
from patchlane.runs.manifest import RunDir
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import VerdictRow
from patchlane.sweep.reports import write_reports
from patchlane.upstream.cache import CacheEntry, ResponseCache
from patchlane.upstream.gitanswers import ANSWERS_FILE, record_git_answers
from patchlane.upstream.gitrepo import track_git
from patchlane.upstream.known import known_states

from ..cli.test_cli import cli
from ..conftest import FakeTarget
from .test_gitrepo import fixed_in_pr7

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")

PR = "https://github.com/acme/fake/pull/7"
API_PR = "https://api.github.com/repos/acme/fake/pulls/7"


def _registry(fake: FakeTarget) -> Registry:
    return load_registries([fake.write_registry(fake.entry(
        upstream={"pr": PR, "forwarded": PR}, retire_when={"release": ">=1.1.0"}))])


def _page(tmp_path: Path, registry: Registry, known: dict[str, dict[str, object]],
          entry_id: str) -> str:
    run = RunDir.create(tmp_path / "run", {"run_id": "run"})
    write_reports(run, [VerdictRow(entry_id, "cpu", 1, Verdict.UPSTREAM_FIXED,
                                   "passes without the overlay")],
                  registry=registry, upstream=known)
    return (run.path / "report.html").read_text()


def _github_open(cache: Path, fetched: dt.datetime) -> None:
    """What `patchlane upstream` (GitHub) cached: PR #7 open, fetched at ``fetched``."""
    ResponseCache(cache).write(API_PR, CacheEntry(
        {"number": 7, "state": "open", "merged": False, "merged_at": None, "milestone": None,
         "title": "Fix greet", "html_url": PR}, fetched.timestamp(), None, None))


@pytest.mark.slow
def test_an_upstream_git_answer_reaches_known_states_and_the_page(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    repo = fixed_in_pr7(tmp_path)
    registry = _registry(fake_target)
    cache = tmp_path / "cache"
    env = {"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(fake_target.registry),
           "PYTHONPATH": str(fake_target.root), "PATCHLANE_GITHUB_API": "http://127.0.0.1:9",
           "PATCHLANE_PYPI_URL": "http://127.0.0.1:9", "PATCHLANE_CACHE": str(cache)}
    out = cli("upstream", fake_target.entry_id, "--git", str(repo), env=env)
    assert out.returncode == 0, out.stderr

    known = known_states(registry.entries, cache_dir=cache)
    state = known[fake_target.entry_id]
    assert state["source"] == "git" and state["mirror"] == str(repo.absolute())
    assert state["state"] == "released" and state["released_in"] == "1.1.0"
    assert state["pr"]["merged"] is True  # type: ignore[index]
    answered = dt.datetime.fromisoformat(str(state["fetched_at"]))
    assert abs(dt.datetime.now(dt.timezone.utc) - answered) < dt.timedelta(minutes=10)

    page = _page(tmp_path, registry, known, fake_target.entry_id)
    assert re.search(r"PR <a href=\"[^\"]+\">acme/fake#7</a> <b>merged 2026-01-05, "
                     r"released in 1\.1\.0</b>", page)
    assert f"from the git mirror <code>{repo.absolute()}</code>" in page
    assert "state not tracked on this machine" not in page
    assert re.search(r'<span class="muted">as of \d{4}-\d\d-\d\d \(git\)</span>', page)


@pytest.mark.parametrize("content", [
    b"\x00\xff not json", b"{\"entries\": ", b"[1, 2]",
    json.dumps({"format": "someone-else", "version": 1, "entries": {}}).encode(),
    json.dumps({"format": "patchlane-git-answers", "version": 1,
                "entries": {"fake_fix": {"verdict": 3, "mirror": None}}}).encode(),
    json.dumps({"format": "patchlane-git-answers", "version": 1,
                "entries": {"fake_fix": {"verdict": "released", "reason": "r", "mirror": "/m",
                                         "answered_at": "yesterday"}}}).encode(),
])
def test_a_corrupt_or_foreign_answers_file_is_ignored_then_replaced(
        fake_target: FakeTarget, tmp_path: Path, content: bytes) -> None:
    registry = _registry(fake_target)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / ANSWERS_FILE).write_bytes(content)
    fetched = dt.datetime(2026, 5, 28, 12, tzinfo=dt.timezone.utc)
    _github_open(cache, fetched)
    known = known_states(registry.entries, cache_dir=cache)  # no crash: GitHub's answer stands
    assert known[fake_target.entry_id]["source"] == "github"
    assert known[fake_target.entry_id]["pr"]["state"] == "open"  # type: ignore[index]

    # The next `upstream --git` replaces the corrupt file rather than failing on it.
    (entry,) = registry.entries
    report = track_git(entry, fixed_in_pr7(tmp_path), tag_template="v{version}")
    record_git_answers(cache, [report], tmp_path / "m", now=fetched + dt.timedelta(days=1))
    assert known_states(registry.entries, cache_dir=cache)[entry.id]["source"] == "git"


def test_the_newer_of_the_github_and_git_answers_wins(fake_target: FakeTarget,
                                                        tmp_path: Path) -> None:
    registry = _registry(fake_target)
    (entry,) = registry.entries
    cache = tmp_path / "cache"
    repo = fixed_in_pr7(tmp_path)
    report = track_git(entry, repo, tag_template="v{version}")
    github_at = dt.datetime(2026, 5, 28, 12, tzinfo=dt.timezone.utc)
    _github_open(cache, github_at)

    # The mirror answered a day before GitHub did: GitHub's (open) answer is shown.
    record_git_answers(cache, [report], repo, now=github_at - dt.timedelta(days=1))
    older = known_states(registry.entries, cache_dir=cache)[entry.id]
    assert older["source"] == "github" and older["pr"]["state"] == "open"  # type: ignore[index]
    page = _page(tmp_path / "a", registry, {entry.id: older}, entry.id)
    assert "state as of 2026-05-28 from GitHub (patchlane upstream cache)" in page

    # Asked again a day after GitHub: the mirror's (released) answer is shown, and says so.
    record_git_answers(cache, [report], repo, now=github_at + dt.timedelta(days=1))
    newer = known_states(registry.entries, cache_dir=cache)[entry.id]
    assert newer["source"] == "git" and newer["state"] == "released"
    assert newer["fetched_at"] == "2026-05-29T12:00:00+00:00"
    page = _page(tmp_path / "b", registry, {entry.id: newer}, entry.id)
    assert "<b>merged 2026-01-05, released in 1.1.0</b>" in page
    assert f"state as of 2026-05-29 from the git mirror <code>{repo.absolute()}</code>" in page

"""``patchlane upstream --git DIR`` and ``patchlane retire --git DIR``: tracking from a real git
repository built here, through the real CLI, with the GitHub API pointed at a dead port (any
request would fail the command)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import yaml

from patchlane.common.exit_codes import ExitCode

from ..conftest import FakeTarget
from ..upstream.test_gitrepo import fixed_in_pr7
from .test_cli import cli

pytestmark = pytest.mark.slow

PR_URL = "https://github.com/acme/fake/pull/{}"


def _dead_api() -> str:
    with socket.socket() as sock:  # a port nothing listens on once the socket closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def tracked(fake_target: FakeTarget, tmp_path: Path) -> tuple[FakeTarget, Path, dict[str, str]]:
    """The fake target's entry linking PR #7, and its upstream: v1.0.0 without the fix,
    v1.1.0 with it (the tag template of a distribution without its own is 'v{version}')."""
    repo = fixed_in_pr7(tmp_path)
    url = PR_URL.format(7)
    fake_target.write_registry(fake_target.entry(
        upstream={"issue": "https://github.com/acme/fake/issues/6", "pr": url,
                  "forwarded": url},
        retire_when={"release": ">=1.1.0", "probe": True}))
    env = {"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(fake_target.registry),
           "PYTHONPATH": str(fake_target.root), "PATCHLANE_GITHUB_API": _dead_api(),
           "PATCHLANE_PYPI_URL": _dead_api(), "PATCHLANE_CACHE": str(tmp_path / "cache")}
    return fake_target, repo, env


def test_upstream_from_git_reports_released(tracked: tuple[FakeTarget, Path, dict[str, str]]
                                            ) -> None:
    fake, repo, env = tracked
    out = cli("upstream", fake.entry_id, "--git", str(repo), "--json", env=env)
    assert out.returncode == 0, out.stderr
    (item,) = json.loads(out.stdout)
    tracking = item["tracking"]
    assert tracking["state"] == "released" and tracking["released_in"] == "1.1.0"
    assert tracking["issue"] is None  # git cannot read an issue
    assert tracking["pr"]["merged"] is True and tracking["gate_names_release"] is True
    assert "squash commit" in tracking["reason"] and "(tag v1.1.0)" in tracking["reason"]
    # the upstream side is satisfied; only the sweep evidence is missing
    assert not item["retirement"]["ready"]
    assert all(m.startswith("sweep") for m in item["retirement"]["missing"])

    table = cli("upstream", fake.entry_id, "--git", str(repo), env=env)
    assert table.returncode == 0, table.stderr
    assert "released" in table.stdout and "1.1.0" in table.stdout


def test_upstream_from_git_for_a_pr_that_has_not_landed(
        tracked: tuple[FakeTarget, Path, dict[str, str]]) -> None:
    fake, repo, env = tracked
    text = fake.registry.read_text().replace(PR_URL.format(7), PR_URL.format(8))
    fake.registry.write_text(text)
    out = cli("upstream", fake.entry_id, "--git", str(repo), "--json", env=env)
    assert out.returncode == 0, out.stderr
    tracking = json.loads(out.stdout)[0]["tracking"]
    assert tracking["state"] == "open"
    assert "git cannot tell an open PR from one closed without merging" in tracking["reason"]


def test_upstream_with_a_path_that_is_not_a_repository(
        tracked: tuple[FakeTarget, Path, dict[str, str]], tmp_path: Path) -> None:
    fake, _, env = tracked
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    out = cli("upstream", fake.entry_id, "--git", str(plain), env=env)
    assert out.returncode == ExitCode.UPSTREAM_UNREACHABLE
    assert f"git repository {plain}: not a git repository" in out.stderr
    assert "Fix:" in out.stderr and "Traceback" not in out.stderr


def test_retire_from_git_weighs_the_same_evidence(
        tracked: tuple[FakeTarget, Path, dict[str, str]]) -> None:
    fake, repo, env = tracked
    refused = cli("retire", fake.entry_id, "--git", str(repo), env=env)
    assert refused.returncode == ExitCode.RETIREMENT_REFUSED
    assert "sweep: no run shows" in refused.stderr and "upstream:" not in refused.stderr

    done = cli("retire", fake.entry_id, "--git", str(repo), "--date", "2026-12-01",
               "--force", "no GPU lane on this cluster", env=env)
    assert done.returncode == 0, done.stderr
    (entry,) = yaml.safe_load(fake.registry.read_text())["entries"]
    assert entry["status"] == "retired"
    assert entry["upstream"]["applied_upstream"] == f"{fake.distribution} 1.1.0"
    (first, *_) = entry["evidence"]["retirement"]
    assert first.startswith("upstream released: PR #7 landed as squash commit")

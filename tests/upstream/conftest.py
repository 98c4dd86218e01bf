"""Fixtures for the upstream tests: the fake GitHub/PyPI server, a client harness on it, and the
registry entry tracking reads. The fake itself is :mod:`tests.upstream.fake_upstream`."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from patchlane.registry import Entry, Kind, RetireWhen, Status, Target, Upstream

from .fake_upstream import ISSUE_URL, PR_URL, REPO, FakeUpstream, Harness, serve


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with serve() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _no_ambient_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)



@pytest.fixture
def h(upstream: FakeUpstream, tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(upstream, tmp_path / "cache")
    yield harness
    for client in harness.clients:
        client.close()


@pytest.fixture(scope="module")
def entry() -> Entry:
    """``mcore_rerun_sentinel`` as registry.yaml declares it (its upstream and retire_when are
    what tracking reads), built here so these tests do not depend on the rest of that file."""
    return Entry(
        id="mcore_rerun_sentinel",
        kind=Kind.SOURCE_PATCH,
        summary="Rerun state machine emits a constant-structure sentinel ShardedObject",
        target=Target("megatron-core", "megatron.core.rerun_state_machine",
                      "RerunStateMachine.state_dict"),
        applies_to=SpecifierSet(">=0.14.0,<0.18.0"),
        upstream=Upstream(issue=ISSUE_URL, pr=PR_URL, forwarded=PR_URL,
                          applied_upstream="megatron-core 0.18.0"),
        retire_when=RetireWhen(release=SpecifierSet(">=0.18.0"), probe=True),
        owner="training-infra",
        added=dt.date(2026, 11, 22),
        status=Status.ACTIVE,
        source=REPO / "registry.yaml",
    )


@pytest.fixture
def registry_file(tmp_path: Path) -> Path:
    """A copy of the default registry, with the files its entries name, to edit in place."""
    root = tmp_path / "reg"
    root.mkdir()
    shutil.copy(REPO / "registry.yaml", root / "registry.yaml")
    for folder in ("patches", "reproducers", "checks", "drafts"):
        shutil.copytree(REPO / folder, root / folder)
    return root / "registry.yaml"

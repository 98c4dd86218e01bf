"""track(): where an entry's fix stands upstream, and whether its retire_when gate names the
release, against the fake upstream of :mod:`tests.upstream.fake_upstream`."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from patchlane.registry import Entry, Target
from patchlane.upstream import TagTemplateError, UpstreamError, UpstreamState, track
from patchlane.upstream.github import MAX_COMPARES

from .fake_upstream import (
    ISSUE_PATH,
    OPEN_PR_PATH,
    OPEN_PR_URL,
    PYPI_PATH,
    SHA,
    Harness,
    Reply,
    compare_path,
    fixture,
    refs,
    tags_path,
    with_gate,
    with_upstream,
)

# -- track --------------------------------------------------------------------------------------


def test_track_released(h: Harness, entry: Entry) -> None:
    report = track(entry, h.client(), tag_template="core_v{version}")
    assert report.state is UpstreamState.RELEASED
    assert report.released_in == "0.18.0"
    assert report.latest_release == "0.19.2"
    assert report.gate_names_release is True  # retire_when.release is '>=0.18.0'
    assert report.issue is not None and report.issue.state == "closed"
    assert report.pr is not None and report.pr.merge_commit_sha == SHA
    assert "first released in megatron-core 0.18.0 (tag core_v0.18.0)" in report.reason
    assert report.stale is False
    # Only releases uploaded after the merge (2026-04-24) are compared: not 0.16.1 or 0.17.0.
    compared = [s.path for s in h.upstream.requests() if "/compare/" in s.path]
    assert compared == [compare_path("core_v0.17.1"), compare_path("core_v0.18.0")]
    as_dict = json.loads(json.dumps(report.as_dict()))
    assert as_dict["state"] == "released" and as_dict["pr"]["milestone"] == "Core 0.16"


@pytest.mark.parametrize(
    ("gate", "names", "says"),
    [
        (">=0.19", False, "does not name it"),
        (">=0.17", True, "also names earlier releases (0.17.0, 0.17.1)"),
        (None, False, "has no release specifier"),
    ],
)
def test_track_released_checks_the_gate(h: Harness, entry: Entry, gate: str | None,
                                        names: bool, says: str) -> None:
    report = track(with_gate(entry, gate), h.client(), tag_template="core_v{version}")
    assert report.state is UpstreamState.RELEASED and report.released_in == "0.18.0"
    assert report.gate_names_release is names
    assert says in report.reason


def test_track_fix_shipping_in_another_distribution(h: Harness, entry: Entry) -> None:
    """A pin on one distribution (numpy) whose fix ships in another (triton): PyPI is asked
    about upstream.distribution, and no gate on the target can name that release."""
    triton = fixture("pypi_megatron-core.json")
    h.upstream.route("/pypi/pypi/triton/json", Reply(body=triton))
    pinned = dataclasses.replace(with_upstream(entry, distribution="triton"),
                                 target=Target("numpy"))
    report = track(pinned, h.client(), tag_template="core_v{version}")
    assert (report.state, report.released_in) == (UpstreamState.RELEASED, "0.18.0")
    assert report.gate_names_release is False
    assert "no gate can name a triton release" in report.reason
    assert h.upstream.requests("/pypi/pypi/triton/json") and not h.upstream.requests(PYPI_PATH)


def test_track_open(h: Harness, entry: Entry) -> None:
    report = track(with_upstream(entry, pr=OPEN_PR_URL), h.client(),
                   tag_template="core_v{version}")
    assert (report.state, report.released_in, report.gate_names_release) == (
        UpstreamState.OPEN, None, False)
    assert "PR #4630 is open" in report.reason
    assert not any(s.path == PYPI_PATH for s in h.upstream.requests())


def test_track_closed_unmerged(h: Harness, entry: Entry) -> None:
    body = fixture("github_pull_4630_open.json")
    body.update(state="closed", closed_at="2026-06-02T00:00:00Z")
    h.upstream.route(OPEN_PR_PATH, Reply(body=body))
    report = track(with_upstream(entry, pr=OPEN_PR_URL), h.client(),
                   tag_template="core_v{version}")
    assert report.state is UpstreamState.CLOSED_UNMERGED
    assert "closed without merging" in report.reason


def test_track_no_upstream_link(h: Harness, entry: Entry) -> None:
    report = track(with_upstream(entry, pr=None), h.client(), tag_template="core_v{version}")
    assert report.state is UpstreamState.NO_UPSTREAM_LINK
    assert report.pr is None and report.issue is not None
    assert [s.path for s in h.upstream.requests()] == [ISSUE_PATH]


def test_track_merged_but_no_tag_contains_it(h: Harness, entry: Entry) -> None:
    for tag in ("core_v0.18.0", "core_v0.19.2"):
        body = fixture(f"github_compare_{tag}.json")
        body.update(status="ahead", ahead_by=3, behind_by=0)
        h.upstream.route(compare_path(tag), Reply(body=body))
    report = track(entry, h.client(), tag_template="core_v{version}")
    assert report.state is UpstreamState.MERGED_UNRELEASED
    assert report.released_in is None and report.latest_release == "0.19.2"
    assert report.gate_names_release is False
    assert "none of the megatron-core releases uploaded since (0.17.1, 0.18.0, 0.19.2)" \
        in report.reason


def test_track_wrong_tag_template_is_reported_not_hidden(h: Harness, entry: Entry) -> None:
    report = track(entry, h.client(), tag_template="v{version}")
    assert report.state is UpstreamState.MERGED_UNRELEASED
    assert "tags not found in NVIDIA/Megatron-LM: v0.17.1, v0.18.0, v0.19.2" in report.reason


def test_track_needs_a_target_distribution_once_merged(h: Harness, entry: Entry) -> None:
    no_target = dataclasses.replace(entry, target=entry.target._replace(distribution=""))
    with pytest.raises(UpstreamError, match=r"no target\.distribution"):
        track(no_target, h.client(), tag_template="core_v{version}")


@pytest.mark.parametrize("template", ["core_v", "core_v{ver}", "{0}", "core_v{version"])
def test_track_refuses_a_bad_tag_template_before_any_request(
        h: Harness, entry: Entry, template: str) -> None:
    with pytest.raises(TagTemplateError, match=re.escape("'{version}'")):
        track(entry, h.client(), tag_template=template)
    assert h.upstream.requests() == []


def test_track_offline_from_an_aged_cache_is_marked_stale(h: Harness, entry: Entry) -> None:
    online = track(entry, h.client(), tag_template="core_v{version}")
    sent = len(h.upstream.requests())
    h.clock.now += 10 * 60.0
    offline = track(entry, h.client(offline=True), tag_template="core_v{version}")
    assert len(h.upstream.requests()) == sent
    assert offline.stale is True and online.stale is False
    assert dataclasses.replace(offline, stale=False) == online




# -- how many requests one entry costs ---------------------------------------------------------


def many_releases(n: int) -> dict[str, object]:
    """A PyPI answer with ``n`` releases, every one uploaded after the PR merged."""
    body = fixture("pypi_megatron-core.json")
    file = body["releases"]["0.19.2"][0]
    body["releases"] = {f"1.{i}.0": [dict(file, filename=f"megatron_core-1.{i}.0.tar.gz")]
                        for i in range(n)}
    return body


def compares(h: Harness) -> list[str]:
    return [s.path for s in h.upstream.requests() if "/compare/" in s.path]


def test_a_template_matching_no_tag_costs_no_compare_request(h: Harness, entry: Entry) -> None:
    """3,000 releases and a tag template that matches none of the repository's tags: the
    tag list says so in one request, and nothing is compared."""
    h.upstream.route(PYPI_PATH, Reply(body=many_releases(3000)))
    h.upstream.route(tags_path("v"), Reply(body=[]))
    report = track(entry, h.client(), tag_template="v{version}")
    assert report.state is UpstreamState.MERGED_UNRELEASED
    assert compares(h) == []
    assert len(h.upstream.requests()) == 4  # the issue, the PR, PyPI, the tag list
    assert ("none of the megatron-core releases uploaded since (1.0.0, 1.1.0, 1.2.0, 1.3.0, "
            "1.4.0, 1.5.0, 1.6.0, 1.7.0, 1.8.0, 1.9.0 and 2990 more) contains it; tags not "
            "found in NVIDIA/Megatron-LM: v1.0.0, ") in report.reason
    assert "and 2990 more (check the tag template 'v{version}')" in report.reason


@pytest.mark.parametrize("listed", [True, False], ids=["tag-list", "no-tag-list"])
def test_compare_requests_are_bounded_per_entry(h: Harness, entry: Entry, listed: bool) -> None:
    """Every tag exists and none contains the commit (or, without a tag list, every compare
    answers 404): at most MAX_COMPARES compare requests, and the reason says what was not
    compared and how to look at every tag."""
    h.upstream.route(PYPI_PATH, Reply(body=many_releases(3000)))
    tags = [f"core_v1.{i}.0" for i in range(3000)]
    if listed:
        h.upstream.route(tags_path("core_v"), Reply(body=refs(*tags)))
        ahead = fixture("github_compare_core_v0.17.1.json")
        ahead.update(status="ahead")
        for tag in tags:
            h.upstream.route(compare_path(tag), Reply(body=ahead))
    else:
        h.upstream.route(tags_path("core_v"), Reply(404, {"message": "Not Found"}))
    report = track(entry, h.client(), tag_template="core_v{version}")
    assert report.state is UpstreamState.MERGED_UNRELEASED
    assert compares(h) == [compare_path(t) for t in tags[:MAX_COMPARES]]
    assert (f"{3000 - MAX_COMPARES} later release tags were not compared (at most "
            f"{MAX_COMPARES} compare requests per entry: core_v1.{MAX_COMPARES}.0, ") \
        in report.reason
    assert f"`patchlane upstream {entry.id} --git MIRROR`" in report.reason


def test_a_tag_not_found_is_asked_about_once_per_ttl(h: Harness, entry: Entry) -> None:
    """The 404s of a wrong tag template are cached like any answer: a second run within the
    TTL sends no compare request, one after it asks again."""
    h.upstream.route(tags_path("v"), Reply(404, {"message": "Not Found"}))  # no tag list
    first = track(entry, h.client(), tag_template="v{version}")
    assert len(compares(h)) == 3  # v0.17.1, v0.18.0, v0.19.2: each a 404
    again = track(entry, h.client(), tag_template="v{version}")
    assert len(compares(h)) == 3 and again.reason == first.reason
    h.clock.now += 61.0  # the harness's TTL is 60 s
    track(entry, h.client(), tag_template="v{version}")
    assert len(compares(h)) == 6

"""GitHub links and readers (pull requests, issues, which tag contains a commit), against the
fake upstream of :mod:`tests.upstream.fake_upstream`."""

from __future__ import annotations

import json

import pytest

from patchlane.common.errors import PatchlaneError
from patchlane.upstream import (
    IssueState,
    MalformedResponse,
    PullState,
    UpstreamURLError,
    issue_state,
    parse_github_url,
    pr_state,
    pypi_releases,
    release_containing,
)

from .fake_upstream import (
    ISSUE_PATH,
    ISSUE_URL,
    OPEN_PR_URL,
    PR_PATH,
    PR_URL,
    PYPI_PATH,
    SHA,
    Harness,
    Reply,
    compare_path,
    fixture,
    utc,
)

# -- links ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (PR_URL, ("NVIDIA", "Megatron-LM", "pull", 4448)),
        (ISSUE_URL, ("NVIDIA", "Megatron-LM", "issues", 4378)),
        ("https://github.com/pytorch/pytorch/pull/123456/", ("pytorch", "pytorch", "pull",
                                                              123456)),
        ("https://github.com/NVIDIA/Megatron-LM/pull/4448/files#diff-1",
         ("NVIDIA", "Megatron-LM", "pull", 4448)),
        ("https://www.github.com/NVIDIA/Megatron-LM/issues/4378?q=1#issuecomment-9",
         ("NVIDIA", "Megatron-LM", "issues", 4378)),
        ("http://github.com/a.b/c_d/pulls/7", ("a.b", "c_d", "pull", 7)),
    ],
)
def test_parse_github_url_accepts(url: str, expected: tuple[str, str, str, int]) -> None:
    assert parse_github_url(url) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://gitlab.com/NVIDIA/Megatron-LM/pull/4448", "not github.com"),
        ("ftp://github.com/NVIDIA/Megatron-LM/pull/4448", "not an http(s) URL"),
        ("https://github.com/NVIDIA/Megatron-LM", "too few path segments"),
        ("https://github.com/NVIDIA/Megatron-LM/commit/4448", "neither 'issues' nor 'pull'"),
        ("https://github.com/NVIDIA/Megatron-LM/pull/abc", "not an issue or pull request"),
        ("https://github.com/NVIDIA/Megatron-LM/pull/0", "not an issue or pull request"),
        ("https://github.com/NVIDIA/Megatron-LM/pull/1/files/x", "unexpected path"),
        ("https://github.com/-bad/Megatron-LM/pull/1", "invalid owner or repository"),
        ("not a url", "not an http(s) URL"),
    ],
)
def test_parse_github_url_rejects_with_the_input_quoted(url: str, problem: str) -> None:
    with pytest.raises(UpstreamURLError) as info:
        parse_github_url(url)
    message = str(info.value)
    assert repr(url) in message and problem in message
    assert "github.com/OWNER/REPO/pull/N" in message  # says what a valid link looks like
    assert isinstance(info.value, ValueError) and isinstance(info.value, PatchlaneError)


def test_pr_link_given_where_an_issue_is_expected_is_refused(h: Harness) -> None:
    with pytest.raises(UpstreamURLError, match="expected an issue"):
        issue_state(h.client(), PR_URL)
    assert h.upstream.requests() == []


# -- records ------------------------------------------------------------------------------------


def test_pr_issue_and_pypi_happy_path(h: Harness) -> None:
    client = h.client()
    pr = pr_state(client, PR_URL)
    assert pr == PullState(
        number=4448, state="closed", merged=True, merged_at=utc("2026-04-24T17:05:49"),
        merge_commit_sha=SHA, milestone="Core 0.16",
        title="Rerun state machine: emit a constant-structure sentinel ShardedObject in the "
        "steady state", url=PR_URL)
    issue = issue_state(client, ISSUE_URL)
    assert issue == IssueState(
        number=4378, state="closed", closed_at=utc("2026-04-24T17:05:50"),
        title="[BUG] Cached checkpoint save plan drops the rerun state machine's fault state",
        url=ISSUE_URL, state_reason="completed")
    releases = pypi_releases(client, "megatron-core")
    # 0.19.0 has only yanked files; 0.17.1's earlier yanked wheel does not count as its upload.
    assert [(r.version, r.upload_time) for r in releases] == [
        ("0.16.1", utc("2026-02-17T19:44:02.118204")),
        ("0.17.0", utc("2026-04-09T16:20:37.902113")),
        ("0.17.1", utc("2026-05-12T11:03:58.440071")),
        ("0.18.0", utc("2026-06-23T14:09:11.000731")),
        ("0.19.2", utc("2026-09-15T08:31:45.671002")),
    ]
    assert json.loads(json.dumps([pr.as_dict(), issue.as_dict(),
                                  [r.as_dict() for r in releases]]))[0]["merged_at"] == (
        "2026-04-24T17:05:49+00:00")
    # Sent to the API paths GitHub and PyPI document, with a GitHub media type.
    assert [s.path for s in h.upstream.requests()] == [PR_PATH, ISSUE_PATH, PYPI_PATH]
    assert h.upstream.requests(PR_PATH)[0].headers["Accept"] == "application/vnd.github+json"


def test_open_pr_drops_the_test_merge_sha(h: Harness) -> None:
    pr = pr_state(h.client(), OPEN_PR_URL)
    assert (pr.state, pr.merged, pr.merged_at, pr.merge_commit_sha) == ("open", False, None, None)



def test_release_containing_scans_in_version_order_and_stops_at_the_first(h: Harness) -> None:
    scrambled = ["core_v0.19.2", "core_v0.17.1", "core_v0.18.0", "core_v0.16.1", "core_v0.17.0"]
    found = release_containing(h.client(), "NVIDIA", "Megatron-LM", SHA, scrambled)
    assert found == "core_v0.18.0"
    assert [s.path for s in h.upstream.requests()] == [
        compare_path("core_v0.16.1"), compare_path("core_v0.17.0"),
        compare_path("core_v0.17.1"), compare_path("core_v0.18.0")]  # never 0.19.2


def test_release_containing_none_and_unknown_tags_skipped(h: Harness) -> None:
    client = h.client()
    assert release_containing(client, "NVIDIA", "Megatron-LM", SHA,
                              ["core_v0.16.1", "core_v0.17.1"]) is None
    assert release_containing(client, "NVIDIA", "Megatron-LM", SHA,
                              ["core_v0.0.1", "core_v0.19.2"]) == "core_v0.19.2"


def test_malformed_record_names_the_field(h: Harness) -> None:
    body = fixture("github_pull_4448.json")
    body["state"] = "merged"
    h.upstream.route(PR_PATH, Reply(body=body))
    with pytest.raises(MalformedResponse, match=r"state 'merged' is neither"):
        pr_state(h.client(), PR_URL)




def test_a_tag_with_a_5000_digit_number_sorts_as_a_tag_without_a_version() -> None:
    from patchlane.upstream.github import _in_version_order

    huge = "core_v1." + "9" * 5000
    assert _in_version_order(["core_v0.17.0", huge, "core_v0.16.1"]) == [
        "core_v0.16.1", "core_v0.17.0", huge]

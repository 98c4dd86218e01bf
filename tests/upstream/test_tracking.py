"""Upstream tracking against a real HTTP server on 127.0.0.1.

The ``upstream`` fixture runs a ``ThreadingHTTPServer`` on an ephemeral port serving the JSON in
``tests/upstream/fixtures/`` (see its README: realistic shapes, made-up values) under
``/github/...`` (the GitHub API base) and ``/pypi/...`` (the PyPI base). Each path can be given a
sequence of replies (status, headers, body, delay, ETag / Last-Modified revalidation); the last
reply repeats. Every request's path and headers are recorded, so tests assert what was *sent*
(conditional headers, the token) as well as what came back. Sleeping and the clock are injected:
no test waits for a backoff or a TTL.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import re
import socket
import threading
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from patchlane.errors import PatchlaneError
from patchlane.registry import Entry, Kind, RetireWhen, Status, Target, Upstream
from patchlane.upstream.tracking import (
    Client,
    Fetched,
    IssueState,
    MalformedResponse,
    NotFound,
    OfflineMiss,
    PullState,
    RateLimited,
    ServerError,
    TagTemplateError,
    TrackerConfig,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
    UpstreamURLError,
    Verdict,
    issue_state,
    parse_github_url,
    pr_state,
    pypi_releases,
    release_containing,
    track,
)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).with_name("fixtures")

SHA = "5f2c9a1e7b3d4c6f8a0b2d4e6f8a1c3e5b7d9f02"
PR_URL = "https://github.com/NVIDIA/Megatron-LM/pull/4448"
OPEN_PR_URL = "https://github.com/NVIDIA/Megatron-LM/pull/4630"
ISSUE_URL = "https://github.com/NVIDIA/Megatron-LM/issues/4378"
GH = "/github/repos/NVIDIA/Megatron-LM"
PR_PATH = f"{GH}/pulls/4448"
OPEN_PR_PATH = f"{GH}/pulls/4630"
ISSUE_PATH = f"{GH}/issues/4378"
PYPI_PATH = "/pypi/pypi/megatron-core/json"
TAGS = ("core_v0.16.1", "core_v0.17.0", "core_v0.17.1", "core_v0.18.0", "core_v0.19.2")
TOKEN = "ghp_" + "Xq7SecretTokenValue" * 2
T0 = 1_800_000_000.0  # 2027-01-15; the injected clock's start


def compare_path(tag: str, sha: str = SHA) -> str:
    return f"{GH}/compare/{tag}...{sha}"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


# -- the fake upstream server ------------------------------------------------------------------


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    """dict/list -> JSON; str/bytes sent as is; None -> empty body."""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    etag: str | None = None
    """Sent as ETag; a request whose If-None-Match equals it gets a 304."""
    last_modified: str | None = None
    """Sent as Last-Modified; a request whose If-Modified-Since equals it gets a 304."""


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


class FakeUpstream:
    def __init__(self) -> None:
        self.routes: dict[str, list[Reply]] = {}
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.url = ""

    def route(self, path: str, *replies: Reply) -> None:
        with self.lock:
            self.routes[path] = list(replies)

    def next_reply(self, path: str) -> Reply | None:
        with self.lock:
            queue = self.routes.get(path)
            if not queue:
                return None
            return queue.pop(0) if len(queue) > 1 else queue[0]

    def requests(self, path: str | None = None) -> list[Seen]:
        with self.lock:
            return [s for s in self.seen if path is None or s.path == path]

    @property
    def github(self) -> str:
        return self.url + "/github"

    @property
    def pypi(self) -> str:
        return self.url + "/pypi"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        with fake.lock:
            fake.seen.append(Seen(path, dict(self.headers.items())))
        reply = fake.next_reply(path) or Reply(404, {"message": "Not Found"})
        if reply.delay and fake.stopping.wait(reply.delay):
            return
        status, body = reply.status, reply.body
        if (reply.etag is not None and self.headers.get("If-None-Match") == reply.etag) or (
            reply.last_modified is not None
            and self.headers.get("If-Modified-Since") == reply.last_modified
        ):
            status, body = 304, None
        if isinstance(body, (dict, list)):
            raw = json.dumps(body).encode()
        elif isinstance(body, str):
            raw = body.encode()
        else:
            raw = body or b""
        try:
            self.send_response(status)
            if reply.etag is not None:
                self.send_header("ETag", reply.etag)
            if reply.last_modified is not None:
                self.send_header("Last-Modified", reply.last_modified)
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
        except OSError:  # the client gave up (timeout tests): nothing to answer
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeUpstream


def default_routes(fake: FakeUpstream) -> None:
    fake.route(PR_PATH, Reply(body=fixture("github_pull_4448.json")))
    fake.route(OPEN_PR_PATH, Reply(body=fixture("github_pull_4630_open.json")))
    fake.route(ISSUE_PATH, Reply(body=fixture("github_issue_4378.json")))
    fake.route(PYPI_PATH, Reply(body=fixture("pypi_megatron-core.json")))
    for tag in TAGS:
        fake.route(compare_path(tag), Reply(body=fixture(f"github_compare_{tag}.json")))


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    fake = FakeUpstream()
    default_routes(fake)
    server = _Server(("127.0.0.1", 0), _Handler)
    server.fake = fake
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01},
                              daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _no_ambient_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Harness:
    upstream: FakeUpstream
    cache_dir: Path
    clock: Clock = field(default_factory=Clock)
    sleeps: list[float] = field(default_factory=list)
    clients: list[Client] = field(default_factory=list)

    def client(self, **overrides: Any) -> Client:
        settings: dict[str, Any] = {
            "github_api": self.upstream.github, "pypi": self.upstream.pypi,
            "cache_dir": self.cache_dir, "ttl": 60.0, "timeout": 2.0, "retries": 3,
            "backoff": 0.5, "sleep": self.sleeps.append, "clock": self.clock,
        }
        settings.update(overrides)
        client = Client(TrackerConfig(**settings))
        self.clients.append(client)
        return client

    def url(self, path: str) -> str:
        return self.upstream.url + path


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


def with_upstream(entry: Entry, **changes: Any) -> Entry:
    return dataclasses.replace(entry, upstream=entry.upstream._replace(**changes))


def with_gate(entry: Entry, spec: str | None) -> Entry:
    release = SpecifierSet(spec) if spec else None
    return dataclasses.replace(entry, retire_when=RetireWhen(release=release, probe=True))


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)


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


def test_pypi_releases_sorts_by_pep440_not_by_string(h: Harness) -> None:
    body = {"releases": {
        "0.10.0": [{"upload_time_iso_8601": "2026-01-03T00:00:00Z", "yanked": False}],
        "0.9.0": [{"upload_time_iso_8601": "2026-01-02T00:00:00Z", "yanked": False}],
        "0.10.0rc1": [{"upload_time_iso_8601": "2026-01-01T00:00:00Z", "yanked": False}],
        "not-a-version": [{"upload_time_iso_8601": "2026-01-01T00:00:00Z", "yanked": False}],
        "0.11.0": [],
    }}
    h.upstream.route("/pypi/pypi/demo/json", Reply(body=body))
    assert [r.version for r in pypi_releases(h.client(), "demo")] == ["0.9.0", "0.10.0rc1",
                                                                      "0.10.0"]


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


# -- track --------------------------------------------------------------------------------------


def test_track_released(h: Harness, entry: Entry) -> None:
    report = track(entry, h.client(), tag_template="core_v{version}")
    assert report.verdict is Verdict.RELEASED
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
    assert as_dict["verdict"] == "released" and as_dict["pr"]["milestone"] == "Core 0.16"


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
    assert report.verdict is Verdict.RELEASED and report.released_in == "0.18.0"
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
    assert (report.verdict, report.released_in) == (Verdict.RELEASED, "0.18.0")
    assert report.gate_names_release is False
    assert "no gate can name a triton release" in report.reason
    assert h.upstream.requests("/pypi/pypi/triton/json") and not h.upstream.requests(PYPI_PATH)


def test_track_open(h: Harness, entry: Entry) -> None:
    report = track(with_upstream(entry, pr=OPEN_PR_URL), h.client(),
                   tag_template="core_v{version}")
    assert (report.verdict, report.released_in, report.gate_names_release) == (
        Verdict.OPEN, None, False)
    assert "PR #4630 is open" in report.reason
    assert not any(s.path == PYPI_PATH for s in h.upstream.requests())


def test_track_closed_unmerged(h: Harness, entry: Entry) -> None:
    body = fixture("github_pull_4630_open.json")
    body.update(state="closed", closed_at="2026-06-02T00:00:00Z")
    h.upstream.route(OPEN_PR_PATH, Reply(body=body))
    report = track(with_upstream(entry, pr=OPEN_PR_URL), h.client(),
                   tag_template="core_v{version}")
    assert report.verdict is Verdict.CLOSED_UNMERGED
    assert "closed without merging" in report.reason


def test_track_no_upstream_link(h: Harness, entry: Entry) -> None:
    report = track(with_upstream(entry, pr=None), h.client(), tag_template="core_v{version}")
    assert report.verdict is Verdict.NO_UPSTREAM_LINK
    assert report.pr is None and report.issue is not None
    assert [s.path for s in h.upstream.requests()] == [ISSUE_PATH]


def test_track_merged_but_no_tag_contains_it(h: Harness, entry: Entry) -> None:
    for tag in ("core_v0.18.0", "core_v0.19.2"):
        body = fixture(f"github_compare_{tag}.json")
        body.update(status="ahead", ahead_by=3, behind_by=0)
        h.upstream.route(compare_path(tag), Reply(body=body))
    report = track(entry, h.client(), tag_template="core_v{version}")
    assert report.verdict is Verdict.MERGED_UNRELEASED
    assert report.released_in is None and report.latest_release == "0.19.2"
    assert report.gate_names_release is False
    assert "none of the megatron-core releases uploaded since (0.17.1, 0.18.0, 0.19.2)" \
        in report.reason


def test_track_wrong_tag_template_is_reported_not_hidden(h: Harness, entry: Entry) -> None:
    report = track(entry, h.client(), tag_template="v{version}")
    assert report.verdict is Verdict.MERGED_UNRELEASED
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


# -- cache --------------------------------------------------------------------------------------


def test_fresh_cache_answers_without_a_request(h: Harness) -> None:
    client = h.client()
    first = client.get_json(h.url(PR_PATH))
    h.clock.now += 59.0  # ttl is 60
    second = client.get_json(h.url(PR_PATH))
    assert len(h.upstream.requests(PR_PATH)) == 1
    assert (first.from_cache, second.from_cache, second.stale) == (False, True, False)
    assert second.data == first.data and second.fetched_at == first.fetched_at
    # A second client on the same cache directory hits it too: the cache is on disk.
    assert h.client().get_json(h.url(PR_PATH)).from_cache is True
    assert len(h.upstream.requests(PR_PATH)) == 1


@pytest.mark.parametrize(
    ("reply", "sent", "value"),
    [
        (Reply(body={"v": 1}, etag='W/"abc"'), "If-None-Match", 'W/"abc"'),
        (Reply(body={"v": 1}, last_modified="Fri, 24 Apr 2026 17:05:52 GMT"),
         "If-Modified-Since", "Fri, 24 Apr 2026 17:05:52 GMT"),
    ],
)
def test_stale_cache_revalidates_and_304_refreshes_it(h: Harness, reply: Reply, sent: str,
                                                      value: str) -> None:
    h.upstream.route("/github/x", reply)
    client = h.client()
    url = h.url("/github/x")
    client.get_json(url)
    assert sent not in h.upstream.requests("/github/x")[0].headers
    h.clock.now += 61.0
    again = client.get_json(url)
    second = h.upstream.requests("/github/x")[1]
    assert second.headers[sent] == value
    assert (again.data, again.from_cache, again.stale) == ({"v": 1}, True, False)
    assert again.fetched_at == dt.datetime.fromtimestamp(h.clock.now, dt.timezone.utc)
    # The 304 refreshed the timestamp: the next call within the TTL sends nothing.
    h.clock.now += 30.0
    client.get_json(url)
    assert len(h.upstream.requests("/github/x")) == 2


def test_stale_cache_replaced_by_a_changed_answer(h: Harness) -> None:
    h.upstream.route("/github/x", Reply(body={"v": 1}, etag='"1"'), Reply(body={"v": 2},
                                                                          etag='"2"'))
    client = h.client()
    client.get_json(h.url("/github/x"))
    h.clock.now += 61.0
    fresh = client.get_json(h.url("/github/x"))
    assert (fresh.data, fresh.from_cache) == ({"v": 2}, False)
    cached = json.loads(client.cache_path(h.url("/github/x")).read_text())
    assert (cached["data"], cached["etag"]) == ({"v": 2}, '"2"')


@pytest.mark.parametrize(
    "garbage",
    [
        b"",
        b'{"schema": 1, "url": ',
        b"\xff\xfe\x00 not utf-8",
        b"[]",
        b'{"schema": 1, "url": "http://elsewhere/", "fetched_at": NOW, "data": {"number": 1}}',
        b'{"schema": 1, "url": "URL", "fetched_at": "yesterday", "data": {"number": 1}}',
        b'{"schema": 1, "url": "URL", "fetched_at": NOW}',
        b'{"schema": 99, "url": "URL", "fetched_at": NOW, "data": {"number": 1}}',
        b'{"schema": 1, "url": "URL", "fetched_at": NOW, "etag": 7, "data": {"number": 1}}',
    ],
    ids=["empty", "truncated", "binary", "list", "other-url", "bad-time",
         "no-data", "future-schema", "bad-etag"],
)
def test_corrupt_cache_file_is_ignored_and_replaced(h: Harness, garbage: bytes) -> None:
    client = h.client()
    url = h.url(PR_PATH)
    path = client.cache_path(url)
    path.parent.mkdir(parents=True)
    # Where a timestamp parses, it is fresh: only the corruption can explain a request.
    path.write_bytes(garbage.replace(b"URL", url.encode()).replace(b"NOW", str(T0).encode()))
    fetched = client.get_json(url)
    assert fetched.from_cache is False and fetched.data["number"] == 4448
    assert len(h.upstream.requests(PR_PATH)) == 1
    assert json.loads(path.read_text())["data"]["number"] == 4448


def test_a_valid_cache_file_written_by_hand_is_served(h: Harness) -> None:
    """The control for the corrupt-cache table: the same shape, valid, is a cache hit."""
    client = h.client()
    url = h.url(PR_PATH)
    path = client.cache_path(url)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"schema": 1, "url": url, "fetched_at": T0, "etag": None,
                                "last_modified": None, "data": {"number": 1}}))
    assert client.get_json(url).data == {"number": 1}
    assert h.upstream.requests() == []


def test_cache_file_is_named_by_the_url_sha256(h: Harness) -> None:
    import hashlib

    client = h.client()
    url = h.url(PR_PATH)
    client.get_json(url)
    name = hashlib.sha256(url.encode()).hexdigest() + ".json"
    assert [p.name for p in h.cache_dir.iterdir()] == [name]  # no temp files left behind


# -- offline -----------------------------------------------------------------------------------


def test_offline_answers_from_cache_of_any_age_and_misses_loudly(h: Harness) -> None:
    h.client().get_json(h.url(PR_PATH))
    h.clock.now += 365 * 86400.0
    offline = h.client(offline=True)
    fetched = offline.get_json(h.url(PR_PATH))
    assert (fetched.from_cache, fetched.stale, fetched.data["number"]) == (True, True, 4448)
    with pytest.raises(OfflineMiss) as info:
        offline.get_json(h.url(ISSUE_PATH))
    assert h.url(ISSUE_PATH) in str(info.value) and "without offline mode" in str(info.value)
    assert len(h.upstream.requests()) == 1


# -- failures -----------------------------------------------------------------------------------


def test_404_is_not_found_and_not_retried(h: Harness) -> None:
    with pytest.raises(NotFound) as info:
        h.client().get_json(h.url(f"{GH}/pulls/999999"))
    message = str(info.value)
    assert h.url(f"{GH}/pulls/999999") in message and "HTTP 404" in message
    assert "check the owner, repository, number" in message
    assert len(h.upstream.requests()) == 1 and h.sleeps == []


def test_retries_5xx_with_exponential_backoff_then_succeeds(h: Harness) -> None:
    h.upstream.route("/github/flaky", Reply(500), Reply(502, "bad gateway"), Reply(body=[1]))
    fetched = h.client().get_json(h.url("/github/flaky"))
    assert fetched.data == [1]
    assert len(h.upstream.requests("/github/flaky")) == 3
    assert h.sleeps == [0.5, 1.0]


def test_persistent_5xx_is_a_server_error_after_all_retries(h: Harness) -> None:
    h.upstream.route("/github/down", Reply(503, {"message": "Service Unavailable"}))
    with pytest.raises(ServerError) as info:
        h.client(retries=2).get_json(h.url("/github/down"))
    assert (info.value.status, info.value.attempts) == (503, 3)
    assert len(h.upstream.requests("/github/down")) == 3
    assert h.sleeps == [0.5, 1.0]
    assert h.url("/github/down") in str(info.value) and "try again later" in str(info.value)


def test_timeout_is_retried_then_upstream_timeout(h: Harness) -> None:
    h.upstream.route("/github/slow", Reply(body={}, delay=1.0))
    with pytest.raises(UpstreamTimeout) as info:
        h.client(timeout=0.05, retries=1).get_json(h.url("/github/slow"))
    assert info.value.attempts == 2 and len(h.upstream.requests("/github/slow")) == 2
    assert h.sleeps == [0.5]
    assert h.url("/github/slow") in str(info.value) and "0.05 s" in str(info.value)


def test_connection_refused_is_unreachable(h: Harness) -> None:
    port = dead_port()
    base = f"http://127.0.0.1:{port}"
    with pytest.raises(UpstreamUnreachable) as info:
        h.client(github_api=base, retries=1).get_json(base + "/repos/a/b/pulls/1")
    assert info.value.attempts == 2 and h.sleeps == [0.5]
    assert "refused" in str(info.value).lower() and f":{port}/repos/a/b/pulls/1" in str(
        info.value)


def test_malformed_json_is_refused_and_the_good_cache_survives(h: Harness) -> None:
    h.upstream.route("/github/x", Reply(body={"good": True}),
                     Reply(body="<html>proxy login</html>"))
    client = h.client()
    url = h.url("/github/x")
    client.get_json(url)
    before = client.cache_path(url).read_bytes()
    h.clock.now += 61.0
    with pytest.raises(MalformedResponse) as info:
        client.get_json(url)
    assert url in str(info.value) and "<html>proxy login" in str(info.value)
    assert client.cache_path(url).read_bytes() == before
    assert h.sleeps == []  # a bad body is not retried


def test_malformed_json_is_never_cached(h: Harness) -> None:
    h.upstream.route("/pypi/pypi/broken/json", Reply(body='{"releases": '))
    client = h.client()
    with pytest.raises(MalformedResponse):
        pypi_releases(client, "broken")
    assert not client.cache_path(h.url("/pypi/pypi/broken/json")).exists()


def dead_port() -> int:
    """A loopback port nothing listens on (bound by us on port 0, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


RESET = 1_800_003_600  # T0 + 1 h


def rate_limited_403() -> Reply:
    return Reply(403, {"message": "API rate limit exceeded"},
                 headers={"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0",
                          "X-RateLimit-Reset": str(RESET)})


def test_403_rate_limit_names_the_reset_time(h: Harness) -> None:
    h.upstream.route("/github/x", rate_limited_403())
    with pytest.raises(RateLimited) as info:
        h.client().get_json(h.url("/github/x"))
    reset = dt.datetime.fromtimestamp(RESET, dt.timezone.utc)
    assert info.value.reset_at == reset
    message = str(info.value)
    assert reset.strftime("%Y-%m-%d %H:%M:%S UTC") in message
    assert h.url("/github/x") in message and "GITHUB_TOKEN" in message
    assert len(h.upstream.requests()) == 1 and h.sleeps == []  # not hammered


def test_403_rate_limit_falls_back_to_a_stale_cached_copy(
        h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    h.upstream.route("/github/x", Reply(body={"v": 1}), rate_limited_403())
    client = h.client()
    first = client.get_json(h.url("/github/x"))
    h.clock.now += 61.0
    with caplog.at_level(logging.WARNING, logger="patchlane.upstream.tracking"):
        fallback = client.get_json(h.url("/github/x"))
    assert isinstance(fallback, Fetched)
    assert (fallback.data, fallback.from_cache, fallback.stale) == ({"v": 1}, True, True)
    assert fallback.fetched_at == first.fetched_at
    assert fallback.stale_reason is not None and "rate limited" in fallback.stale_reason
    assert "rate limited" in caplog.text


def test_403_without_rate_limit_headers_is_not_a_rate_limit(h: Harness) -> None:
    h.upstream.route("/github/x", Reply(403, {"message": "Resource not accessible"}))
    with pytest.raises(UpstreamError) as info:
        h.client().get_json(h.url("/github/x"))
    assert not isinstance(info.value, RateLimited)
    assert "HTTP 403" in str(info.value) and h.url("/github/x") in str(info.value)


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [
        ("120", dt.datetime.fromtimestamp(T0 + 120, dt.timezone.utc)),
        ("Wed, 21 Oct 2026 07:28:00 GMT", dt.datetime(2026, 10, 21, 7, 28,
                                                       tzinfo=dt.timezone.utc)),
    ],
)
def test_429_retry_after(h: Harness, retry_after: str, expected: dt.datetime) -> None:
    h.upstream.route("/pypi/pypi/demo/json", Reply(429, "slow down",
                                                   headers={"Retry-After": retry_after}))
    with pytest.raises(RateLimited) as info:
        pypi_releases(h.client(), "demo")
    assert info.value.status == 429 and info.value.reset_at == expected
    assert expected.strftime("%Y-%m-%d %H:%M:%S UTC") in str(info.value)
    assert len(h.upstream.requests()) == 1


# -- the token ----------------------------------------------------------------------------------


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        todo += [item.__cause__, item.__context__]


@pytest.mark.parametrize("env_name", ["GITHUB_TOKEN", "PL_UPSTREAM_TOKEN"])
def test_token_is_sent_to_github_only_and_never_leaks(
        h: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        env_name: str) -> None:
    monkeypatch.setenv(env_name, TOKEN)
    caplog.set_level(logging.DEBUG)
    h.upstream.route("/github/limited", rate_limited_403())
    h.upstream.route("/github/down", Reply(500))
    h.upstream.route("/github/slow", Reply(body={}, delay=1.0))
    h.upstream.route("/github/garbage", Reply(body="not json"))
    client = h.client(token_env=env_name, retries=1)
    impatient = h.client(token_env=env_name, retries=1, timeout=0.05)

    pr_state(client, PR_URL)
    pypi_releases(client, "megatron-core")
    errors: list[BaseException] = []
    for which, path in ((client, "/github/limited"), (client, "/github/down"),
                        (impatient, "/github/slow"), (client, "/github/garbage"),
                        (client, f"{GH}/pulls/1")):
        with pytest.raises(UpstreamError) as info:
            which.get_json(h.url(path))
        errors.append(info.value)
    dead = f"http://127.0.0.1:{dead_port()}"
    with Client(dataclasses.replace(client.config, github_api=dead, retries=0)) as other, \
            pytest.raises(UpstreamUnreachable) as unreachable:
        other.get_json(dead + "/x")
    errors.append(unreachable.value)

    assert h.upstream.requests(PR_PATH)[0].headers["Authorization"] == f"Bearer {TOKEN}"
    assert all(s.headers.get("Authorization") == f"Bearer {TOKEN}"
               for s in h.upstream.requests() if s.path.startswith("/github/"))
    assert "Authorization" not in h.upstream.requests(PYPI_PATH)[0].headers  # not PyPI's
    for error in errors:
        for item in _chain(error):
            assert TOKEN not in str(item) and TOKEN not in repr(item)
            assert all(TOKEN not in repr(arg) for arg in item.args)
        assert TOKEN not in "".join(traceback.format_exception(error))
    for cache_file in h.cache_dir.iterdir():
        assert TOKEN.encode() not in cache_file.read_bytes()
    assert len(list(h.cache_dir.iterdir())) == 2
    assert caplog.records  # the client did log; none of it carries the token
    for record in caplog.records:
        assert TOKEN not in record.getMessage()
    assert TOKEN not in caplog.text


def test_no_token_no_authorization_header(h: Harness) -> None:
    pr_state(h.client(), PR_URL)
    assert "Authorization" not in h.upstream.requests(PR_PATH)[0].headers


def test_importing_the_module_does_not_import_requests() -> None:
    import subprocess
    import sys

    code = ("import sys, patchlane.upstream.tracking; "
            "sys.exit('requests' in sys.modules or 'urllib3' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0

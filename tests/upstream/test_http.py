"""The HTTP client's failures: not found, retries (urllib3's Retry), timeouts, refused
connections, malformed bodies, rate limits, and the token that must never leak."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import traceback
from collections.abc import Iterator

import pytest

from patchlane.upstream import (
    Client,
    Fetched,
    MalformedResponse,
    NotFound,
    RateLimited,
    ServerError,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnreachable,
    pr_state,
    pypi_releases,
)
from patchlane.upstream.retries import RETRY_AFTER_MAX

from .fake_upstream import (
    GH,
    PR_PATH,
    PR_URL,
    PYPI_PATH,
    REPO,
    RESET,
    T0,
    TOKEN,
    Harness,
    Reply,
    dead_port,
    rate_limited_403,
)

# -- failures -----------------------------------------------------------------------------------


def test_404_is_not_found_and_not_retried(h: Harness) -> None:
    with pytest.raises(NotFound) as info:
        h.client().get_json(h.url(f"{GH}/pulls/999999"))
    message = str(info.value)
    assert h.url(f"{GH}/pulls/999999") in message and "HTTP 404" in message
    assert "check the owner, repository, number" in message
    assert len(h.upstream.requests()) == 1 and h.sleeps == []


def test_a_404_is_cached_under_the_same_lifetime_rules(
        h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    url = h.url(f"{GH}/pulls/999999")
    client = h.client()
    with pytest.raises(NotFound):
        client.get_json(url)
    with pytest.raises(NotFound) as again:  # within the TTL: from the cache, nothing sent
        client.get_json(url)
    assert len(h.upstream.requests()) == 1
    assert "HTTP 404" in str(again.value) and "a cached answer" in str(again.value)
    h.clock.now += 365 * 86400.0
    with pytest.raises(NotFound):  # offline: the cached answer, of any age; not a miss
        h.client(offline=True).get_json(url)
    assert len(h.upstream.requests()) == 1
    with pytest.raises(NotFound):  # older than the TTL: asked again
        client.get_json(url)
    assert len(h.upstream.requests()) == 2
    # a 404 without a token may be a private repository: a token set since asks again
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    with pytest.raises(NotFound):
        client.get_json(url)
    assert len(h.upstream.requests()) == 3
    h.upstream.route(f"{GH}/pulls/999999", Reply(body={"number": 999999}))
    h.clock.now += 61.0
    assert client.get_json(url).data == {"number": 999999}  # it exists now: answered


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


def test_retry_after_on_a_5xx_is_honoured_up_to_a_cap(h: Harness) -> None:
    """urllib3's respect_retry_after_header: a 503 saying when to come back is waited out (at
    most RETRY_AFTER_MAX seconds); an unreadable value falls back to the backoff."""
    h.upstream.route("/github/busy", Reply(503, headers={"Retry-After": "7"}), Reply(body=[1]))
    h.upstream.route("/github/busier", Reply(503, headers={"Retry-After": "99999"}),
                     Reply(body=[2]))
    h.upstream.route("/github/garbled", Reply(503, headers={"Retry-After": "soon"}),
                     Reply(body=[3]))
    client = h.client()
    assert client.get_json(h.url("/github/busy")).data == [1]
    assert h.sleeps == [7.0]
    assert client.get_json(h.url("/github/busier")).data == [2]
    assert h.sleeps == [7.0, float(RETRY_AFTER_MAX)]
    assert client.get_json(h.url("/github/garbled")).data == [3]
    assert h.sleeps == [7.0, float(RETRY_AFTER_MAX), 0.5]


def test_a_429_with_retry_after_is_not_waited_out_when_a_cached_copy_exists(
        h: Harness) -> None:
    h.upstream.route("/github/x", Reply(body={"v": 1}),
                     Reply(429, "slow down", headers={"Retry-After": "30"}))
    client = h.client()
    client.get_json(h.url("/github/x"))
    h.clock.now += 61.0
    fallback = client.get_json(h.url("/github/x"))
    assert (fallback.data, fallback.stale) == ({"v": 1}, True)
    assert len(h.upstream.requests("/github/x")) == 2 and h.sleeps == []


def test_each_retry_is_logged_with_its_cause(h: Harness,
                                             caplog: pytest.LogCaptureFixture) -> None:
    h.upstream.route("/github/flaky", Reply(500), Reply(body=[1]))
    with caplog.at_level(logging.INFO, logger="patchlane.upstream.retries"):
        h.client().get_json(h.url("/github/flaky"))
    assert "retrying GET /github/flaky in 0.50 s after HTTP 500 (attempt 2 of 4)" in caplog.text


def test_retries_off_means_one_attempt(h: Harness) -> None:
    h.upstream.route("/github/down", Reply(502))
    with pytest.raises(ServerError) as info:
        h.client(retries=0).get_json(h.url("/github/down"))
    assert info.value.attempts == 1 and "on the only attempt (retries are off)" in str(
        info.value)
    assert len(h.upstream.requests("/github/down")) == 1 and h.sleeps == []


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
    with caplog.at_level(logging.WARNING, logger="patchlane.upstream.http"):
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
    # the PR and PyPI's answer, and the 404 for pulls/1 (cached as "not found", no header)
    assert len(list(h.cache_dir.iterdir())) == 3
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

    # Every module of the package but retries.py, which is imported when a request is sent.
    modules = ", ".join(f"patchlane.upstream.{name}" for name in (
        "answers", "cache", "display", "errors", "github", "http", "pypi", "records", "retire",
        "track"))
    code = (f"import sys, patchlane.upstream, {modules}; "
            "sys.exit('requests' in sys.modules or 'urllib3' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, timeout=60).returncode == 0

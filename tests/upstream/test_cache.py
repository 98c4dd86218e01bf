"""The client's on-disk cache: TTL, revalidation, corrupt files, and offline answers."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from patchlane.upstream import NotFound, OfflineMiss

from .fake_upstream import ISSUE_PATH, PR_PATH, T0, Harness, Reply

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


def test_a_not_found_answer_is_stored_as_its_status_without_data(h: Harness) -> None:
    """The file of a 404: the status and whether a token was sent (never the token), no body;
    a body's file keeps its shape (no status key)."""
    client = h.client()
    url = h.url("/github/repos/NVIDIA/Megatron-LM/pulls/1")
    with pytest.raises(NotFound):
        client.get_json(url)
    record = json.loads(client.cache_path(url).read_text())
    assert (record["status"], record["authenticated"], record["data"]) == (404, False, None)
    client.get_json(h.url(PR_PATH))
    assert "status" not in json.loads(client.cache_path(h.url(PR_PATH)).read_text())
    record["status"] = 500  # not an answer this cache keeps: ignored, and asked again
    client.cache_path(url).write_text(json.dumps(record))
    with pytest.raises(NotFound):
        client.get_json(url)
    assert len(h.upstream.requests("/github/repos/NVIDIA/Megatron-LM/pulls/1")) == 2


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



"""The upstream client against hostile or broken servers (issue 14 item 9): a total deadline,
redirects only within one host, a body cap, and messages instead of tracebacks for absurd
headers and deeply nested JSON. Real sockets on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from patchlane.upstream import MalformedResponse, UpstreamError, UpstreamTimeout

from .fake_upstream import PR_PATH, Harness, Reply


@contextmanager
def trickling_server(interval: float) -> Iterator[str]:
    """Headers at once, then one body byte every ``interval`` seconds, forever."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000000\r\n\r\n[")
                while not stop.wait(interval):
                    try:
                        conn.sendall(b" ")
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()


def test_a_trickling_body_hits_the_total_deadline(h: Harness) -> None:
    with trickling_server(0.2) as base:
        client = h.client(github_api=base, timeout=1.0, deadline=1.5, retries=0)
        started = time.monotonic()
        with pytest.raises(UpstreamTimeout):
            client.get_json(base + "/repos/x/y/pulls/1")
        assert time.monotonic() - started < 10


def test_a_redirect_to_another_host_is_not_followed_or_cached(h: Harness) -> None:
    h.upstream.route(PR_PATH, Reply(301, None, headers={
        "Location": "http://127.0.0.2:9/elsewhere"}))
    client = h.client()
    with pytest.raises(UpstreamError, match="redirected to another host"):
        client.get_json(h.url(PR_PATH))
    assert not any(h.cache_dir.rglob("*.json"))


def test_a_redirect_within_the_host_is_followed(h: Harness) -> None:
    h.upstream.route(PR_PATH, Reply(302, None, headers={"Location": "/github/moved"}))
    h.upstream.route("/github/moved", Reply(200, {"moved": True}))
    assert h.client().get_json(h.url(PR_PATH)).data == {"moved": True}


def test_a_body_over_the_cap_is_refused(h: Harness) -> None:
    h.upstream.route(PR_PATH, Reply(200, b"[" + b"1," * 600_000 + b"1]"))
    with pytest.raises(MalformedResponse, match="cap"):
        h.client(max_body=1_000_000).get_json(h.url(PR_PATH))
    assert not any(h.cache_dir.rglob("*.json"))


def test_deeply_nested_json_and_an_absurd_retry_after_give_messages(h: Harness) -> None:
    h.upstream.route(PR_PATH, Reply(200, b"[" * 200_000 + b"]" * 200_000))
    with pytest.raises(MalformedResponse, match="nested too deeply"):
        h.client().get_json(h.url(PR_PATH))
    h.upstream.route(PR_PATH, Reply(429, {"message": "slow down"},
                                    headers={"Retry-After": "9" * 20}))
    with pytest.raises(UpstreamError) as info:
        h.client(retries=0).get_json(h.url(PR_PATH))
    assert "rate limit" in str(info.value).lower()

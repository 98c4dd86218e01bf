"""A fake GitHub and PyPI on 127.0.0.1, for the upstream tests.

:func:`serve` runs a ``ThreadingHTTPServer`` on an ephemeral port serving the JSON in
``tests/upstream/fixtures/`` (see its README: realistic shapes, made-up values) under
``/github/...`` (the GitHub API base) and ``/pypi/...`` (the PyPI base). Each path can be given a
sequence of replies (status, headers, body, delay, ETag / Last-Modified revalidation); the last
reply repeats. Every request's path and headers are recorded, so tests assert what was *sent*
(conditional headers, the token) as well as what came back. Sleeping and the clock are injected
through :class:`Harness`: no test waits for a backoff or a TTL.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from patchlane.registry import Entry, RetireWhen
from patchlane.upstream import Client, TrackerConfig

from ..conftest import free_port

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


def tags_path(prefix: str) -> str:
    """GitHub's list of the tags starting with ``prefix`` (``git/matching-refs``)."""
    return f"{GH}/git/matching-refs/tags/{prefix}"


def refs(*tags: str) -> list[dict[str, Any]]:
    """``git/matching-refs``' answer for ``tags``, in GitHub's shape."""
    return [{"ref": f"refs/tags/{tag}", "node_id": f"REF_{i}",
             "url": f"https://api.github.com/repos/NVIDIA/Megatron-LM/git/refs/tags/{tag}",
             "object": {"sha": f"{i:040x}", "type": "commit",
                        "url": f"https://api.github.com/repos/NVIDIA/Megatron-LM/git/commits/"
                               f"{i:040x}"}}
            for i, tag in enumerate(tags)]


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


class Handler(BaseHTTPRequestHandler):
    server: Server

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


class Server(ThreadingHTTPServer):
    daemon_threads = True
    fake: FakeUpstream


def default_routes(fake: FakeUpstream) -> None:
    fake.route(PR_PATH, Reply(body=fixture("github_pull_4448.json")))
    fake.route(OPEN_PR_PATH, Reply(body=fixture("github_pull_4630_open.json")))
    fake.route(ISSUE_PATH, Reply(body=fixture("github_issue_4378.json")))
    fake.route(PYPI_PATH, Reply(body=fixture("pypi_megatron-core.json")))
    for tag in TAGS:
        fake.route(compare_path(tag), Reply(body=fixture(f"github_compare_{tag}.json")))
    fake.route(tags_path("core_v"), Reply(body=refs(*TAGS)))



@contextmanager
def serve() -> Iterator[FakeUpstream]:
    """A running fake with the default routes; shut down on exit."""
    fake = FakeUpstream()
    default_routes(fake)
    server = Server(("127.0.0.1", 0), Handler)
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



def with_upstream(entry: Entry, **changes: Any) -> Entry:
    return dataclasses.replace(entry, upstream=entry.upstream._replace(**changes))


def with_gate(entry: Entry, spec: str | None) -> Entry:
    release = SpecifierSet(spec) if spec else None
    return dataclasses.replace(entry, retire_when=RetireWhen(release=release, probe=True))


def utc(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.timezone.utc)



def dead_port() -> int:
    """A loopback port nothing listens on (bound by us on port 0, then closed)."""
    return free_port()


RESET = 1_800_003_600  # T0 + 1 h


def rate_limited_403() -> Reply:
    return Reply(403, {"message": "API rate limit exceeded"},
                 headers={"X-RateLimit-Limit": "60", "X-RateLimit-Remaining": "0",
                          "X-RateLimit-Reset": str(RESET)})


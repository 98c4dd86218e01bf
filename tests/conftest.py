"""Shared fixtures.

``fake_target`` builds a tiny *fake target package* (with distribution metadata, a registry and
an overlay) for the framework's own mechanics: hooks, gates, drift, idempotence. It is never
evidence that a real patch works; the real-upstream tests live in ``tests/releases/``.
"""

from __future__ import annotations

import os
import socket
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.deciding.audit import AuditLog
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.installed.fingerprint import compute_from_source
from patchlane.registry import load_registries

# The suite's cases (every run of a reproducer's ranks that names no start: sweeps, the
# matrix, bisect steps, drafts' checks) start their CPU ranks warm where that proves what a
# fresh start proves (docs/sweep.md, "How a case's ranks start"): a megatron rank's import of
# torch is most of its CPU. tests/evidence/test_rank_start.py holds the two starts to the same
# outcome on every real case of the installed release, and the tests about the fresh start
# ask for it.
os.environ.setdefault("PATCHLANE_RANK_START", "warm")

TARGET_SOURCE = '''
"""A fake upstream module."""

FIXED = False


class Greeter:
    def greet(self, name):
        return f"hello {name}"


def shout(text):
    return text.upper()
'''

OVERLAY_SOURCE = '''
def overlay(wrapped, instance, args, kwargs):
    return "patched " + wrapped(*args, **kwargs)


def probe(module):
    return bool(getattr(module, "FIXED", False))
'''


@dataclass
class FakeTarget:
    root: Path
    package: str
    distribution: str
    version: str
    entry_id: str

    @property
    def module(self) -> str:
        return f"{self.package}.target"

    @property
    def registry(self) -> Path:
        return self.root / "registry.yaml"

    @property
    def target_file(self) -> Path:
        return self.root / self.package / "target.py"

    def entry(self, **overrides: Any) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.entry_id,
            "kind": "source_patch",
            "summary": "fake target for mechanics tests",
            "target": {"distribution": self.distribution,
                       "object": f"{self.module}:Greeter.greet"},
            "applies_to": ">=1.0,<2.0",
            "upstream": {"issue": "https://example.invalid/issues/1", "forwarded": "no",
                         "draft": f"drafts/{self.entry_id}.md"},
            "retire_when": {"release": ">=2.0", "probe": True},
            "overlay": f"patches/{self.entry_id}.py",
            "reproducer": f"reproducers/{self.entry_id}.py",
            "fingerprint": {"policy": "refuse", "sha256": [self.fingerprint()]},
            "owner": "tests",
            "added": "2026-11-22",
            "status": "active",
        }
        data.update(overrides)
        return data

    def fingerprint(self, qualnames: tuple[str, ...] = ("Greeter.greet",)) -> str:
        return compute_from_source(self.target_file.read_text(), qualnames)

    def write_registry(self, *entries: dict[str, Any]) -> Path:
        body = {"schema": 1, "entries": list(entries) or [self.entry()]}
        self.registry.write_text(yaml.safe_dump(body, sort_keys=False))
        return self.registry

    def write_overlay(self, source: str) -> None:
        (self.root / "patches" / f"{self.entry_id}.py").write_text(textwrap.dedent(source))

    def decider(self, env: dict[str, str] | None = None, start: bool = True) -> Decider:
        if not self.registry.exists():
            self.write_registry()
        decider = Decider(load_registries([self.registry]), Controls.from_env(env or {}),
                          AuditLog())
        if start:
            decider.start()
        return decider

    def import_target(self) -> Any:
        import importlib

        return importlib.import_module(self.module)


def make_fake(root: Path, version: str = "1.2.0") -> FakeTarget:
    tag = uuid.uuid4().hex[:10]
    package = f"plfake_{tag}"
    fake = FakeTarget(root=root, package=package, distribution=f"plfake-{tag}",
                      version=version, entry_id=f"fake_{tag}")
    (root / package).mkdir(parents=True)
    (root / package / "__init__.py").write_text("")
    fake.target_file.write_text(TARGET_SOURCE)
    meta = root / f"plfake_{tag}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {fake.distribution}\nVersion: {version}\n")
    (root / "patches").mkdir()
    (root / "reproducers").mkdir()
    (root / "drafts").mkdir()
    (root / "drafts" / f"{fake.entry_id}.md").write_text("# a draft for upstream\n")
    fake.write_overlay(OVERLAY_SOURCE)
    (root / "reproducers" / f"{fake.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n    pass\n")
    return fake


@pytest.fixture
def fake_target(tmp_path: Path) -> Iterator[FakeTarget]:
    fake = make_fake(tmp_path)
    sys.path.insert(0, str(tmp_path))
    try:
        yield fake
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith(fake.package)
                     or m.endswith(fake.entry_id)]:
            del sys.modules[name]


def free_port() -> int:
    """A loopback TCP port free now (bound on port 0, then closed): for a rendezvous
    (torchrun, gloo's MASTER_PORT), or as a port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With pytest-xdist (``./scripts/test`` runs ``-n N --dist loadgroup``): a module's tests
    stay on one worker, so a module-scoped fixture (a real sweep, an installed wheel) runs
    once; a module marked ``independent`` (each test its own release set) spreads over the
    workers instead, so its longest tests do not queue behind each other.

    The workers take the groups in collection order, so the long ones go first (a release
    set's own test, then the other real-upstream modules, then the other slow ones; each
    module's tests keep their order): a long module collected last would run alone at the end
    while the other worker idles (the 3.12 half ended on a 70-second test)."""
    def weight(item: pytest.Item) -> int:
        marks = {name for name in ("independent", "upstream", "slow")
                 if item.get_closest_marker(name) is not None}
        return (0 if {"independent", "slow"} <= marks else 1 if {"upstream", "slow"} <= marks
                else 2 if "slow" in marks else 3)

    items.sort(key=weight)  # stable: the order within each weight stays
    for item in items:
        if item.get_closest_marker("independent") is None:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module
                                                    else item.nodeid.split("::")[0]))


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """patchlane's wheel, built once per test process from this checkout (as a user installs
    it): the tests that run patchlane installed, outside the checkout, share it."""
    import subprocess

    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                    str(out), str(Path(__file__).resolve().parents[1])], check=True,
                   capture_output=True, timeout=300)
    (path,) = out.glob("patchlane-*.whl")
    return path

"""The validated-registry cache: reused only while every input is unchanged, never an error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchlane import registry_cache
from patchlane.audit import AuditLog, Outcome
from patchlane.controls import Controls
from patchlane.errors import RegistryError
from patchlane.importer import Decider
from patchlane.registry import load_registries

from ..conftest import FakeTarget


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path, ...]]:
    """Every full parse + validation the cache falls back to."""
    calls: list[tuple[Path, ...]] = []

    def spy(paths: Any) -> Any:
        calls.append(tuple(paths))
        return load_registries(paths)

    monkeypatch.setattr(registry_cache, "load_registries", spy)
    return calls


def test_second_load_is_served_from_the_cache(fake_target: FakeTarget, tmp_path: Path,
                                              parses: list[tuple[Path, ...]]) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    first = registry_cache.load([path], cache)
    assert len(parses) == 1 and len(list(cache.glob("*.pickle"))) == 1
    second = registry_cache.load([path], cache)
    assert len(parses) == 1  # no parse, no validation
    assert second.entries == first.entries == load_registries([path]).entries
    assert second.sources == first.sources and second.contents == first.contents
    assert second.digest == first.digest


def test_a_cached_registry_starts_a_lane_without_rebuilding_its_entries(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    cached = registry_cache.load([path], cache)
    assert cached.startup_index == load_registries([path]).startup_index
    lane = Decider(cached, Controls.from_env({}), AuditLog())
    lane.start()
    assert "_entries" not in cached.__dict__  # `import patchlane` read the index only
    decision = lane.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.PENDING
    assert decision.reason == f"waiting for `import {fake_target.module}`"
    assert decision.applies_to == "<2.0,>=1.0"
    module = fake_target.import_target()  # the hook needs the entry: rebuilt now, once
    assert lane.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED
    assert module.Greeter().greet("x") == "patched hello x"
    assert cached.entries is cached.entries and cached.entries == load_registries([path]).entries


def test_unreadable_cached_entries_are_parsed_again(fake_target: FakeTarget,
                                                    tmp_path: Path) -> None:
    path = fake_target.write_registry()
    registry_cache.load([path], tmp_path / "cache")
    cached = registry_cache.load([path], tmp_path / "cache")
    cached.__dict__["_blob"] = b"not a pickle"  # e.g. written by an incompatible interpreter
    assert cached.entries == load_registries([path]).entries


def test_changed_bytes_are_parsed_again(fake_target: FakeTarget, tmp_path: Path,
                                        parses: list[tuple[Path, ...]]) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    fake_target.write_registry(fake_target.entry(summary="changed"))
    (entry,) = registry_cache.load([path], cache).entries
    assert entry.summary == "changed" and len(parses) == 2


def test_a_removed_overlay_is_caught_as_validation_would(fake_target: FakeTarget,
                                                         tmp_path: Path) -> None:
    path = fake_target.write_registry()
    patches = fake_target.root / "patches"
    os.utime(patches, ns=(10**18, 10**18))  # so the removal's mtime differs on any filesystem
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    (patches / f"{fake_target.entry_id}.py").unlink()
    with pytest.raises(RegistryError, match="file does not exist"):
        registry_cache.load([path], cache)


def test_a_rejected_registry_is_never_cached(fake_target: FakeTarget, tmp_path: Path) -> None:
    path = fake_target.write_registry(fake_target.entry(applies_to=">=1.0"))  # no upper bound
    cache = tmp_path / "cache"
    for _ in range(2):
        with pytest.raises(RegistryError, match="upper bound"):
            registry_cache.load([path], cache)
    assert not list(cache.glob("*.pickle"))


@pytest.mark.parametrize("damage", ["garbage", "others-can-write"])
def test_a_bad_cache_file_is_a_miss(fake_target: FakeTarget, tmp_path: Path, damage: str,
                                    parses: list[tuple[Path, ...]]) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    (file,) = cache.glob("*.pickle")
    if damage == "garbage":
        file.write_bytes(b"not a pickle")
    else:
        file.chmod(0o666)  # unpickling runs code: only a file nobody else can write is read
    assert registry_cache.load([path], cache).entries == load_registries([path]).entries
    assert len(parses) == 2
    assert file.stat().st_mode & 0o077 == 0  # rewritten, private again


def test_an_unwritable_cache_directory_is_no_error(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    path = fake_target.write_registry()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert registry_cache.load([path], blocker / "cache").entries  # mkdir fails: no cache


def test_cache_controls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Controls.from_env({"PATCHLANE_REGISTRY_CACHE": "0"}).registry_cache is None
    assert Controls.from_env({"PATCHLANE_REGISTRY_CACHE": str(tmp_path)}).registry_cache \
        == tmp_path
    assert Controls.from_env({"XDG_CACHE_HOME": str(tmp_path)}).registry_cache \
        == tmp_path / "patchlane" / "registry"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Controls.from_env({}).registry_cache == tmp_path / "home/.cache/patchlane/registry"


def _child_env(registry: Path, cache: Path, **extra: str) -> dict[str, str]:
    """The environment of a fresh interpreter whose `import patchlane` starts on ``registry``
    with its validated copy cached in ``cache``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({"PATCHLANE_REGISTRY": str(registry), "PATCHLANE_REGISTRY_CACHE": str(cache),
                "PYTHONWARNINGS": "ignore", **extra})
    return env


def _child(code: str, env: dict[str, str]) -> Any:
    """What ``code`` prints as JSON, run by a fresh interpreter (outside any checkout)."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, cwd="/")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_import_patchlane_uses_and_fills_the_cache(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    env = _child_env(fake_target.write_registry(), tmp_path / "c")
    code = ("import json, patchlane\n"
            "print(json.dumps([(e['id'], e['decision']['outcome'], e['decision']['reason'])"
            " for e in patchlane.report()['entries']]))")
    first, second = (_child(code, env) for _ in range(2))
    assert first == second and fake_target.entry_id in {i for i, _, _ in first}
    assert len(list((tmp_path / "c").glob("*.pickle"))) == 1


def test_a_start_served_from_the_cache_loads_no_parser_or_schema(fake_target: FakeTarget,
                                                                 tmp_path: Path) -> None:
    """What the cache saves is the parse and the validation, and their imports with them."""
    env = _child_env(fake_target.write_registry(), tmp_path / "c")
    code = ("import json, sys, patchlane\n"
            "print(json.dumps(sorted(m for m in ('yaml', 'patchlane.registry.safe_yaml',\n"
            "    'patchlane.registry.schema', 'patchlane.registry.loader') if m in sys.modules)))")
    first, second = (_child(code, env) for _ in range(2))
    assert first == ["patchlane.registry.loader", "patchlane.registry.safe_yaml",
                     "patchlane.registry.schema", "yaml"]  # a miss: parsed and validated
    assert second == []
    from patchlane.registry import SCHEMA_VERSION, load_registries, parse_registry

    assert (SCHEMA_VERSION, load_registries.__module__, parse_registry.__module__) \
        == (1, "patchlane.registry.loader", "patchlane.registry.loader")  # there when asked


def test_a_change_to_any_module_of_the_registry_package_revalidates(fake_target: FakeTarget,
                                                                     tmp_path: Path) -> None:
    """The cache stands for what the registry package's code made of the files: its schema, its
    reader, and the record classes the pickle names. Touching any one of its modules (in a copy
    of patchlane, imported by fresh interpreters) makes the next start validate again."""
    import patchlane

    root = tmp_path / "src"
    shutil.copytree(Path(patchlane.__file__).parent, root / "patchlane")
    package = root / "patchlane" / "registry"
    modules = sorted(package.glob("*.py"))
    assert {"__init__.py", "records.py", "schema.py", "reader.py", "safe_yaml.py", "loader.py"} \
        <= {m.name for m in modules}
    env = _child_env(fake_target.write_registry(), tmp_path / "cache", PYTHONPATH=str(root),
                     PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0")
    # The start, then a second load in the same process: whether each came from the cache.
    code = ("import json, patchlane\n"
            "from patchlane import registry_cache, startup\n"
            "lane = startup.current()\n"
            "again = registry_cache.load(startup.registry_paths(lane.controls),\n"
            "                            lane.controls.registry_cache)\n"
            "print(json.dumps([patchlane.__file__, lane.registry.entries[0].id,\n"
            "    isinstance(lane.registry, registry_cache._CachedRegistry),\n"
            "    isinstance(again, registry_cache._CachedRegistry)]))")

    def start() -> tuple[bool, bool]:
        file, entry_id, started_cached, then_cached = _child(code, env)
        assert Path(file).parent == root / "patchlane" and entry_id == fake_target.entry_id
        return started_cached, then_cached

    assert start() == (False, True)  # validated, cached
    assert start() == (True, True)  # nothing changed: served from the cache
    for i, module in enumerate(modules, start=1):
        info = module.stat()
        if module.name == "records.py":  # new bytes at the same mtime: the size tells
            module.write_text(module.read_text() + "\n# changed\n")
            os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns))
        else:  # the same bytes at a new mtime
            os.utime(module, ns=(info.st_atime_ns, info.st_mtime_ns + i * 10**9))
        assert start() == (False, True), module.name  # validated again, then cached again

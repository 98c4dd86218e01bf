"""The validated-registry cache: reused only while every input is unchanged, never an error."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchlane.deciding.audit import AuditLog, Outcome
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.registry import Registry, load_registries
from patchlane.registry import cache as registry_cache

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


def test_a_cached_registry_starts_a_decider_without_rebuilding_its_entries(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    cached = registry_cache.load([path], cache)
    assert cached.startup_rows == load_registries([path]).startup_rows
    decider = Decider(cached, Controls.from_env({}), AuditLog())
    decider.start()
    assert "_entries" not in cached.__dict__  # `import patchlane` read the index only
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.PENDING
    assert decision.reason == f"waiting for `import {fake_target.module}`"
    assert decision.applies_to == "<2.0,>=1.0"
    module = fake_target.import_target()  # the hook needs the entry: rebuilt now, once
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED
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


def refused_by(registry: Registry, says: str) -> None:
    """A start refuses the file on its own: no entry of it loads, its error says ``says``."""
    assert registry.entries == () and len(registry.rejected) == 1, registry.rejected
    assert re.search(says, str(registry.rejected[0])), registry.rejected[0]


def test_a_removed_overlay_is_caught_as_validation_would(fake_target: FakeTarget,
                                                         tmp_path: Path) -> None:
    path = fake_target.write_registry()
    patches = fake_target.root / "patches"
    os.utime(patches, ns=(10**18, 10**18))  # so the removal's mtime differs on any filesystem
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    (patches / f"{fake_target.entry_id}.py").unlink()
    refused_by(registry_cache.load([path], cache), "file does not exist")


def test_a_rejected_registry_is_never_cached(fake_target: FakeTarget, tmp_path: Path) -> None:
    path = fake_target.write_registry(fake_target.entry(applies_to=">=1.0"))  # no upper bound
    cache = tmp_path / "cache"
    for _ in range(2):
        refused_by(registry_cache.load([path], cache), "upper bound")
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
            "from patchlane import startup\n"
            "from patchlane.registry import cache as registry_cache\n"
            "decider = startup.current()\n"
            "again = registry_cache.load(startup.registry_paths(decider.controls),\n"
            "                            decider.controls.registry_cache)\n"
            "print(json.dumps([patchlane.__file__, decider.registry.entries[0].id,\n"
            "    isinstance(decider.registry, registry_cache._CachedRegistry),\n"
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


# -- who can write the cache: a planted file never runs ---------------------------------------

class _Planted:
    """Unpickling this creates ``marker``: the proof that a cache file's bytes ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.marker),))


def _plant(file: Path, marker: Path) -> None:
    import pickle

    file.write_bytes(pickle.dumps(_Planted(marker)))
    file.chmod(0o600)


def _cache_file(path: Path, cache: Path) -> Path:
    return cache / registry_cache._name([path.resolve()])


def test_a_symlink_in_place_of_the_cache_file_is_never_followed(
        fake_target: FakeTarget, tmp_path: Path, parses: list[tuple[Path, ...]]) -> None:
    """Another user replaces the cache file with a link to a file this user owns but whose
    bytes someone else wrote (a README in a cloned repository)."""
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    readme, marker = tmp_path / "clone" / "README", tmp_path / "ran"
    readme.parent.mkdir()
    _plant(readme, marker)
    file = _cache_file(path, cache)
    file.unlink()
    file.symlink_to(readme)
    assert registry_cache.load([path], cache).entries == load_registries([path]).entries
    assert not marker.exists() and len(parses) == 2  # not read: parsed and validated again
    assert not file.is_symlink()  # replaced by a private file of this user


@pytest.mark.parametrize("mode", [0o777, 0o707, 0o770])
def test_a_cache_directory_others_can_write_is_never_read(
        fake_target: FakeTarget, tmp_path: Path, mode: int, caplog: pytest.LogCaptureFixture,
        parses: list[tuple[Path, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "shared"
    registry_cache.load([path], cache)
    cache.chmod(mode)
    if mode == 0o770:  # writable by a group of other users (not the user's private group)
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another group needs root")
        os.chown(cache, -1, 4242)
    marker = tmp_path / "ran"
    _plant(_cache_file(path, cache), marker)  # a private file of this user: the dir decides
    monkeypatch.setattr(registry_cache, "_warned", set(), raising=False)  # said once each
    for _ in range(2):
        assert registry_cache.load([path], cache).entries == load_registries([path]).entries
    assert not marker.exists() and len(parses) == 3
    warnings = [r.getMessage() for r in caplog.records if "registry cache" in r.getMessage()]
    assert len(warnings) == 1, warnings  # once per process
    assert str(cache) in warnings[0] and "can be written by other users" in warnings[0]
    assert "Fix: make it private (chmod go-w)" in warnings[0]
    assert _cache_file(path, cache).read_bytes().startswith(b"\x80")  # nothing written there
    assert not marker.exists()


def test_a_directory_above_the_cache_that_others_can_write_makes_it_shared(
        fake_target: FakeTarget, tmp_path: Path, parses: list[tuple[Path, ...]]) -> None:
    """Whoever can write a parent can rename the cache directory and put another in its
    place; a sticky parent (as /tmp) cannot be used that way."""
    path = fake_target.write_registry()
    parent = tmp_path / "parent"
    cache = parent / "cache"
    registry_cache.load([path], cache)
    marker = tmp_path / "ran"
    _plant(_cache_file(path, cache), marker)
    parent.chmod(0o777)
    registry_cache.load([path], cache)
    assert not marker.exists() and len(parses) == 2
    parent.chmod(0o1777)  # sticky: the planted file is this user's, in a private directory
    registry_cache.load([path], cache)
    assert marker.exists()  # read: this is the trust the cache gives a private directory


def test_a_cache_directory_writable_by_the_users_private_group_is_used(
        fake_target: FakeTarget, tmp_path: Path, parses: list[tuple[Path, ...]]) -> None:
    """Where each user has a group of their own (umask 002), group-writable is private."""
    import grp
    import pwd

    user = pwd.getpwuid(os.getuid())
    group = grp.getgrgid(os.getgid())
    if group.gr_name != user.pw_name or set(group.gr_mem) - {user.pw_name}:
        pytest.skip("this user has no private group")
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    os.chown(cache, -1, os.getgid())
    cache.chmod(0o770)
    registry_cache.load([path], cache)
    assert len(parses) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory away needs root")
def test_a_cache_directory_of_another_user_is_never_read(
        fake_target: FakeTarget, tmp_path: Path, parses: list[tuple[Path, ...]]) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "theirs"
    registry_cache.load([path], cache)
    marker = tmp_path / "ran"
    _plant(_cache_file(path, cache), marker)
    os.chown(cache, 4242, 4242)
    registry_cache.load([path], cache)
    assert not marker.exists() and len(parses) == 2


def test_a_cache_file_with_another_link_is_never_read(
        fake_target: FakeTarget, tmp_path: Path, parses: list[tuple[Path, ...]]) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    elsewhere, marker = tmp_path / "elsewhere", tmp_path / "ran"
    _plant(elsewhere, marker)
    file = _cache_file(path, cache)
    file.unlink()
    os.link(elsewhere, file)
    registry_cache.load([path], cache)
    assert not marker.exists() and len(parses) == 2


def test_the_cache_directory_is_made_private_at_every_level(fake_target: FakeTarget,
                                                            tmp_path: Path) -> None:
    path = fake_target.write_registry()
    old = os.umask(0o002)  # a user-private-group umask: new folders group-writable
    try:
        registry_cache.load([path], tmp_path / "a" / "b" / "cache")
    finally:
        os.umask(old)
    for folder in (tmp_path / "a", tmp_path / "a" / "b", tmp_path / "a" / "b" / "cache"):
        assert folder.stat().st_mode & 0o077 == 0, folder
    assert len(list((tmp_path / "a" / "b" / "cache").glob("*.pickle"))) == 1


# -- everything validation reads is in the key ------------------------------------------------

def test_a_removed_draft_is_caught_as_validation_would(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    (fake_target.root / "drafts" / f"{fake_target.entry_id}.md").unlink()
    refused_by(registry_cache.load([path], cache), "draft does not exist")


def test_a_removed_draft_refuses_a_cached_strict_start(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    """The same registry, cached or not, is accepted or refused alike by `import patchlane`."""
    env = _child_env(fake_target.write_registry(), tmp_path / "c", PATCHLANE_STRICT="1",
                     PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0")
    code = "import patchlane"
    assert _child("import json, patchlane; print(json.dumps(1))", env) == 1  # cached now
    (fake_target.root / "drafts" / f"{fake_target.entry_id}.md").unlink()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=120, cwd="/")
    assert out.returncode == 3, out.stderr
    assert "draft does not exist" in out.stderr and "Traceback" not in out.stderr


def test_a_re_pointed_overlay_symlink_is_followed(fake_target: FakeTarget,
                                                  tmp_path: Path) -> None:
    """Validation resolves the paths it checks: a symlink re-pointed since is a miss, so the
    overlay imported is the one the link names now."""
    name = f"{fake_target.entry_id}.py"
    overlay = fake_target.root / "patches" / name
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        (tmp_path / side / name).write_text(overlay.read_text())
    overlay.unlink()
    overlay.symlink_to(tmp_path / "a" / name)
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    overlay.unlink()
    overlay.symlink_to(tmp_path / "b" / name)
    os.utime(overlay.parent, ns=(10**18, 10**18), follow_symlinks=False)  # mtime alone: no help
    (entry,) = registry_cache.load([path], cache).entries
    assert entry.overlay == tmp_path / "b" / name


def test_a_re_pointed_folder_symlink_is_followed(fake_target: FakeTarget,
                                                 tmp_path: Path) -> None:
    """A folder on the way (``patches``) turned into a link to a copy with the same
    listing and mtimes: the overlay imported is the copy's."""
    patches = fake_target.root / "patches"
    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    copy = tmp_path / "copy"
    shutil.copytree(patches, copy)
    shutil.copystat(patches, copy)
    shutil.rmtree(patches)
    patches.symlink_to(copy)
    (entry,) = registry_cache.load([path], cache).entries
    assert entry.overlay == copy / f"{fake_target.entry_id}.py"


# -- a wrong-shaped cache is a miss, never an error -------------------------------------------

_ROW = ("x", "source_patch", True, "d", None, (), "waiting", None)


@pytest.mark.parametrize("damage", [
    {"dirs": None}, {"dirs": {"/nowhere": "1"}}, {"dirs": {1: 1}}, {"dirs": {"a\0b": 1}},
    {"links": None}, {"links": (("a",),)}, {"links": ((1, 2),)},
    {"rows": "abc"}, {"rows": None}, {"rows": ("abc",)}, {"rows": (_ROW[:3],)},
    {"entries": "not bytes"}, {"entries": None},
])
def test_a_wrong_shaped_cache_is_a_miss(fake_target: FakeTarget, tmp_path: Path,
                                        damage: dict[str, Any],
                                        parses: list[tuple[Path, ...]]) -> None:
    import pickle

    path = fake_target.write_registry()
    cache = tmp_path / "cache"
    registry_cache.load([path], cache)
    file = _cache_file(path, cache)
    data = pickle.loads(file.read_bytes())
    file.write_bytes(pickle.dumps({**data, **damage}))
    registry = registry_cache.load([path], cache)
    assert len(parses) == 2
    decider = Decider(registry, Controls.from_env({}), AuditLog())
    decider.start()
    assert registry.entries == load_registries([path]).entries


@pytest.mark.parametrize("what", ["a list", "other ids", "not entries"])
def test_cached_entries_of_the_wrong_shape_are_parsed_again(fake_target: FakeTarget,
                                                            tmp_path: Path, what: str) -> None:
    import pickle

    path = fake_target.write_registry()
    registry_cache.load([path], tmp_path / "cache")
    cached = registry_cache.load([path], tmp_path / "cache")
    (entry,) = load_registries([path]).entries
    import dataclasses

    cached.__dict__["_blob"] = pickle.dumps(
        [entry] if what == "a list" else
        (dataclasses.replace(entry, id="other_id"),) if what == "other ids" else ("x",))
    assert cached.entries == (entry,)


def test_a_wrong_shaped_cache_does_not_break_import_patchlane(fake_target: FakeTarget,
                                                              tmp_path: Path) -> None:
    import pickle

    env = _child_env(fake_target.write_registry(), tmp_path / "c")
    code = ("import json, patchlane\n"
            "print(json.dumps([e['id'] for e in patchlane.report()['entries']]))")
    first = _child(code, env)
    (file,) = (tmp_path / "c").glob("*.pickle")
    data = pickle.loads(file.read_bytes())
    file.write_bytes(pickle.dumps({**data, "dirs": None, "rows": "abc"}))
    assert _child(code, env) == first


def test_a_relative_cache_directory_turns_the_cache_off(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Resolved in each process, it would leave a cache in every working directory."""
    assert Controls.from_env({"PATCHLANE_REGISTRY_CACHE": "cache"}).registry_cache is None
    (said,) = [r for r in caplog.records if "PATCHLANE_REGISTRY_CACHE" in r.getMessage()]
    assert said.levelname == "WARNING"
    assert "'cache' is a relative path" in said.getMessage()
    assert "Fix: give an absolute path" in said.getMessage()
    assert Controls.from_env({"PATCHLANE_REGISTRY_CACHE": "~/c", "HOME": str(tmp_path)}) \
        .registry_cache is not None
    assert Controls.from_env({"XDG_CACHE_HOME": "relative", "HOME": str(tmp_path)}) \
        .registry_cache is not None


def test_the_cache_keys_on_every_module_it_names() -> None:
    """Both keys (the validated registry's, the watch list's) name modules outside the registry
    package by path. A named module that is not there is skipped (a broken install keys on what
    it has), so a module moved without its key would silently stop revalidating the cache: each
    name must be a file of this install."""
    from patchlane.lazy import watchlist
    from patchlane.registry import cache

    registry_key = {name for name, _, _ in cache._validator_modules()}
    watch_key = {name for name, _, _ in watchlist._validator()}
    named = {"common/versions.py", "installed/gates.py"}
    assert named <= registry_key, sorted(registry_key)
    assert named | {"_version.py"} <= watch_key, sorted(watch_key)
    root = Path(cache.__file__).parents[1]
    assert all((root / name).is_file() for name in registry_key | watch_key)

"""Ledger entries in the sweep (mechanics on a fake distribution; the real entries, numpy and
torch, run in the default sweep): a setting's reproducer without it (upstream's default) and
with it; a pin's reproducer on its bad side (``BAD_SIDE``, installed side by side) and on the
environment's own release; a pin whose ``when.installed`` excludes the environment runs on its
bad side only, and passing there is its retirement evidence."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.exit_codes import ExitCode
from patchlane.registry import load_registries
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import exit_code, sweep
from patchlane.sweep.installs import record_install

from ..conftest import FakeTarget

pytestmark = pytest.mark.slow

SETTING_REPRO = """
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import {module} as target
    assert target.LIMIT >= 64, f"the default limit {{target.LIMIT}} is too small"
"""

# The fake distribution misbehaves from 2.0 on: the bad side of a `<2.0` pin.
PIN_REPRO = """
LANES = ("cpu",)
WORLD_SIZES = (1,)
BAD_SIDE = ("{dist}==2.0.0",)

def run(ctx):
    import {package} as pkg
    assert not getattr(pkg, "BROKEN", False), f"{{pkg.__name__}} {{pkg.VERSION}} is broken"
"""


def _entry(fake: FakeTarget, entry_id: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {"id": entry_id, "kind": kind, "summary": f"test {kind}",
            "upstream": {"issue": "https://example.invalid/issues/1", "forwarded": "no"},
            "retire_when": {"reproducer": True}, "reproducer": f"reproducers/{entry_id}.py",
            "owner": "tests", "added": "2026-11-22", "status": "active", **extra}


def _env(fake: FakeTarget, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(fake.root), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("PATCHLANE_DEFAULT_REGISTRY", "0")
    monkeypatch.setenv("PATCHLANE_RELEASE_CACHE", str(cache))


def _bad_side(fake: FakeTarget, cache: Path) -> None:
    """``DIST==2.0.0`` as the release cache holds it after a pip install: the package with
    its metadata, marked complete (so no index is asked)."""
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    root = cache / tag / f"{fake.distribution}-2.0.0"
    (root / fake.package).mkdir(parents=True)
    (root / fake.package / "__init__.py").write_text("VERSION = '2.0.0'\nBROKEN = True\n")
    meta = root / f"{fake.package}-2.0.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {fake.distribution}\nVersion: 2.0.0\n")
    record_install(root, f"{fake.distribution}==2.0.0")
    (fake.root / fake.package / "__init__.py").write_text("VERSION = '1.2.0'\n")


def _sweep(fake: FakeTarget, tmp_path: Path, *entries: dict[str, Any]) -> list[Any]:
    fake.registry.write_text(yaml.safe_dump({"schema": 1, "entries": list(entries)},
                                            sort_keys=False))
    return sweep(load_registries([fake.registry]), lanes=["cpu"], timeout=120,
                 run_dir=tmp_path / "run")


def test_a_setting_guards_when_its_reproducer_fails_at_the_default(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_module = fake_target.root / fake_target.package / "config.py"
    config_module.write_text("LIMIT = 8\n")
    (fake_target.root / "reproducers" / "fake_setting.py").write_text(
        SETTING_REPRO.format(module=f"{fake_target.package}.config"))
    _env(fake_target, tmp_path / "cache", monkeypatch)
    entry = _entry(fake_target, "fake_setting", "config",
                   target={"distribution": fake_target.distribution},
                   settings={f"{fake_target.package}.config.LIMIT": 64})
    (row,) = _sweep(fake_target, tmp_path, entry)
    assert row.verdict is Verdict.GUARDING, row.reason
    assert "the default limit 8 is too small" in row.reason
    # upstream's default catches up: the case without the entry passes, a retirement candidate
    config_module.write_text("LIMIT = 64\n")
    (row,) = _sweep(fake_target, tmp_path / "again", entry)
    assert row.verdict is Verdict.UPSTREAM_FIXED, row.reason


def test_a_pin_guards_when_its_bad_side_fails(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _bad_side(fake_target, tmp_path / "cache")
    (fake_target.root / "reproducers" / "fake_pin.py").write_text(
        PIN_REPRO.format(dist=fake_target.distribution, package=fake_target.package))
    _env(fake_target, tmp_path / "cache", monkeypatch)
    entry = _entry(fake_target, "fake_pin", "packaging_pin",
                   target={"distribution": fake_target.distribution}, pin="<2.0",
                   when={"imported": fake_target.package})
    (row,) = _sweep(fake_target, tmp_path, entry)
    assert row.verdict is Verdict.GUARDING, row.reason
    assert "2.0.0 is broken" in row.reason  # the case without it ran on the bad side
    assert row.installed == "2.0.0"
    assert exit_code([row]) == ExitCode.OK


def test_a_pin_scoped_away_runs_its_bad_side_only(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # when.installed names a range the environment is outside of (the other package's bug is
    # fixed here): the bad side alone runs, and it failing is the gate outlived, loudly
    _bad_side(fake_target, tmp_path / "cache")
    (fake_target.root / "reproducers" / "fake_pin.py").write_text(
        PIN_REPRO.format(dist=fake_target.distribution, package=fake_target.package))
    _env(fake_target, tmp_path / "cache", monkeypatch)
    entry = _entry(fake_target, "fake_pin", "packaging_pin",
                   target={"distribution": fake_target.distribution}, pin="<2.0",
                   when={"imported": fake_target.package,
                         "installed": {fake_target.distribution: ">=9"}})
    (row,) = _sweep(fake_target, tmp_path, entry)
    assert row.verdict is Verdict.STILL_AFFECTED, row.reason
    assert "outside when.installed" in row.reason and set(row.receipts) == {"without"}
    # the bad side fixed: a retirement candidate, measured
    bad = tmp_path / "cache" / f"cp{sys.version_info.major}{sys.version_info.minor}" / \
        f"{fake_target.distribution}-2.0.0" / fake_target.package / "__init__.py"
    bad.write_text("VERSION = '2.0.0'\n")
    # (recorded as installed: an edit the cache did not record would be reinstalled, not run)
    record_install(bad.parents[1], f"{fake_target.distribution}==2.0.0")
    (row,) = _sweep(fake_target, tmp_path / "again", entry)
    assert row.verdict is Verdict.UPSTREAM_FIXED, row.reason


def test_a_bad_side_with_its_dependencies_comes_from_its_own_install(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # BAD_SIDE_DEPS: the release is installed with its dependencies, in a directory of its own
    # (a torch build imports only beside its CUDA libraries); only that one is prepared here,
    # so the case finds it or fails to install
    cache = tmp_path / "cache"
    _bad_side(fake_target, cache)
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    plain = cache / tag / f"{fake_target.distribution}-2.0.0"
    plain.rename(plain.with_name(plain.name + "+deps"))
    (fake_target.root / "reproducers" / "fake_pin.py").write_text(
        PIN_REPRO.format(dist=fake_target.distribution, package=fake_target.package)
        + f'BAD_SIDE_DEPS = ("{fake_target.distribution}==2.0.0",)\n')
    _env(fake_target, cache, monkeypatch)
    entry = _entry(fake_target, "fake_pin", "packaging_pin",
                   target={"distribution": fake_target.distribution}, pin="<2.0",
                   when={"imported": fake_target.package})
    (row,) = _sweep(fake_target, tmp_path, entry)
    assert row.verdict is Verdict.GUARDING, row.reason
    assert "2.0.0 is broken" in row.reason


def test_bad_side_deps_must_name_bad_side_releases(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    from patchlane.common.errors import ReproducerError
    from patchlane.sweep.reproduce import read_spec

    (fake_target.root / "reproducers" / "fake_pin.py").write_text(
        PIN_REPRO.format(dist=fake_target.distribution, package=fake_target.package)
        + 'BAD_SIDE_DEPS = ("torch==2.5.1",)\n')
    entry = _entry(fake_target, "fake_pin", "packaging_pin",
                   target={"distribution": fake_target.distribution}, pin="<2.0",
                   when={"imported": fake_target.package})
    fake_target.registry.write_text(yaml.safe_dump({"schema": 1, "entries": [entry]},
                                                   sort_keys=False))
    with pytest.raises(ReproducerError, match=r"BAD_SIDE_DEPS: found \['torch==2.5.1'\]"):
        read_spec(load_registries([fake_target.registry]).get("fake_pin"))


def test_a_bad_side_that_cannot_be_installed_is_an_error_of_its_case(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The bad side is not in the release cache and pip finds it nowhere (no index, an empty
    # folder of links: no network asked): the case without the entry is an error that says
    # why, the case with it still runs, and the sweep carries on to its verdict.
    (fake_target.root / "reproducers" / "fake_pin.py").write_text(
        PIN_REPRO.format(dist=fake_target.distribution, package=fake_target.package))
    _env(fake_target, tmp_path / "cache", monkeypatch)
    (tmp_path / "links").mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "links"))
    entry = _entry(fake_target, "fake_pin", "packaging_pin",
                   target={"distribution": fake_target.distribution}, pin="<2.0",
                   when={"imported": fake_target.package})
    (row,) = _sweep(fake_target, tmp_path, entry)
    assert row.verdict is Verdict.ERROR, row.reason
    assert f"cannot install the bad side ['{fake_target.distribution}==2.0.0']" in row.reason
    assert set(row.receipts) == {"without", "with"}

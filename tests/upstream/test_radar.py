"""``patchlane radar``: releases newer than the newest with run evidence, per target
distribution, from a fake PyPI on loopback; ``--sweep`` installs each (real pip installs of fake
wheels from a local index) and sweeps its entries, with the edit each verdict proposes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane.registry import load_registries
from patchlane.releases.bisect import Candidate, Listing
from patchlane.releases.radar import evidence_releases, proposal, radar
from patchlane.runs.verdicts import Verdict

from ..conftest import FakeTarget
from .fake_upstream import Harness, Reply
from .test_bisect import (  # noqa: F401 - fixtures
    _fake_entry,
    _file,
    _pip_env,
    _publish,
    _wheel,
    base_env,
    index,
)

pytestmark = pytest.mark.slow


def test_new_releases_are_those_newer_than_the_newest_with_evidence(
        fake_target: FakeTarget) -> None:
    fake_target.write_registry(_fake_entry(fake_target))  # fingerprint.releases: 0.4.0
    registry = load_registries([fake_target.registry])
    listing = Listing(tuple(Candidate(v, "wheel") for v in ("0.3.0", "0.4.0", "0.5.0", "0.6.0")),
                      (("0.7.0", "no wheel for this interpreter"),))
    evidence = evidence_releases(registry, [("a-set", [f"{fake_target.distribution}==0.2.0"])])
    assert set(evidence[fake_target.distribution]) == {"0.2.0", "0.4.0"}
    (row,) = radar(registry, lambda d: listing, [("a-set", [f"{fake_target.distribution}==0.2.0"])])
    assert row.newest_with_evidence == "0.4.0"
    assert row.evidence_from == (f"{fake_target.entry_id} fingerprint.releases",)
    assert row.new == ("0.5.0", "0.6.0") and row.entries == (fake_target.entry_id,)
    assert row.left_out == (("0.7.0", "no wheel for this interpreter"),)


def test_each_verdict_proposes_its_edit(fake_target: FakeTarget) -> None:
    fake_target.write_registry(_fake_entry(fake_target))
    entry = load_registries([fake_target.registry]).entries[0]
    assert "extend applies_to past 0.5.0 (e.g. <0.6.0)" in proposal(
        entry, Verdict.STILL_AFFECTED, "0.5.0")
    assert "retire_when.release '>=0.6.0'" in proposal(entry, Verdict.UPSTREAM_FIXED, "0.6.0")
    assert "record it" in proposal(entry, Verdict.GUARDING, "0.4.1")
    assert "guards it" in proposal(entry, Verdict.COVERED, "0.5.0", "next_entry")


def test_the_command_sweeps_each_new_release_and_proposes_the_edit(
        fake_target: FakeTarget, base_env: dict[str, str], h: Harness,  # noqa: F811
        index: tuple[str, Path], tmp_path: Path) -> None:  # noqa: F811
    url, root = index
    files = root / "files"
    files.mkdir()
    # the entry's gate is >=0.4.0,<0.5.0 and 0.4.0 ran; 0.5.0 still has the bug, 0.6.0 not
    wheels = {v: _wheel(files, fake_target, v, fixed=fixed)
              for v, fixed in (("0.4.0", False), ("0.5.0", False), ("0.6.0", True))}
    _publish(root, fake_target.distribution, wheels)
    h.upstream.route(f"/pypi/pypi/{fake_target.distribution}/json", Reply(body={"releases": {
        v: [_file(w.name)] for v, w in wheels.items()}}))
    env = _pip_env(base_env, h, url, tmp_path)
    work = tmp_path / "work"  # not the fake's root: python -m puts the working directory first
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "radar", "--json", "--sweep",
         "--matrix", str(tmp_path / "no-matrix.yaml"), "--runs-root", str(tmp_path / "runs"),
         "--cache", str(tmp_path / "releases")], env=env, capture_output=True, text=True,
        timeout=600, cwd=work)
    data = json.loads(out.stdout)
    (row,) = data["rows"]
    assert row["newest_with_evidence"] == "0.4.0" and row["new"] == ["0.5.0", "0.6.0"]
    swept = {s["release"]: s for s in data["swept"]}
    entry = fake_target.entry_id
    assert swept["0.5.0"]["verdicts"][entry] == ["still-affected"]
    assert "extend applies_to past 0.5.0" in swept["0.5.0"]["proposals"][entry]
    assert swept["0.6.0"]["verdicts"][entry] == ["upstream-fixed"]
    assert "retirement candidate" in swept["0.6.0"]["proposals"][entry]
    assert all(Path(s["run_dir"], "index.json").is_file() for s in data["swept"])
    # a release that needs someone (still affected) makes the radar say so: 32 | 4
    assert out.returncode == 36, out.stderr


def test_one_release_pip_cannot_install_is_one_bad_row(
        fake_target: FakeTarget, base_env: dict[str, str], h: Harness,  # noqa: F811
        index: tuple[str, Path], tmp_path: Path) -> None:  # noqa: F811
    """A night goes on past a release pip cannot install: that release is an error row, the
    next one is swept (it used to traceback, exit 70, and sweep nothing more)."""
    url, root = index
    files = root / "files"
    files.mkdir()
    wheels = {v: _wheel(files, fake_target, v, fixed=fixed)
              for v, fixed in (("0.4.0", False), ("0.5.0", False), ("0.6.0", True))}
    wheels["0.5.0"].write_bytes(b"not a zip file")  # pip refuses it
    _publish(root, fake_target.distribution, wheels)
    h.upstream.route(f"/pypi/pypi/{fake_target.distribution}/json", Reply(body={"releases": {
        v: [_file(w.name)] for v, w in wheels.items()}}))
    env = _pip_env(base_env, h, url, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "radar", "--json", "--sweep",
         "--matrix", str(tmp_path / "no-matrix.yaml"), "--runs-root", str(tmp_path / "runs"),
         "--cache", str(tmp_path / "releases")], env=env, capture_output=True, text=True,
        timeout=600, cwd=work)
    data = json.loads(out.stdout)
    swept = {s["release"]: s for s in data["swept"]}
    entry = fake_target.entry_id
    assert swept["0.5.0"]["verdicts"][entry] == ["error"]
    assert swept["0.5.0"]["proposals"][entry].startswith(
        f"not swept: pip could not install {fake_target.distribution}==0.5.0 (exit ")
    assert swept["0.6.0"]["verdicts"][entry] == ["upstream-fixed"]  # the night went on
    assert out.returncode == 34, out.stderr  # 32 | error


def test_the_working_folders_matrix_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    from patchlane.cli.radar import matrix_file

    monkeypatch.chdir(tmp_path)
    assert matrix_file(None).parent.name != tmp_path.name  # none here: the checkout's
    (tmp_path / "matrix.yaml").write_text("schema: 1\nsets: []\n")
    assert matrix_file(None) == Path("matrix.yaml")  # an installed radar reads this one
    assert matrix_file(tmp_path / "other.yaml") == tmp_path / "other.yaml"

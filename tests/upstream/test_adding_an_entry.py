"""docs/adding-an-entry.md walked as a maintainer walks it, through the real commands on a
stand-in target with releases on a local package index: ``new`` → the reproducer seen failing
→ the overlay → ``sweep`` (guarding) → ``bisect --write`` → ``sweep`` again → ``status``.
Afterwards the registry is one the project accepts as it is: no hand edit, no stale comment,
and a strict start on each release the new gate admits applies the overlay with no drift."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.exit_codes import ExitCode

from ..cli.test_new import OVERLAY, REPRODUCER
from ..conftest import TARGET_SOURCE, FakeTarget
from .fake_upstream import Harness, Reply
from .test_bisect import _file, _publish, _wheel_of, index  # noqa: F401  (index: the fixture)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "shout_no_bang"
# Like megatron-core's and liger-kernel's modules, the stand-in imports torch: what a run
# proves is tied to the torch build, the device and the interpreter it ran on.
BUGGY_SOURCE = "import torch  # noqa: F401\n" + TARGET_SOURCE
FIXED_SOURCE = BUGGY_SOURCE.replace(
    "def shout(text):\n    return text.upper()\n",
    "SHOUT_ENDS_WITH_BANG = True\n\n\ndef shout(text):\n    return text.upper() + \"!\"\n")


def test_the_guide_from_new_to_a_bisected_gate_needs_no_hand_edit(
        fake_target: FakeTarget, h: Harness, index: tuple[str, Path],  # noqa: F811
        tmp_path: Path) -> None:
    url, served = index
    # the stand-in's releases: 1.0.0 has no shout(); 1.1.0 and 1.2.0 (the installed one) have
    # the bug; 1.3.0 and 1.4.0 carry upstream's fix
    plan: dict[str, str | None] = {"1.0.0": None, "1.1.0": BUGGY_SOURCE,
                                   "1.2.0": BUGGY_SOURCE, "1.3.0": FIXED_SOURCE,
                                   "1.4.0": FIXED_SOURCE}
    fake_target.target_file.write_text(BUGGY_SOURCE)  # the installed 1.2.0
    (served / "files").mkdir()
    wheels = {v: _wheel_of(served / "files", fake_target, v, src) for v, src in plan.items()}
    _publish(served, fake_target.distribution, wheels)
    h.upstream.route(f"/pypi/pypi/{fake_target.distribution}/json", Reply(body={
        "releases": {v: [_file(w.name)] for v, w in wheels.items()}}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PATCHLANE_", "PIP_"))} | {
        "PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_ENTRY_POINTS": "0",
        "PATCHLANE_REGISTRY": str(fake_target.registry),
        "PYTHONPATH": os.pathsep.join([str(fake_target.root), str(ROOT)]),
        "PATCHLANE_PYPI_URL": h.upstream.pypi, "PATCHLANE_CACHE": str(tmp_path / "http"),
        "PATCHLANE_RELEASE_CACHE": str(tmp_path / "releases"),
        "PIP_INDEX_URL": f"{url}/simple", "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1"}

    # not the stand-in's folder: `python -m` puts the working directory first on sys.path,
    # where the installed copy would shadow each release bisect installs
    work = tmp_path / "work"
    work.mkdir()

    def cli(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                              capture_output=True, text=True, env=env | (extra or {}),
                              cwd=work, timeout=600)

    fake_target.write_registry()  # a team registry with one entry already
    # and its docs' entries table, as the catalog keeps one
    docs = fake_target.root / "docs" / "entries.md"
    docs.parent.mkdir()
    docs.write_text("# Entries\n\n| id | kind | target | applies to | upstream |\n"
                    "|---|---|---|---|---|\n| `older` | source_patch | `x:y` | x `>=1` | "
                    "not forwarded |\n\nProse after the table.\n")

    # 1. new: the gate from the installed release, "not yet verified by runs"; its docs row
    out = cli("new", ENTRY, "--target", f"{fake_target.module}:shout", "--registry",
              str(fake_target.registry), "--owner", "tests", "--summary",
              "shout() forgets the exclamation mark", "--issue",
              "https://github.com/acme/fake/issues/12")
    assert out.returncode == 0, out.stderr
    assert f"added its row to the entries table in {docs}" in out.stdout, out.stdout
    row = f"| `{ENTRY}` | source_patch | `{fake_target.module}:shout` | " \
          f"{fake_target.distribution} `>=1.2.0,<1.3.0` | " \
          "issue [#12](https://github.com/acme/fake/issues/12) |"
    assert docs.read_text().splitlines()[5] == row, docs.read_text()
    assert docs.read_text().endswith("|\n\nProse after the table.\n")
    block = _block(fake_target.registry.read_text())
    assert block["applies_to"] == ">=1.2.0,<1.3.0"
    assert "not yet verified by runs" in _words(fake_target.registry.read_text())

    # 2-3. the reproducer fails without the overlay; the overlay makes it pass
    (fake_target.root / "reproducers" / f"{ENTRY}.py").write_text(
        REPRODUCER.format(module=fake_target.module))
    assert cli("reproduce", ENTRY, "--without-overlay").returncode == \
        ExitCode.REPRODUCER_FAILED
    (fake_target.root / "patches" / f"{ENTRY}.py").write_text(OVERLAY)
    assert cli("reproduce", ENTRY).returncode == ExitCode.OK

    # 4. bisect --write: the gate from runs, both legs where it widens; the team's release
    # matrix (sets for 1.0.0, 1.2.0 and 1.4.0, written for the entry already there) gets the
    # new entry's verdicts, and the command says which recorded releases it does not run
    dist, other = fake_target.distribution, fake_target.entry_id
    matrix = fake_target.root / "matrix.yaml"
    matrix.write_text(
        "schema: 1\nsets:\n"
        f"  - name: before  # the team's comment\n    install: [{dist}==1.0.0]\n"
        f"    expect:\n      {other}: guarding  # theirs\n"
        f"  - name: installed\n    install: [{dist}==1.2.0]\n    expect:\n"
        f"      {other}: guarding\n    python: [\"3.11\", \"3.12\"]\n"
        f"  - name: fixed\n    install: [{dist}==1.4.0]\n    expect:\n"
        f"      {other}: guarding\n")
    before_text = matrix.read_text()
    out = cli("bisect", ENTRY, "--write", "--json", "--run-dir", str(tmp_path / "bisect"))
    assert out.returncode == 0, out.stderr
    assert "the fingerprints of 1.1.0, 1.3.0 went to fingerprint.sha256 only: no set " \
        "of" in out.stderr
    # the matrix: each set's verdict as the runs showed it, every other line as it was
    sets = {s["name"]: s for s in yaml.safe_load(matrix.read_text())["sets"]}
    assert {name: s["expect"].get(ENTRY) for name, s in sets.items()} == {
        "before": "skipped", "installed": "guarding", "fixed": "upstream-fixed"}, \
        matrix.read_text()
    assert all(s["expect"][other] == "guarding" for s in sets.values())
    kept = [ln for ln in matrix.read_text().splitlines() if ENTRY not in ln]
    assert kept == before_text.splitlines()
    assert f"recorded in {matrix}: installed: {ENTRY}: guarding" in out.stderr
    # the docs' row: the gate drawn from runs
    assert docs.read_text().splitlines()[5] == row.replace(">=1.2.0,<1.3.0", ">=1.1.0,<1.3.0")
    found = json.loads(out.stdout)
    assert (found["first_affected"], found["first_fixed"], found["applies_to"]) == (
        "1.1.0", "1.3.0", ">=1.1.0,<1.3.0")
    assert {r["release"]: r["overlay"] for r in found["runs"]
            if r["finding"] == "affected"} == {"1.1.0": "guarding", "1.2.0": "guarding"}
    text = fake_target.registry.read_text()
    block = _block(text)
    assert block["applies_to"] == ">=1.1.0,<1.3.0"
    assert block["retire_when"]["release"] == ">=1.3.0"
    assert "not yet verified by runs" not in _words(text) and "(not a run)" not in text
    assert "gate drawn by `patchlane bisect --write` on" in _words(text)
    prints = block["fingerprint"]
    # under releases, what the matrix runs (every value there checked by a run); each value
    # a run saw is accepted in sha256, so a strict start on 1.1.0 is no drift either
    assert set(prints["releases"]) == {"1.2.0", "1.4.0"}
    assert set(prints["releases"].values()) <= set(prints["sha256"])
    assert len(set(prints["sha256"])) == 2  # the buggy shout() and the fixed one

    # 5. the sweep on the installed release, strict as in CI: guarding, exit 0
    out = cli("sweep", "--only", ENTRY, "--run-dir", str(tmp_path / "run"), "--quiet",
              extra={"PATCHLANE_STRICT": "1"})
    assert out.returncode == ExitCode.OK, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith(ENTRY))
    assert "guarding" in row.split(), out.stdout

    # 6. status: applied where the job runs
    out = cli("status", "--evidence", str(tmp_path / "run"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{ENTRY}: proven here (run run, cpu ws1)" in out.stdout, out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith(ENTRY))
    assert row.split()[4] == "applied", out.stdout

    # and the release the gate widened to: a strict start there applies it, no drift
    first = next(Path(r["receipt"]) for r in found["runs"] if r["release"] == "1.1.0")
    installed_at = json.loads(first.read_text())["installed_at"]
    script = f"import patchlane, {fake_target.module} as t; print(t.shout('hi'))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env | {"PATCHLANE_STRICT": "1", "PYTHONPATH": os.pathsep.join(
                             [installed_at, str(fake_target.root), str(ROOT)])},
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "HI!", out.stdout


def _block(text: str) -> dict[str, Any]:
    return next(e for e in yaml.safe_load(text)["entries"] if e["id"] == ENTRY)


def _words(text: str) -> str:
    """The file's words, comments' line breaks and ``#`` marks taken out."""
    return " ".join(text.replace("#", " ").split())

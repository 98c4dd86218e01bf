"""Maintainers' commands: upstream tracking through the CLI (against a loopback server that
serves recorded GitHub/PyPI responses), retirement recorded in place, deletion, and doctor
catching an edited file in a real installed package."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchlane.registry import Status, load_registries
from patchlane.releases.matrix import install_dir

from ..conftest import FakeTarget
from .fake_upstream import PR_PATH, FakeUpstream, Reply
from .sweep_runs import edit_json, sweep_run

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "mcore_rerun_sentinel"


@pytest.fixture
def registry_copy(tmp_path: Path) -> Iterator[Path]:
    """The real default registry with its overlays, reproducers and checks, in a scratch dir."""
    root = tmp_path / "reg"
    root.mkdir()
    shutil.copy(ROOT / "registry.yaml", root / "registry.yaml")
    for folder in ("patches", "reproducers", "checks", "drafts"):  # every file the registry names
        shutil.copytree(ROOT / folder, root / folder)
    yield root / "registry.yaml"


def cli(*args: str, registry: Path, fake: FakeUpstream | None = None,
        extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(registry),
                "PATCHLANE_CACHE": str(registry.parent / "cache"), "PYTHONWARNINGS": "ignore"})
    if fake is not None:
        env.update({"PATCHLANE_GITHUB_API": fake.github, "PATCHLANE_PYPI_URL": fake.pypi})
    env.update(extra or {})
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                          capture_output=True, text=True, env=env, timeout=300)


def sweep_evidence(root: Path, verdict: str, installed: str, probe: str) -> Path:
    """A run directory as `patchlane sweep` writes it (manifest, receipts, index)."""
    return sweep_run(root, ENTRY, (verdict, installed, probe), name="run-0.18.0")


def test_upstream_command_reports_tracking_and_what_retirement_lacks(
        registry_copy: Path, upstream: FakeUpstream) -> None:
    out = cli("upstream", ENTRY, "--json", registry=registry_copy, fake=upstream)
    assert out.returncode == 0, out.stderr
    (item,) = json.loads(out.stdout)
    assert item["tracking"]["state"] == "released"
    assert item["tracking"]["released_in"] == "0.18.0"
    assert not item["retirement"]["ready"]
    assert any("sweep" in m for m in item["retirement"]["missing"])
    n_requests = len(upstream.requests())
    # offline afterwards: served from the cache the first call wrote
    offline = cli("upstream", ENTRY, "--json", "--offline", registry=registry_copy,
                  fake=upstream)
    assert len(upstream.requests()) == n_requests  # offline: nothing sent
    assert json.loads(offline.stdout)[0]["tracking"]["released_in"] == "0.18.0"


def test_upstream_command_reports_server_errors_clearly(registry_copy: Path,
                                                        upstream: FakeUpstream) -> None:
    upstream.route(PR_PATH, Reply(404, {"message": "Not Found"}))
    out = cli("upstream", ENTRY, registry=registry_copy, fake=upstream)
    assert out.returncode == 14
    assert "404" in out.stdout or "not found" in out.stdout.lower()


def test_retire_refuses_without_evidence_and_leaves_the_file_alone(
        registry_copy: Path, upstream: FakeUpstream) -> None:
    before = registry_copy.read_bytes()
    out = cli("retire", ENTRY, registry=registry_copy, fake=upstream)
    assert out.returncode == 15, out.stdout + out.stderr
    assert "not enough evidence" in out.stderr and "sweep" in out.stderr
    guarding = sweep_evidence(registry_copy.parent, "guarding", "0.16.1", "applied")
    out = cli("retire", ENTRY, "--evidence", str(guarding), registry=registry_copy,
              fake=upstream)
    assert out.returncode == 15 and "guarding@0.16.1" in out.stderr
    assert registry_copy.read_bytes() == before


def test_retire_refuses_an_index_edited_to_say_upstream_fixed(
        registry_copy: Path, upstream: FakeUpstream) -> None:
    """Through the real command: a guarding run whose index.json was edited (verdict and
    release) is refused, exit 15, one line naming the index and the receipts; nothing
    written. The same run, untouched, is refused for what it is (guarding)."""
    before = registry_copy.read_bytes()
    run = sweep_evidence(registry_copy.parent, "guarding", "0.16.1", "upstream-fixed")
    row = lambda d: next(r for r in d["rows"] if r["entry_id"] == ENTRY)  # noqa: E731
    edit_json(run / "index.json", lambda d: row(d).update(verdict="upstream-fixed",
                                                           installed="0.18.0"))
    out = cli("retire", ENTRY, "--evidence", str(run), "--date", "2026-11-22",
              registry=registry_copy, fake=upstream)
    assert out.returncode == 15, out.stdout + out.stderr
    assert f"{run / 'index.json'}: row {ENTRY}[cpu-ws1] says upstream-fixed, but its receipts" \
        in out.stderr and "say guarding by the both-ways rule" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert registry_copy.read_bytes() == before


def test_retire_of_a_mistyped_run_is_a_usage_error_before_upstream_is_asked(
        registry_copy: Path, upstream: FakeUpstream, tmp_path: Path) -> None:
    before = registry_copy.read_bytes()
    for given in (tmp_path / "no-such-run", tmp_path):
        out = cli("retire", ENTRY, "--evidence", str(given), registry=registry_copy,
                  fake=upstream)
        assert out.returncode == 2, out.stderr  # was 74, after the tracker had run
        assert f"--evidence {given}: " in out.stderr and "fix: give a sweep's run" in out.stderr
    assert upstream.requests() == []
    assert registry_copy.read_bytes() == before


def test_retire_round_trip_changes_only_the_entry(registry_copy: Path,
                                                  upstream: FakeUpstream) -> None:
    before = registry_copy.read_text()
    run = sweep_evidence(registry_copy.parent, "upstream-fixed", "0.18.0", "upstream-fixed")
    out = cli("retire", ENTRY, "--evidence", str(run), "--date", "2026-11-22",
              registry=registry_copy, fake=upstream)
    assert out.returncode == 0, out.stdout + out.stderr
    after = registry_copy.read_text()
    # outside the entry's block the file is byte-identical: same prefix, same suffix
    head = before.index(f"  - id: {ENTRY}")
    tail = before.index("  - id: ", head + 1)
    assert after[:head] == before[:head]
    assert after.endswith(before[tail:])
    block_before, block_after = before[head:tail], after[head:len(after) - len(before) + tail]
    diff = [d for d in difflib.unified_diff(block_before.splitlines(),
                                            block_after.splitlines(), n=0, lineterm="")
            if d[:1] in "+-" and d[:3] not in ("+++", "---")]
    removed = [d[1:] for d in diff if d.startswith("-")]
    added = [d[1:] for d in diff if d.startswith("+")]
    assert removed == ["    status: active"]  # applied_upstream already said 0.18.0: kept
    assert "    status: retired" in added and "    retired: 2026-11-22" in added
    assert any(line.strip().startswith("- \"upstream released: PR #4448 merged")
               for line in added), added
    assert any("sweep run-0.18.0: upstream-fixed on 0.18.0" in line for line in added)
    assert after.count("\n") == before.count("\n") + len(added) - len(removed)
    entry = load_registries([registry_copy]).get(ENTRY)
    assert entry.status is Status.RETIRED
    assert entry.upstream.applied_upstream == "megatron-core 0.18.0"
    assert (registry_copy.parent / "patches" / f"{ENTRY}.py").exists()  # kept
    assert (registry_copy.parent / "reproducers" / f"{ENTRY}.py").exists()
    again = cli("retire", ENTRY, "--evidence", str(run), registry=registry_copy, fake=upstream)
    assert again.returncode == 15 and "already retired" in again.stderr


def test_force_records_the_reason(registry_copy: Path) -> None:
    out = cli("retire", ENTRY, "--skip-upstream", "--force", "vendor backport in 0.16.3",
              registry=registry_copy)
    assert out.returncode == 0, out.stderr
    text = registry_copy.read_text()
    assert "forced: vendor backport in 0.16.3" in text
    assert load_registries([registry_copy]).get(ENTRY).status is Status.RETIRED


def test_delete_only_a_retired_entry_and_only_its_block(registry_copy: Path) -> None:
    refused = cli("delete", ENTRY, "--yes", registry=registry_copy)
    assert refused.returncode == 15 and "only a retired entry" in refused.stderr
    assert cli("retire", ENTRY, "--skip-upstream", "--force", "test",
               registry=registry_copy).returncode == 0
    # the #7428 follow-up depends on it: refused until that one is gone
    dependent = cli("delete", ENTRY, "--yes", registry=registry_copy)
    assert dependent.returncode == 15 and "depend on" in dependent.stderr, dependent.stderr
    follow = "mcore_strict_load_idle_rerun_shard"
    assert cli("retire", follow, "--skip-upstream", "--force", "test",
               registry=registry_copy).returncode == 0
    assert cli("delete", follow, "--yes", registry=registry_copy).returncode == 0
    before = registry_copy.read_text()
    count = len(load_registries([registry_copy]).entries)
    assert cli("delete", ENTRY, registry=registry_copy).returncode == 2  # needs --yes: usage
    out = cli("delete", ENTRY, "--yes", registry=registry_copy)
    assert out.returncode == 0, out.stderr
    after = registry_copy.read_text()
    assert f"id: {ENTRY}" not in after
    ids = [e.id for e in load_registries([registry_copy]).entries]
    assert ENTRY not in ids and len(ids) == count - 1
    assert after in before or set(after.splitlines()) <= set(before.splitlines())
    assert "files left for you" in out.stdout


@pytest.mark.slow
def test_retired_entry_stays_in_the_sweep_as_a_guard(fake_target: FakeTarget,
                                                     tmp_path: Path) -> None:
    from patchlane.runs.verdicts import Verdict
    from patchlane.sweep.engine import Shard, new_run, run_sweep

    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    assert t.Greeter().greet('a') == 'hello a', 'regressed'\n")
    fake_target.write_registry(fake_target.entry(status="retired"))
    registry = load_registries([fake_target.registry])
    run = new_run(registry, tmp_path / "run", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "guard"})
    assert [c["mode"] for c in run.manifest["cases"].values()] == ["without"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONPATH=str(fake_target.root), PATCHLANE_DEFAULT_REGISTRY="0")
    (row,) = run_sweep(registry, run, env=env)
    assert row.verdict is Verdict.UPSTREAM_FIXED, row.reason


@pytest.mark.slow
@pytest.mark.upstream
def test_doctor_catches_an_edited_file_in_a_real_installed_package(tmp_path: Path) -> None:
    release = tmp_path / "mcore"
    shutil.copytree(install_dir("megatron-core==0.14.0", ROOT / ".cache" / "releases"),
                    release, symlinks=True)
    env = {"PYTHONPATH": str(release)}
    clean = cli("doctor", "--json", registry=ROOT / "registry.yaml",
                extra=env | {"PATCHLANE_DEFAULT_REGISTRY": "1", "PATCHLANE_REGISTRY": ""})
    report = json.loads(clean.stdout)
    mcore = next(r for r in report["records"] if r["distribution"] == "megatron-core")
    assert mcore["version"] == "0.14.0" and mcore["ok"] and mcore["checked"] > 100
    assert clean.returncode == 0, report["problems"]
    edited = release / "megatron" / "core" / "utils.py"
    edited.write_text(edited.read_text() + "\n# a local fix nobody declared\n")
    dirty = cli("doctor", registry=ROOT / "registry.yaml",
                extra=env | {"PATCHLANE_DEFAULT_REGISTRY": "1", "PATCHLANE_REGISTRY": ""})
    assert dirty.returncode == 16, dirty.stdout + dirty.stderr
    assert "megatron/core/utils.py differs from its RECORD hash" in dirty.stdout
    assert "doctor: FAILED" in dirty.stdout


@pytest.mark.slow
def test_retire_accepts_a_real_sweep_and_refuses_it_once_edited(fake_target: FakeTarget,
                                                                 tmp_path: Path) -> None:
    """The check against the receipts accepts what `patchlane sweep` really writes: a real
    sweep of a fake target where the reproducer passes without the overlay retires the entry;
    the same kind of run, guarding, with its index edited, is refused."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root), str(ROOT)]),
               PYTHONWARNINGS="ignore")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=300)

    fake_target.write_registry(fake_target.entry(retire_when={"reproducer": True}))
    guarding = tmp_path / "guarding"
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    assert t.Greeter().greet('a') == 'patched hello a', 'the bug shows'\n")
    out = run("sweep", "--lane", "cpu", "--run-dir", str(guarding), "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    index = guarding / "index.json"
    edit_json(index, lambda d: d["rows"][0].update(verdict="upstream-fixed"))
    before = fake_target.registry.read_bytes()
    refused = run("retire", fake_target.entry_id, "--evidence", str(guarding), "--skip-upstream")
    assert refused.returncode == 15, refused.stdout + refused.stderr
    assert "says upstream-fixed, but its receipts" in refused.stderr
    assert fake_target.registry.read_bytes() == before

    fixed = tmp_path / "fixed"
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    t.Greeter().greet('a')  # no assertion: it passes without the overlay\n")
    out = run("sweep", "--lane", "cpu", "--run-dir", str(fixed), "--quiet")
    assert out.returncode == 0, out.stdout + out.stderr
    retired = run("retire", fake_target.entry_id, "--evidence", str(fixed), "--skip-upstream")
    assert retired.returncode == 0, retired.stdout + retired.stderr
    assert load_registries([fake_target.registry]).get(fake_target.entry_id).status \
        is Status.RETIRED


@pytest.mark.slow
@pytest.mark.upstream
def test_doctor_reports_a_refused_torch_import_instead_of_crashing(tmp_path: Path) -> None:
    """A floor on torch with `policy: error` that the installed torch violates: importing
    torch raises the floor's error, and every later import of torch fails for that alone (a
    C extension half-registered, the exit may crash). Doctor names the floor as the problem
    once, exits 16, and says why it did not import the targets: no internal error."""
    registry = tmp_path / "registry.yaml"
    registry.write_text("""schema: 1
entries:
  - id: torch_floor_future
    kind: version_floor
    summary: needs a torch nobody has yet
    target:
      distribution: torch
      object: torch
    requires: ">=99"
    policy: error
    upstream:
      issue: https://github.com/pytorch/pytorch/issues/1
      forwarded: not-needed
    retire_when:
      upstream_released: true
    owner: tests
    added: 2026-11-27
    status: active
""")
    out = cli("doctor", registry=registry,
              extra={"PATCHLANE_DEFAULT_REGISTRY": "1", "PATCHLANE_REGISTRY": str(registry)})
    assert out.returncode == 16, out.stdout + out.stderr
    assert "internal error" not in out.stderr, out.stderr
    assert "torch_floor_future: torch" in out.stdout and "below the floor torch>=99" in out.stdout
    assert out.stdout.count("PROBLEM:") == 1, out.stdout
    assert "targets not imported: torch_floor_future (`import torch`) refuses its import" \
        in out.stdout, out.stdout

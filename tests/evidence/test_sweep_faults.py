"""Sweep fault tolerance with deliberately bad reproducers (fake targets): every fault is
classified by stage, the sweep carries on, finished receipts stay intact, and a killed sweep
resumes without redoing or losing anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from patchlane.common.exit_codes import ExitCode
from patchlane.registry import load_registries
from patchlane.runs.index import RunIndex
from patchlane.runs.manifest import RunDir
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import Shard, new_run, run_sweep
from patchlane.sweep.rank_start import RankStart
from patchlane.sweep.receipts import validate
from patchlane.sweep.reports import compare, load_index, write_reports

from ..conftest import OVERLAY_SOURCE, FakeTarget

pytestmark = pytest.mark.slow

HEAD = "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\n"
GUARDING = HEAD + ("def run(ctx):\n    import {module} as t\n"
                   "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
FAULTS = {
    "hang": HEAD + "def run(ctx):\n    import time\n    time.sleep(600)\n",
    "segv": HEAD + ("def run(ctx):\n    import os, signal\n"
                    "    os.kill(os.getpid(), signal.SIGSEGV)\n"),
    "oom": HEAD + ("def run(ctx):\n    import resource\n"
                   "    resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))\n"
                   "    hog = bytearray(4 * 2**30)\n"),
    "badimport": HEAD + "import no_such_module_anywhere\n\ndef run(ctx):\n    pass\n",
    "setupfail": HEAD + ("def setup(ctx):\n    raise OSError('scratch disk missing')\n\n"
                         "def run(ctx):\n    pass\n"),
    "garbage": HEAD + ("def run(ctx):\n    import os, sys\n"
                       "    os.write(1, bytes(range(256)) * 50)\n"
                       "    os.write(2, b'{\"outcome\": \"pass\"' + bytes(range(256)))\n"
                       "    import {module} as t\n"
                       "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n"),
    "wrongexc": HEAD + "def run(ctx):\n    raise KeyError('not an assertion')\n",
}
EXPECTED_STAGE = {"hang": "timeout", "segv": "crash", "oom": "oom", "badimport": "import",
                  "setupfail": "setup", "wrongexc": "run"}


def multi_registry(fake: FakeTarget, names: dict[str, str]) -> Path:
    """Several entries on the same fake target, one reproducer each."""
    entries = []
    for suffix, source in names.items():
        entry_id = f"{fake.entry_id}_{suffix}"
        (fake.root / "patches" / f"{entry_id}.py").write_text(OVERLAY_SOURCE)
        (fake.root / "reproducers" / f"{entry_id}.py").write_text(
            source.replace("{module}", fake.module))
        entry = fake.entry(id=entry_id, overlay=f"patches/{entry_id}.py",
                           reproducer=f"reproducers/{entry_id}.py")
        entries.append(entry)
    fake.registry.write_text(yaml.safe_dump({"schema": 1, "entries": entries},
                                            sort_keys=False))
    return fake.registry


def env_for(fake: FakeTarget) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(fake.root)
    env["PATCHLANE_DEFAULT_REGISTRY"] = "0"
    env["PATCHLANE_REGISTRY"] = str(fake.registry)
    return env


@pytest.mark.parametrize("start", list(RankStart), ids=[s.value for s in RankStart])
def test_every_fault_is_classified_and_the_sweep_carries_on(fake_target: FakeTarget,
                                                            tmp_path: Path,
                                                            start: RankStart) -> None:
    """Each fault reads the same whether its rank started fresh or was forked warm from the
    server that imported torch (the shim passes the rank's exit and its signal on)."""
    # A warm rank is for a reproducer that uses torch (a fake target alone would start fresh)
    uses = "import torch\n" if start is RankStart.WARM else ""
    registry = load_registries([multi_registry(fake_target, {
        name: uses + source for name, source in {**FAULTS, "good": GUARDING}.items()})])
    run = new_run(registry, tmp_path / "run", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "faults"})
    rows = run_sweep(registry, run, jobs=2, timeout=8, env=env_for(fake_target), start=start)
    by = {r.entry_id.rsplit("_", 1)[-1]: r for r in rows}
    assert by["good"].verdict is Verdict.GUARDING, by["good"].reason
    assert by["garbage"].verdict is Verdict.GUARDING, by["garbage"].reason
    for name, stage in EXPECTED_STAGE.items():
        assert by[name].verdict is Verdict.ERROR, (name, by[name].reason)
        assert f"without overlay: {stage}:" in by[name].reason, (name, by[name].reason)
    # every case has a receipt that validates, and the manifest agrees with it
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert len(manifest["cases"]) == 2 * len(by)
    for cid, case in manifest["cases"].items():
        receipt = json.loads((run.path / case["receipt"]).read_text())
        assert validate(receipt) == [], (cid, validate(receipt))
        assert receipt["outcome"] == case["outcome"]
        assert receipt["provenance"]["rank_start"] == start.value, receipt["provenance"]
        expected_state = {"pass": "ok", "fail": "failed", "error": "error"}[receipt["outcome"]]
        assert case["state"] == expected_state


def test_an_only_id_the_registry_lacks_is_a_usage_error_not_an_empty_pass(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """`--only a,b` (or a typo) swept nothing and exited 0: a nightly that says all is well
    without running anything. It is refused before any run directory exists."""
    multi_registry(fake_target, {"good": GUARDING})
    good = f"{fake_target.entry_id}_good"
    for only, fix in (([f"{good},x"], "repeat --only for each id (--only a --only b)"),
                      ([good, "typo_id"], "name an entry the registry has")):
        run_dir = tmp_path / f"run-{len(only)}"
        cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir)]
        for entry_id in only:
            cmd += ["--only", entry_id]
        out = subprocess.run(cmd, env=env_for(fake_target), capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 2, out.stdout + out.stderr
        assert "no such entry in the registry" in out.stderr and fix in out.stderr, out.stderr
        assert not run_dir.exists()


def test_receipts_never_record_secrets(fake_target: FakeTarget, tmp_path: Path) -> None:
    registry = load_registries([multi_registry(fake_target, {"good": GUARDING})])
    run = new_run(registry, tmp_path / "run", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "secrets"})
    env = env_for(fake_target) | {"NCCL_AUTH_TOKEN": "s3cret", "TORCH_API_KEY": "s3cret",
                                  "GITHUB_TOKEN": "s3cret", "NCCL_DEBUG": "INFO"}
    run_sweep(registry, run, env=env)
    for receipt in (run.path / "receipts").glob("*.json"):
        text = receipt.read_text()
        assert "s3cret" not in text
        assert json.loads(text)["provenance"]["environment"]["NCCL_DEBUG"] == "INFO"


def test_killed_sweep_resumes_without_redoing_or_losing_cases(fake_target: FakeTarget,
                                                              tmp_path: Path) -> None:
    slow = GUARDING.replace("def run(ctx):\n", "def run(ctx):\n    import time\n"
                                                "    time.sleep(4)\n")
    multi_registry(fake_target, {"a": GUARDING, "b": slow, "c": GUARDING})
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", "1", "--quiet"]
    proc = subprocess.Popen(cmd, env=env_for(fake_target), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        receipts = list((run_dir / "receipts").glob("*.json")) if run_dir.exists() else []
        if len(receipts) >= 2:
            break
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)  # no cleanup, no finally: a crashed sweep
    proc.wait()
    before = {p.name: p.read_bytes() for p in (run_dir / "receipts").glob("*.json")}
    states = [c["state"] for c in RunDir.open(run_dir).manifest["cases"].values()]
    assert 2 <= len(before) < 6, states
    assert "queued" in states or "running" in states, states
    out = subprocess.run([*cmd[:4], "--resume", str(run_dir), "--quiet"],
                         env=env_for(fake_target), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    after = {p.name: p.read_bytes() for p in (run_dir / "receipts").glob("*.json")}
    assert len(after) == 6
    for name, data in before.items():
        assert after[name] == data, f"{name} was redone or rewritten on resume"
    manifest = RunDir.open(run_dir).manifest
    assert all(c["state"] in ("ok", "failed") for c in manifest["cases"].values())
    assert [r["verdict"] for r in load_index(run_dir).as_dict()["rows"]] == ["guarding"] * 3


def test_shards_split_the_rows_without_overlap(fake_target: FakeTarget, tmp_path: Path) -> None:
    registry = load_registries([multi_registry(fake_target,
                                               {n: GUARDING for n in "abcde"})])
    owned = []
    for i in (1, 2, 3):
        run = new_run(registry, tmp_path / f"s{i}", lanes=["cpu"], only=None,
                      shard=Shard(i, 3), header={"run_id": f"s{i}"})
        owned.append({r["entry_id"] for r in run.manifest["rows"]})  # the manifest's JSON
    assert sum(len(o) for o in owned) == 5
    assert set().union(*owned) == {e.id for e in registry.entries}
    with pytest.raises(ValueError, match="1-based"):
        Shard.parse("0/3")


def test_reports_and_compare_within_the_same_class(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    registry = load_registries([multi_registry(fake_target, {"a": GUARDING})])
    run = new_run(registry, tmp_path / "r1", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "r1"})
    rows = run_sweep(registry, run, env=env_for(fake_target))
    first = write_reports(run, rows)
    for name in ("index.json", "summary.md", "junit.xml", "report.html"):
        assert (run.path / name).stat().st_size > 0
    assert "| **guarding** |" in (run.path / "summary.md").read_text()
    import xml.etree.ElementTree as ET

    suite = ET.parse(run.path / "junit.xml").getroot()
    assert suite.get("tests") == "1" and suite.get("failures") == "0"
    # same class, verdict changed: a change
    second = json.loads(json.dumps(first.as_dict()))
    second["rows"][0]["verdict"] = "broken"
    assert [c["change"] for c in compare(first, RunIndex.from_dict(second))] == \
        ["verdict-changed"]
    # other upstream version: a class change, not a regression
    second["rows"][0]["comparison_key"]["distributions"][fake_target.distribution] = "1.3.0"
    (change,) = compare(first, RunIndex.from_dict(second))
    assert change["change"] == "class-changed"
    assert change["differs"]["distributions"]
    html = (run.path / "report.html").read_text()
    assert fake_target.entry_id in html and "guarding" in html


def test_sweep_cli_progress_lines_in_ci_and_resume_refuses_a_changed_registry(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    multi_registry(fake_target, {"a": GUARDING})
    run_dir = tmp_path / "run"
    env = env_for(fake_target) | {"CI": "1"}
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"[1/2] {fake_target.entry_id}_a--cpu--ws1--without: fail" in out.stderr
    assert "\r" not in out.stderr  # no live line outside a terminal
    assert "guarding" in out.stdout and str(run_dir) in out.stdout
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already exists" in again.stderr
    # Issue 14 item 7: a second sweep on a run directory in use is refused before it touches it
    manifest = (run_dir / "manifest.json").read_bytes()
    with RunDir.lock(run_dir):
        busy = subprocess.run([*cmd[:4], "--resume", str(run_dir)], env=env,
                              capture_output=True, text=True, timeout=120)
    assert busy.returncode == 2 and "in use by another sweep" in busy.stderr, busy.stderr
    assert (run_dir / "manifest.json").read_bytes() == manifest
    fake_target.registry.write_text(fake_target.registry.read_text() + "\n# edited\n")
    resumed = subprocess.run([*cmd[:4], "--resume", str(run_dir)], env=env,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 2 and "registry changed" in resumed.stderr
    assert (run_dir / "manifest.json").read_bytes() == manifest  # a refused resume: untouched


def test_resume_of_a_mistyped_run_directory_is_refused_and_creates_nothing(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    multi_registry(fake_target, {"a": GUARDING})
    env = env_for(fake_target)
    for typo in (tmp_path / "runs" / "20260101T000000Z-hots", tmp_path):
        out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--resume",
                              str(typo)], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 2, out.stderr
        assert f"--resume {typo}: no such run" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    assert not (tmp_path / "runs").exists()  # the mistyped path was not created
    assert not (tmp_path / ".lock").exists()  # nor a lock left in a folder that is no run


BOOT_BREAKER = '''
import os
import sys

registry = []
# Only in a sweep's rank (the sweep sets PATCHLANE_ONLY there), never in the sweep itself.
if os.environ.get("PATCHLANE_ONLY"):
    token = os.environ["MY_API_TOKEN"]
    print("pip index: https://deploy:hunter2pass@pypi.example.invalid/simple", file=sys.stderr)
    print(f"retrying with {token}", file=sys.stderr)
    raise RuntimeError("registry plugin exploded: distinctive-marker-4711 (index "
                       "https://deploy:hunter2pass@pypi.example.invalid/simple, "
                       f"MY_API_TOKEN={token}, with {token}, db_password=opensesame42)")
'''


def boot_breaker(root: Path) -> Path:
    """A distribution whose ``patchlane.registries`` entry point prints secrets to stderr and
    raises: ``import patchlane`` (hence ``python -m patchlane.sweep.runner``) dies before the
    rank
    can write its JSON."""
    root.mkdir()
    (root / "plbootbreak.py").write_text(BOOT_BREAKER)
    meta = root / "plbootbreak-1.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: plbootbreak\nVersion: 1.0\n")
    (meta / "entry_points.txt").write_text(
        "[patchlane.registries]\nplbootbreak = plbootbreak:registry\n")
    return root


def test_a_rank_that_dies_before_reporting_says_why_without_secrets(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    registry = load_registries([multi_registry(fake_target, {"a": GUARDING})])
    run = new_run(registry, tmp_path / "run", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "boot"})
    env = env_for(fake_target)
    env["PYTHONPATH"] += os.pathsep + str(boot_breaker(tmp_path / "breaker"))
    env["MY_API_TOKEN"] = "s3cr3t-value"
    (row,) = run_sweep(registry, run, timeout=60, env=env)
    write_reports(run, rows=[row])
    secrets = ("s3cr3t-value", "hunter2pass", "opensesame42")

    assert row.verdict is Verdict.ERROR
    # the failing entry point is named (a RegistryError, strict in a rank: one line, exit 3)
    assert row.reason.startswith("without overlay: bootstrap: rank 0 exited 3 before reporting: "
                                 "patchlane: RegistryError: entry point plbootbreak = "
                                 "plbootbreak:registry (group patchlane.registries): loading "
                                 "it raised RuntimeError: registry plugin exploded: "
                                 "distinctive-marker-4711"), row.reason
    # the exception line in the reason is redacted like the rest: context stays, secrets go

    receipt = json.loads(next((run.path / "receipts").glob("*--without.json")).read_text())
    assert validate(receipt) == []
    tail = receipt["stderr_tail"]
    assert tail == row.stderr_tail == receipt["ranks"][0]["stderr_tail"]
    assert "plbootbreak:registry" in tail and "distinctive-marker-4711" in tail
    assert tail.splitlines()[-1].startswith("patchlane: RegistryError: entry point "
                                            "plbootbreak")
    assert "RuntimeError: registry plugin exploded" in tail.splitlines()[-1]
    # the exception line is redacted like the rest: context stays, secrets go
    assert ("https://deploy:***@pypi.example.invalid/simple, MY_API_TOKEN=***, with ***, "
            "db_password=***") in tail
    assert "retrying with ***" in tail
    assert len(tail.splitlines()) <= 20 and len(tail) <= 4096
    assert "distinctive-marker-4711" in receipt["message"]

    page = (run.path / "report.html").read_text()
    assert "<h2>Errors</h2>" in page
    assert "distinctive-marker-4711" in page.split("<h2>Errors</h2>", 1)[1]  # not only a tooltip
    assert "RuntimeError: registry plugin exploded" in (run.path / "summary.md").read_text()

    for name in ("index.json", "summary.md", "junit.xml", "report.html", "manifest.json",
                 *(f"receipts/{p.name}" for p in (run.path / "receipts").iterdir())):
        text = (run.path / name).read_text()
        for secret in secrets:
            assert secret not in text, (name, secret)
    for secret in secrets:
        assert secret not in row.reason

    # the CLI prints the whole reason and the failing rank's last lines under the table
    cli = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir",
                          str(tmp_path / "cli"), "--quiet"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert cli.returncode == ExitCode.SWEEP_ERROR, cli.stdout + cli.stderr
    assert (f"error {row.key}: without overlay: bootstrap: rank 0 exited 3 before reporting: "
            "patchlane: RegistryError: entry point plbootbreak") in cli.stdout
    assert "  | retrying with ***\n" in cli.stdout
    assert "RuntimeError: registry plugin exploded: distinctive-marker-4711" in cli.stdout
    for secret in secrets:
        assert secret not in cli.stdout + cli.stderr


def _finished_run(fake_target: FakeTarget, tmp_path: Path) -> tuple[Path, dict[str, str],
                                                                     list[str], dict]:
    """A sweep run to its end: its directory, environment, command and manifest."""
    multi_registry(fake_target, {"a": GUARDING})
    run_dir = tmp_path / "run"
    env = env_for(fake_target)
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep"]
    assert subprocess.run([*cmd, "--run-dir", str(run_dir)], env=env, capture_output=True,
                          timeout=120).returncode == 0
    return run_dir, env, cmd, json.loads((run_dir / "manifest.json").read_text())


def test_resume_of_a_run_naming_an_entry_no_longer_there_is_refused(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    run_dir, env, cmd, manifest = _finished_run(fake_target, tmp_path)
    case = next(iter(manifest["cases"].values()))
    case["entry_id"], case["state"] = "gone_entry", "queued"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    before = (run_dir / "manifest.json").read_bytes()
    out = subprocess.run([*cmd, "--resume", str(run_dir)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, out.stderr  # was a KeyError, exit 70
    assert "names entries the registry no longer has: gone_entry" in out.stderr
    assert "Traceback" not in out.stderr
    assert (run_dir / "manifest.json").read_bytes() == before


def test_resume_of_a_run_whose_reproducer_changed_is_refused(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    # A finished case of one reproducer joined to a resumed case of another makes a row whose
    # verdict neither proves: refused, the run left as it was, as for a changed registry.
    run_dir, env, cmd, manifest = _finished_run(fake_target, tmp_path)
    case = next(c for c in manifest["cases"].values() if c["mode"] == "with")
    case["state"] = "queued"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    before = (run_dir / "manifest.json").read_bytes()
    reproducer = fake_target.root / "reproducers" / f"{fake_target.entry_id}_a.py"
    reproducer.write_text(reproducer.read_text() + "\n# weakened since\n")
    out = subprocess.run([*cmd, "--resume", str(run_dir)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "an overlay, reproducer or check changed since this run started" in out.stderr
    assert (run_dir / "manifest.json").read_bytes() == before


def test_resume_installs_from_the_wheelhouse_the_run_started_with(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    # An air-gapped night's run, resumed as its stop line says (no --wheelhouse): its releases
    # come from the wheelhouse its manifest records, never the package index. Shown with one
    # that is gone since: resume names it and stops, where it went to the index before.
    run_dir, env, cmd, manifest = _finished_run(fake_target, tmp_path)
    next(iter(manifest["cases"].values()))["state"] = "queued"
    manifest["wheelhouse"] = str(tmp_path / "kit")
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    out = subprocess.run([*cmd, "--resume", str(run_dir)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert f"{tmp_path / 'kit'}" in out.stderr and "is no wheelhouse" in out.stderr, out.stderr


def test_a_run_records_its_wheelhouse_as_an_absolute_path(fake_target: FakeTarget,
                                                          tmp_path: Path) -> None:
    # PATCHLANE_WHEELHOUSE given relative to where the night started: a resume from another
    # folder must find the same one
    import hashlib

    multi_registry(fake_target, {"a": GUARDING})
    kit = tmp_path / "kit"
    kit.mkdir(mode=0o700)
    (kit / "p.whl").write_bytes(b"patchlane")
    (kit / "wheelhouse.json").write_text(json.dumps({
        "schema": 1, "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "platforms": [], "sets": {}, "project": "p.whl", "support": [],
        "hashes": {"p.whl": "sha256:" + hashlib.sha256(b"patchlane").hexdigest()}}))
    run_dir = tmp_path / "run"
    env = {**env_for(fake_target), "PATCHLANE_WHEELHOUSE": "kit"}
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir",
                          str(run_dir)], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads((run_dir / "manifest.json").read_text())["wheelhouse"] == str(kit)

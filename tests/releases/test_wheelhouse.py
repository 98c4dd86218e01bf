"""The prepared GPU check end to end on the CPU: a wheelhouse is built from the package index,
then installed with no index (an unreachable one stands in for an air gap), then the release
matrix runs from it on the cpu lane. What the GPU box does, minus the GPU."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = [pytest.mark.upstream, pytest.mark.slow]

SET = "liger-kernel-0.8.2"  # small (pure Python), and its verdict is known: upstream-fixed
PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def test_wheelhouse_then_an_offline_check(tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    prepared = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "wheelhouse", str(wh), "--file",
         str(ROOT / "matrix.yaml"), "--set", SET, "--python", PY],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    house = json.loads((wh / "wheelhouse.json").read_text())
    assert house["python"] == PY and house["sets"] == {SET: ["liger-kernel==0.8.2"]}
    assert house["project"].startswith("patchlane-") and (wh / house["project"]).is_file()
    assert {"wrapt", "packaging", "pyyaml", "requests", "filelock"} <= {
        name.split("-")[0].lower() for name in house["support"]}
    assert not any(name.split("-")[0].lower() in ("torch", "triton", "numpy")
                   for name in house["support"])  # the box's own
    assert house["benchmarks"] == [{"script": "bench_flce.py",
                                    "install": ["liger-kernel==0.8.2"]}]
    assert (wh / "gpu-check").is_file() and (wh / "benchmarks" / "bench_flce.py").is_file()
    assert (wh / "matrix.yaml").is_file()

    out = tmp_path / "out"
    offline = {**env, "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0",
               "PIP_TIMEOUT": "2", "PATCHLANE_RELEASE_CACHE": str(tmp_path / "not-used")}
    check = subprocess.run([sys.executable, str(wh / "gpu-check"), str(wh), str(out),
                            "--lane", "cpu", "--jobs", "2"],
                           capture_output=True, text=True, env=offline, cwd=tmp_path,
                           timeout=900)
    assert check.returncode == 0, (check.stdout[-4000:], check.stderr[-2000:])
    log = (out / "gpu-check.log").read_text()
    assert log.count("--no-index") >= 1 and "matrix --wheelhouse" in log
    # patchlane ran from the wheel installed out of the wheelhouse, not from this checkout
    assert (out / "site" / "patchlane" / "_bundle" / "registry.yaml").is_file()
    # and the check says which build that was (the commit its wheel was built from)
    assert '"from": "wheel"' in (out / "machine.txt").read_text(), (out / "machine.txt").read_text()
    index = json.loads((out / "runs" / f"{SET}-py{PY}" / "index.json").read_text())
    verdicts = {row["entry_id"]: row["verdict"] for row in index["rows"]}
    assert verdicts == {"liger_flce_weighted_none": "upstream-fixed"}
    receipt = next((out / "runs" / f"{SET}-py{PY}" / "receipts").glob("*.json")).read_text()
    assert '"0.8.2"' in receipt
    assert (out / "summary.md").read_text().count("## Matrix (cpu lane)") == 1


@pytest.mark.parametrize("manifest", [b"[]", b'{"support": []}', b'{"project": 3}',
                                      b'{"project": "p.whl", "support": "x"}',
                                      b'{"project": "../p.whl", "support": []}',
                                      b'{"project": "caf\xe9"}', "fifo"])
def test_gpu_check_with_a_bad_manifest_is_one_line_and_exit_2(tmp_path: Path,
                                                               manifest: bytes | str) -> None:
    kit = tmp_path / "kit"
    kit.mkdir()
    if manifest == "fifo":
        os.mkfifo(kit / "wheelhouse.json")
    else:
        assert isinstance(manifest, bytes)
        (kit / "wheelhouse.json").write_bytes(manifest)
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu-check"), str(kit),
                          str(tmp_path / "out"), "--lane", "cpu"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert "wheelhouse.json: " in out.stdout + out.stderr
    assert "patchlane wheelhouse DIR" in out.stdout + out.stderr


@pytest.mark.parametrize(("field", "value"), [
    ("python", 3.12), ("platforms", "manylinux"), ("project", ["p.whl"]),
    ("support", "a.whl"), ("support", ["../../etc/x.whl"]), ("skipped", "x"),
    ("benchmarks", {"a": 1})])
def test_a_wheelhouse_manifest_of_wrong_types_is_a_usage_error_naming_the_field(
        tmp_path: Path, field: str, value: object) -> None:
    from patchlane.sweep.wheelhouse_manifest import WheelhouseError, load

    data = {"schema": 1, "python": "3.12", "platforms": [], "sets": {}, "project": "p.whl",
            "support": [], field: value}
    (tmp_path / "p.whl").write_bytes(b"")
    (tmp_path / "wheelhouse.json").write_text(json.dumps(data))
    with pytest.raises(WheelhouseError, match=f"wheelhouse.json: {field}: found "):
        load(tmp_path)


def _kit(root: Path) -> Path:
    import hashlib

    root.mkdir(mode=0o700)
    (root / "p.whl").write_bytes(b"patchlane")
    data = {"schema": 1, "python": "3.12", "platforms": [], "sets": {}, "project": "p.whl",
            "support": [],
            "hashes": {"p.whl": "sha256:" + hashlib.sha256(b"patchlane").hexdigest()}}
    (root / "wheelhouse.json").write_text(json.dumps(data))
    return root


def test_a_wheelhouse_is_trusted_as_the_release_cache_is(tmp_path: Path) -> None:
    """Only a folder no other user can write, holding exactly the wheels it recorded, each
    unchanged, is installed from (a planted release would be kept in the release cache and
    run by later jobs)."""
    from patchlane.sweep.wheelhouse_manifest import WheelhouseError, load

    kit = _kit(tmp_path / "kit")
    assert load(kit).hashes["p.whl"].startswith("sha256:")
    kit.chmod(0o777)
    with pytest.raises(WheelhouseError, match="can be written by other users"):
        load(kit)
    kit.chmod(0o700)
    (kit / "torch-9.9.9-py3-none-any.whl").write_bytes(b"planted")
    with pytest.raises(WheelhouseError, match=re.escape("torch-9.9.9-py3-none-any.whl is "
                                                         "no wheel it recorded")):
        load(kit)
    (kit / "torch-9.9.9-py3-none-any.whl").unlink()
    # any file pip's --find-links takes as a release, not wheels alone
    (kit / "liger_kernel-0.8.1+evil.tar.gz").write_bytes(b"planted")
    with pytest.raises(WheelhouseError, match=re.escape("liger_kernel-0.8.1+evil.tar.gz is "
                                                         "no wheel it recorded")):
        load(kit)
    (kit / "liger_kernel-0.8.1+evil.tar.gz").unlink()
    # a page pip's --find-links reads and whose links it follows, wherever they lead
    (kit / "notes.html").write_text('<a href="/elsewhere/demo-1.0+evil.tar.gz">x</a>')
    with pytest.raises(WheelhouseError, match=re.escape("notes.html is no wheel it recorded")):
        load(kit)
    (kit / "notes.html").unlink()
    (kit / "README.txt").write_text("what pip never reads is the operator's own")
    load(kit)
    # a release's wheel recorded, then gone (a folder copied in part)
    data = json.loads((kit / "wheelhouse.json").read_text())
    (kit / "wheelhouse.json").write_text(json.dumps(
        {**data, "hashes": {**data["hashes"], "numpy-2.4.1-cp312-none-any.whl": "sha256:0"}}))
    with pytest.raises(WheelhouseError, match=re.escape("numpy-2.4.1-cp312-none-any.whl is "
                                                         "recorded but not there")):
        load(kit)
    (kit / "wheelhouse.json").write_text(json.dumps(data))
    (kit / "p.whl").write_bytes(b"patchlane, edited")
    with pytest.raises(WheelhouseError, match=re.escape("p.whl is not the wheel it recorded")):
        load(kit)
    data = json.loads((kit / "wheelhouse.json").read_text())
    del data["hashes"]
    (kit / "wheelhouse.json").write_text(json.dumps(data))
    with pytest.raises(WheelhouseError, match="hashes: found None"):
        load(kit)


def test_a_refresh_into_last_nights_folder_records_every_wheel(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """What the radar's cron does each night: prepare into the same folder. The wheels a step
    needs are recorded whether or not the folder held them (it recorded none, and the next
    night could not install patchlane's support)."""
    from patchlane.releases import wheelhouse

    def pip(args: list[str], what: str, log: object) -> None:  # what pip download writes
        dest = Path(args[args.index("--dest") + 1])
        for name in ("filelock-3.0-py3-none-any.whl", "wrapt-1.0-py3-none-any.whl"):
            (dest / name).write_bytes(name.encode())

    monkeypatch.setattr(wheelhouse, "_pip", pip)
    out = tmp_path / "wh"
    out.mkdir()
    first = wheelhouse._download(out, ["filelock", "wrapt"], "support wheels", print)
    again = wheelhouse._download(out, ["filelock", "wrapt"], "support wheels", print)
    assert first == again == ["filelock-3.0-py3-none-any.whl", "wrapt-1.0-py3-none-any.whl"]
    assert sorted(p.name for p in out.iterdir()) == first  # no scratch folder left behind


def test_a_prepare_refuses_a_release_file_it_did_not_record(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """A prepare records the hash of every wheel the folder holds, and pip download keeps a
    file already there under the name it would fetch: a wheel planted between nights would be
    recorded as trusted and installed by the next night. Refused before anything is
    downloaded, naming it; what the last prepare recorded, unchanged or gone, is fine."""
    from patchlane.releases import wheelhouse
    from patchlane.sweep.wheelhouse_manifest import WheelhouseError

    fetched: list[str] = []

    def pip(args: list[str], what: str, log: object) -> None:  # what pip download writes
        dest = Path(args[args.index("--dest") + 1])
        for name in ("filelock-3.0-py3-none-any.whl", "wrapt-1.0-py3-none-any.whl"):
            fetched.append(name)
            if not (dest / name).exists():  # pip keeps a file already there
                (dest / name).write_bytes(name.encode())

    def own(out: Path, project_root: object, log: object) -> str:
        (out / "patchlane-0.1.0-py3-none-any.whl").write_bytes(b"ours")
        return "patchlane-0.1.0-py3-none-any.whl"

    monkeypatch.setattr(wheelhouse, "_pip", pip)
    monkeypatch.setattr(wheelhouse, "_own_wheel", own)
    out = tmp_path / "wh"

    def prepare() -> None:
        wheelhouse.prepare(out, [], python=PY, platforms=wheelhouse.PLATFORMS,
                           project_root=None, constraints_for=lambda python: None,
                           matrix_file=ROOT / "matrix.yaml", log=lambda line: None)

    prepare()
    manifest = (out / "wheelhouse.json").read_bytes()
    prepare()  # last night's folder, as it left it
    for planted, says in (("liger_kernel-0.8.1-py3-none-any.whl", "is no wheel it recorded"),
                          ("liger_kernel-0.8.1+evil.tar.gz", "is no wheel it recorded"),
                          ("wrapt-1.0-py3-none-any.whl", "is not the wheel it recorded")):
        (out / planted).write_bytes(b"planted")
        fetched.clear()
        with pytest.raises(WheelhouseError, match=re.escape(planted) + ".*" + says):
            prepare()
        assert fetched == [] and (out / "wheelhouse.json").read_bytes() == manifest
        (out / planted).unlink()
    prepare()  # a recorded wheel that is gone is fetched again
    assert (out / "wrapt-1.0-py3-none-any.whl").read_bytes() == b"wrapt-1.0-py3-none-any.whl"
    # a night whose prepare stopped half-way (the index refused) after writing patchlane's own
    # wheel anew: the next prepare trusts what that prepare wrote (it refused every night after)
    from patchlane.releases.wheelhouse import WheelhouseDownloadError

    def own_v2(out: Path, project_root: object, log: object) -> str:
        (out / "patchlane-0.1.0-py3-none-any.whl").write_bytes(b"ours, rebuilt")
        return "patchlane-0.1.0-py3-none-any.whl"

    def refused(args: list[str], what: str, log: object) -> None:
        raise WheelhouseDownloadError(f"{what}: pip exited 1")

    monkeypatch.setattr(wheelhouse, "_own_wheel", own_v2)
    monkeypatch.setattr(wheelhouse, "_pip", refused)
    with pytest.raises(WheelhouseDownloadError):
        prepare()
    monkeypatch.setattr(wheelhouse, "_pip", pip)
    prepare()
    assert not (out / ".prepare-unfinished.json").exists()
    (out / "wheelhouse.json").unlink()  # wheels no prepare recorded
    with pytest.raises(WheelhouseError, match="is no wheel it recorded"):
        prepare()

"""A night on a machine with no package index, as an air-gapped GPU node runs it: the wheel
installed with no checkout, `patchlane wheelhouse` run from it where the index is reachable,
then the wheelhouse's `night` script with every connection off this machine refused and
recorded (tests/releases/netguard/sitecustomize.py, loaded by every process the night starts,
pip's included). Nothing may be attempted, and a release the wheelhouse lacks is a skipped row
that says so, never an error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.upstream, pytest.mark.slow]

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
GUARD = Path(__file__).with_name("netguard")
ENTRIES = ("numpy_pin_triton_interpreter", "torch_floor_a2a_overlap", "liger_flce_weighted_none")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if not k.startswith("PATCHLANE_") and k != "PYTHONPATH"}


@pytest.fixture
def wheel(built_wheel: Path) -> Path:
    return built_wheel


def _install(wheel: Path, site: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(site), str(wheel)], check=True, timeout=300)


def _pack(site: Path, out: Path) -> subprocess.CompletedProcess[str]:
    code = ("import sys; from pathlib import Path\n"
            "from patchlane.common.errors import PatchlaneError\n"
            "from patchlane.releases.own_wheel import pack_installed\n"
            "try:\n"
            f"    print(pack_installed(Path({str(out)!r})))\n"
            "except PatchlaneError as exc:\n"
            "    sys.exit(f'refused: {exc}')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**_clean_env(), "PYTHONPATH": str(site)}, cwd=out.parent,
                          timeout=120)


def test_the_packed_wheel_is_the_wheel_installed_and_an_edit_refuses_it(
        wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(wheel, site)
    packed = _pack(site, tmp_path / "out")
    assert packed.returncode == 0, packed.stderr
    import zipfile

    original, again = zipfile.ZipFile(wheel), zipfile.ZipFile(packed.stdout.strip())
    names = sorted(n for n in original.namelist() if not n.endswith("/RECORD"))
    assert sorted(n for n in again.namelist() if not n.endswith("/RECORD")) == names
    assert all(original.read(n) == again.read(n) for n in names), [
        n for n in names if original.read(n) != again.read(n)]
    # installed again from the packed wheel, it is the same package
    _install(Path(packed.stdout.strip()), tmp_path / "site2")
    assert (tmp_path / "site2" / "bin" / "patchlane").read_text().startswith(
        f"#!{sys.executable}\n")
    # an edited installed file is never carried to a box
    gates = site / "patchlane" / "installed" / "gates.py"
    gates.write_text(gates.read_text() + "\n# a local edit\n")
    refused = _pack(site, tmp_path / "out2")
    assert refused.returncode != 0
    assert "differ from its RECORD, e.g. patchlane/installed/gates.py" in refused.stderr, \
        refused.stderr
    assert not list((tmp_path / "out2").glob("*.whl")) if (tmp_path / "out2").exists() else True


def _planted_sdist(folder: Path, name: str, version: str, marker: Path) -> Path:
    """A source archive of ``name`` at ``version``+evil whose in-tree build backend writes
    ``marker`` when pip so much as asks it for anything: it ran if the marker is there."""
    import io
    import tarfile

    folder.mkdir(parents=True, exist_ok=True)
    base = f"{name.replace('-', '_')}-{version}+evil"
    files = {
        "pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                          'backend-path = ["."]\n',
        "backend.py": f"open({str(marker)!r}, 'w').write('ran')\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}+evil\n",
    }
    path = folder / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for file, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{base}/{file}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_night_from_a_wheelhouse_built_from_the_installed_package_uses_no_network(
        wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install(wheel, site)
    kit = tmp_path / "kit"
    env = {**_clean_env(), "PYTHONPATH": str(site), "PYTHONWARNINGS": "ignore"}
    # where the index is reachable: from the installed package, no checkout in sight
    prepared = subprocess.run(
        [str(site / "bin" / "patchlane"), "wheelhouse", str(kit), "--python", PY,
         "--set", "liger-kernel-0.8.2"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    assert "packed from the installed package" in prepared.stdout
    house = json.loads((kit / "wheelhouse.json").read_text())
    assert "numpy==2.4.1" in house["releases"]  # a ledger reproducer's bad side
    assert "torch==2.5.1" in house["skipped"] and "--torch-builds" in house["skipped"][
        "torch==2.5.1"]
    assert any(spec.startswith("liger-kernel==") for spec in house["environment"])
    for name in ("night", "gpu-check", "kit_trust.py", "private_files.py",
                 "wheelhouse_files.py", "matrix.yaml", "benchmarks/bench_flce.py"):
        assert (kit / name).is_file(), name  # shipped in the wheel, copied beside the wheels
    packed = kit / house["project"]
    assert house["hashes"][packed.name].startswith("sha256:")

    # on the box: no index, and every connection off this machine refused and recorded; the
    # machine's pip settings name a second source (a planted source archive of the target at
    # its version, +evil, which pip would rank first): the night must not read them
    (liger,) = [s for s in house["environment"] if s.startswith("liger-kernel==")]
    marker = tmp_path / "planted-build-ran"
    _planted_sdist(tmp_path / "elsewhere", "liger-kernel", liger.partition("==")[2], marker)
    log = tmp_path / "connections.log"
    offline = {**_clean_env(), "PYTHONPATH": str(GUARD), "NETGUARD_LOG": str(log),
               "PIP_INDEX_URL": "http://10.255.255.1/simple", "PIP_RETRIES": "0",
               "PIP_TIMEOUT": "2", "PATCHLANE_RELEASE_CACHE": str(tmp_path / "releases"),
               "PIP_FIND_LINKS": str(tmp_path / "elsewhere"),
               "PYTHONWARNINGS": "ignore", "CI": "1"}
    runs = tmp_path / "runs"

    def night_run(*only: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(kit / "night"), str(kit), str(runs), "--lane", "cpu", "-j",
             "2", *(arg for entry in only for arg in ("--only", entry))],
            capture_output=True, text=True, env=offline, cwd=tmp_path, timeout=900)

    night = night_run(*ENTRIES)
    assert night.returncode == 0, (night.stdout[-3000:], night.stderr[-3000:])
    assert not log.exists(), log.read_text()  # not one connection was attempted
    assert not marker.exists(), "pip took a release from outside the wheelhouse"
    installed = list((runs / f".night-site-py{PY}").glob("liger_kernel-*.dist-info"))
    assert [p.name for p in installed] == [f"liger_kernel-{liger.partition('==')[2]}.dist-info"]
    (run,) = [p for p in runs.iterdir() if (p / "index.json").is_file()]
    rows = {row["entry_id"]: row for row in json.loads((run / "index.json").read_text())["rows"]}
    assert rows["torch_floor_a2a_overlap"]["verdict"] == "skipped"
    assert "needs torch==2.5.1, not in the wheelhouse" in rows["torch_floor_a2a_overlap"][
        "reason"]
    # the bad side was installed from the wheelhouse into the empty release cache, and ran
    assert rows["numpy_pin_triton_interpreter"]["verdict"] in ("guarding", "upstream-fixed")
    assert (tmp_path / "releases" / f"cp{PY.replace('.', '')}" / "numpy-2.4.1").is_dir()
    assert not [r for r in rows.values() if r["verdict"] == "error"], rows
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["wheelhouse"] == str(kit)
    receipt = json.loads(next((run / "receipts").glob("*.json")).read_text())
    assert receipt["provenance"]["build"]["from"] == "wheel"  # the kit's wheel ran
    assert str(runs / f".night-site-py{PY}") in night.stderr + night.stdout or (
        runs / f".night-site-py{PY}" / "patchlane").is_dir()

    # the same archive planted in the wheelhouse itself, then a recorded wheel gone: the night
    # names the file and stops before installing anything (exit 2)
    planted = _planted_sdist(kit, "liger-kernel", liger.partition("==")[2], marker)
    refused = night_run("liger_flce_weighted_none")
    assert refused.returncode == 2, (refused.stdout[-2000:], refused.stderr[-2000:])
    assert f"{planted.name} is no wheel it recorded" in refused.stderr, refused.stderr
    assert "nothing was installed from it" in refused.stderr and not marker.exists()
    assert "fix: remove it from the folder" in refused.stderr
    planted.unlink()
    gone = next(kit.glob("numpy-*.whl"))
    gone.rename(tmp_path / gone.name)
    refused = night_run("liger_flce_weighted_none")
    assert refused.returncode == 2, (refused.stdout[-2000:], refused.stderr[-2000:])
    assert f"{gone.name} is recorded but not there" in refused.stderr, refused.stderr


def test_the_network_guard_records_and_refuses_a_connection(tmp_path: Path) -> None:
    """The guard the night is checked with does catch a connection (or the test above could
    not fail)."""
    log = tmp_path / "connections.log"
    code = ("import urllib.request\n"
            "try:\n"
            "    urllib.request.urlopen('https://pypi.org/simple/', timeout=3)\n"
            "except OSError as exc:\n"
            "    print('refused', exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**_clean_env(), "PYTHONPATH": str(GUARD),
                              "NETGUARD_LOG": str(log)}, timeout=60)
    assert "refused" in out.stdout, out.stderr
    assert "pypi.org" in log.read_text()

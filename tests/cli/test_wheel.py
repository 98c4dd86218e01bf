"""The wheel carries overlays, reproducers and the default registry inside the patchlane
namespace (never as top-level `patches`/`reproducers`), and works installed from it alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture
def wheel(built_wheel: Path) -> Path:
    return built_wheel


def test_wheel_layout(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    stem = wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1]
    assert tops == {"patchlane", stem + ".dist-info", stem + ".data"}, tops
    # The command is a script of ours (pip's console-script wrapper imports `re`), installed
    # with the installing interpreter on its first line
    assert [n for n in names if n.startswith(stem + ".data/")] == [
        stem + ".data/scripts/patchlane"]
    script = zipfile.ZipFile(wheel).read(stem + ".data/scripts/patchlane").decode()
    assert script.startswith("#!python\n") and "import re" not in script
    assert "patchlane/_bundle/registry.yaml" in names
    assert "patchlane/_bundle/matrix.yaml" in names  # the release matrix runs from the wheel
    assert "patchlane/_bundle/patches/mcore_rerun_sentinel.py" in names
    assert "patchlane/_bundle/reproducers/mcore_rerun_sentinel.py" in names
    assert "patchlane/_bundle/checks/mcore_pp_variable_seq_deadlock.py" in names
    assert "patchlane/_bundle/drafts/mcore_dsa_indexer_loss_graph_safe.md" in names
    assert "patchlane/py.typed" in names


def test_installed_wheel_finds_its_registry_and_overlays(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    code = (
        "import json, patchlane\n"
        "from patchlane import startup\n"
        "from patchlane.deciding.decider import load_overlay\n"
        "lane = startup.current()\n"
        "entry = lane.registry.get('mcore_rerun_sentinel')\n"
        "overlay = load_overlay(entry)\n"
        "print(json.dumps({'file': patchlane.__file__, 'registry': str(entry.source),\n"
        "    'overlay': str(entry.overlay), 'reproducer': str(entry.reproducer),\n"
        "    'has_overlay': callable(overlay.overlay)}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout.splitlines()[-1])
    for key in ("file", "registry", "overlay", "reproducer"):
        assert data[key].startswith(str(target / "patchlane")), (key, data[key])
    assert data["has_overlay"]
    command = target / "bin" / "patchlane"
    assert command.read_text().startswith(f"#!{sys.executable}\n")
    out = subprocess.run([str(command), "show", "mcore_rerun_sentinel"], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and "mcore_rerun_sentinel" in out.stdout, out.stderr


def test_from_the_wheel_a_broken_team_file_refuses_its_own_entries_only(
        wheel: Path, tmp_path: Path) -> None:
    """Installed from the wheel, outside the checkout, a team registry with an unknown key
    beside the catalog: commands about one entry that loaded still work (the refusal said on
    stderr), an id of the refused file is that file's error, and drafting a catalog entry
    writes to the working directory, never into the installed package."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    broken = tmp_path / "broken.yaml"
    broken.write_text("schema: 1\nentries:\n  - id: team_fix\n    colour: blue\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONPATH=str(target), PATCHLANE_REGISTRY=str(broken))
    work = tmp_path / "job"
    work.mkdir()

    def command(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(target / "bin" / "patchlane"), *args], capture_output=True,
                              text=True, env=env, cwd=work, timeout=300)

    shown = command("show", "mcore_rerun_sentinel", "--no-import")
    assert shown.returncode == 0 and "mcore_rerun_sentinel" in shown.stdout, shown.stderr
    assert f"registry {broken} refused" in shown.stderr
    theirs = command("show", "team_fix", "--no-import")
    assert theirs.returncode == 3 and "entry 'team_fix'" in theirs.stderr, theirs.stderr
    assert "no registry that loaded has entry 'team_fix', and the refused file(s) may hold " \
        f"it: {broken}: entry 'team_fix'" in theirs.stderr, theirs.stderr
    typo = command("show", "mcore_rerun_sentinal", "--no-import")  # a typo of one that loaded
    assert typo.returncode == 3, typo.stderr
    assert "(the closest that loaded: 'mcore_rerun_sentinel')" in typo.stderr, typo.stderr
    bundle = target / "patchlane" / "_bundle" / "drafts" / "mcore_dsa_indexer_loss_graph_safe.md"
    before = bundle.read_bytes()
    drafted = command("draft", "mcore_dsa_indexer_loss_graph_safe")
    assert drafted.returncode == 0, drafted.stderr
    assert (work / "drafts" / "mcore_dsa_indexer_loss_graph_safe.md").is_file()
    assert bundle.read_bytes() == before
    assert "the installed package is not edited" in drafted.stdout


def test_the_matrix_runs_from_the_wheel_with_no_checkout(wheel: Path, tmp_path: Path) -> None:
    """No matrix.yaml in the working directory: the one shipped beside the catalog is read
    (it was: "matrix.yaml: cannot read the release matrix", exit 2)."""
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = str(target)
    out = subprocess.run([str(target / "bin" / "patchlane"), "matrix", "--set", "no-such-set"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    shipped = target / "patchlane" / "_bundle" / "matrix.yaml"
    assert out.returncode == 2, out.stderr
    assert f"{shipped}: no set named ['no-such-set']" in out.stderr, out.stderr


def test_the_wheel_and_each_receipt_name_the_build_that_ran(wheel: Path, tmp_path: Path) -> None:
    """The wheel records the commit it was built from and whether that tree was clean;
    installed from it, patchlane says so (receipts carry it as provenance.build)."""
    import zipfile

    recorded = json.loads(zipfile.ZipFile(wheel).read("patchlane/_build.json"))
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert recorded["commit"] == head and isinstance(recorded["clean"], bool), recorded
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    str(target), str(wheel)], check=True, timeout=300)
    code = ("import json; from patchlane.sweep.provenance import build; "
            "print(json.dumps(build()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(target)}, cwd=tmp_path,
                         timeout=60)
    assert json.loads(out.stdout) == {"commit": head, "clean": recorded["clean"],
                                      "from": "wheel"}, out.stderr

"""A real stack without some of the product's optional targets: a megatron-only team.

The environment is this venv's own packages, hard-linked into a new venv minus liger-kernel
(Python 3.12, where every CUDA torch brings triton and megatron-core 0.19 imports it) or minus
liger-kernel and triton (Python 3.11, the CPU torch with megatron-core 0.16.1). Every release
in it is a real install; only what is absent differs. The sweep there must exit 0: a reproducer
whose own dependency is missing says ``skipped``, naming it, never ``error``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

pytestmark = [pytest.mark.upstream, pytest.mark.slow]

HIDDEN = ("liger_kernel",) if sys.version_info >= (3, 12) else ("liger_kernel", "triton")
ENTRIES = ("numpy_pin_triton_interpreter", "liger_flce_weighted_none")


def _stack_without(hidden: tuple[str, ...], where: Path) -> Path:
    """A venv holding hard links to this one's site-packages, minus ``hidden`` (their code and
    their metadata). Hard links, not symbolic ones: a module must live in the release that
    installed it, or the sweep rightly calls the environment mixed."""
    import site
    import sysconfig

    if where.exists():
        shutil.rmtree(where)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    source = Path(sysconfig.get_paths()["purelib"])
    target = Path(subprocess.run(
        [str(where / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
         "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip())
    assert source in map(Path, site.getsitepackages()), source
    for item in source.iterdir():
        if item.name.split("-")[0].lower().replace(".", "_") in hidden or \
                item.name.split(".")[0] in hidden:
            continue
        out = subprocess.run(["cp", "-al", str(item), str(target / item.name)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            pytest.skip(f"cannot hard-link this venv's packages ({out.stderr.strip()})")
    return where / "bin" / "python"


def test_a_sweep_without_a_reproducers_own_dependency_exits_0(tmp_path: Path) -> None:
    name = f"py{sys.version_info.major}{sys.version_info.minor}-without-{'-'.join(HIDDEN)}"
    python = _stack_without(HIDDEN, ROOT / ".cache" / "stacks" / name)
    probe = subprocess.run([str(python), "-c", "import importlib.util as u, json; print(json."
                            f"dumps([u.find_spec(n) is None for n in {list(HIDDEN)!r}]))"],
                           capture_output=True, text=True, check=True)
    assert json.loads(probe.stdout) == [True] * len(HIDDEN), "the stack still has them"
    run_dir = tmp_path / "run"
    cmd = [str(python), "-m", "patchlane.cli.main", "sweep", "--lane", "cpu", "--json",
           "--run-dir", str(run_dir)]
    for entry_id in ENTRIES:
        cmd += ["--only", entry_id]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=900,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.returncode == 0, (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    rows = {row["entry_id"]: row for row in json.loads(run_dir.joinpath("index.json")
                                                       .read_text())["rows"]}
    assert rows["numpy_pin_triton_interpreter"]["verdict"] == "skipped"
    # REQUIRES lists triton first: on 3.11 both are missing, on 3.12 liger-kernel alone
    missing = "triton, liger_kernel" if "triton" in HIDDEN else "liger_kernel"
    assert rows["numpy_pin_triton_interpreter"]["reason"].startswith(f"needs {missing},"), rows
    assert rows["liger_flce_weighted_none"]["verdict"] == "skipped"

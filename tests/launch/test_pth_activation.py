"""The `.pth` activation in a real venv: patchlane is imported once `site` has put every site
directory on sys.path, and a requirement missing for good never stops an interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from patchlane.launch.pth import FILE_NAME, content

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DEPS = Path(sysconfig.get_paths()["purelib"])  # this venv's wrapt, PyYAML, packaging


def _venv(tmp_path: Path, system: bool = True) -> tuple[Path, Path]:
    """A venv that reaches patchlane's source (a .pth) but not, in its own site-packages, its
    requirements, with the activation written into it: (its python, its site-packages).
    ``system``: with the base interpreter's site-packages (and the user site)."""
    base = getattr(sys, "_base_executable", sys.executable)
    venv = tmp_path / "v"
    subprocess.run([base, "-m", "venv", "--without-pip",
                    *(["--system-site-packages"] if system else []), str(venv)],
                   check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                   "get_paths()['purelib'])"], capture_output=True, text=True,
                                  check=True).stdout.strip())
    (purelib / "patchlane-source.pth").write_text(f"{ROOT}\n")
    (purelib / FILE_NAME).write_text(content(purelib / FILE_NAME))
    return python, purelib


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PATCHLANE_", "PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONUSERBASE"] = str(tmp_path / "userbase")
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_requirements_from_a_later_site_directory_are_found(tmp_path: Path) -> None:
    # The requirements come from the user site, which `site` adds after the venv's own
    # site-packages (also a --system-site-packages base, a .pth named after this one):
    # imported from the .pth line itself, every interpreter, pip included, exited 69.
    python, _ = _venv(tmp_path)
    env = _env(tmp_path)
    user_site = subprocess.run([str(python), "-m", "site", "--user-site"], capture_output=True,
                               text=True, env=env, timeout=60).stdout.strip()
    Path(user_site).mkdir(parents=True)
    (Path(user_site) / "deps.pth").write_text(f"{DEPS}\n")
    out = subprocess.run([str(python), "-c", "import sys; print('patchlane' in sys.modules)"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "True"), out.stderr
    assert out.stderr == "", out.stderr


def test_a_requirement_missing_for_good_is_said_and_the_interpreter_runs_on(
        tmp_path: Path) -> None:
    python, _ = _venv(tmp_path, system=False)
    out = subprocess.run([str(python), "-c", "print('ran')"], capture_output=True, text=True,
                         env=_env(tmp_path), timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, "ran"), out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("patchlane: MissingDependencyError: patchlane needs "), line
    assert "left it off: this interpreter runs without patchlane" in line, line

"""The suite's warm python (``warm_python.py``) gives a child what the fresh interpreter it
stands for has, so the tests that run each release in one can trust what it imports: the same
``sys.path`` (the request's ``PYTHONPATH`` where Python puts it), argv, working directory,
environment, ``__main__``, output and exit status, with torch imported before and patchlane
and megatron-core not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .warm_python import WarmPython

pytestmark = [pytest.mark.slow]

torch = pytest.importorskip("torch")

SEEN = r"""
import json, os, sys
print(json.dumps({"path": sys.path, "argv": sys.argv, "cwd": os.getcwd(),
                  "env": {k: os.environ.get(k) for k in ("PYTHONPATH", "PATCHLANE_X")},
                  "name": __name__, "stdin": sys.stdin.read(),
                  "loaded": [m for m in ("torch", "patchlane", "megatron") if m in sys.modules]}))
print("to stderr", file=sys.stderr)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "first"), str(tmp_path / "second"),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATCHLANE_X"] = "1"
    return env


@pytest.mark.parametrize("form", ["-c", "script"])
def test_a_child_sees_what_a_fresh_interpreter_sees(warm_python: WarmPython, tmp_path: Path,
                                                    form: str) -> None:
    script = tmp_path / "sub" / "seen.py"
    script.parent.mkdir()
    script.write_text(SEEN)
    args = ["-c", SEEN, "a", "b"] if form == "-c" else [str(script), "a", "b"]
    env, cwd = _env(tmp_path), tmp_path
    fresh = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    forked = warm_python.run(args, env=env, cwd=cwd)
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (
        0, "to stderr\n"), forked.stderr
    a, b = json.loads(fresh.stdout), json.loads(forked.stdout)
    assert a.pop("loaded") == [] and b.pop("loaded") == ["torch"]
    assert a == b
    assert b["path"][1:3] == [str(tmp_path / "first"), str(tmp_path / "second")]


def test_a_child_ends_as_a_fresh_interpreter_would(warm_python: WarmPython,
                                                   tmp_path: Path) -> None:
    env = _env(tmp_path)
    ends = {"raise SystemExit(3)": 3, "raise ValueError('boom')": 1,
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)": -9,
            "raise SystemExit('said why')": 1}
    for code, status in ends.items():
        fresh = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        forked = warm_python.run(["-c", code], env=env, cwd=tmp_path)
        assert fresh.returncode == forked.returncode == status, (code, forked.stderr)
        assert fresh.stderr.splitlines()[-1:] == forked.stderr.splitlines()[-1:], code
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run(["-c", "import time; time.sleep(60)"], env=env, cwd=tmp_path, timeout=1)
    assert warm_python.run(["-c", "print('next')"], env=env, cwd=tmp_path).stdout == "next\n"


def test_an_environment_torch_could_read_is_refused(warm_python: WarmPython,
                                                    tmp_path: Path) -> None:
    env = {**_env(tmp_path), "TORCH_SHOW_CPP_STACKTRACES": "1"}
    with pytest.raises(AssertionError, match="TORCH_SHOW_CPP_STACKTRACES"):
        warm_python.run(["-c", "pass"], env=env, cwd=tmp_path)

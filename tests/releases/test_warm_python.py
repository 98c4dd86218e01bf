"""The suite's warm python (``warm_python.py``) gives a child what the fresh interpreter it
stands for has, so the tests that run each release in one can trust what it imports: the same
``sys.path`` (the request's ``PYTHONPATH`` where Python puts it, each folder once), argv,
working directory, environment, ``__main__``, output, exit functions and exit status, with
torch imported before and patchlane and megatron-core not; and it refuses what it cannot
give."""

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


def _env(tmp_path: Path, *folders: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONPATH"] = os.pathsep.join([*(str(tmp_path / f) for f in folders),
                                         *filter(None, [os.environ.get("PYTHONPATH")])])
    env["PATCHLANE_X"] = "1"
    return env


def _same(python: WarmPython, args: list[str], env: dict[str, str], cwd: Path) -> dict[str, object]:
    fresh = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True,
                           text=True, timeout=120, stdin=subprocess.DEVNULL)
    forked = python.run(args, env=env, cwd=cwd)
    assert (forked.returncode, forked.stderr) == (fresh.returncode, fresh.stderr) == (
        0, "to stderr\n"), forked.stderr
    a, b = json.loads(fresh.stdout), json.loads(forked.stdout)
    assert a.pop("loaded") == [] and b.pop("loaded") == ["torch"]
    assert a == b
    seen: dict[str, object] = b
    return seen


@pytest.mark.parametrize("form", ["-c", "script"])
def test_a_child_sees_what_a_fresh_interpreter_sees(warm_python: WarmPython, tmp_path: Path,
                                                    form: str) -> None:
    script = tmp_path / "sub" / "seen.py"
    script.parent.mkdir()
    script.write_text(SEEN)
    (tmp_path / "link.py").symlink_to(script)  # Python puts the folder of what it links to
    env = _env(tmp_path, "first", "second", "first")  # each folder once, at its first place
    for args in ([["-c", SEEN, "a", "b"]] if form == "-c" else
                 [[str(script), "a", "b"], ["sub/seen.py", "a"], ["link.py"]]):
        seen = _same(warm_python, args, env, tmp_path)
        path = seen["path"]
        assert isinstance(path, list)
        assert path[1:3] == [str(tmp_path / "first"), str(tmp_path / "second")]


def test_a_server_started_with_its_own_python_path_gives_the_requests(tmp_path: Path) -> None:
    """A server whose own ``PYTHONPATH`` repeats a folder the request's leaves out still gives
    each child the path its request's ``PYTHONPATH`` makes."""
    env = _env(tmp_path, "x")
    server_env = {**env, "PYTHONPATH": os.pathsep.join([str(tmp_path / "y"),
                                                        str(tmp_path / "y"), env["PYTHONPATH"]])}
    python = WarmPython(server_env)
    try:
        seen = _same(python, ["-c", SEEN], env, tmp_path)
        assert str(tmp_path / "y") not in seen["path"]  # type: ignore[operator]
    finally:
        python.close()


def test_a_child_ends_as_a_fresh_interpreter_would(warm_python: WarmPython,
                                                   tmp_path: Path) -> None:
    env = _env(tmp_path)
    ends = {"raise SystemExit(3)": 3, "raise ValueError('boom')": 1,
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)": -9,
            "raise SystemExit('said why')": 1,
            ("import atexit, threading, time\n"
             "atexit.register(print, 'exit functions ran')\n"
             "threading.Thread(target=lambda: (time.sleep(0.3), print('thread ended'))).start()"
             ): 0}
    for code, status in ends.items():
        fresh = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                               capture_output=True, text=True, timeout=120)
        forked = warm_python.run(["-c", code], env=env, cwd=tmp_path)
        assert fresh.returncode == forked.returncode == status, (code, forked.stderr)
        assert fresh.stderr.splitlines()[-1:] == forked.stderr.splitlines()[-1:], code
        assert fresh.stdout == forked.stdout, code
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run(["-c", "import time; time.sleep(60)"], env=env, cwd=tmp_path, timeout=1)
    assert warm_python.run(["-c", "print('next')"], env=env, cwd=tmp_path).stdout == "next\n"


def test_what_it_cannot_give_is_refused(warm_python: WarmPython, tmp_path: Path) -> None:
    """An environment torch could read at import, and a folder holding a module the server
    imported (a copy of typing_extensions) or relative to the working directory."""
    import shutil

    import typing_extensions

    env = {**_env(tmp_path), "TORCH_SHOW_CPP_STACKTRACES": "1"}
    with pytest.raises(AssertionError, match="TORCH_SHOW_CPP_STACKTRACES"):
        warm_python.run(["-c", "pass"], env=env, cwd=tmp_path)
    (tmp_path / "shadow").mkdir()
    shutil.copy(typing_extensions.__file__, tmp_path / "shadow")
    for folders in (["shadow"], []):
        env = _env(tmp_path, *folders)
        if not folders:
            env["PYTHONPATH"] = os.pathsep.join(["relative", env["PYTHONPATH"]])
        with pytest.raises(AssertionError, match="would change what the warm python imported"):
            warm_python.run(["-c", "pass"], env=env, cwd=tmp_path)

"""Bad input and failing extensions at startup (issue 14 items 4, 5, 6, 11): each is a clear
RegistryError in bounded time and memory, recorded in startup_error, and never a crash or a
half-started decider. Subprocesses where a hang or a process exit is the failure mode."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.errors import RegistryError
from patchlane.registry import parse_registry

ROOT = Path(__file__).resolve().parents[2]


def bomb(levels: int) -> str:
    lines = ["schema: 1", 'a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"entries: *a{levels - 1}")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_fast_and_briefly(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text(bomb(9))  # 9^9 * 8 strings if expanded
    assert len(path.read_bytes()) < 1000
    started = time.monotonic()
    with pytest.raises(RegistryError, match="YAML aliases expand too far") as info:
        parse_registry(path)
    assert time.monotonic() - started < 2.0
    assert len(str(info.value)) < 1000


def test_a_recursive_alias_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text("schema: 1\nentries: &e [*e]\n")
    with pytest.raises(RegistryError, match="recursive YAML alias"):
        parse_registry(path)


def test_a_huge_value_in_a_wrong_typed_field_is_echoed_bounded(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "entries": {"x": "y" * 5_000_000}}))
    with pytest.raises(RegistryError) as info:
        parse_registry(path)
    assert len(str(info.value)) < 1000 and "more characters" in str(info.value)


def test_a_fifo_or_a_device_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "registry.yaml"
    os.mkfifo(fifo)
    code = ("from patchlane.registry import parse_registry\nimport sys\n"
            "try:\n    parse_registry(sys.argv[1])\nexcept Exception as e:\n    print(e)\n")
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device")):
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                             text=True, timeout=60, env={**os.environ,
                                                         "PATCHLANE_DEFAULT_REGISTRY": "0"})
        assert "not a regular file" in out.stdout and kind in out.stdout, out


def _entry_point_dist(root: Path, body: str) -> dict[str, str]:
    """A distribution declaring a patchlane.registries entry point whose module is ``body``."""
    (root / "plbroken_ep.py").write_text(body)
    info = root / "plbroken_ep-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plbroken-ep\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[patchlane.registries]\nteam = plbroken_ep:paths\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)]),
           "PATCHLANE_DEFAULT_REGISTRY": "0"}
    env.pop("PATCHLANE_STRICT", None)  # the suite runs strict; the default path is the point
    env.pop("PATCHLANE_REGISTRY", None)
    return env


@pytest.mark.parametrize(("body", "said"), [
    ("raise ImportError('no such thing')\n", "ImportError: no such thing"),
    ("def paths():\n    raise RuntimeError('boom')\n", "RuntimeError: boom"),
    ("import sys\ndef paths():\n    sys.exit(3)\n", "SystemExit: 3"),
    ("def paths():\n    return None\n", "it gave no registry path"),
])
def test_a_failing_entry_point_is_a_startup_error_not_a_crash(tmp_path: Path, body: str,
                                                              said: str) -> None:
    env = _entry_point_dist(tmp_path, body)
    code = "import patchlane\nprint('ERR', patchlane.startup.startup_error())\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "ERR" in out.stdout and "entry point team = plbroken_ep:paths" in out.stdout
    assert said in out.stdout
    strict = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env={**env, "PATCHLANE_STRICT": "1"})
    assert strict.returncode != 0 and "RegistryError" in strict.stderr


def test_strict_failure_is_sticky_on_a_second_import(tmp_path: Path) -> None:
    bad = tmp_path / "registry.yaml"
    bad.write_text("schema: 1\nentries: 3\n")
    code = ("import sys\nfor attempt in (1, 2):\n"
            "    try:\n        import patchlane\n        print(attempt, 'imported')\n"
            "    except Exception as exc:\n        print(attempt, type(exc).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PATCHLANE_STRICT": "1",
                                           "PATCHLANE_DEFAULT_REGISTRY": "0",
                                           "PATCHLANE_REGISTRY": str(bad)})
    assert out.stdout.split("\n")[:2] == ["1 RegistryError", "2 RegistryError"], out


@pytest.mark.parametrize("where", ["module", "probe"])
def test_an_overlay_calling_sys_exit_is_a_failed_entry_not_an_exit(fake_target: Any,
                                                                   where: str) -> None:
    from patchlane.deciding.audit import Outcome

    body = ("import sys\nsys.exit(3)\ndef overlay(w, i, a, k):\n    return w(*a, **k)\n"
            if where == "module" else
            "import sys\ndef overlay(w, i, a, k):\n    return w(*a, **k)\n"
            "def probe(module):\n    sys.exit(3)\n")
    fake_target.write_overlay(body)
    decider = fake_target.decider()
    fake_target.import_target()  # still here: the process did not exit
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR
    assert "called sys.exit(3)" in decision.reason


@pytest.mark.parametrize("path", ["../outside/x.py", "/etc/passwd", "patches/../../x.py"])
def test_an_overlay_path_outside_the_registry_folder_is_refused(fake_target: Any,
                                                                path: str) -> None:
    fake_target.write_registry(fake_target.entry(overlay=path))
    with pytest.raises(RegistryError, match="path outside the registry's folder") as info:
        parse_registry(fake_target.registry)
    assert info.value.key == "overlay" and info.value.found == path

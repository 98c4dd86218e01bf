"""The release cache: trusted only where the registry cache would be, and what it holds is
what was installed.

The cache holds code that radar, bisect and matrix import: a cache other users can write is
refused, and an install changed since (or a folder planted with a bare marker) is installed
afresh, never run. Real installs of a small real release from the package index."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from patchlane.sweep.installs import MARKER, ReleaseCacheError, install_dir

SPEC = "six==1.16.0"  # one pure-Python file: a real release, installed in a second


def _module(target: Path) -> Path:
    return target / "six.py"


@pytest.mark.slow
def test_an_install_records_its_content_and_a_changed_one_is_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = install_dir(SPEC, cache)
    marker = json.loads((target / MARKER).read_text())
    assert marker["spec"] == SPEC and "six.py" in marker["files"]
    original = _module(target).read_text()
    assert install_dir(SPEC, cache) == target  # reused as it is
    _module(target).write_text(original + "\nimport os; os.system('echo planted')\n")
    assert install_dir(SPEC, cache) == target
    assert _module(target).read_text() == original  # changed: installed afresh


@pytest.mark.slow
def test_a_planted_folder_with_a_bare_marker_is_not_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    planted = cache / f"cp{sys.version_info.major}{sys.version_info.minor}" / "six-1.16.0"
    planted.mkdir(parents=True)
    (planted / "six.py").write_text("raise SystemExit('planted code ran')\n")
    (planted / MARKER).write_text("ok\n")  # what the cache's marker used to be
    target = install_dir(SPEC, cache)
    assert target == planted and "planted" not in _module(target).read_text()


def test_a_cache_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # writable by everyone, no sticky bit
    with pytest.raises(ReleaseCacheError) as refused:
        install_dir(SPEC, shared / "cache")
    text = str(refused.value)
    assert text.startswith(f"release cache {shared / 'cache'}/cp")
    assert "can be written by other users" in text
    assert "fix: point PATCHLANE_RELEASE_CACHE (or --cache) at a directory only you can " \
           "write" in text
    assert not list((shared / "cache").rglob("six.py"))  # nothing installed there


def test_an_install_others_can_write_is_neither_reused_nor_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    foreign = cache / tag / "six-1.16.0"
    foreign.mkdir(parents=True)
    (cache / tag).chmod(0o700)
    foreign.chmod(foreign.stat().st_mode | stat.S_IWOTH)
    with pytest.raises(ReleaseCacheError, match="neither reused nor replaced"):
        install_dir(SPEC, cache)


@pytest.mark.slow
def test_two_commands_installing_one_release_at_once_install_it_once(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch
                                                                     ) -> None:
    """A matrix beside a bisect on one cache: without the release's lock both ran pip into the
    same folder at once (one's rmtree under the other's install)."""
    import threading

    from patchlane.sweep import installs

    ran: list[list[str]] = []
    real = installs._step

    def counted(cmd: list[str], **kw: object) -> int:
        if "pip" in cmd:
            ran.append(cmd)
        return real(cmd, **kw)

    monkeypatch.setattr(installs, "_step", counted)
    cache = tmp_path / "cache"
    found: list[Path] = []
    threads = [threading.Thread(target=lambda: found.append(install_dir(SPEC, cache)))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert len(found) == 3 and len(set(found)) == 1
    assert len(ran) == 1, ran  # one pip install; the others waited and reused it
    assert "six.py" in json.loads((found[0] / MARKER).read_text())["files"]


@pytest.mark.slow
def test_an_edit_that_keeps_size_and_mtime_is_still_seen(tmp_path: Path) -> None:
    """Reuse reads no byte (a torch install is gigabytes): it compares each file's size, mtime
    and ctime with what the install recorded. An edit of the same length with its mtime put
    back still moves ctime, which no tool of this user can set back."""
    import os

    cache = tmp_path / "cache"
    target = install_dir(SPEC, cache)
    module = _module(target)
    original = module.read_bytes()
    before = module.stat()
    planted = original.replace(b"import", b"IMPORT", 1)
    assert len(planted) == len(original) and planted != original
    module.write_bytes(planted)
    os.utime(module, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert module.stat().st_mtime_ns == before.st_mtime_ns
    assert install_dir(SPEC, cache) == target
    assert module.read_bytes() == original  # seen, and installed afresh
    marker = json.loads((target / MARKER).read_text())
    assert marker["stamps"]["six.py"][0] == len(original)


@pytest.mark.slow
def test_an_install_is_compiled_once_to_bytecode_checked_against_its_source(
        tmp_path: Path) -> None:
    """Where PYTHONDONTWRITEBYTECODE is set Python writes no bytecode on import, and every rank
    of every case would compile the release afresh: the install writes it once. Hash-checked
    bytecode (PEP 552): Python uses it only while the source it was compiled from is the one
    there, and the install is still recorded as it was (bytecode is no part of its content)."""
    import importlib.util
    import subprocess

    cache = tmp_path / "cache"
    target = install_dir(SPEC, cache)
    pyc = Path(importlib.util.cache_from_source(str(_module(target))))
    assert pyc.is_file(), sorted(p.name for p in target.rglob("*"))
    flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
    assert flags == 0b11  # hash-based, checked against the source on every import
    assert not any("__pycache__" in name for name in
                   json.loads((target / MARKER).read_text())["files"])
    stamp = pyc.stat().st_mtime_ns
    assert install_dir(SPEC, cache) == target and pyc.stat().st_mtime_ns == stamp  # reused
    # An import that may write no bytecode reads it: the file is not compiled again.
    # (python -v names each module's code object read from bytecode.)
    out = subprocess.run([sys.executable, "-B", "-v", "-c", "import six"],
                         env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    assert f"code object from '{pyc}'" in out.stderr, out.stderr[-2000:]


@pytest.mark.slow
def test_a_compile_stopped_by_a_signal_stops_the_install(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """stop_installs (Ctrl-C, SIGTERM) ends whichever step runs; a compile it ends must not
    leave an install recorded as complete, as a pip it ends does not. (A compile that ends
    with an uncompilable file is no failure: bytecode is a saving.)"""
    import subprocess

    from patchlane.sweep import installs

    real = installs._step

    def stopped(cmd: list[str], check: bool = True, **kw: object) -> int:
        if "compileall" in cmd:  # a real process, ended by SIGTERM as stop_installs ends it
            cmd = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"]
        return real(cmd, check, **kw)

    monkeypatch.setattr(installs, "_step", stopped)
    cache = tmp_path / "cache"
    with pytest.raises(subprocess.CalledProcessError) as ended:
        install_dir(SPEC, cache)
    assert ended.value.returncode < 0
    assert not list(cache.rglob(MARKER))  # never recorded: the next use installs afresh
    monkeypatch.setattr(installs, "_step", real)
    target = install_dir(SPEC, cache)
    assert (target / MARKER).is_file()

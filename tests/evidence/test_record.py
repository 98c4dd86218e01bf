"""The wheel RECORD check (patchlane.evidence.record): an installed distribution's files hashed
against what its RECORD says the wheel installed; an edited, or a deleted, file is named."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from patchlane.evidence.record import verify_distribution

FILES = {
    "__init__.py": "from .core import answer\n",
    "core.py": "def answer():\n    return 42\n",
    "data/table.txt": "a,b\n1,2\n",
}


def record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def record_text(rows: list[tuple[str, str, str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def names() -> tuple[str, str]:
    """A distribution name nothing else on sys.path has, and its import name."""
    tag = uuid.uuid4().hex[:8]
    return f"plrecord-{tag}", f"plrecord_{tag}"


def install_by_hand(site: Path, dist: str, package: str) -> Path:
    """What an installer leaves: the files, and a dist-info whose RECORD lists each with its
    hash (RECORD itself and a byte-code cache without one, as pip writes them)."""
    rows = []
    for rel, text in FILES.items():
        path = site / package / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        rows.append((f"{package}/{rel}", record_hash(text.encode()), str(len(text))))
    cache = site / package / "__pycache__" / "core.cpython-311.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"stale bytecode")
    rows.append((f"{package}/__pycache__/core.cpython-311.pyc", "", ""))
    info = site / f"{package}-1.0.dist-info"
    info.mkdir()
    metadata = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n"
    (info / "METADATA").write_text(metadata)
    rows.append((f"{info.name}/METADATA", record_hash(metadata.encode()), str(len(metadata))))
    rows.append((f"{info.name}/RECORD", "", ""))
    (info / "RECORD").write_text(record_text(rows))
    return info


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "site"
    path.mkdir()
    monkeypatch.syspath_prepend(str(path))
    return path


def test_an_untouched_install_checks_out(site: Path) -> None:
    dist, package = names()
    install_by_hand(site, dist, package)
    check = verify_distribution(dist)
    assert check.ok, check
    assert (check.distribution, check.version) == (dist, "1.0")
    assert check.checked == len(FILES) + 1  # the package's files and METADATA
    assert check.unhashed == 2  # RECORD itself and the byte-code cache
    assert check.modified == () and check.missing == () and check.error is None
    assert check.location == str(site.resolve())
    data = check.as_dict()
    assert data["ok"] is True and data["modified"] == [] and data["missing"] == []


def test_an_edited_file_is_named(site: Path) -> None:
    dist, package = names()
    install_by_hand(site, dist, package)
    core = site / package / "core.py"
    core.write_text(core.read_text().replace("42", "43"))
    check = verify_distribution(dist)
    assert not check.ok
    assert check.modified == (f"{package}/core.py",)
    assert check.missing == ()
    assert check.checked == len(FILES) + 1
    assert check.as_dict()["modified"] == [f"{package}/core.py"]


def test_the_same_size_edit_and_a_data_file_edit_are_caught_too(site: Path) -> None:
    dist, package = names()
    install_by_hand(site, dist, package)
    table = site / package / "data" / "table.txt"
    table.write_text(table.read_text().replace("1", "9"))  # same length, other bytes
    assert verify_distribution(dist).modified == (f"{package}/data/table.txt",)


def test_a_deleted_file_is_missing(site: Path) -> None:
    dist, package = names()
    install_by_hand(site, dist, package)
    (site / package / "core.py").unlink()
    check = verify_distribution(dist)
    assert not check.ok
    assert check.missing == (f"{package}/core.py",) and check.modified == ()
    assert check.checked == len(FILES)


def test_a_rewritten_bytecode_cache_is_not_an_edit(site: Path) -> None:
    dist, package = names()
    install_by_hand(site, dist, package)
    (site / package / "__pycache__" / "core.cpython-311.pyc").write_bytes(b"recompiled")
    assert verify_distribution(dist).ok


def test_not_installed_and_no_record_are_errors(site: Path) -> None:
    dist, package = names()
    check = verify_distribution(dist)
    assert not check.ok and check.error == "not installed" and check.version is None
    info = install_by_hand(site, dist, package)
    (info / "RECORD").unlink()
    check = verify_distribution(dist)
    assert not check.ok and check.error == "no RECORD (installed without one)"
    assert check.version == "1.0"


def build_wheel(directory: Path, dist: str, package: str) -> Path:
    """A pure-Python wheel, written as a build backend writes one."""
    info = f"{package}-1.0.dist-info"
    members = {f"{package}/{rel}": text.encode() for rel, text in FILES.items()}
    members[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n".encode()
    members[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: patchlane-tests\n"
                                b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    rows = [(name, record_hash(data), str(len(data))) for name, data in members.items()]
    rows.append((f"{info}/RECORD", "", ""))
    members[f"{info}/RECORD"] = record_text(rows).encode()
    wheel = directory / f"{package}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return wheel


@pytest.mark.slow
def test_a_pip_installed_wheel_checks_out_until_a_file_is_edited(site: Path,
                                                                 tmp_path: Path) -> None:
    dist, package = names()
    wheel = build_wheel(tmp_path, dist, package)
    # pip writes the RECORD here (and byte-compiles, adding .pyc rows with hashes of their own)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--disable-pip-version-check", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    record = next(site.glob("*.dist-info/RECORD")).read_text()
    assert f"{package}/core.py,sha256=" in record and ".pyc," in record
    check = verify_distribution(dist)
    assert check.ok, check
    assert check.checked >= len(FILES) and check.unhashed >= 1
    core = site / package / "core.py"
    core.write_text(core.read_text() + "# a local fix nobody recorded\n")
    check = verify_distribution(dist)
    assert not check.ok
    assert check.modified == (f"{package}/core.py",)

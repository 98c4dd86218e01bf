"""The wheel RECORD check (patchlane.sweep.record): an installed distribution's files hashed
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

from patchlane.sweep.record import verify_distribution

from ..conftest import FakeTarget

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


# -- a RECORD is input, not instructions ----------------------------------------------------------


def add_rows(info: Path, *rows: tuple[str, str, str]) -> None:
    """Rows added to an installed distribution's RECORD (before its own, unhashed, row)."""
    record = info / "RECORD"
    text = record.read_text()
    own = f"{info.name}/RECORD,,\n"
    record.write_text(text.replace(own, record_text(list(rows)) + own))


def verify_in_a_child(site: Path, dist: str, timeout: float = 60) -> dict[str, object]:
    """verify_distribution run in a child process with a deadline: a check that reads a
    device or blocks on a pipe fails the test instead of hanging the session."""
    import json
    import os

    code = ("import json, sys\nfrom patchlane.sweep.record import verify_distribution\n"
            "print(json.dumps(verify_distribution(sys.argv[1]).as_dict()))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(site), str(Path(__file__).resolve().parents[2])])}
    try:
        done = subprocess.run([sys.executable, "-c", code, dist], capture_output=True,
                              text=True, env=env, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail(f"verify_distribution({dist!r}) still running after {timeout} s")
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_row_that_climbs_out_of_the_install_directory_is_not_read(site: Path) -> None:
    """``../../…/dev/zero``: hashing it never ends. A row outside the directory the
    distribution is installed in is listed as outside and not opened."""
    dist, package = names()
    info = install_by_hand(site, dist, package)
    climb = "../" * (len(site.resolve().parts) + 2) + "dev/zero"
    add_rows(info, (climb, record_hash(b""), "0"))
    result = verify_in_a_child(site, dist)
    assert result["ok"] is True, result
    assert result["outside"] == [climb]
    assert result["checked"] == len(FILES) + 1 and result["unreadable"] == []


@pytest.mark.parametrize("kind", ["a symlink to /dev/zero", "a named pipe", "a directory"])
def test_a_row_whose_file_is_not_a_regular_file_is_a_finding(site: Path, kind: str) -> None:
    dist, package = names()
    info = install_by_hand(site, dist, package)
    odd = site / package / "odd"
    if kind == "a symlink to /dev/zero":
        if not Path("/dev/zero").exists():
            pytest.skip("no /dev/zero here")
        odd.symlink_to("/dev/zero")
        said = "not a regular file (a character device)"
    elif kind == "a named pipe":
        os_mkfifo = getattr(__import__("os"), "mkfifo", None)
        if os_mkfifo is None:
            pytest.skip("no named pipes here")
        os_mkfifo(odd)  # opening it to read would wait for a writer forever
        said = "not a regular file (a FIFO (named pipe))"
    else:
        odd.mkdir()
        said = "not a regular file (a directory)"
    add_rows(info, (f"{package}/odd", record_hash(b""), "0"))
    result = verify_in_a_child(site, dist)
    assert result["ok"] is False
    (line,) = result["unreadable"]  # type: ignore[misc]
    record = info.resolve() / "RECORD"
    assert line.startswith(f"{record}: row ") and f"({package}/odd): {said}" in line, line
    assert "Fix: reinstall it: `pip install --force-reinstall --no-deps" in line
    assert result["checked"] == len(FILES) + 1  # the other rows are still checked


def test_an_unknown_hash_algorithm_is_a_finding_naming_the_row(site: Path) -> None:
    dist, package = names()
    info = install_by_hand(site, dist, package)
    add_rows(info, (f"{package}/core.py", "blake9=AAAA", "10"))
    check = verify_distribution(dist)
    assert not check.ok and check.error is None
    (line,) = check.unreadable
    rows = (info / "RECORD").read_text().splitlines()
    number = rows.index(f"{package}/core.py,blake9=AAAA,10") + 1
    assert line.startswith(f"{info.resolve() / 'RECORD'}: row {number} ({package}/core.py): "
                           "hash algorithm 'blake9' is not one hashlib guarantees; expected "
                           "one of blake2b, blake2s, md5, sha1, sha224, sha256"), line
    assert check.checked == len(FILES) + 1 and check.as_dict()["unreadable"] == [line]


def test_a_row_naming_no_possible_file_is_a_finding(site: Path) -> None:
    dist, package = names()
    info = install_by_hand(site, dist, package)
    add_rows(info, (f"{package}/nul\x00byte.py", record_hash(b""), "0"))
    check = verify_distribution(dist)
    if check.error is not None:  # an interpreter whose csv refuses NUL: said, not raised
        assert check.error.startswith("RECORD is not CSV") and not check.ok
        return
    (line,) = check.unreadable
    assert "nul\\x00byte.py'): not a file name" in line and not check.ok


def test_doctor_reports_hostile_record_rows_as_problems_and_exits_16(
        fake_target: FakeTarget) -> None:
    """Through the real command: an unknown algorithm and a row pointing at a device are
    problems (exit 16, no traceback), not a crash (70) or a hang."""
    import os

    info = next(fake_target.root.glob("*.dist-info"))
    target = fake_target.target_file.read_bytes()
    rows = [(f"{fake_target.package}/target.py", "blake9=AAAA", str(len(target))),
            ("../" * (len(fake_target.root.resolve().parts) + 2) + "dev/zero",
             record_hash(b""), "0"),
            (f"{info.name}/RECORD", "", "")]
    (info / "RECORD").write_text(record_text(rows))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_REGISTRY=str(
        fake_target.write_registry()), PYTHONPATH=str(fake_target.root))
    try:
        out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "doctor", "--json"],
                             capture_output=True, text=True, env=env, timeout=120,
                             cwd=Path(__file__).resolve().parents[2])
    except subprocess.TimeoutExpired:
        pytest.fail("doctor still running after 120 s")
    assert out.returncode == 16, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    import json

    report = json.loads(out.stdout)
    (problem,) = [p for p in report["problems"] if "RECORD" in p]
    assert f"row 1 ({fake_target.package}/target.py): hash algorithm 'blake9'" in problem
    (record,) = [r for r in report["records"]
                 if r["distribution"] == fake_target.distribution]
    assert record["outside"] and record["outside"][0].endswith("dev/zero")

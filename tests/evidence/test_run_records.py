"""A run's records against hostile neighbours and hostile reproducers: a FIFO where an earlier
run's receipt or index belongs, an earlier index of the wrong shape, two sweeps started in the
same second, a reproducer that floods its message and its output, control characters in a
reason, and the permissions records are written with."""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from patchlane.registry import load_registries
from patchlane.runs.manifest import RunDir, case_id
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import Shard, VerdictRow, new_run, run_sweep
from patchlane.sweep.receipts import validate
from patchlane.sweep.reports import write_reports
from patchlane.sweep.reproduce import (
    LOG_HEAD_BYTES,
    LOG_TAIL_BYTES,
    MESSAGE_HEAD_CHARS,
    MESSAGE_TAIL_CHARS,
    Mode,
    clip,
)
from patchlane.sweep.schedule import plan_schedule

from ..conftest import FakeTarget
from .test_sweep_faults import HEAD, env_for, multi_registry

T = TypeVar("T")
ROWS = [VerdictRow("e_guard", "cpu", 1, Verdict.GUARDING, "fails without, passes with"),
        VerdictRow("e_error", "cpu", 1, Verdict.ERROR, "without overlay: run: KeyError: 'x'",
                   stderr_tail="Traceback\nKeyError: 'x'")]


@contextlib.contextmanager
def fifo(path: Path) -> Iterator[Path]:
    """A FIFO at ``path``; a reader left blocked on it (the bug) is released at the end."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):  # ENXIO: nobody is blocked reading, as it should be
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))


def within(seconds: float, call: Callable[[], T]) -> T:
    """``call()``, failing the test (instead of hanging it) when it blocks."""
    pool = cf.ThreadPoolExecutor(1)
    try:
        return pool.submit(call).result(timeout=seconds)
    except cf.TimeoutError:
        raise AssertionError(f"blocked for more than {seconds}s") from None
    finally:
        pool.shutdown(wait=False)


def earlier_run(root: Path, name: str = "earlier") -> RunDir:
    run = RunDir.create(root / name, {"run_id": name})
    write_reports(run, ROWS[:1])
    return run


# -- a FIFO in the runs root -----------------------------------------------------------------

def test_a_fifo_named_as_an_earlier_receipt_does_not_block_planning(tmp_path: Path) -> None:
    cid = case_id("e", "cpu", 1, Mode.WITHOUT)
    old = tmp_path / "old"
    (old / "manifest.json").parent.mkdir()
    (old / "manifest.json").write_text("{}")
    with fifo(old / "receipts" / f"{cid}.json"):
        schedule = within(10, lambda: plan_schedule([(cid, None)], history=tmp_path,
                                                    exclude=tmp_path / "new"))
    assert schedule["order"] == [{"case": cid, "estimate_s": None, "from": None,
                                  "match": None, "host_class": None}]


def test_a_fifo_named_index_json_is_listed_as_unreadable_and_the_report_is_written(
        tmp_path: Path) -> None:
    earlier_run(tmp_path)
    with fifo(tmp_path / "blocked" / "index.json"):
        run = RunDir.create(tmp_path / "tonight", {"run_id": "tonight"})
        index = within(20, lambda: write_reports(run, ROWS))
    (problem,) = index.lineage["unreadable"] if index.lineage else []
    assert problem.startswith("blocked: NotARegularFile: ")
    assert "index.json: is a FIFO (named pipe), not a regular file" in problem
    assert index.lineage and index.lineage["earlier"] == 1  # the readable run still counts
    assert "blocked: NotARegularFile" in (run.path / "report.html").read_text()


# -- an earlier index of the wrong shape -------------------------------------------------------

@pytest.mark.parametrize(("where", "value", "says"), [
    (("counts",), ["guarding"], "counts is a JSON array"),
    (("rows", 0, "comparison_key"), {"lane": "cpu", "distributions": ["plfake"]},
     "e_guard[cpu-ws1]: comparison_key: distributions is a JSON array"),
    (("rows", 0, "links"), [["receipts", "x"]], "e_guard[cpu-ws1]: links is a JSON array"),
    (("entries",), {"e_guard": ["summary"]}, "entries: e_guard is a JSON array"),
    (("provenance",), ["python"], "provenance is a JSON array"),
])
def test_an_earlier_index_of_the_wrong_shape_is_that_runs_problem(
        tmp_path: Path, where: tuple[Any, ...], value: Any, says: str) -> None:
    bad = earlier_run(tmp_path, "bad")
    data = json.loads((bad.path / "index.json").read_text())
    data["rows"][0]["comparison_key"] = {"lane": "cpu", "distributions": {"plfake": "1.0"}}
    target = data
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    (bad.path / "index.json").write_text(json.dumps(data))
    good = earlier_run(tmp_path, "good")
    run = RunDir.create(tmp_path / "tonight", {"run_id": "tonight"})
    index = write_reports(run, ROWS)
    assert index.lineage is not None
    (problem,) = index.lineage["unreadable"]
    assert problem.startswith("bad: TypeError: "), problem
    assert f"{says}, not an object" in problem, problem
    assert index.lineage["earlier"] == 1  # the good one still counts
    assert (run.path / "report.html").is_file() and good.path.is_dir()


def test_a_malformed_compare_run_is_a_usage_error_before_anything_runs(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    multi_registry(fake_target, {"a": HEAD + "def run(ctx):\n    pass\n"})
    bad = earlier_run(tmp_path, "bad")
    data = json.loads((bad.path / "index.json").read_text())
    data["counts"] = ["guarding"]
    (bad.path / "index.json").write_text(json.dumps(data))
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "sweep", "--runs-root",
                          str(tmp_path / "runs"), "--compare", str(bad.path), "--quiet"],
                         env=env_for(fake_target), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"--compare {bad.path}: {bad.path / 'index.json'}: not a sweep index (TypeError: " \
           in out.stderr and "counts is a JSON array, not an object" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "runs").exists()


# -- two sweeps in the same second -------------------------------------------------------------

FROZEN_ID = ("import sys; import patchlane.cli.sweep as s; "
             "s._run_id = lambda shard: '20260101T000000Z-host'; "
             "from patchlane.cli.main import main; sys.exit(main(sys.argv[1:]))")


def test_two_sweeps_started_in_the_same_second_get_two_run_directories(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    # A reproducer for cuda only, swept on cpu: a row, no case, a quick sweep.
    multi_registry(fake_target, {"a": "LANES = ('cuda',)\nWORLD_SIZES = (1,)\n\n"
                                      "def run(ctx):\n    pass\n"})
    root = tmp_path / "runs"
    cmd = [sys.executable, "-c", FROZEN_ID, "sweep", "--lane", "cpu", "--runs-root",
           str(root), "--quiet"]
    for _ in range(2):  # the clock says the same second both times
        out = subprocess.run(cmd, env=env_for(fake_target), capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
    assert sorted(p.name for p in root.iterdir()) == ["20260101T000000Z-host",
                                                      "20260101T000000Z-host-02"]
    ids = [json.loads((root / name / "index.json").read_text())["run_id"]
           for name in sorted(os.listdir(root))]
    assert ids == sorted(ids) == ["20260101T000000Z-host", "20260101T000000Z-host-02"]


# -- a reproducer that floods ----------------------------------------------------------------

FLOOD = HEAD + (
    "def run(ctx):\n    import os, sys\n    import {module} as t\n    t.Greeter().greet('a')\n"
    "    sys.stdout.write('first line of the output\\n')\n"
    "    line = b'x' * 1023 + b'\\n'\n"
    "    for _ in range(12 * 1024):\n        os.write(1, line)\n"
    "    sys.stdout.write('last line of the output\\n'); sys.stdout.flush()\n"
    "    raise AssertionError('start of the message ' + 'y' * 5_000_000 + ' end of it')\n")


@pytest.mark.slow
def test_a_flooding_reproducer_leaves_bounded_records(fake_target: FakeTarget,
                                                      tmp_path: Path) -> None:
    registry = load_registries([multi_registry(fake_target, {"flood": FLOOD})])
    run = new_run(registry, tmp_path / "run", lanes=["cpu"], only=None, shard=Shard(1, 1),
                  header={"run_id": "flood"})
    rows = run_sweep(registry, run, timeout=120, env=env_for(fake_target))
    write_reports(run, rows)
    (row,) = rows
    assert row.verdict is Verdict.BROKEN, row.reason  # fails both ways
    total = 5_000_000 + len("start of the message  end of it")
    note = (f"[… truncated: kept the first {MESSAGE_HEAD_CHARS} and the last "
            f"{MESSAGE_TAIL_CHARS} of {total} characters …]")
    assert note in row.reason and row.reason.endswith(" end of it")
    for name in ("manifest.json", "index.json", "report.html", "summary.md", "junit.xml"):
        assert (run.path / name).stat().st_size < 200_000, name
    for receipt in (run.path / "receipts").iterdir():
        data = json.loads(receipt.read_text())
        assert validate(data) == [] and note in data["message"]
        assert receipt.stat().st_size < 100_000
    logs = sorted((run.path / "cases").rglob("rank0.log"))
    assert len(logs) == 2
    written = len("first line of the output\n") + 12 * 1024 * 1024 + \
        len("last line of the output\n")
    for log in logs:
        assert log.stat().st_size < LOG_HEAD_BYTES + LOG_TAIL_BYTES + 1000
        text = log.read_bytes()
        assert text.startswith(b"first line of the output\n")
        note = re.search(rb"\[patchlane: truncated: kept the first (\d+) and the last (\d+) "
                         rb"of (\d+) bytes of this rank's output; (\d+) bytes left out here\]",
                         text)
        assert note is not None
        head, tail, total, left_out = (int(n) for n in note.groups())
        assert (head, tail) == (LOG_HEAD_BYTES, LOG_TAIL_BYTES)
        assert total > written and left_out == total - head - tail
        # the end is kept whole: the output's last line and the traceback after it
        assert b"last line of the output\n" in text[-LOG_TAIL_BYTES:]
        assert b" end of it" in text[-2000:]
    for rank_json in (run.path / "cases").rglob("rank0.json"):
        assert rank_json.stat().st_size < 100_000


def test_clip_keeps_both_ends_and_says_what_it_left_out() -> None:
    assert clip("a" * 400, 100, 100) == "a" * 400  # within the note's room: kept whole
    text = "<" + "m" * 998 + ">"
    clipped = clip(text, 2, 3)
    assert clipped == ("<m [… truncated: kept the first 2 and the last 3 of 1000 characters …] "
                       "mm>")
    assert clip(clipped, 2, 3) == clipped  # clipping twice changes nothing


# -- control characters in a reason --------------------------------------------------------------

def test_control_characters_never_reach_the_reports(tmp_path: Path) -> None:
    nasty = ("\x1b[31mred\x1b[0m nul\x00 bell\x07 cr\r del\x7f c1\x85 lone\ud800 "
             "nonchar\uffff tab\tok")
    run = RunDir.create(tmp_path / "run", {"run_id": "r"})
    rows = [VerdictRow("e_error", "cpu", 1, Verdict.ERROR, f"without overlay: run: {nasty}",
                       stderr_tail=f"Traceback\n{nasty}"),
            VerdictRow("e_broken", "cpu", 1, Verdict.BROKEN, nasty),
            VerdictRow("e_skip", "cpu", 2, Verdict.SKIPPED, nasty)]
    write_reports(run, rows)
    suite = ET.parse(run.path / "junit.xml").getroot()  # well-formed
    failure = suite.find("testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    assert "\ufffd[31mred\ufffd[0m" in failure.text and "tab\tok" in failure.text
    for name in ("junit.xml", "report.html", "summary.md"):
        text = (run.path / name).read_text(encoding="utf-8")
        assert not [c for c in text if (ord(c) < 32 and c not in "\t\n") or 0x7f <= ord(c)
                    <= 0x9f or c in "\uffff"], name
        assert "red" in text and "tab" in text
    # the index keeps the reason as it was
    index = json.loads((run.path / "index.json").read_text())
    reasons = {row["entry_id"]: row["reason"] for row in index["rows"]}
    assert reasons["e_error"] == f"without overlay: run: {nasty}"


# -- permissions --------------------------------------------------------------------------------

@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_records_get_the_mode_the_umask_gives_a_new_file(fake_target: FakeTarget,
                                                         tmp_path: Path) -> None:
    from .test_run_dir import receipt_for

    with umask(0o022):
        run = RunDir.create(tmp_path / "run", {"run_id": "r"})
        run.write_receipt("e--cpu--ws1--without", receipt_for(fake_target))
        write_reports(run, ROWS)
    names = ["manifest.json", "index.json", "summary.md", "junit.xml", "report.html",
             "receipts/e--cpu--ws1--without.json"]
    modes = {name: stat.S_IMODE((run.path / name).stat().st_mode) for name in names}
    assert modes == dict.fromkeys(names, 0o644)
    with umask(0o077):
        private = RunDir.create(tmp_path / "private", {"run_id": "p"})
    assert stat.S_IMODE((private.path / "manifest.json").stat().st_mode) == 0o600

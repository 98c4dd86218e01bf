"""Reproducer runner and verdicts on fake targets (mechanics: every verdict path is reachable).

Real-upstream verdicts are in tests/releases/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchlane.common.exit_codes import ExitCode
from patchlane.registry import load_registries
from patchlane.runs.verdicts import Verdict
from patchlane.sweep.engine import exit_code, sweep
from patchlane.sweep.reproduce import Mode, RunOutcome, read_spec, run_case

from ..conftest import FakeTarget

pytestmark = pytest.mark.slow

# The reproducer asserts the *correct* behaviour; with the fake overlay, greet() is "patched".
REPRO_GUARDING = """
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import {module} as target
    got = target.Greeter().greet("a")
    assert got == "patched hello a", f"bug shows: {{got!r}}"
"""


def fake_env(fake: FakeTarget) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(fake.root), env.get("PYTHONPATH")) if p)
    env["PATCHLANE_DEFAULT_REGISTRY"] = "0"
    return env


def write_repro(fake: FakeTarget, source: str) -> None:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(
        source.format(module=fake.module))


def verdict_for(fake: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> tuple[Verdict, str]:
    for key, value in fake_env(fake).items():
        monkeypatch.setenv(key, value)
    rows = sweep(load_registries([fake.write_registry()
                                  if not fake.registry.exists() else fake.registry]),
                 lanes=["cpu"], timeout=60)
    assert len(rows) == 1
    return rows[0].verdict, rows[0].reason


def test_guarding(fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING)
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.GUARDING, reason
    assert "bug shows" in reason


def test_upstream_fixed(fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING.replace('"patched hello a"', '"hello a"'))
    fake_target.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n")
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.UPSTREAM_FIXED, reason


def test_broken(fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING.replace('"patched hello a"', '"fixed hello a"'))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.BROKEN, reason


def test_error_is_not_a_fail(fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING.replace("import {module} as target",
                                                    "raise KeyError('wrong kind of failure')"))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.ERROR, reason
    assert "run: KeyError" in reason


def test_skipped_when_the_gate_excludes_the_release(fake_target: FakeTarget,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING)
    fake_target.write_registry(fake_target.entry(applies_to=">=1.5,<2.0"))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.SKIPPED
    assert "1.2.0 is outside" in reason


def test_skipped_not_error_when_a_required_module_is_missing(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    # a megatron-only stack running a reproducer that also needs liger-kernel: nothing to act
    # on, so the row is skipped (never `error`, which turns a nightly red)
    write_repro(fake_target, REPRO_GUARDING.replace(
        'WORLD_SIZES = (1,)', 'WORLD_SIZES = (1,)\nREQUIRES = ("no_such_module_xyz", "os")')
        .replace("def run(ctx):", "def run(ctx):\n    import no_such_module_xyz"))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.SKIPPED
    assert reason.startswith("needs no_such_module_xyz, not installed here"), reason
    assert exit_code([]) == ExitCode.OK


def test_past_the_gate_still_affected_runs_without_only(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # 1.2.0 is above <1.2: the reproducer runs without the overlay only, and the bug shows.
    write_repro(fake_target, REPRO_GUARDING)
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,<1.2"))
    for key, value in fake_env(fake_target).items():
        monkeypatch.setenv(key, value)
    rows = sweep(load_registries([fake_target.registry]), lanes=["cpu"], timeout=60,
                 run_dir=tmp_path / "run")
    assert [r.verdict for r in rows] == [Verdict.STILL_AFFECTED], rows[0].reason
    assert "past the gate" in rows[0].reason and "bug shows" in rows[0].reason
    assert set(rows[0].receipts) == {"without"}  # the overlay is never applied past its gate
    assert exit_code(rows) == ExitCode.SWEEP_STILL_AFFECTED


def _successor(fake: FakeTarget, applies_to: str) -> dict[str, object]:
    """A second entry on the same target with the same overlay and reproducer: the entry that
    carries the first one's bug onward on later releases."""
    succ = f"{fake.entry_id}_next"
    root = fake.root
    (root / "drafts" / f"{succ}.md").write_text("# a draft for upstream\n")
    (root / "patches" / f"{succ}.py").write_text(
        (root / "patches" / f"{fake.entry_id}.py").read_text())
    (root / "reproducers" / f"{succ}.py").write_text(
        (root / "reproducers" / f"{fake.entry_id}.py").read_text())
    return fake.entry(id=succ, applies_to=applies_to, overlay=f"patches/{succ}.py",
                      reproducer=f"reproducers/{succ}.py",
                      upstream={"forwarded": "no", "draft": f"drafts/{succ}.md"})


def test_past_the_gate_covered_by_the_continuing_entry_is_no_alarm(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The bug is still there on 1.2.0, past the first entry's gate (<1.2), and the entry its
    # continued_by names guards it there: covered (naming it), not still-affected, no exit bit.
    write_repro(fake_target, REPRO_GUARDING)
    succ = _successor(fake_target, ">=1.2,<2.0")
    fake_target.write_registry(
        fake_target.entry(applies_to=">=1.0,<1.2", continued_by=succ["id"]), succ)
    for key, value in fake_env(fake_target).items():
        monkeypatch.setenv(key, value)
    rows = sweep(load_registries([fake_target.registry]), lanes=["cpu"], timeout=60,
                 run_dir=tmp_path / "run")
    got = {r.entry_id: r for r in rows}
    assert got[succ["id"]].verdict is Verdict.GUARDING, got[succ["id"]].reason
    first = got[fake_target.entry_id]
    assert first.verdict is Verdict.COVERED, first.reason
    assert f"{succ['id']} (continued_by) guards it here" in first.reason
    assert first.reason.endswith(f"{succ['id']} here: guarding."), first.reason
    assert set(first.receipts) == {"without"}
    assert exit_code(rows) == ExitCode.OK


def test_past_the_gate_is_still_affected_where_the_continuation_does_not_reach(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # continued_by names an entry whose gate excludes 1.2.0: nobody guards the bug there.
    write_repro(fake_target, REPRO_GUARDING)
    succ = _successor(fake_target, ">=1.3,<2.0")
    fake_target.write_registry(
        fake_target.entry(applies_to=">=1.0,<1.2", continued_by=succ["id"]), succ)
    for key, value in fake_env(fake_target).items():
        monkeypatch.setenv(key, value)
    rows = sweep(load_registries([fake_target.registry]), lanes=["cpu"], timeout=60,
                 run_dir=tmp_path / "run", only=[fake_target.entry_id])
    assert [r.verdict for r in rows] == [Verdict.STILL_AFFECTED], rows[0].reason
    assert exit_code(rows) == ExitCode.SWEEP_STILL_AFFECTED


def test_past_the_gate_upstream_fixed_records_the_probe(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import json

    write_repro(fake_target, REPRO_GUARDING.replace('"patched hello a"', '"hello a"'))
    fake_target.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n"
                              "def probe(module):\n    return True\n")
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,<1.2"))
    for key, value in fake_env(fake_target).items():
        monkeypatch.setenv(key, value)
    rows = sweep(load_registries([fake_target.registry]), lanes=["cpu"], timeout=60,
                 run_dir=tmp_path / "run")
    assert [r.verdict for r in rows] == [Verdict.UPSTREAM_FIXED], rows[0].reason
    assert "past the gate" in rows[0].reason
    receipt = json.loads((tmp_path / "run" / rows[0].receipts["without"]).read_text())
    assert receipt["probe"]["outcome"] == "upstream-fixed"
    assert exit_code(rows) == ExitCode.OK


@pytest.mark.parametrize(("gate", "retire"), [(">=1.5,<2.0", ">=2.0"),  # below the gate
                                              (">=1.0,!=1.2.0,<2.0", ">=2.0")])  # excluded
def test_below_or_excluded_stays_skipped(fake_target: FakeTarget,
                                         monkeypatch: pytest.MonkeyPatch, gate: str,
                                         retire: str) -> None:
    write_repro(fake_target, REPRO_GUARDING)
    fake_target.write_registry(fake_target.entry(applies_to=gate,
                                                 retire_when={"release": retire}))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.SKIPPED, reason


def test_inside_retire_when_runs_past_a_closed_gate(fake_target: FakeTarget,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # retire_when.release names 1.2.0 although the gate excludes it as "!=": the retirement
    # evidence is asked for there too.
    write_repro(fake_target, REPRO_GUARDING.replace('"patched hello a"', '"hello a"'))
    fake_target.write_registry(fake_target.entry(applies_to=">=1.0,!=1.2.0,<2.0",
                                                 retire_when={"release": ">=1.2"}))
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.UPSTREAM_FIXED, reason
    assert "inside retire_when.release" in reason


def test_skipped_when_the_lane_is_unavailable(fake_target: FakeTarget,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    write_repro(fake_target, REPRO_GUARDING.replace('("cpu",)', '("cpu", "cuda")'))
    for key, value in fake_env(fake_target).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr("patchlane.sweep.engine.cuda_devices", lambda: 0)
    rows = sweep(load_registries([fake_target.write_registry()]), lanes=["cuda"], timeout=60)
    assert [r.verdict for r in rows] == [Verdict.SKIPPED]
    assert "lane unavailable" in rows[0].reason


def test_overlay_that_never_runs_is_an_error(fake_target: FakeTarget,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the overlay it fails, and "with" passes without ever calling the patched method:
    # the reproducer does not exercise the overlay, so it proves nothing.
    write_repro(fake_target, """
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import os
    import {module} as target
    assert ctx.mode.value == "with", "fails without"
""")
    verdict, reason = verdict_for(fake_target, monkeypatch)
    assert verdict is Verdict.ERROR
    assert "was never called" in reason


def test_timeout_and_crash_are_classified(fake_target: FakeTarget) -> None:
    write_repro(fake_target, "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                             "def run(ctx):\n    import time; time.sleep(30)\n")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    result = run_case(entry, Mode.WITH, timeout=3, env=fake_env(fake_target))
    assert result.outcome is RunOutcome.ERROR and result.stage == "timeout"
    write_repro(fake_target, "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                             "def run(ctx):\n    import os, signal\n"
                             "    os.kill(os.getpid(), signal.SIGSEGV)\n")
    result = run_case(entry, Mode.WITH, timeout=30, env=fake_env(fake_target))
    assert result.outcome is RunOutcome.ERROR and result.stage == "crash", result


def test_two_ranks_share_a_workdir_and_report_each(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    write_repro(fake_target, """
LANES = ("cpu",)
WORLD_SIZES = (2,)

def run(ctx):
    assert ctx.world_size == 2
    (ctx.workdir / f"seen{{ctx.rank}}").write_text("x")
    import {module} as target
    target.Greeter().greet("b")
    assert ctx.rank == 0, "rank 1 sees the bug"
""")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    assert read_spec(entry).world_sizes == (2,)
    result = run_case(entry, Mode.WITH, world_size=2, workdir=tmp_path,
                      env=fake_env(fake_target))
    assert result.outcome is RunOutcome.FAIL
    assert [r["outcome"] for r in result.ranks] == ["pass", "fail"]
    assert result.message == "rank 1 sees the bug"


@pytest.mark.parametrize(
    ("verdicts", "code"),
    [([Verdict.GUARDING, Verdict.UPSTREAM_FIXED, Verdict.SKIPPED], 0),
     ([Verdict.GUARDING, Verdict.BROKEN], ExitCode.SWEEP_BROKEN),
     ([Verdict.ERROR], ExitCode.SWEEP_ERROR),
     ([Verdict.BROKEN, Verdict.ERROR], 35),
     ([Verdict.STILL_AFFECTED, Verdict.GUARDING], 36),
     ([Verdict.STILL_AFFECTED, Verdict.BROKEN, Verdict.ERROR], 39)],
)
def test_exit_codes(verdicts: list[Verdict], code: int) -> None:
    from patchlane.sweep.engine import VerdictRow

    assert exit_code([VerdictRow("x", "cpu", 1, v, "") for v in verdicts]) == code


def test_a_rank_blocked_after_its_peer_died_is_not_waited_for(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("patchlane.sweep.reproduce.RANK_GRACE_SECONDS", 1.0)
    write_repro(fake_target, "LANES = ('cpu',)\nWORLD_SIZES = (2,)\n"
                             "def run(ctx):\n    import time\n"
                             "    if ctx.rank == 1:\n        raise RuntimeError('rank 1 died')\n"
                             "    time.sleep(120)\n")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    result = run_case(entry, Mode.WITH, world_size=2, timeout=100, env=fake_env(fake_target))
    assert result.seconds < 30
    assert result.outcome is RunOutcome.ERROR
    stages = {r["rank"]: r.get("stage") for r in result.ranks}
    assert stages == {0: "timeout", 1: "run"}, result.ranks
    assert "after a peer exited" in result.ranks[0]["message"]


def test_a_reported_error_keeps_its_traceback_and_loses_its_secrets(
        fake_target: FakeTarget) -> None:
    write_repro(fake_target, "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                             "def run(ctx):\n    import os\n"
                             "    raise RuntimeError('cannot reach https://bot:pw-4711x@h.invalid/x'"
                             " f' with {{os.environ[\"MY_API_TOKEN\"]}}')\n")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    env = fake_env(fake_target) | {"MY_API_TOKEN": "s3cr3t-value"}
    result = run_case(entry, Mode.WITH, timeout=60, env=env)
    assert result.outcome is RunOutcome.ERROR and result.stage == "run", result
    assert result.message == "RuntimeError: cannot reach https://bot:***@h.invalid/x with ***"
    tail = result.stderr_tail
    assert tail is not None and "Traceback (most recent call last)" in tail
    assert "RuntimeError: cannot reach https://bot:***@h.invalid/x with ***" in tail
    for text in (tail, result.message, result.ranks[0]["traceback"]):
        assert "pw-4711x" not in text and "s3cr3t-value" not in text


def test_a_passing_case_has_no_tail(fake_target: FakeTarget) -> None:
    write_repro(fake_target, REPRO_GUARDING)
    entry = load_registries([fake_target.write_registry()]).entries[0]
    result = run_case(entry, Mode.WITH, timeout=60, env=fake_env(fake_target))
    assert result.outcome is RunOutcome.PASS and result.stderr_tail is None
    assert "stderr_tail" not in result.ranks[0]


def test_the_tail_is_bounded_printable_and_redacted(tmp_path: Path) -> None:
    from patchlane.sweep.reproduce import TAIL_CHARS, TAIL_LINES, log_tail

    log = tmp_path / "rank0.log"
    with log.open("wb") as fh:
        fh.write(b"noise " * 50 + b"\n")
        for i in range(20_000):
            fh.write(b"line %d " % i + b"x" * 150 + b"\n")
        fh.write(bytes(range(256)) + b"\n")
        fh.write(b"    ^^^^^^^^^^\n")
        fh.write(b"ValueError: bad token=abcdef123 from s3cr3t-value\n")
    tail = log_tail(log, {"MY_API_TOKEN": "s3cr3t-value"})
    assert len(tail.splitlines()) <= TAIL_LINES and len(tail) <= TAIL_CHARS
    assert tail.splitlines()[-1] == "ValueError: bad token=*** from ***"
    assert "^^^" not in tail
    assert not any(c < " " and c not in "\t\n" for c in tail)
    # one enormous line is cut to size too
    log.write_bytes(b"y" * 5_000_000)
    tail = log_tail(log, {})
    assert len(tail) == TAIL_CHARS and tail.startswith("…")
    assert log_tail(tmp_path / "missing.log", {}) == ""


@pytest.mark.parametrize("detach", ["", "os.setsid()"], ids=["child", "setsid-grandchild"])
def test_processes_a_case_starts_end_with_it(fake_target: FakeTarget, tmp_path: Path,
                                             detach: str) -> None:
    # Issue 14 item 8: a reproducer that returns normally after starting a process (or one
    # that leaves the rank's session) leaves nothing running behind the receipt.
    write_repro(fake_target, f"""
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import os, subprocess, sys
    code = "import os, time\\n{detach}\\ntime.sleep(60)\\n"
    child = subprocess.Popen([sys.executable, "-c", code])
    (ctx.workdir / "child.pid").write_text(str(child.pid))
    import {{module}} as target
    target.Greeter().greet("a")
""")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    result = run_case(entry, Mode.WITH, workdir=tmp_path, env=fake_env(fake_target), flat=True)
    assert result.outcome is RunOutcome.PASS, result.message  # it returned normally
    pid = int((tmp_path / "child.pid").read_text())
    import time

    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        # a killed child of an exited rank is reparented and reaped by init: give it a moment
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        raise AssertionError(f"pid {pid} outlived its case")


def test_a_reproducer_that_changes_directory_under_a_relative_run_folder(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sweep's default runs root is relative (./runs): each rank is handed its case folder,
    # and a reproducer that changes directory must still write its result there.
    write_repro(fake_target, """
LANES = ("cpu",)
WORLD_SIZES = (2,)

def run(ctx):
    import os
    os.chdir("/")
    import {module} as target
    assert target.Greeter().greet("a") == "patched hello a", "bug shows"
""")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    monkeypatch.chdir(tmp_path)
    result = run_case(entry, Mode.WITH, world_size=2, workdir=Path("runs") / "r1",
                      env=fake_env(fake_target), timeout=60)
    assert result.outcome is RunOutcome.PASS, (result.stage, result.message)
    assert all(Path(rank["log"]).is_absolute() for rank in result.ranks)
    assert (tmp_path / "runs" / "r1" / "with-cpu-ws2" / "rank1.json").is_file()

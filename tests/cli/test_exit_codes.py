"""Every exit code in the exit-code table (docs/cli.md), produced by the real command on a fake
target and registry; the table's codes are exactly ``ExitCode``, and each error class it names
carries the code of its row (so neither the reference nor a class can drift from the other)."""

from __future__ import annotations

import ast
import importlib
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.errors import PatchlaneError
from patchlane.common.exit_codes import ExitCode, sweep_exit_code
from patchlane.runs.verdicts import Verdict, exit_bits

from ..conftest import FakeTarget
from .test_cli import cli

ROOT = Path(__file__).resolve().parents[2]
Setup = Callable[[FakeTarget, Path], tuple[list[str], dict[str, str]]]


def _env(fake: FakeTarget, *entries: dict[str, Any], **extra: str) -> dict[str, str]:
    fake.write_registry(*entries)
    return {"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(fake.registry),
            "PYTHONPATH": str(fake.root), **extra}


def _reproducer(fake: FakeTarget, body: str) -> None:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n" + body)


def _drift(fake: FakeTarget) -> None:
    fake.target_file.write_text(fake.target_file.read_text().replace("hello", "howdy"))


def ok(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["status"], _env(fake)


def reproducer_failed(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    _reproducer(fake, f"    import {fake.module} as t\n"
                      "    assert t.Greeter().greet('q') == 'patched hello q', 'bug'\n")
    return ["reproduce", fake.entry_id, "--without-overlay"], _env(fake)


def unknown_id(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["show", "no_such_entry"], _env(fake)


def delete_without_yes(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["delete", fake.entry_id], _env(fake)


def sweep_into_a_used_run_dir(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    used = tmp / "used-run"
    used.mkdir()
    (used / "something").write_text("x")
    return ["sweep", "--lane", "cpu", "--run-dir", str(used), "--quiet"], _env(fake)


def registry_rejected(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    env = _env(fake)
    fake.registry.write_text("schema: 1\nentries:\n  - id: x\n    kind: [\n")
    return ["status"], env


def registry_rejected_strict(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    # the command's own `import patchlane` refuses it: one line and 3, never a traceback
    env = _env(fake, PATCHLANE_STRICT="1")
    fake.registry.write_text("schema: 1\nentries:\n  - id: x\n    kind: [\n")
    return ["status"], env


def run_registry_rejected_strict(fake: FakeTarget,
                                 tmp: Path) -> tuple[list[str], dict[str, str]]:
    import sys

    _, env = registry_rejected_strict(fake, tmp)
    return ["run", "--", sys.executable, "-c", "print('the command ran')"], env


def drift(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    env = _env(fake, PATCHLANE_STRICT="1")  # the registry records the fingerprint before
    _drift(fake)
    return ["status"], env


def overlay_failed(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    fake.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n"
                       "def probe(m):\n    raise ValueError('probe broke')\n")
    return ["status"], _env(fake, PATCHLANE_STRICT="1")


def strict_refusal(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    # a release whose version is not PEP 440: the gate cannot be evaluated (never guessed)
    meta = fake.root / f"{fake.package}-{fake.version}.dist-info" / "METADATA"
    meta.write_text(meta.read_text().replace(f"Version: {fake.version}", "Version: banana"))
    return ["status"], _env(fake, PATCHLANE_STRICT="1")


def reproducer_error(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    _reproducer(fake, "    raise RuntimeError('the harness cannot run this')\n")
    return ["reproduce", fake.entry_id], _env(fake)


def ledger_violation(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    # status imports the source patch's module; the floor guarding that import refuses it
    floor = {"id": "floor_fake", "kind": "version_floor", "summary": "needs a newer fake",
             "upstream": {"issue": "https://github.com/example/x/issues/1", "forwarded": "no"},
             "retire_when": {"upstream_released": True}, "owner": "tests",
             "added": "2026-11-22", "status": "active", "requires": ">=99", "policy": "error",
             "target": {"distribution": fake.distribution, "object": fake.module}}
    return ["status"], _env(fake, fake.entry(), floor)


def matrix_mismatch(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    _reproducer(fake, f"    import {fake.module} as t\n"
                      "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    matrix = tmp / "matrix.yaml"
    matrix.write_text(yaml.safe_dump({"schema": 1, "sets": [
        {"name": "fake", "install": [], "expect": {fake.entry_id: "broken"}}]}))
    return (["matrix", "--file", str(matrix), "--cache", str(tmp / "cache"),
             "--runs-root", str(tmp / "runs"), "--timeout", "120"], _env(fake))


def upstream_unreachable(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    entry = fake.entry(upstream={**fake.entry()["upstream"],
                                 "issue": "https://github.com/acme/fake/issues/6"})
    return (["upstream", fake.entry_id, "--offline"],
            _env(fake, entry, PATCHLANE_CACHE=str(tmp / "empty-cache")))


def retirement_refused(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["retire", fake.entry_id, "--skip-upstream"], _env(fake)


def doctor_problems(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    env = _env(fake)
    _drift(fake)
    return ["doctor"], env


def entries_never_hit(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    # a real `patchlane run` job that imports the target and never calls it
    env = _env(fake, PYTHONPATH=os.pathsep.join([str(fake.root), str(ROOT)]))
    reports = tmp / "reports"
    job = cli("run", "--reports", str(reports), "--", sys.executable, "-c",
              f"import {fake.module}", env=env)
    assert job.returncode == 0, job.stderr
    return ["usage", str(reports)], env


def filesystem_refused(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    blocker = tmp / "a-file"
    blocker.write_text("not a directory")
    return ["sweep", "--lane", "cpu", "--run-dir", str(blocker / "run"), "--quiet"], _env(fake)


def command_not_executable(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    script = tmp / "train.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o644)
    return ["run", "--", str(script)], _env(fake)


def command_not_found(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["run", "--", "pyhton3-no-such-command", "train.py"], _env(fake)


def unreadable_setting(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["status"], _env(fake, PATCHLANE_VERIFY_RANKS="maybe")


def run_with_an_unreadable_setting(fake: FakeTarget,
                                   tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["run", "--", "true"], _env(fake, PATCHLANE_VERIFY_RANKS="maybe")


def _without(module: str, fake: FakeTarget, tmp: Path) -> dict[str, str]:
    """An environment whose interpreter cannot import ``module``, as a venv built without
    patchlane's dependencies: a module of that name first on the path that fails as a missing
    one does."""
    shadow = tmp / "shadow"
    shadow.mkdir()
    (shadow / f"{module}.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{module}'\", name='{module}')\n")
    env = _env(fake)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env.get("PYTHONPATH", "")])
    return env


def missing_dependency(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["status"], _without("packaging", fake, tmp)


def missing_lazy_dependency(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    # one the command imports only when it runs (filelock: a sweep's run directory)
    return ["sweep", "--run-dir", str(tmp / "run")], _without("filelock", fake, tmp)


CASES: list[tuple[ExitCode, Setup, str]] = [
    (ExitCode.OK, ok, ""),
    (ExitCode.REPRODUCER_FAILED, reproducer_failed, "FAIL"),
    (ExitCode.USAGE, unknown_id, "no registry entry 'no_such_entry'"),
    (ExitCode.USAGE, delete_without_yes, "pass --yes to confirm"),
    (ExitCode.USAGE, sweep_into_a_used_run_dir, "already exists and is not empty"),
    (ExitCode.USAGE, unreadable_setting, "error: PATCHLANE_VERIFY_RANKS='maybe': expected"),
    (ExitCode.USAGE, run_with_an_unreadable_setting, "error: PATCHLANE_VERIFY_RANKS='maybe'"),
    (ExitCode.REGISTRY_REJECTED, registry_rejected, "invalid YAML"),
    (ExitCode.REGISTRY_REJECTED, registry_rejected_strict, "invalid YAML"),
    (ExitCode.REGISTRY_REJECTED, run_registry_rejected_strict, "invalid YAML"),
    (ExitCode.DRIFT, drift, "refused: drift"),
    (ExitCode.OVERLAY_ERROR, overlay_failed, "probe broke"),
    (ExitCode.STRICT_REFUSAL, strict_refusal, "cannot evaluate the gate"),
    (ExitCode.REPRODUCER_ERROR, reproducer_error, "the harness cannot run this"),
    (ExitCode.LEDGER_VIOLATION, ledger_violation, "below the floor"),
    (ExitCode.MATRIX_MISMATCH, matrix_mismatch, "MISMATCH"),
    (ExitCode.UPSTREAM_UNREACHABLE, upstream_unreachable, "offline and not in the"),
    (ExitCode.RETIREMENT_REFUSED, retirement_refused, "not enough evidence to retire"),
    (ExitCode.DOCTOR_PROBLEMS, doctor_problems, "refused: drift"),
    (ExitCode.ENTRIES_NEVER_HIT, entries_never_hit, "DEAD OR MISAPPLIED (exit 17)"),
    (ExitCode.IO_ERROR, filesystem_refused, "a-file"),
    (ExitCode.MISSING_DEPENDENCY, missing_dependency, "patchlane needs packaging"),
    (ExitCode.MISSING_DEPENDENCY, missing_lazy_dependency, "patchlane needs filelock"),
    (ExitCode.COMMAND_NOT_EXECUTABLE, command_not_executable, "train.sh has no execute permission"),
    (ExitCode.COMMAND_NOT_FOUND, command_not_found,
     "'pyhton3-no-such-command': no such command on PATH"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("code", "setup", "says"),
                         [pytest.param(*case, id=f"{int(case[0])}-{case[1].__name__}")
                          for case in CASES])
def test_the_command_exits_with(fake_target: FakeTarget, tmp_path: Path, code: ExitCode,
                                setup: Setup, says: str) -> None:
    args, env = setup(fake_target, tmp_path)
    out = cli(*args, env=env)
    assert out.returncode == code, out.stdout + out.stderr
    assert says in out.stdout + out.stderr
    assert "Traceback" not in out.stderr  # an expected failure is one line, never a bug report


def test_reproduce_on_a_lane_it_cannot_run_says_so(fake_target: FakeTarget) -> None:
    """`reproduce --lane cuda` on a reproducer for the CPU alone is skipped, as the sweep
    says; one for both lanes, where there is no GPU, is not run (exit 7): it printed a CUDA
    PASS that never touched a GPU."""
    from patchlane.sweep.engine import cuda_devices

    if cuda_devices():
        pytest.skip("this machine has a GPU: the cuda lane runs")
    body = f"    import {fake_target.module} as t\n    assert t.Greeter().greet('q')\n"
    _reproducer(fake_target, body)
    out = cli("reproduce", fake_target.entry_id, "--lane", "cuda", env=_env(fake_target))
    assert out.returncode == 0, out.stderr
    assert "SKIPPED: the reproducer declares lanes ['cpu']; run it with --lane cpu" \
        in out.stdout, out.stdout
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu', 'cuda')\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n" + body)
    out = cli("reproduce", fake_target.entry_id, "--lane", "cuda", env=_env(fake_target))
    assert out.returncode == ExitCode.REPRODUCER_ERROR, out.stdout + out.stderr
    assert "[with overlay, cuda, world size 1]: NOT RUN: lane unavailable: 0 CUDA device(s)" \
        in out.stdout
    assert "PASS" not in out.stdout


@pytest.mark.parametrize("command", ["reproduce", "sweep"])
def test_a_message_that_cannot_be_encoded_is_printed_escaped(fake_target: FakeTarget,
                                                             tmp_path: Path,
                                                             command: str) -> None:
    """A reproducer's message holding a lone surrogate (a file name read with os.fsdecode),
    under a UTF-8 locale whose stdout is strict: printed escaped, with the verdict's own exit
    code (it was UnicodeEncodeError and exit 70, "a bug in patchlane")."""
    _reproducer(fake_target, f"    import os\n    import {fake_target.module} as t\n"
                             "    got = t.Greeter().greet('q')\n"
                             "    assert got == 'patched hello q', os.fsdecode(b'ckpt-\\xff')\n")
    env = _env(fake_target, PYTHONIOENCODING="utf-8:strict")
    if command == "reproduce":
        out = cli("reproduce", fake_target.entry_id, "--without-overlay", env=env)
        assert out.returncode == ExitCode.REPRODUCER_FAILED, out.stderr
    else:
        out = cli("sweep", "--only", fake_target.entry_id, "--run-dir", str(tmp_path / "run"),
                  env=env)
        assert out.returncode == 0, out.stdout + out.stderr  # guarding
    assert "ckpt-\\udcff" in out.stdout + out.stderr, out.stdout + out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("module", ["wrapt", "yaml", "packaging"])
def test_the_version_is_said_with_a_dependency_missing(fake_target: FakeTarget, tmp_path: Path,
                                                       module: str) -> None:
    # The first thing a bug report about a broken install asks; every other command still
    # answers with the missing requirement, exit 69.
    from patchlane import __version__

    env = {**os.environ, **_without(module, fake_target, tmp_path)}
    env.pop("PATCHLANE_STRICT", None)

    def command(*args: str) -> subprocess.CompletedProcess[str]:  # the command's first step
        return subprocess.run([sys.executable, "-m", "patchlane", *args], capture_output=True,
                              text=True, env=env, timeout=120)

    for args in (["--version"], ["--full-width", "--version"]):
        out = command(*args)
        assert (out.returncode, out.stdout, out.stderr) == (0, f"patchlane {__version__}\n", "")
    out = command("status")
    assert out.returncode == ExitCode.MISSING_DEPENDENCY, out.stderr
    assert out.stderr.count("patchlane needs") == 1 and "Traceback" not in out.stderr


@pytest.mark.parametrize("setup", [registry_rejected_strict, run_registry_rejected_strict])
def test_a_registry_rejected_in_strict_mode_is_one_line(fake_target: FakeTarget,
                                                        tmp_path: Path, setup: Setup) -> None:
    args, env = setup(fake_target, tmp_path)
    out = cli(*args, env=env)
    assert out.returncode == ExitCode.REGISTRY_REJECTED, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("patchlane: RegistryError: ") and str(fake_target.registry) in line
    assert out.stdout == ""  # `run` stopped before the command


def unreadable_lazy_setting(fake: FakeTarget, tmp: Path) -> tuple[list[str], dict[str, str]]:
    return ["status"], _env(fake, PATCHLANE_LAZY="maybe")


@pytest.mark.parametrize("setup", [unreadable_setting, run_with_an_unreadable_setting,
                                   unreadable_lazy_setting])
def test_an_unreadable_setting_is_one_line_from_a_command(fake_target: FakeTarget,
                                                          tmp_path: Path, setup: Setup) -> None:
    """The command refuses a setting it cannot read in one line, exit 2: its startup's own
    ERROR line (what a training job logs) was a second copy of it. PATCHLANE_LAZY, read at
    `import patchlane`, is refused like the others (it was accepted, silently)."""
    args, env = setup(fake_target, tmp_path)
    out = cli(*args, env=env)
    assert out.returncode == ExitCode.USAGE, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("patchlane: error: PATCHLANE_") and "='maybe': expected" in line


SWEEP_FLAGS = {
    ExitCode.SWEEP_BROKEN: {"broken"},
    ExitCode.SWEEP_ERROR: {"error"},
    ExitCode.SWEEP_BROKEN_AND_ERROR: {"broken", "error"},
    ExitCode.SWEEP_STILL_AFFECTED: {"still-affected"},
    ExitCode.SWEEP_STILL_AFFECTED_AND_BROKEN: {"still-affected", "broken"},
    ExitCode.SWEEP_STILL_AFFECTED_AND_ERROR: {"still-affected", "error"},
    ExitCode.SWEEP_STILL_AFFECTED_BROKEN_AND_ERROR: {"still-affected", "broken", "error"},
}
"""The sweep's 33-39: its verdict summary (the sweep itself through the CLI is
tests/evidence/test_sweep_faults.py's; each verdict's code is tests/evidence/test_sweep.py's)."""

ELSEWHERE = {
    ExitCode.RANKS_DISAGREE: "raised in the training process (tests/training/test_ranks.py); "
                             "no command returns it itself",
    ExitCode.INTERNAL_ERROR: "a bug: tests/cli/test_main.py raises one into the real handler",
    ExitCode.INTERRUPTED: "a signal to a running sweep: tests/evidence/test_sweep_signals.py",
    ExitCode.TERMINATED: "a signal to a running sweep: tests/evidence/test_sweep_signals.py",
}


@pytest.mark.parametrize(("code", "flags"), list(SWEEP_FLAGS.items()))
def test_the_sweep_summary_codes(code: ExitCode, flags: set[str]) -> None:
    verdicts = [Verdict.parse(f) for f in flags | {"guarding", "upstream-fixed", "covered"}]
    assert sweep_exit_code(exit_bits(verdicts)) is code


def readme_table() -> dict[int, list[str]]:
    """The exit-code table of docs/cli.md: code -> the error classes its row names."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("Exit codes (`patchlane/common/exit_codes.py`")
    rows: dict[int, list[str]] = {}
    for line in text[start:].splitlines()[1:]:
        if rows and not line.startswith("|"):
            break
        # a code, or a range with the en dash (\u2013) the table writes "33-39" with
        found = re.match(r"\| (\d+)(?:\u2013(\d+))? \|(.*)\|(.*)\|$", line)
        if found is None:
            continue
        first, last = int(found[1]), int(found[2] or found[1])
        for code in range(first, last + 1):
            rows[code] = re.findall(r"`(\w+)`", found[4])
    return rows


def test_the_readme_table_is_the_exit_code_table_and_every_code_is_produced() -> None:
    table = readme_table()
    assert sorted(table) == sorted(int(c) for c in ExitCode)
    produced = {int(code) for code, _, _ in CASES} | {int(c) for c in SWEEP_FLAGS} \
        | {int(c) for c in ELSEWHERE}
    assert produced == set(table)


_ERROR_MODULES = ("patchlane.common.errors", "patchlane.deciding.ledger",
                  "patchlane.training.ranks",
                  "patchlane.training.checkpoint", "patchlane.upstream.errors",
                  "patchlane.upstream.retire", "patchlane.authoring.draft",
                  "patchlane.releases.bisect", "patchlane.launch.command",
                  "patchlane.sweep.receipts", "patchlane.testing.capture.violations",
                  "patchlane.releases.wheelhouse", "patchlane.sweep.installs",
                  "patchlane.releases.release_runs", "patchlane.registry.editor",
                  "patchlane.sweep.wheelhouse_manifest", "patchlane.releases.own_wheel")


def _error_classes() -> dict[str, type[PatchlaneError]]:
    for module in _ERROR_MODULES:
        importlib.import_module(module)
    found: dict[str, type[PatchlaneError]] = {}
    todo: list[type[PatchlaneError]] = [PatchlaneError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("patchlane"):
            found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_the_code_of_its_readme_row() -> None:
    classes = _error_classes()
    named = {name: code for code, names in readme_table().items() for name in names}
    for name in named:
        assert name == "OSError" or name in classes, f"docs/cli.md names no such class {name!r}"
    for name, cls in classes.items():
        if cls is PatchlaneError:
            assert cls.exit_code is ExitCode.INTERNAL_ERROR  # never raised bare on purpose
            continue
        # a class the table does not name has the code of its nearest ancestor it names
        row = next((named[c.__name__] for c in cls.__mro__ if c.__name__ in named), None)
        assert row is not None, f"{name} is in no row of the exit-code table (docs/cli.md)"
        assert cls.exit_code == row, (name, cls.exit_code, row)


def test_no_raise_site_uses_the_bare_root() -> None:
    # The root's code says "a bug in patchlane": each raise names what went wrong.
    bare = []
    for path in sorted((ROOT / "patchlane").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                    and isinstance(node.exc.func, ast.Name) \
                    and node.exc.func.id == "PatchlaneError":
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bare == []

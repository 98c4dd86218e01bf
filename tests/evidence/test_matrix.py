"""The release matrix file and its verdicts (the real release sets run in
tests/releases/test_matrix.py): verdicts parsed into the enum, a set checked against a sweep
of a fake target, and the command's exit code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from patchlane.common.errors import PatchlaneError
from patchlane.common.exit_codes import ExitCode
from patchlane.releases.matrix import (
    MatrixResult,
    MatrixSet,
    interpreter,
    load_matrix,
    run_set,
)
from patchlane.runs.verdicts import Verdict

from ..conftest import FakeTarget

MATRIX = """schema: 1
sets:
  - name: old
    python: "3.11"
    install: [megatron-core==0.14.0]
    expect: {mcore_rerun_sentinel: guarding, other: upstream-fixed}
  - name: new
    install: [megatron-core==0.19.2, torch==2.15.0]
    deps: [torch==2.15.0]
    expect: {mcore_rerun_sentinel: skipped}
"""


def test_verdicts_in_the_matrix_are_parsed(tmp_path: Path) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX)
    old, new = load_matrix(path)
    assert old.expect == {"mcore_rerun_sentinel": Verdict.GUARDING,
                          "other": Verdict.UPSTREAM_FIXED}
    assert all(isinstance(v, Verdict) for v in old.expect.values())
    assert (old.python, new.python, new.deps) == (("3.11",), (), ("torch==2.15.0",))


@pytest.mark.parametrize(("expect", "found"), [
    ("{a: fixed}", "{'a': 'fixed'}"),
    ("{a: guarding, b: Guarding}", "{'b': 'Guarding'}"),
    ("{}", "{}"),
    ("[guarding]", "['guarding']"),
])
def test_a_verdict_that_is_not_one_is_refused(tmp_path: Path, expect: str, found: str) -> None:
    path = tmp_path / "matrix.yaml"
    path.write_text(f"schema: 1\nsets:\n  - name: s\n    install: []\n    expect: {expect}\n")
    with pytest.raises(PatchlaneError) as info:
        load_matrix(path)
    assert str(info.value) == (
        f"{path}: sets[0]: needs a name and `expect: {{entry: verdict}}` with verdicts from "
        f"['guarding', 'upstream-fixed', 'still-affected', 'covered', 'broken', 'error', "
        f"'skipped'] "
        f"(found {found})")


@pytest.mark.slow
def test_a_set_is_checked_against_the_verdicts_of_its_sweep(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    fake_target.write_registry()
    for key in [k for k in os.environ if k.startswith("PATCHLANE_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PYTHONPATH", str(fake_target.root))
    monkeypatch.setenv("PATCHLANE_DEFAULT_REGISTRY", "0")
    monkeypatch.setenv("PATCHLANE_REGISTRY", str(fake_target.registry))
    guarding = MatrixSet("fake", (), {fake_target.entry_id: Verdict.GUARDING})
    result = run_set(guarding, cache=tmp_path / "cache", runs_root=tmp_path / "runs",
                     timeout=60)
    assert result.ok and result.mismatches == [] and result.exit_code == 0
    assert result.verdicts == {fake_target.entry_id: [Verdict.GUARDING]}
    assert result.run_dir == tmp_path / "runs" / f"fake-py{interpreter()}"
    assert (result.run_dir / "index.json").is_file()
    broken = MatrixSet("fake2", (), {fake_target.entry_id: Verdict.BROKEN,
                                     "absent": Verdict.SKIPPED})
    result = run_set(broken, cache=tmp_path / "cache", runs_root=tmp_path / "runs", timeout=60)
    assert not result.ok
    assert result.mismatches == [
        f"{fake_target.entry_id}: expected broken, got ['guarding']",
        "absent: expected skipped, but the registry has no such entry"]


def test_the_command_exits_with_the_mismatch_code(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    import patchlane.cli.matrix as command

    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.replace('python: "3.11"', "python: []"))
    outcomes = {"old": True, "new": False}

    def fake_run_set(matrix_set: MatrixSet, **_: object) -> MatrixResult:
        ok = outcomes[matrix_set.name]
        got = {k: [v if ok else Verdict.GUARDING, Verdict.ERROR]
               for k, v in matrix_set.expect.items()}
        return MatrixResult(matrix_set.name, ok, [] if ok else ["x: expected skipped"], got,
                            tmp_path / matrix_set.name, 0 if ok else 11)

    monkeypatch.setattr(command, "run_set", fake_run_set)
    code = command.run_matrix_command(path, None, tmp_path, tmp_path, 1, 10.0)
    assert code is ExitCode.MATRIX_MISMATCH and int(code) == 13
    out = capsys.readouterr().out
    assert "mcore_rerun_sentinel: error,guarding" in out and "MISMATCH" in out
    outcomes["new"] = True
    assert command.run_matrix_command(path, ["new"], tmp_path, tmp_path, 1, 10.0) is ExitCode.OK
    with pytest.raises(PatchlaneError, match=r"no set named \['nope'\]"):
        command.run_matrix_command(path, ["nope"], tmp_path, tmp_path, 1, 10.0)

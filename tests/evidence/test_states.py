"""Typed states of the evidence side: verdicts, lanes, run outcomes and exit codes, parsed from
the strings run directories, reproducers and matrix.yaml carry, and the one helper that prints
rank-log tails for ``reproduce`` and ``sweep``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import get_args

import pytest

from patchlane.cli.reproduce import print_tails
from patchlane.common.errors import ReproducerError
from patchlane.common.exit_codes import ExitCode
from patchlane.registry import load_registries
from patchlane.runs.rows import CaseView, RowRule, verdict_of
from patchlane.runs.verdicts import SEVERITY, Verdict
from patchlane.sweep.engine import VerdictRow, exit_code
from patchlane.sweep.reproduce import (
    LANES,
    CaseResult,
    Lane,
    Mode,
    RunOutcome,
    parse_lane,
    read_spec,
    run_case,
)

from ..conftest import FakeTarget


def test_verdicts_parse_from_their_strings_and_nothing_else() -> None:
    assert [Verdict.parse(v.value) for v in Verdict] == list(Verdict)
    assert Verdict.parse("upstream-fixed") is Verdict.UPSTREAM_FIXED
    with pytest.raises(ValueError, match=r"matrix.yaml: 'fixed' is not a verdict; expected one "
                                         r"of \['guarding', 'upstream-fixed', "
                                         r"'still-affected', 'covered', 'broken', 'error', "
                                         r"'skipped'\]"):
        Verdict.parse("fixed", "matrix.yaml")
    assert sorted(SEVERITY) == sorted(Verdict) and SEVERITY[0] is Verdict.BROKEN


def test_lanes_are_cpu_and_cuda() -> None:
    assert LANES == get_args(Lane) == ("cpu", "cuda")
    assert [parse_lane(x) for x in ("cpu", "cuda")] == ["cpu", "cuda"]
    for bad in ("gpu", "CPU", None, 1):
        with pytest.raises(ValueError, match="is not a lane; expected one of"):
            parse_lane(bad)


def test_a_reproducer_declaring_an_unknown_lane_is_refused(fake_target: FakeTarget) -> None:
    repro = fake_target.root / "reproducers" / f"{fake_target.entry_id}.py"
    entry = load_registries([fake_target.write_registry()]).entries[0]
    repro.write_text("LANES = ('cpu', 'cuda')\nWORLD_SIZES = (1, 2)\n")
    assert read_spec(entry).lanes == ("cpu", "cuda")
    repro.write_text("LANES = ('cpu', 'gpu')\n")
    with pytest.raises(ReproducerError, match=r"LANES: 'gpu' is not a lane"):
        read_spec(entry)


def test_run_outcomes_map_to_the_documented_exit_codes() -> None:
    assert [o.exit_code for o in RunOutcome] == [0, 1, 7]  # an error is no usage error
    assert RunOutcome.FAIL.exit_code is ExitCode.REPRODUCER_FAILED


@pytest.mark.parametrize(("verdicts", "code"), [
    ([], 0),
    ([Verdict.GUARDING, Verdict.UPSTREAM_FIXED, Verdict.SKIPPED], 0),
    ([Verdict.BROKEN], 33),
    ([Verdict.ERROR, Verdict.GUARDING], 34),
    ([Verdict.ERROR, Verdict.BROKEN], 35),
    ([Verdict.STILL_AFFECTED, Verdict.UPSTREAM_FIXED], 36),
    ([Verdict.STILL_AFFECTED, Verdict.BROKEN], 37),
    ([Verdict.STILL_AFFECTED, Verdict.ERROR], 38),
    ([Verdict.STILL_AFFECTED, Verdict.ERROR, Verdict.BROKEN], 39),
])
def test_sweep_exit_codes_are_32_or_bits(verdicts: list[Verdict], code: int) -> None:
    got = exit_code([VerdictRow("x", "cpu", 1, v, "") for v in verdicts])
    assert isinstance(got, ExitCode) and got == code
    assert int(ExitCode.MATRIX_MISMATCH) == 13


def case(outcome: str | None, message: str = "m", stage: str | None = None) -> dict[str, object]:
    return {"outcome": outcome, "message": message, "stage": stage}


def test_verdicts_from_manifest_records_and_from_results_agree() -> None:
    result = CaseResult("x", Mode.WITHOUT, "cpu", 1, RunOutcome.FAIL, "bug shows")
    assert CaseView.of(result) == CaseView(RunOutcome.FAIL, "", "bug shows")
    assert CaseView.of(case("fail", "bug shows")) == CaseView.of(result)
    assert verdict_of(result, case("pass"))[0] is Verdict.GUARDING
    assert verdict_of(case("pass"), case("pass"))[0] is Verdict.UPSTREAM_FIXED
    assert verdict_of(case("fail"), case("fail", "still"))[0] is Verdict.BROKEN
    assert verdict_of(case("fail"), case("error", "boom", "run")) == (
        Verdict.ERROR, "with overlay: run: boom")
    assert verdict_of(case("error", "died", "bootstrap"), case("pass")) == (
        Verdict.ERROR, "without overlay: bootstrap: died")


def test_a_guarding_reason_keeps_the_symptom_and_shows_where_it_is_cut() -> None:
    """The first real entry's symptom sat past character 80 and was cut with no mark: the row
    keeps up to 400 characters of the failure, on one line, and says how much it cut."""
    symptom = "grad_input off by 0.8 " + "x" * 70 + " at rank 1"
    assert verdict_of(case("fail", symptom), case("pass")) == (
        Verdict.GUARDING, f"fails without ({symptom}), passes with")
    long = "first line of the failure\n" + "y" * 500
    reason = verdict_of(case("fail", long), case("pass"))[1]
    assert reason.startswith("fails without (first line of the failure yyy")
    assert reason.endswith("… (126 more characters)), passes with"), reason


def test_a_record_without_a_valid_outcome_is_an_error_never_a_pass() -> None:
    assert CaseView.of(case(None)).outcome is RunOutcome.ERROR
    verdict, reason = verdict_of(case("PASS"), case("pass"))
    assert verdict is Verdict.ERROR
    assert reason == "without overlay: verify: the case records no valid outcome ('PASS')"


def test_print_tails_prints_each_heading_and_marks_every_tail_line(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_tails([("error a", "Traceback:\n\n  boom\nKeyError: 'x'"), ("error b", None),
                 ("error c", "")])
    assert capsys.readouterr().out == ("error a\n  | Traceback:\n  | \n  |   boom\n"
                                       "  | KeyError: 'x'\nerror b\nerror c\n")


def test_reproduce_command_prints_the_failing_rank_tail(fake_target: FakeTarget,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    import patchlane.cli.reproduce as command

    entry = load_registries([fake_target.write_registry()]).entries[0]

    def one_entry(entry_id: str) -> tuple[object, object]:
        assert entry_id == entry.id
        return None, entry

    ranks = [{"rank": 0, "outcome": "pass", "log": "r0.log"},
             {"rank": 1, "outcome": "error", "log": "r1.log", "stderr_tail": "line\nOSError: x"}]
    results = iter([CaseResult(entry.id, Mode.WITH, "cpu", 2, RunOutcome.ERROR,
                               "OSError: x", "run", 1.0, ranks)])
    monkeypatch.setattr(command, "one_entry", one_entry)
    monkeypatch.setattr(command, "run_case", lambda *a, **k: next(results))
    code = command.run_reproduce(entry.id, False, "cpu", [2], 10.0)
    assert code is ExitCode.REPRODUCER_ERROR
    out = capsys.readouterr().out
    assert out.endswith("--- rank 1 log (r1.log), last lines ---\n  | line\n  | OSError: x\n")
    assert "rank 0 log" not in out


@pytest.mark.slow
def test_a_rank_record_without_a_valid_outcome_is_an_error(fake_target: FakeTarget) -> None:
    # the rank writes a record of its own and leaves before the runner can write the real one
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\n\ndef run(ctx):\n    import json, os\n"
        "    (ctx.workdir / f'rank{ctx.rank}.json').write_text(json.dumps({'outcome': 'maybe'}))\n"
        "    os._exit(0)\n")
    entry = load_registries([fake_target.write_registry()]).entries[0]
    env = dict(os.environ) | {"PYTHONPATH": str(fake_target.root),
                              "PATCHLANE_DEFAULT_REGISTRY": "0"}
    result = run_case(entry, Mode.WITH, timeout=60, env=env)
    assert (result.outcome, result.stage) == (RunOutcome.ERROR, "verify")
    assert result.message == "rank 0 reported outcome 'maybe', not one of ['pass', 'fail', 'error']"
    assert result.ranks[0]["outcome"] == "error"


@pytest.mark.parametrize("rule", [k for k in RowRule if k is not RowRule.SKIPPED])
def test_a_case_judged_alone_says_what_its_row_says(rule: RowRule) -> None:
    """The pytest plugin judges each case on its own (`PlannedRow.case_verdict`): for every
    outcome of every case, what a case decides is its row's verdict, by the same rules, and it
    decides nothing exactly when the row is guarding."""
    import itertools

    from patchlane.reproducer import Mode, RunOutcome
    from patchlane.runs.rows import PlannedRow

    row = PlannedRow("e", "cpu", 1, rule, beyond="past <1.0",
                     covered_by="other" if rule is RowRule.PAST_GATE_COVERED else None)
    for outcomes in itertools.product(RunOutcome, repeat=len(row.modes)):
        cases = {m: {"outcome": o.value, "stage": "run", "message": f"{m.value} {o.value}"}
                 for m, o in zip(row.modes, outcomes, strict=True)}
        verdict, _ = row.verdict(cases)
        alone = {m: row.case_verdict(m, c) for m, c in cases.items()}
        said = {v for v, _ in filter(None, alone.values())}
        if verdict is Verdict.GUARDING:
            assert not said, (rule, outcomes, alone)
        else:
            assert verdict in said, (rule, outcomes, verdict, alone)
        assert set(alone) == set(row.modes) and Mode.WITHOUT in alone


def test_a_row_s_rule_is_written_as_rule_and_read_back_from_an_older_manifest_s_kind() -> None:
    """Manifests keep a row's rule under ``rule``; those recorded before the word changed
    (gpu-runs/ keeps some) said ``kind``, and still read back the same; a value no rule has is
    refused, naming where and what is expected."""
    from patchlane.runs.rows import PlannedRow

    row = PlannedRow("e", "cpu", 1, RowRule.REGRESSION_GUARD)
    written = row.as_dict()
    assert written["rule"] == "regression-guard" and "kind" not in written
    assert PlannedRow.from_manifest(written, "m.json: rows") == row
    older = {k: v for k, v in written.items() if k != "rule"} | {"kind": "regression-guard"}
    assert PlannedRow.from_manifest(older, "m.json: rows") == row
    # the older key has a removal version, held to it
    from packaging.version import Version

    from patchlane import __version__
    from patchlane.runs.rows import OLDER_ROWS_READ_UNTIL

    assert Version(__version__) < Version(OLDER_ROWS_READ_UNTIL), (
        "patchlane.runs.rows still reads rows as older sweeps wrote them (the key 'kind', or no "
        "rule): record the gpu-runs/ runs again and drop those readings")
    with pytest.raises(ValueError, match=r"m.json: rows: 'sideways' is not a row rule; "
                                         r"expected one of \['both-ways'"):
        PlannedRow.from_manifest(written | {"rule": "sideways"}, "m.json: rows")

"""The one error handler of the command line: expected errors print one line and their own
code, the filesystem refusing names the file, and a bug shows its traceback (never a
misleading usage error)."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from patchlane.cli import main as cli_main
from patchlane.common.errors import PatchlaneError, UnknownEntryError, UsageError
from patchlane.common.exit_codes import ExitCode


def fail_with(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    def boom(args: Any) -> int:
        raise exc

    monkeypatch.setattr(cli_main, "_dispatch", boom)


@pytest.mark.parametrize(("exc", "code", "text"), [
    pytest.param(UsageError("bad --thing"), ExitCode.USAGE, "bad --thing", id="usage"),
    pytest.param(UnknownEntryError("mcore_rerun_sentinal", ["mcore_rerun_sentinel"]),
                 ExitCode.USAGE, "did you mean 'mcore_rerun_sentinel'?", id="unknown-id"),
    pytest.param(OSError(errno.EROFS, "Read-only file system", "/runs/x/manifest.json"),
                 ExitCode.IO_ERROR, "Read-only file system: /runs/x/manifest.json", id="oserror"),
])
def test_expected_errors_print_one_line_and_their_code(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        exc: BaseException, code: ExitCode, text: str) -> None:
    fail_with(monkeypatch, exc)
    assert cli_main.main(["status"]) == code
    err = capsys.readouterr().err
    assert text in err and "Traceback" not in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("exc", [KeyError("internal"), ValueError("internal"),
                                 RuntimeError("internal"),
                                 # a raise site that named no class: its code says "a bug"
                                 PatchlaneError("bare root")])
def test_a_bug_prints_its_traceback_and_exits_70(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        exc: BaseException) -> None:
    fail_with(monkeypatch, exc)
    assert cli_main.main(["status"]) == ExitCode.INTERNAL_ERROR == 70
    err = capsys.readouterr().err
    assert "Traceback" in err and "this is a bug in patchlane" in err


def test_every_error_class_maps_to_a_code_in_the_table() -> None:
    import patchlane.common.errors as errors

    classes = [c for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, PatchlaneError)]
    assert len(classes) >= 8
    for cls in classes:
        assert isinstance(cls.exit_code, ExitCode), cls


def test_an_unknown_id_through_the_real_cli_says_which_ids_exist(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main.main(["show", "mcore_rerun_sentinal"]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "no registry entry 'mcore_rerun_sentinal'" in err
    assert "did you mean 'mcore_rerun_sentinel'?" in err and "Known ids:" in err


def test_a_bad_shard_is_a_usage_error_before_anything_runs(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main(["sweep", "--shard", "5/4"])
    assert exit_info.value.code == ExitCode.USAGE
    assert "between 1 and n" in capsys.readouterr().err


def test_upstream_reads_its_settings_through_controls(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    from patchlane.cli import upstream
    from patchlane.upstream.cache import default_cache_dir
    from patchlane.upstream.http import TrackerConfig

    for name in ("PATCHLANE_GITHUB_API", "PATCHLANE_PYPI_URL", "PATCHLANE_CACHE",
                 "PATCHLANE_SCHEDULE"):
        monkeypatch.delenv(name, raising=False)
    unset = upstream.tracker_config(False, None)
    assert (unset.github_api, unset.pypi, unset.cache_dir) == (
        TrackerConfig.github_api, TrackerConfig.pypi, default_cache_dir())
    monkeypatch.setenv("PATCHLANE_GITHUB_API", "http://127.0.0.1:9/gh")
    monkeypatch.setenv("PATCHLANE_PYPI_URL", "http://127.0.0.1:9/pypi")
    monkeypatch.setenv("PATCHLANE_CACHE", str(tmp_path / "env-cache"))
    config = upstream.tracker_config(True, None)
    assert (config.github_api, config.pypi, config.cache_dir, config.offline) == (
        "http://127.0.0.1:9/gh", "http://127.0.0.1:9/pypi", tmp_path / "env-cache", True)
    assert upstream.tracker_config(False, tmp_path / "flag").cache_dir == tmp_path / "flag"


@pytest.mark.parametrize("argv", [["upstream", "--git", "repo"], ["retire", "x", "--git", "repo"]])
def test_upstream_and_retire_take_the_same_git_option(argv: list[str]) -> None:
    assert cli_main._parser().parse_args(argv).git == Path("repo")


def test_every_command_the_parser_knows_has_its_handler() -> None:
    """One table dispatches (patchlane.cli.main._COMMANDS): a command added to the parser
    without a handler would otherwise fail only when someone runs it."""
    import argparse

    from patchlane.cli import main as cli_main

    parser = cli_main._parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(cli_main._COMMANDS)


def test_status_says_an_applied_overlay_that_something_replaced_since(
        fake_target: Any, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """"Applied" is checked afresh: code that replaced the attribute after the overlay was
    placed took it off the call path, and the table says so rather than "applied"."""
    from patchlane.cli import status

    decider = fake_target.decider()
    module = fake_target.import_target()
    assert decider.is_applied(fake_target.entry_id)
    monkeypatch.setattr(status, "decider", lambda refused_ok=False: decider)
    monkeypatch.setattr(status.startup, "startup_error", lambda: None)
    assert status.run_status(False, False) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith(fake_target.entry_id))
    assert " applied " in row and "displaced" not in row
    module.Greeter.greet = lambda self, name: "someone else's"  # a later monkeypatch
    assert status.run_status(False, False) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith(fake_target.entry_id))
    assert " displaced " in row and "no longer where the calls go" in row, row


def test_an_entry_another_decider_placed_reads_applied_while_it_is_there(
        fake_target: Any) -> None:
    # A second registry load in one process finds the first decider's layer and records
    # "applied" without placing one: checked afresh there, not read as displaced
    first = fake_target.decider()
    fake_target.import_target()
    second = fake_target.decider()
    decision = second.audit.latest()[fake_target.entry_id]
    assert decision.reason == "already wrapped by another patchlane decider"
    assert second.is_applied(fake_target.entry_id)
    first.revert(fake_target.entry_id)
    assert not second.is_applied(fake_target.entry_id)

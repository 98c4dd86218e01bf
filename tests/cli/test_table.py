"""The terminal tables (patchlane/cli/common.py ``table``, under status, sweep, doctor, bisect,
radar, matrix and upstream): one line per row, every reason whole."""

from __future__ import annotations

import json

from patchlane.cli.common import table

from ..conftest import FakeTarget
from .test_cli import cli, fake_cli_env

REASON = ("without overlay: run: AssertionError: gradients scaled by w[0] on every rank; "
          "expected the reference within 1e-4, got 0.8 off (see rank 1's log for the tail)")


def test_the_last_column_is_whole_and_the_others_are_cut() -> None:
    assert len(REASON) > 150
    out = table(["ENTRY", "LANE", "REASON"],
                [["an_entry_with_a_rather_long_identifier", "cpu", REASON],
                 ["short", "cuda", "two\nlines"]], width=20).splitlines()
    assert len(out) == 4  # header, rule, one line per row
    assert out[2] == f"an_entry_with_a_rat…  cpu   {REASON}"
    assert out[3].split() == ["short", "cuda", "two", "lines"]
    # the last column is neither cut nor padded: a short reason ends the line
    assert out[0].endswith("REASON") and out[3].endswith("two lines")


def test_status_prints_a_drift_reason_whole(fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target)
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("hello", "howdy"))  # drifted upstream
    reason = json.loads(cli("status", "--json", env=env).stdout)["entries"][0]["decision"][
        "reason"]
    assert len(reason) > 90, reason  # longer than any width a table cut at
    out = cli("status", env=env)
    assert out.returncode == 0, out.stderr
    row = next(ln for ln in out.stdout.splitlines() if ln.startswith(fake_target.entry_id))
    assert row.endswith(" ".join(reason.splitlines())), row

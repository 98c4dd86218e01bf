"""One rank, by hand: ``python -m patchlane.sweep.runner`` against a fake registry entry, and
the ``rank<N>.json`` it writes (outcome, stage, message, audit and hits) for every path: pass,
fail (the reproducer's own AssertionError), error (any other exception, per stage), and the
audit checks of both modes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from patchlane.common.exit_codes import ExitCode

from ..conftest import FakeTarget

pytestmark = pytest.mark.slow

# The reproducer asserts the *correct* behaviour; the fake overlay is the fix.
GUARDING = """
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import {module} as target
    got = target.Greeter().greet("a")
    assert got == "patched hello a", f"bug shows: {{got!r}}"
"""


@dataclass
class Rank:
    returncode: int
    data: dict[str, Any]
    summary: dict[str, Any]
    """The one JSON line the rank prints."""
    stderr: str

    @property
    def hits(self) -> int:
        return int(self.data["audit"]["hits"])

    @property
    def audited(self) -> str | None:
        decision = self.data["audit"]["decision"]
        return None if decision is None else str(decision["outcome"])


def write_repro(fake: FakeTarget, source: str) -> None:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(
        textwrap.dedent(source).replace("{module}", fake.module).replace("{{", "{")
        .replace("}}", "}"))


def run_rank(fake: FakeTarget, tmp_path: Path, mode: str, *, disable: bool | None = None,
             rank: int = 0, world_size: int = 1, entry: str | None = None) -> Rank:
    """The environment run_case gives a rank, written out here by hand: only this entry,
    strictly, and disabled exactly when the mode is ``without`` (unless ``disable`` says
    otherwise)."""
    if not fake.registry.exists():
        fake.write_registry()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONPATH=str(fake.root), PATCHLANE_DEFAULT_REGISTRY="0",
               PATCHLANE_REGISTRY=str(fake.registry), PATCHLANE_ONLY=fake.entry_id,
               PATCHLANE_STRICT="1", PATCHLANE_REGISTRY_CACHE=str(tmp_path / "cache"))
    if disable if disable is not None else mode == "without":
        env["PATCHLANE_DISABLE"] = fake.entry_id
    workdir = tmp_path / f"{mode}-rank{rank}"
    workdir.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "patchlane.sweep.runner", "--entry", entry or fake.entry_id,
         "--mode", mode, "--lane", "cpu", "--rank", str(rank), "--world-size", str(world_size),
         "--workdir", str(workdir)],
        env=env, capture_output=True, text=True, timeout=120)
    files = sorted(p.name for p in workdir.iterdir())
    assert files == [f"rank{rank}.json"], (files, out.stderr)  # no temp file left behind
    data = json.loads((workdir / f"rank{rank}.json").read_text())
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary == {k: data[k] for k in ("outcome", "stage", "message")}
    assert data["entry_id"] == (entry or fake.entry_id)
    assert (data["mode"], data["lane"], data["rank"]) == (mode, "cpu", rank)
    return Rank(out.returncode, data, summary, out.stderr)


def test_with_the_overlay_a_guarding_reproducer_passes(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING)
    rank = run_rank(fake_target, tmp_path, "with")
    assert rank.returncode == int(ExitCode.OK) == 0, rank.stderr
    assert (rank.data["outcome"], rank.data["stage"]) == ("pass", "")
    assert rank.data["message"] == "reproducer passed"
    assert rank.audited == "applied" and rank.data["audit"]["applied"] is True
    assert rank.hits == 1  # the reproducer called the patched method once
    assert "traceback" not in rank.data
    assert set(rank.data["timings"]) == {"bootstrap", "import", "run", "verify"}
    assert rank.data["peak_memory"]["rss_mib"] > 0


def test_without_the_overlay_the_bug_is_a_fail(fake_target: FakeTarget, tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING)
    rank = run_rank(fake_target, tmp_path, "without")
    assert rank.returncode == int(ExitCode.REPRODUCER_FAILED) == 1, rank.stderr
    assert (rank.data["outcome"], rank.data["stage"]) == ("fail", "")
    assert rank.data["message"] == "bug shows: 'hello a'"
    assert "AssertionError: bug shows" in rank.data["traceback"]
    assert rank.audited == "skipped: disabled" and rank.data["audit"]["applied"] is False
    assert rank.hits == 0


def test_an_assertion_without_a_message_still_says_what_failed(fake_target: FakeTarget,
                                                               tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING.replace(', f"bug shows: {{got!r}}"', ""))
    rank = run_rank(fake_target, tmp_path, "without")
    assert rank.data["outcome"] == "fail"
    assert rank.data["message"] == "assertion failed"


@pytest.mark.parametrize("mode", ["with", "without"])
def test_any_other_exception_is_an_error_not_a_fail(fake_target: FakeTarget, tmp_path: Path,
                                                    mode: str) -> None:
    write_repro(fake_target, GUARDING.replace("import {module} as target",
                                              "raise KeyError('wrong kind of failure')"))
    rank = run_rank(fake_target, tmp_path, mode)
    assert rank.returncode == int(ExitCode.REPRODUCER_ERROR) == 7, rank.stderr
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", "run")
    assert rank.data["message"] == "KeyError: 'wrong kind of failure'"
    # into the rank log as well, where the sweep's tail finds it
    assert "KeyError: 'wrong kind of failure'" in rank.stderr
    assert "audit" not in rank.data  # it never got to verify
    assert "run" in rank.data["timings"]


@pytest.mark.parametrize(("source", "stage", "message"), [
    ("LANES = ('cpu',)\nimport no_such_module_anywhere\n\ndef run(ctx):\n    pass\n",
     "import", "ModuleNotFoundError: No module named 'no_such_module_anywhere'"),
    ("LANES = ('cpu',)\n\ndef setup(ctx):\n    raise OSError('scratch disk missing')\n\n"
     "def run(ctx):\n    pass\n", "setup", "OSError: scratch disk missing"),
    ("LANES = ('cpu',)\n\ndef run(ctx):\n    raise MemoryError()\n", "oom", "MemoryError: "),
])
def test_errors_name_the_stage_they_happened_in(fake_target: FakeTarget, tmp_path: Path,
                                                source: str, stage: str, message: str) -> None:
    write_repro(fake_target, source)
    rank = run_rank(fake_target, tmp_path, "with")
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", stage), rank.data
    assert rank.data["message"] == message
    assert rank.returncode == 7


def test_setup_runs_before_run_with_the_context(fake_target: FakeTarget,
                                                tmp_path: Path) -> None:
    write_repro(fake_target, """
        LANES = ("cpu",)

        def setup(ctx):
            ctx.workdir.joinpath("..", "seen-setup").write_text(
                f"{{ctx.mode.value}} {{ctx.lane}} {{ctx.rank}}/{{ctx.world_size}} {{ctx.device}} "
                f"{{ctx.backend}} {{ctx.init_method.startswith('file://')}}")

        def run(ctx):
            import {module} as target
            assert (ctx.workdir / ".." / "seen-setup").exists()
            target.Greeter().greet("b")
    """)
    rank = run_rank(fake_target, tmp_path, "with")
    assert rank.data["outcome"] == "pass", rank.data
    assert set(rank.data["timings"]) == {"bootstrap", "import", "setup", "run", "verify"}
    assert (tmp_path / "seen-setup").read_text() == "with cpu 0/1 cpu gloo True"


def test_an_overlay_that_never_ran_is_a_verify_error(fake_target: FakeTarget,
                                                     tmp_path: Path) -> None:
    # passes with the overlay applied, but never calls the patched method: proves nothing
    write_repro(fake_target, "LANES = ('cpu',)\n\ndef run(ctx):\n    import {module}\n")
    rank = run_rank(fake_target, tmp_path, "with")
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", "verify")
    said = rank.data["message"]
    assert "is on the call path of" in said and "was never called" in said, said
    assert rank.audited == "applied" and rank.hits == 0


def test_with_mode_insists_on_the_overlay_applied(fake_target: FakeTarget,
                                                  tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING.replace('"patched hello a"', '"hello a"'))
    rank = run_rank(fake_target, tmp_path, "with", disable=True)
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", "verify")
    assert rank.data["message"] == ("RuntimeError: expected the overlay applied, audit says "
                                    "'skipped: disabled'")


def test_without_mode_insists_on_the_overlay_disabled(fake_target: FakeTarget,
                                                      tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING)
    rank = run_rank(fake_target, tmp_path, "without", disable=False)
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", "verify")
    assert rank.data["message"] == ("RuntimeError: expected the overlay disabled, audit says "
                                    "'applied'")
    assert rank.hits == 1


def test_upstream_fixed_keeps_the_overlay_out_and_says_so(fake_target: FakeTarget,
                                                          tmp_path: Path) -> None:
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("FIXED = False", "FIXED = True"))
    fake_target.write_registry()  # fingerprints cover Greeter.greet only: still matching
    write_repro(fake_target, GUARDING.replace('"patched hello a"', '"hello a"'))
    rank = run_rank(fake_target, tmp_path, "with")
    assert (rank.data["outcome"], rank.data["stage"]) == ("pass", ""), rank.data
    assert rank.data["message"] == ("reproducer passed (overlay stayed out: probe reports "
                                    "upstream-fixed)")
    assert rank.audited == "upstream-fixed" and rank.hits == 0


def test_rank_zero_alone_records_provenance(fake_target: FakeTarget, tmp_path: Path) -> None:
    write_repro(fake_target, GUARDING.replace("WORLD_SIZES = (1,)", "WORLD_SIZES = (2,)"))
    zero = run_rank(fake_target, tmp_path, "with", rank=0, world_size=2)
    one = run_rank(fake_target, tmp_path, "with", rank=1, world_size=2)
    assert zero.data["outcome"] == one.data["outcome"] == "pass"
    runtime = zero.data["runtime"]
    assert runtime["distributions"][fake_target.distribution] == "1.2.0"
    assert zero.data["record"]["distribution"] == fake_target.distribution
    assert zero.data["record"]["error"] == "no RECORD (installed without one)"
    assert zero.data["environment"]["PATCHLANE_ONLY"] == fake_target.entry_id
    for key in ("runtime", "record", "environment"):
        assert key not in one.data


def test_an_unknown_entry_is_a_bootstrap_error(fake_target: FakeTarget, tmp_path: Path) -> None:
    rank = run_rank(fake_target, tmp_path, "with", entry="no_such_entry")
    assert (rank.data["outcome"], rank.data["stage"]) == ("error", "bootstrap")
    assert "no_such_entry" in rank.data["message"]
    assert rank.returncode == 7


def test_bad_arguments_are_refused_before_anything_runs(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "patchlane.sweep.runner", "--entry", "x",
                          "--mode", "sideways", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "invalid choice: 'sideways'" in out.stderr
    out = subprocess.run([sys.executable, "-m", "patchlane.sweep.runner", "--entry", "x",
                          "--mode", "with", "--lane", "tpu", "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "invalid choice: 'tpu'" in out.stderr
    assert list(tmp_path.iterdir()) == []

"""``patchlane bisect``: the search on made-up release outcomes, the release listing against a
fake PyPI on loopback, runs of a fake distribution's releases, ``--write`` on a copy of the
registry, and the command end to end (real pip installs of fake wheels from a local index)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator, Sequence
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag

from patchlane.common.errors import ReproducerError
from patchlane.registry import Target, load_registries
from patchlane.releases.bisect import (
    BisectError,
    Bisection,
    Candidate,
    Listing,
    bisect,
    bisect_entry,
    bounds,
    list_candidates,
    next_probes,
    write_bisection,
)
from patchlane.releases.release_runs import ReleaseRun, ReleaseRunner, classify
from patchlane.runs.verdicts import Finding
from patchlane.sweep.reproduce import CaseResult, Mode, RunOutcome

from ..conftest import TARGET_SOURCE, FakeTarget
from .fake_upstream import REPO, Harness, Reply

A, N, P, E = Finding.AFFECTED, Finding.NOT_AFFECTED, Finding.ABSENT, Finding.ERROR


# -- the search, on made-up outcomes ---------------------------------------------------------


class Outcomes:
    """A runner over made-up findings, one per release ``0.<i>.0``, counting what ran."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings = list(findings)
        self.releases = [Candidate(f"0.{i}.0", "wheel") for i in range(len(findings))]
        self.ran: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, version: str, how: str) -> ReleaseRun:
        with self.lock:
            self.ran.append(version)
        i = int(version.split(".")[1])
        return ReleaseRun(version, self.findings[i], f"made up: {self.findings[i].value}")

    def bisect(self, pivot: int, *, recorded: Sequence[int] = (), jobs: int = 1) -> Bisection:
        return bisect("demo", "demo-dist", self.releases, self, pivots=[f"0.{pivot}.0"],
                      recorded=[f"0.{i}.0" for i in recorded], jobs=jobs)


def timeline(n: int, first: int, fixed: int | None, *, absent: int = 0) -> list[Finding]:
    """``absent`` releases without the target, clean ones, affected from ``first``, clean
    again from ``fixed``."""
    return [P if i < absent else A if first <= i < (fixed if fixed is not None else n) else N
            for i in range(n)]


def test_finds_both_boundaries_in_logarithmic_runs() -> None:
    outcomes = Outcomes(timeline(64, 20, 45))
    result = outcomes.bisect(30)
    assert (result.first_affected, result.last_affected, result.first_fixed) == (
        "0.20.0", "0.44.0", "0.45.0")
    assert result.applies_to == ">=0.20.0,<0.45.0"
    assert result.lower_certain and result.upper_certain and result.consistent
    # a scan would run 64; each side is a binary search over at most 64 releases
    assert result.runs_taken == len(outcomes.ran) <= 1 + 2 * math.ceil(math.log2(64))
    assert len(set(outcomes.ran)) == len(outcomes.ran)  # nothing ran twice
    assert result.runs[0][0] == "pivot"
    # each boundary was checked on both sides by a run
    assert {"0.19.0", "0.20.0", "0.44.0", "0.45.0"} <= set(outcomes.ran)
    as_json = result.as_dict()
    assert (as_json["releases_considered"], as_json["runs_taken"]) == (64, result.runs_taken)
    assert {r["finding"] for r in as_json["runs"]} == {"affected", "not-affected"}


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_any_contiguous_range_is_found_exactly(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 80), label="n")
    first = data.draw(st.integers(0, n - 1), label="first")
    fixed = data.draw(st.one_of(st.none(), st.integers(first + 1, n)), label="fixed")
    fixed = None if fixed == n else fixed
    pivot = data.draw(st.integers(first, (fixed or n) - 1), label="pivot")
    absent = data.draw(st.integers(0, first), label="absent")
    jobs = data.draw(st.integers(1, 4), label="jobs")
    outcomes = Outcomes(timeline(n, first, fixed, absent=absent))
    result = outcomes.bisect(pivot, jobs=jobs)
    assert result.first_affected == f"0.{first}.0"
    assert result.first_fixed == (None if fixed is None else f"0.{fixed}.0")
    if jobs == 1:
        assert result.runs_taken <= 1 + 2 * math.ceil(math.log2(n + 1))
    assert result.runs_taken <= n


def test_parallel_rounds_probe_both_sides_at_once() -> None:
    found: list[Finding | None] = [None] * 40
    found[20] = A
    probes = next_probes(found, jobs=4)
    assert len(probes) == 4
    assert sum(p < 20 for p in probes) == 2 and sum(p > 20 for p in probes) == 2
    assert next_probes(found, jobs=1) in ([10], [30])  # one probe: the middle of a side


def test_absent_releases_are_below_the_bound_not_evidence() -> None:
    outcomes = Outcomes(timeline(12, 4, 9, absent=4))
    result = outcomes.bisect(6)
    assert (result.first_affected, result.first_fixed) == ("0.4.0", "0.9.0")
    assert result.lower_certain
    assert any("absent" in note and "0.3.0" in note for note in result.notes)


def test_an_error_is_stepped_over_and_leaves_the_bound_uncertain() -> None:
    findings = timeline(16, 6, 12)
    findings[5] = E  # the release right before the first affected one cannot run
    findings[9] = E  # one inside the range (recorded, so it runs): no evidence either way
    outcomes = Outcomes(findings)
    result = outcomes.bisect(7, recorded=[9])
    assert (result.first_affected, result.first_fixed) == ("0.6.0", "0.12.0")
    assert not result.lower_certain and result.upper_certain and result.consistent
    assert "0.4.0" in outcomes.ran  # the neighbour under the error ran
    assert any("0.5.0 errored" in note for note in result.notes)
    assert any("0.9.0 errored inside the affected range" in note for note in result.notes)
    assert "lower bound next to releases whose runs errored" in result.summary(dt.date(2027, 1, 2))


def test_still_affected_at_the_newest_release_ends_at_the_next_minor() -> None:
    outcomes = Outcomes(timeline(10, 3, None))
    result = outcomes.bisect(9)
    assert (result.first_affected, result.first_fixed) == ("0.3.0", None)
    assert result.applies_to == ">=0.3.0,<0.10.0"
    assert any("still affected at the newest release 0.9.0" in n for n in result.notes)
    assert "first fixed none (still affected at 0.9.0)" in result.summary(dt.date(2027, 1, 2))


def test_without_an_affected_pivot_it_says_what_ran_and_the_fix() -> None:
    outcomes = Outcomes([N] * 8)
    with pytest.raises(BisectError, match=r"0\.4\.0: not-affected.*--pivot RELEASE"):
        outcomes.bisect(4)
    assert outcomes.ran == ["0.4.0"]  # nothing beyond the pivot ran
    with pytest.raises(ReproducerError, match="could not run"):
        Outcomes([E] * 8).bisect(4)


def test_pivots_are_tried_in_order_until_one_is_affected() -> None:
    outcomes = Outcomes(timeline(10, 3, 6))
    result = bisect("demo", "demo-dist", outcomes.releases, outcomes,
                    pivots=["0.8.0", "0.1.0", "0.4.0", "0.5.0"])
    assert result.pivot == "0.4.0"
    assert outcomes.ran[:3] == ["0.8.0", "0.1.0", "0.4.0"]
    assert (result.first_affected, result.first_fixed) == ("0.3.0", "0.6.0")


def test_recorded_releases_all_run_and_a_gap_in_the_range_is_reported() -> None:
    findings = timeline(20, 5, 15)
    outcomes = Outcomes(findings)
    result = outcomes.bisect(10, recorded=[0, 17])
    assert {"0.0.0", "0.17.0"} <= set(outcomes.ran)
    assert result.consistent
    findings[8] = N  # a release inside the affected range that passes: not one range
    broken = Outcomes(findings).bisect(10, recorded=[8])
    assert not broken.consistent
    assert any("not contiguous: 0.8.0 is not-affected" in n for n in broken.notes)


def test_bounds_read_the_runs_as_they_are() -> None:
    b = bounds([P, N, None, A, None, A, None, N])
    assert (b.low, b.high, b.below, b.above, b.contradictions) == (3, 5, 1, 7, ())
    assert bounds([None, None]).low is None


# -- the release listing, against a fake PyPI -------------------------------------------------


def _file(name: str, *, yanked: bool = False, requires: str | None = None) -> dict[str, Any]:
    return {"filename": name, "upload_time_iso_8601": "2026-01-02T03:04:05Z", "yanked": yanked,
            "requires_python": requires}


HERE = [Tag("cp311", "cp311", "manylinux_2_28_x86_64"), Tag("py3", "none", "any")]


def test_listing_keeps_what_installs_here_and_says_why_the_rest_does_not(h: Harness) -> None:
    h.upstream.route("/pypi/pypi/demo/json", Reply(body={"releases": {
        "0.1.0": [_file("demo-0.1.0-py3-none-any.whl")],
        "0.2.0": [_file("demo-0.2.0.tar.gz")],
        "0.3.0": [_file("demo-0.3.0-cp312-cp312-manylinux_2_28_x86_64.whl")],
        "0.4.0": [_file("demo-0.4.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
                  _file("demo-0.4.0-cp311-cp311-manylinux_2_28_x86_64.whl")],
        "0.5.0": [_file("demo-0.5.0-py3-none-any.whl", yanked=True)],
        "0.6.0": [_file("demo-0.6.0-py3-none-any.whl", requires=">=3.12")],
        "0.10.0rc1": [_file("demo-0.10.0rc1-py3-none-any.whl")],
        "0.10.0": [_file("demo-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl"),
                   _file("demo-0.10.0.tar.gz")],
    }}))
    listing = list_candidates(h.client(), "demo", tags=HERE, python="3.11.9")
    assert [(c.version, c.how) for c in listing.candidates] == [
        ("0.1.0", "wheel"), ("0.2.0", "sdist"), ("0.4.0", "wheel"), ("0.10.0", "wheel")]
    skipped = dict(listing.skipped)
    assert "no wheel for this interpreter" in skipped["0.3.0"]
    assert "0.5.0" not in skipped  # all yanked: not a release pip would install
    assert skipped["0.6.0"] == "needs Python >=3.12 (Requires-Python)"
    assert skipped["0.3.0"] == ("no wheel for this interpreter (wheels for cp312 only) and no "
                                "sdist")
    assert "1 prerelease" in skipped["*"]
    with_pre = list_candidates(h.client(), "demo", tags=HERE, python="3.11.9", pre=True)
    assert "0.10.0rc1" in [c.version for c in with_pre.candidates]


# -- runs of a fake distribution's releases ----------------------------------------------------


def _release_tree(root: Path, fake: FakeTarget, version: str, *, fixed: bool | None) -> Path:
    """``fake``'s distribution at ``version``, as pip would install it: the package (without
    the target module when ``fixed`` is None) and its dist-info."""
    where = root / version
    package = where / fake.package
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    if fixed is not None:
        (package / "target.py").write_text(TARGET_SOURCE.replace(
            "FIXED = False", f"FIXED = {fixed}"))
    meta = where / f"{fake.package}-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {fake.distribution}\nVersion: {version}\n")
    return where


REPRODUCER = """LANES = ("cpu",)
WORLD_SIZES = (1,)


def run(ctx):
    import {module} as target

    # the overlay makes the greeting "patched ..."; a fixed release needs none
    greeting = target.Greeter().greet("x")
    assert target.FIXED or greeting.startswith("patched"), "the bug shows"
"""


def _fake_entry(fake: FakeTarget, **overrides: Any) -> dict[str, Any]:
    (fake.root / "reproducers" / f"{fake.entry_id}.py").write_text(
        REPRODUCER.format(module=fake.module))
    return fake.entry(applies_to=">=0.4.0,<0.5.0", fingerprint={
        "policy": "refuse", "sha256": [fake.fingerprint()],
        "releases": {"0.4.0": fake.fingerprint()}}, **overrides)


@pytest.fixture
def base_env(fake_target: FakeTarget) -> dict[str, str]:
    fake_target.write_registry(_fake_entry(fake_target))
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    return env | {"PATCHLANE_DEFAULT_REGISTRY": "0",
                  "PATCHLANE_REGISTRY": str(fake_target.registry), "PYTHONPATH": path}


def test_runs_of_real_releases_are_classified_and_recorded(
        fake_target: FakeTarget, base_env: dict[str, str], tmp_path: Path) -> None:
    trees = {v: _release_tree(tmp_path / "releases", fake_target, v, fixed=fixed)
             for v, fixed in [("0.1.0", None), ("0.2.0", True), ("0.3.0", False),
                              ("0.4.0", False), ("0.5.0", False), ("0.6.0", True)]}
    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)
    run_dir = tmp_path / "run"
    installs: list[str] = []

    def install(version: str, log: Path) -> Path:
        installs.append(version)
        return trees[version]

    runner = ReleaseRunner(entry, run_dir, tmp_path / "cache", install=install, env=base_env,
                         fingerprints=True, timeout=120)
    releases = [Candidate(v, "wheel") for v in trees]
    result = bisect_entry(entry, Listing(tuple(releases)), runner, jobs=2)
    assert (result.first_affected, result.first_fixed) == ("0.3.0", "0.6.0")
    assert result.applies_to == ">=0.3.0,<0.6.0"
    verdicts = {r.release: r.finding for _, r in result.runs}
    assert verdicts["0.2.0"] is N and verdicts["0.4.0"] is A
    record = json.loads((run_dir / "runs" / "0.4.0.json").read_text())
    assert record["finding"] == "affected" and record["message"] == "the bug shows"
    assert record["case"]["mode"] == Mode.WITHOUT.value
    assert all(Path(log).is_file() for log in record["logs"])
    assert record["fingerprint"] == fake_target.fingerprint()
    assert sorted(installs) == sorted(verdicts)  # each release ran once, installed once


def test_a_release_without_the_target_is_absent_and_an_install_failure_an_error(
        fake_target: FakeTarget, base_env: dict[str, str], tmp_path: Path) -> None:
    trees = {"0.1.0": _release_tree(tmp_path / "releases", fake_target, "0.1.0", fixed=None)}
    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)

    def install(version: str, log: Path) -> Path:
        if version not in trees:
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("ERROR: Could not build wheels for demo\n")
            raise subprocess.CalledProcessError(1, ["pip"])
        return trees[version]

    runner = ReleaseRunner(entry, tmp_path / "run", tmp_path / "cache", install=install,
                         env=base_env, timeout=120)
    absent = runner("0.1.0", "wheel")
    assert absent.finding is P, absent.message
    assert fake_target.module in absent.message
    failed = runner("0.2.0", "sdist")
    assert failed.finding is E
    assert "pip could not install" in failed.message and "Could not build" in failed.message


def _case(outcome: RunOutcome, message: str, stage: str = "run") -> CaseResult:
    return CaseResult("x", Mode.WITHOUT, "cpu", 1, outcome, message,
                      stage if outcome is RunOutcome.ERROR else "")


@pytest.mark.parametrize(("outcome", "message", "stage", "finding"), [
    (RunOutcome.FAIL, "the bug shows", "", A),
    (RunOutcome.PASS, "reproducer passed", "", N),
    (RunOutcome.ERROR, "ModuleNotFoundError: No module named 'pkg.mod'", "run", P),
    (RunOutcome.ERROR, "TypeError: Machine.state_dict() got an unexpected keyword argument "
                       "'force'", "run", P),
    (RunOutcome.ERROR, "AttributeError: 'Machine' object has no attribute 'x'", "run", P),
    (RunOutcome.ERROR, "ImportError: cannot import name 'mod' from 'pkg'", "run", P),
    (RunOutcome.ERROR, "ImportError: cannot import name 'other' from 'pkg'", "setup", P),
    (RunOutcome.ERROR, "TypeError: load_state_dict() missing 1 required argument", "run", E),
    (RunOutcome.ERROR, "RuntimeError: Machine broke", "run", E),
    (RunOutcome.ERROR, "rank 0 exited 3 before reporting", "bootstrap", E),
])
def test_classify(outcome: RunOutcome, message: str, stage: str, finding: Finding) -> None:
    target = Target("pkg-dist", "pkg.mod", "Machine.state_dict")
    assert classify(target, _case(outcome, message, stage))[0] is finding


def test_classify_reads_the_release_files_for_an_import_error_that_names_something_else(
        tmp_path: Path) -> None:
    target = Target("pkg-dist", "pkg.mod", "Machine.state_dict")
    case = _case(RunOutcome.ERROR, "ImportError: cannot import name 'helpers' from 'pkg'")
    (tmp_path / "pkg").mkdir()
    assert classify(target, case, [tmp_path]) == (
        Finding.ABSENT, "ImportError: cannot import name 'helpers' from 'pkg' (the release has "
                        "no module pkg.mod)")
    (tmp_path / "pkg" / "mod.py").write_text("class Machine:\n    def state_dict(self): pass\n")
    assert classify(target, case, [tmp_path])[0] is Finding.ERROR  # it is there: an error


def test_an_inherited_target_is_not_absent_where_its_class_is_there(tmp_path: Path) -> None:
    # liger's target is `LigerFusedLinearCrossEntropyFunction.apply`, inherited from
    # torch.autograd.Function: the file never writes `apply`, so its absence proves nothing,
    # and an old release failing on the new torch (`module 'torch' has no attribute 'hip'`) is
    # an error, not "the target does not exist yet"
    target = Target("pkg-dist", "pkg.mod", "Fn.apply")
    case = _case(RunOutcome.ERROR, "AttributeError: module 'torch' has no attribute 'hip'")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("class Fn(Base):\n    def forward(ctx): pass\n")
    assert classify(target, case, [tmp_path])[0] is Finding.ERROR
    (tmp_path / "pkg" / "mod.py").write_text("class Other:\n    pass\n")
    assert classify(target, case, [tmp_path]) == (
        Finding.ABSENT, "AttributeError: module 'torch' has no attribute 'hip' (mod.py defines "
                        "no Fn.apply)")


def test_an_error_says_whose_code_raised_it(tmp_path: Path) -> None:
    release = tmp_path / "megatron-core-0.15.3"
    tb = ("Traceback (most recent call last):\n"
          f'  File "{REPO}/reproducers/x.py", line 43, in _run\n'
          f'  File "{release}/pkg/unified_memory.py", line 71, in <module>\n'
          '  File "/venv/lib/python3.12/site-packages/torch/utils/cpp_extension.py", line 2714, '
          "in _get_cuda_arch_flags\n"
          "IndexError: list index out of range\n")
    case = _case(RunOutcome.ERROR, "IndexError: list index out of range")
    case.ranks = [{"outcome": "error", "traceback": tb}]
    assert classify(Target("pkg-dist", "pkg.mod", "Machine.state_dict"), case, [release]) == (
        Finding.ERROR, "run: IndexError: list index out of range (raised at "
        "torch/utils/cpp_extension.py:2714 in _get_cuda_arch_flags, called from "
        "pkg/unified_memory.py:71)")


# -- --write, on a copy of the registry --------------------------------------------------------

ENTRY = "mcore_rerun_sentinel"
FP_NEW = "sha256-v2:" + "a" * 32
FP_OLD = "sha256-v2:f1d56a68f9832c7151c20d9842c1ef0d"  # 0.15.3's, as registry.yaml records it


def _result(overlay_at_0131: str = "guarding", **changes: Any) -> Bisection:
    runs = [("pivot", ReleaseRun("0.15.3", A, "", fingerprint=FP_OLD, overlay="guarding")),
            ("bisect", ReleaseRun("0.13.1", A, "", fingerprint=FP_NEW,
                                  overlay=overlay_at_0131)),
            ("bisect", ReleaseRun("0.12.3", N, "", fingerprint=FP_NEW)),
            ("bisect", ReleaseRun("0.18.0", N, "", fingerprint="sha256-v2:" + "b" * 32)),
            ("bisect", ReleaseRun("0.17.1", A, "", fingerprint=None, overlay="guarding"))]
    result = Bisection(ENTRY, "megatron-core", (), runs=runs, first_affected="0.13.1",
                       last_affected="0.17.1", first_fixed="0.18.0",
                       applies_to=">=0.13.1,<0.18.0", lower_certain=True, upper_certain=True,
                       python="3.12")
    return dataclasses.replace(result, **changes)


def _block_of(text: str, entry_id: str) -> tuple[int, int]:
    head = text.index(f"  - id: {entry_id}")
    return head, text.index("  - id: ", head + 1)


def test_write_rewrites_only_the_entry_s_lines(registry_file: Path) -> None:
    before = registry_file.read_text()
    entry = load_registries([registry_file]).get(ENTRY)
    write_bisection(entry, _result(), date=dt.date(2027, 1, 2))
    after = registry_file.read_text()
    head, tail = _block_of(before, ENTRY)
    assert after[:head] == before[:head]
    assert after[after.index("  - id: ", after.index(f"  - id: {ENTRY}") + 1):] == before[tail:]
    block = after[head:after.index("  - id: ", head + 1)]
    assert '    applies_to: ">=0.13.1,<0.18.0"\n' in block
    assert '      release: ">=0.18.0"\n' in block
    # a recorded value that did not change keeps its bytes (and its comment); new ones land in
    # version order; the changed one is rewritten, its comment kept
    assert f'        "0.12.3": "{FP_NEW}"\n        "0.13.1": "{FP_NEW}"\n' \
           '        "0.14.0": ' in block
    assert '        "0.18.0": "sha256-v2:' + "b" * 32 + '"  # upstream\'s fix (PR #4448)\n' \
        in block
    assert '      bisected: "2027-01-02: 5 runs on Python 3.12: first affected 0.13.1, first ' \
           'fixed 0.18.0"\n    owner: training-infra\n' in block
    written = load_registries([registry_file]).get(ENTRY)
    assert written.applies_to == SpecifierSet(">=0.13.1,<0.18.0")
    assert written.fingerprint is not None and written.fingerprint.releases["0.13.1"] == FP_NEW
    assert yaml.safe_load(after)["entries"][0]["evidence"]["bisected"].startswith("2027-01-02")
    # again: the same result gives the same bytes (the evidence line is replaced, not added)
    write_bisection(load_registries([registry_file]).get(ENTRY), _result(),
                    date=dt.date(2027, 1, 2))
    assert registry_file.read_text() == after


def test_write_keeps_crlf_and_refuses_a_broken_range_leaving_the_file(
        registry_file: Path) -> None:
    crlf = registry_file.read_bytes().replace(b"\n", b"\r\n")
    registry_file.write_bytes(crlf)
    entry = load_registries([registry_file]).get(ENTRY)
    with pytest.raises(BisectError, match="do not form one contiguous"):
        write_bisection(entry, _result(consistent=False, notes=["not contiguous: x"]),
                        date=dt.date(2027, 1, 2))
    assert registry_file.read_bytes() == crlf
    write_bisection(entry, _result(first_fixed=None, applies_to=">=0.13.1,<0.20.0"),
                    date=dt.date(2027, 1, 2))
    after = registry_file.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b"")
    assert b'    applies_to: ">=0.13.1,<0.20.0"\r\n' in after
    assert b'      release: ">=0.18.0"\r\n' in after  # no first fixed: left as it was


def test_write_widens_the_gate_only_where_the_overlay_guards(registry_file: Path) -> None:
    """0.13.1 is affected, outside the entry's gate, and the reproducer fails there with the
    overlay too: the sweep would say broken there, so the gate is not widened to it."""
    before = registry_file.read_bytes()
    entry = load_registries([registry_file]).get(ENTRY)
    assert entry.applies_to is not None and "0.13.1" not in entry.applies_to
    with pytest.raises(BisectError) as refused:
        write_bisection(entry, _result("fail with the overlay: AssertionError: still hangs"),
                        date=dt.date(2027, 1, 2))
    text = str(refused.value)
    assert "0.13.1: fail with the overlay: AssertionError: still hangs" in text
    assert "nothing written" in text and "0.17.1" not in text  # inside the gate: not asked
    assert registry_file.read_bytes() == before


def test_write_keeps_crlf_when_the_entry_is_last_and_has_no_final_line_break(
        registry_file: Path) -> None:
    """A CRLF file whose last line (the entry's) has no line break: every line written ends
    in CRLF, and the file still ends without one."""
    text = registry_file.read_text()
    head, tail = _block_of(text, ENTRY)
    moved = text[:head] + text[tail:].rstrip("\n") + "\n" + text[head:tail].rstrip("\n")
    crlf = moved.replace("\n", "\r\n").encode()
    registry_file.write_bytes(crlf)
    entry = load_registries([registry_file]).get(ENTRY)
    write_bisection(entry, _result(), date=dt.date(2027, 1, 2))
    after = registry_file.read_bytes()
    assert b"\n" not in after.replace(b"\r\n", b""), "an LF-only line was spliced in"
    assert not after.endswith(b"\n") and after.endswith(b"status: active")
    at = crlf.index(f"  - id: {ENTRY}".encode())
    assert after[:at] == crlf[:at]
    assert b'      bisected: "2027-01-02: 5 runs' in after
    assert load_registries([registry_file]).get(ENTRY).applies_to == SpecifierSet(
        ">=0.13.1,<0.18.0")


# -- the command, end to end: a fake PyPI, fake wheels, real pip -------------------------------


def _wheel(out: Path, fake: FakeTarget, version: str, *, fixed: bool | None,
           greeting: str = "hello") -> Path:
    """A py3-none-any wheel of ``fake``'s distribution at ``version`` (the target module left
    out when ``fixed`` is None; ``greeting``: another word changes the target's fingerprint)."""
    source = None if fixed is None else TARGET_SOURCE.replace(
        "FIXED = False", f"FIXED = {fixed}").replace('f"hello {name}"', f'f"{greeting} {{name}}"')
    return _wheel_of(out, fake, version, source)


def _wheel_of(out: Path, fake: FakeTarget, version: str, source: str | None) -> Path:
    """``fake``'s distribution at ``version`` as a py3 wheel whose target module is
    ``source`` (None: the release has no target module)."""
    name = fake.distribution.replace("-", "_")
    files = {f"{fake.package}/__init__.py": ""}
    if source is not None:
        files[f"{fake.package}/target.py"] = source
    info = f"{name}-{version}.dist-info"
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {fake.distribution}\n"
                                 f"Version: {version}\n")
    files[f"{info}/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n")
    record = [f"{path},sha256={_digest(text)},{len(text.encode())}" for path, text in
              files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    path = out / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


def _publish(root: Path, distribution: str, wheels: dict[str, Path]) -> None:
    """A PEP 503 page for ``distribution`` under ``root/simple``, linking ``wheels`` (which lie
    in ``root/files``)."""
    simple = root / "simple" / distribution
    simple.mkdir(parents=True)
    (simple / "index.html").write_text("<html><body>" + "".join(
        f'<a href="../../files/{w.name}">{w.name}</a>' for w in wheels.values())
        + "</body></html>")


def _pip_env(base_env: dict[str, str], h: Harness, url: str, tmp_path: Path) -> dict[str, str]:
    """``base_env`` for a command that asks the fake PyPI and pip installs from the index at
    ``url`` only."""
    return {k: v for k, v in base_env.items() if not k.startswith("PIP_")} | {
        "PATCHLANE_PYPI_URL": h.upstream.pypi, "PATCHLANE_CACHE": str(tmp_path / "http"),
        "PIP_INDEX_URL": f"{url}/simple", "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_CACHE_DIR": "1"}


def _digest(text: str) -> str:
    import base64

    raw = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A simple package index (PEP 503) on loopback serving ``tmp_path/index``."""
    root = tmp_path / "index"
    root.mkdir()
    handler = functools.partial(_Quiet, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", root
    finally:
        server.shutdown()
        server.server_close()


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_the_command_bisects_pip_installed_releases_and_writes_the_gate(
        fake_target: FakeTarget, base_env: dict[str, str], h: Harness,
        index: tuple[str, Path], tmp_path: Path) -> None:
    url, root = index
    plan = [("0.1.0", None), ("0.2.0", True), ("0.3.0", False), ("0.4.0", False),
            ("0.5.0", False), ("0.6.0", True), ("0.7.0", True)]
    files = root / "files"
    files.mkdir()
    # 0.3.0's target differs from the recorded one (its fingerprint is new): --write must
    # record it in sha256 as well as under its release
    wheels = {v: _wheel(files, fake_target, v, fixed=fixed,
                        greeting="hi" if v == "0.3.0" else "hello") for v, fixed in plan}
    _publish(root, fake_target.distribution, wheels)
    h.upstream.route(f"/pypi/pypi/{fake_target.distribution}/json", Reply(body={"releases": {
        v: [_file(w.name)] for v, w in wheels.items()} | {
        "0.8.0": [_file("x-0.8.0-cp27-cp27mu-linux_x86_64.whl")]}}))
    env = _pip_env(base_env, h, url, tmp_path)
    run_dir = tmp_path / "bisect-run"
    work = tmp_path / "work"  # not the fake's root: python -m puts the working directory first
    work.mkdir()
    before = fake_target.registry.read_text()
    out = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "bisect", fake_target.entry_id, "--json",
         "--jobs", "2", "--write", "--run-dir", str(run_dir), "--cache",
         str(tmp_path / "releases")], env=env, capture_output=True, text=True, timeout=600,
        cwd=work)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # stdout is the JSON alone (pip's lines go to its log)
    assert {k: data[k] for k in ("entry", "distribution", "first_affected", "first_fixed",
                                 "applies_to", "releases_considered")} == {
        "entry": fake_target.entry_id, "distribution": fake_target.distribution,
        "first_affected": "0.3.0", "first_fixed": "0.6.0", "applies_to": ">=0.3.0,<0.6.0",
        "releases_considered": 7}
    assert data["runs_taken"] == len(data["runs"]) < 7
    # each affected release also ran with the overlay, its gate widened to it: guarding
    assert {r["release"]: r["overlay"] for r in data["runs"] if r["finding"] == "affected"} \
        == dict.fromkeys(("0.3.0", "0.4.0", "0.5.0"), "guarding")
    assert {r["finding"] for r in data["runs"]} <= {"affected", "not-affected", "absent"}
    assert all(Path(r["receipt"]).is_file() for r in data["runs"])
    assert any(s["release"] == "0.8.0" for s in data["skipped"])
    assert json.loads((run_dir / "bisect.json").read_text())["applies_to"] == ">=0.3.0,<0.6.0"
    after = yaml.safe_load(fake_target.registry.read_text())["entries"][0]
    assert after["applies_to"] == ">=0.3.0,<0.6.0"
    assert after["retire_when"]["release"] == ">=0.6.0"
    ran_clean = {r["release"] for r in data["runs"] if r["finding"] != "absent"}
    assert set(after["fingerprint"]["releases"]) == ran_clean | {"0.4.0"}
    # every value recorded for a release is one sha256 accepts: a strict start on any release
    # that ran is never a drift error (the first real entry's bisect left sha256 short)
    assert set(after["fingerprint"]["releases"].values()) <= set(after["fingerprint"]["sha256"])
    assert after["evidence"]["bisected"].endswith("first affected 0.3.0, first fixed 0.6.0")
    assert fake_target.registry.read_text() != before

    # the same command, with an unusable start or no PyPI answer, exits with its code
    again = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "bisect", fake_target.entry_id,
         "--pivot", "9.9.9", "--cache", str(tmp_path / "releases")], env=env,
        capture_output=True, text=True, timeout=120, cwd=work)
    assert again.returncode == 2 and "--pivot 9.9.9 is not a release" in again.stderr
    offline = subprocess.run(
        [sys.executable, "-m", "patchlane.cli.main", "bisect", fake_target.entry_id,
         "--offline"], env=env | {"PATCHLANE_CACHE": str(tmp_path / "empty")},
        capture_output=True, text=True, timeout=120, cwd=work)
    assert offline.returncode == 14, offline.stderr


def _other_python() -> tuple[str, Path]:
    """The other interpreter's (version, python) among the two scripts/test sets up."""
    root = Path(__file__).resolve().parents[2]
    other = "3.12" if sys.version_info[:2] == (3, 11) else "3.11"
    python = root / (".venv312" if other == "3.12" else ".venv") / "bin" / "python"
    if not python.exists():
        pytest.skip(f"the Python {other} venv ({python}) is not set up: ./scripts/test makes "
                    "both")
    return other, python


def test_releases_that_install_only_on_another_python_are_bisected_there(
        fake_target: FakeTarget, base_env: dict[str, str], h: Harness,
        index: tuple[str, Path], tmp_path: Path) -> None:
    """megatron-core 0.17+ installs on Python 3.12 only: a bisect on 3.11 that stops at the
    newest release it can install says so, with the command; ``--python`` runs the rest on
    the other interpreter and draws one gate from both (and the mirror case on 3.12)."""
    url, root = index
    other, python = _other_python()
    # not-affected 0.2.0 | affected 0.3.0, 0.4.0 | fixed 0.5.0, 0.6.0; 0.4.0 is recorded (the
    # pivot). On 3.11 the fixed ones need 3.12; on 3.12 the first two need 3.11.
    plan = [("0.2.0", True), ("0.3.0", False), ("0.4.0", False), ("0.5.0", True),
            ("0.6.0", True)]
    on_311 = sys.version_info[:2] == (3, 11)
    elsewhere = {"0.5.0", "0.6.0"} if on_311 else {"0.2.0", "0.3.0"}
    requires = ">=3.12" if on_311 else "<3.12"
    files = root / "files"
    files.mkdir()
    wheels = {v: _wheel(files, fake_target, v, fixed=fixed) for v, fixed in plan}
    _publish(root, fake_target.distribution, wheels)
    h.upstream.route(f"/pypi/pypi/{fake_target.distribution}/json", Reply(body={"releases": {
        v: [_file(w.name, requires=requires if v in elsewhere else None)]
        for v, w in wheels.items()}}))
    env = _pip_env(base_env, h, url, tmp_path)
    work = tmp_path / "work"
    work.mkdir()

    def bisect_cmd(run: str, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "patchlane.cli.main", "bisect", fake_target.entry_id,
             "--run-dir", str(tmp_path / run), "--cache", str(tmp_path / "releases"), *extra],
            env=env, capture_output=True, text=True, timeout=600, cwd=work)

    alone = bisect_cmd("alone")
    assert alone.returncode == 0, alone.stderr
    data = json.loads((tmp_path / "alone" / "bisect.json").read_text())
    span = "0.5.0 … 0.6.0" if on_311 else "0.2.0 … 0.3.0"
    shown = f"2 release(s) ({span}: needs Python {requires} (Requires-Python)) do not install here"
    assert shown in alone.stdout, alone.stdout
    assert f"patchlane bisect {fake_target.entry_id} --python PYTHON" in alone.stdout
    assert f"{', '.join(sorted(elsewhere))}: needs Python {requires}" in alone.stdout  # not run
    if on_311:
        assert (data["first_fixed"], data["upper_certain"]) == (None, False)
        assert data["newer_elsewhere"] == ["0.5.0", "0.6.0"]
    else:
        assert (data["first_affected"], data["lower_certain"]) == ("0.4.0", False)
        assert data["older_elsewhere"] == ["0.2.0", "0.3.0"]

    both = bisect_cmd("both", "--python", str(python), "--json", "--write")
    assert both.returncode == 0, both.stderr
    data = json.loads(both.stdout)
    assert {k: data[k] for k in ("first_affected", "first_fixed", "applies_to",
                                 "lower_certain", "upper_certain", "consistent")} == {
        "first_affected": "0.3.0", "first_fixed": "0.5.0", "applies_to": ">=0.3.0,<0.5.0",
        "lower_certain": True, "upper_certain": True, "consistent": True}
    assert data["python"] == f"{sys.version_info[0]}.{sys.version_info[1]}, {other}"
    ran_there = {r["release"] for r in data["runs"] if r.get("python") == other}
    assert elsewhere <= ran_there
    assert not data["skipped"]
    after = yaml.safe_load(fake_target.registry.read_text())["entries"][0]
    assert after["applies_to"] == ">=0.3.0,<0.5.0"
    assert after["retire_when"]["release"] == ">=0.5.0"
    assert f"on Python {data['python']}: first affected 0.3.0, first fixed 0.5.0" in \
        after["evidence"]["bisected"]
    # the releases that ran there are recorded like the ones that ran here
    assert elsewhere & {r for r in after["fingerprint"]["releases"]}


def test_installs_failing_in_a_row_stop_the_search_with_a_cap(
        fake_target: FakeTarget, base_env: dict[str, str], tmp_path: Path) -> None:
    from patchlane.releases.release_runs import MAX_INSTALL_FAILURES, ReleaseInstallError

    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)
    pivot = _release_tree(tmp_path / "releases", fake_target, "0.4.0", fixed=False)
    tried: list[str] = []

    def install(version: str, log: Path) -> Path:
        if version == "0.4.0":  # the pivot installs and shows the bug; then the index fails
            return pivot
        tried.append(version)
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("ERROR: Could not connect to the index\n")
        raise subprocess.CalledProcessError(1, ["pip"])

    runner = ReleaseRunner(entry, tmp_path / "run", tmp_path / "cache", install=install,
                           env=base_env, timeout=120)
    releases = [Candidate(f"0.{i}.0", "wheel") for i in range(1, 10)]
    with pytest.raises(ReleaseInstallError) as stopped:
        bisect_entry(entry, Listing(tuple(releases)), runner)
    assert len(tried) == MAX_INSTALL_FAILURES  # not one pip attempt per release
    text = str(stopped.value)
    assert f"stopped after {MAX_INSTALL_FAILURES} installs in a row failed" in text
    assert "fix: check the index (PIP_INDEX_URL, the network)" in text
    assert int(stopped.value.exit_code) == 14


def test_a_stopped_runner_kills_its_running_case_at_once(
        fake_target: FakeTarget, base_env: dict[str, str], tmp_path: Path) -> None:
    """Ctrl-C or SIGTERM to bisect sets the runner's stop: the case running then is killed
    at once, not after its --timeout (600 s by default)."""
    import threading
    import time

    from patchlane.sweep.reproduce import CaseInterrupted

    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "import time\n\ndef run(ctx):\n    time.sleep(300)\n")
    trees = {"0.4.0": _release_tree(tmp_path / "releases", fake_target, "0.4.0", fixed=False)}
    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)
    runner = ReleaseRunner(entry, tmp_path / "run", tmp_path / "cache",
                           install=lambda v, log: trees[v], env=base_env, timeout=600)
    threading.Timer(3.0, runner.stop.set).start()
    started = time.monotonic()
    with pytest.raises(CaseInterrupted):
        runner("0.4.0", "wheel")
    assert time.monotonic() - started < 30


def test_the_bisect_table_shows_the_with_overlay_leg(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`--write` widens a gate only where the overlay guards: the table shows that leg, not
    only bisect.json."""
    from patchlane.cli.bisect import _show
    from patchlane.releases.bisect import Bisection
    from patchlane.releases.release_runs import Finding, ReleaseRun

    result = Bisection(entry_id="e", distribution="d", releases=(), first_affected="1.0",
                       applies_to=">=1.0,<1.1")
    result.runs.append(("bisect", ReleaseRun("1.0", Finding.AFFECTED, "the bug shows",
                                             overlay="guarding")))
    result.runs.append(("bisect", ReleaseRun("1.1", Finding.NOT_AFFECTED, "passed")))
    _show(result, tmp_path)
    out = capsys.readouterr().out
    header, _, first, second = out.splitlines()[:4]
    assert "WITH OVERLAY" in header
    assert first.startswith("1.0") and "guarding" in first, first
    assert second.startswith("1.1") and "guarding" not in second, second


# -- --write and the release matrix beside the registry ----------------------------------------

MATRIX = """\
schema: 1
sets:
  - name: old   # kept
    install: [megatron-core==0.12.3]
    expect:
      mcore_moe_ffn_mixed_dense: skipped
  - name: mid
    install: [megatron-core==0.15.3]
    expect:
      mcore_rerun_sentinel: broken   # a guess, before any run
      mcore_moe_ffn_mixed_dense: guarding
    python: ["3.11"]
  - name: new
    install: [megatron-core==0.18.0]
    expect:
      mcore_moe_ffn_mixed_dense: upstream-fixed
  - name: gpu
    lanes: [cuda]
    install: [megatron-core==0.15.3]
    expect:
      mcore_moe_ffn_mixed_dense: guarding
  - name: unrun
    install: [megatron-core==0.14.0]
    expect:
      mcore_moe_ffn_mixed_dense: guarding
  - name: other-dist
    install: [liger-kernel==0.8.1]
    expect:
      liger_flce_weighted_none: guarding
"""


def test_write_records_each_matrix_set_s_verdict_as_the_runs_showed_it(
        registry_file: Path, tmp_path: Path) -> None:
    from patchlane.releases.matrix import parse_matrix
    from patchlane.releases.matrix_expectations import expected_verdicts, write_expectations

    entry = load_registries([registry_file]).get(ENTRY)
    path = tmp_path / "matrix.yaml"
    path.write_bytes(MATRIX.replace("\n", "\r\n").encode())  # CRLF, kept
    found = {e.set_name: e for e in expected_verdicts(entry, _result(),
                                                       parse_matrix(path, MATRIX))}
    assert {n: (e.verdict.value if e.verdict else None) for n, e in found.items()} == {
        "old": "skipped", "mid": "guarding", "new": "upstream-fixed", "gpu": None,
        "unrun": None}  # other-dist installs no megatron-core: not its set
    assert "swept on cuda only" in found["gpu"].why
    assert "did not run in this bisection" in found["unrun"].why
    changes = write_expectations(path, ENTRY, list(found.values()), dt.date(2027, 1, 2))
    assert changes == [f"old: {ENTRY}: skipped", f"mid: {ENTRY}: broken -> guarding",
                       f"new: {ENTRY}: upstream-fixed"]
    raw = path.read_bytes().decode()
    assert "\n" not in raw.replace("\r\n", "")  # every line CRLF, the new ones too
    text = raw.replace("\r\n", "\n")
    sets = {s.name: s for s in parse_matrix(path, text)}
    assert sets["mid"].python == ("3.11",)  # the key after expect: stays the set's
    assert sets["old"].expect[ENTRY].value == "skipped"
    assert "gpu" in sets and ENTRY not in sets["gpu"].expect
    assert f"      {ENTRY}: guarding   # patchlane bisect --write, 2027-01-02 (was broken)" \
        in text.splitlines()
    untouched = [ln for ln in MATRIX.splitlines() if ENTRY not in ln]
    assert [ln for ln in text.splitlines() if ENTRY not in ln] == untouched
    # again: nothing changes
    assert write_expectations(path, ENTRY, list(found.values()), dt.date(2027, 1, 3)) == []
    assert path.read_bytes().decode() == raw


def test_write_to_a_matrix_it_cannot_edit_writes_nothing(registry_file: Path,
                                                         tmp_path: Path) -> None:
    from patchlane.releases.matrix import parse_matrix
    from patchlane.releases.matrix_expectations import expected_verdicts, write_expectations

    entry = load_registries([registry_file]).get(ENTRY)
    path = tmp_path / "matrix.yaml"
    flow = ("schema: 1\nsets:\n  - name: mid\n    install: [megatron-core==0.15.3]\n"
            "    expect: {mcore_moe_ffn_mixed_dense: guarding}\n")
    path.write_text(flow)
    wanted = expected_verdicts(entry, _result(), parse_matrix(path, flow))
    with pytest.raises(BisectError, match="no block `expect:`"):
        write_expectations(path, ENTRY, wanted, dt.date(2027, 1, 2))
    assert path.read_text() == flow


def test_a_signal_stops_a_release_downloading_now(fake_target: FakeTarget,
                                                  base_env: dict[str, str],
                                                  tmp_path: Path) -> None:
    """SIGTERM to bisect during a slow pip download: the install is terminated at once (it
    ran on for as long as pip did), and the release is no finding, not an install error."""
    import subprocess
    import threading
    import time

    from patchlane.sweep import installs
    from patchlane.sweep.reproduce import CaseInterrupted

    failed: list[BaseException] = []

    def slow() -> None:
        try:
            installs._step([sys.executable, "-c", "import time; time.sleep(300)"])
        except subprocess.CalledProcessError as exc:
            failed.append(exc)

    worker = threading.Thread(target=slow)
    started = time.monotonic()
    worker.start()
    time.sleep(1.0)
    installs.stop_installs()
    worker.join(timeout=30)
    assert failed and time.monotonic() - started < 30

    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)
    runner = ReleaseRunner(entry, tmp_path / "run", tmp_path / "cache", env=base_env,
                           timeout=600)

    def stopped_install(version: str, log: Path) -> Path:
        runner.stop.set()  # the signal arrives while pip runs; pip is terminated
        raise subprocess.CalledProcessError(-15, ["pip"])

    runner._install = stopped_install  # type: ignore[method-assign]
    with pytest.raises(CaseInterrupted, match="its install was stopped"):
        runner("0.4.0", "wheel")
    assert runner.install_failures == 0

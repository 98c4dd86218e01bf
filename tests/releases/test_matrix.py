"""The release matrix (matrix.yaml) on real upstream releases: every set gets the verdicts it
declares: guarding where the bug is, skipped where the gate excludes the release."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from patchlane.common.exit_codes import sweep_exit_code
from patchlane.registry import load_registries
from patchlane.releases.matrix import MatrixSet, load_matrix, run_set
from patchlane.runs.verdicts import Verdict, exit_bits
from patchlane.sweep.rank_start import warm_allowed
from patchlane.sweep.reproduce import RunOutcome, read_spec

from . import case_checks
from .conftest import CACHE, ROOT
from .matrix_sets import not_swept_here

SETS = load_matrix(ROOT / "matrix.yaml")

pytestmark = [pytest.mark.upstream, pytest.mark.slow, pytest.mark.independent]


def _shared_install(matrix_set: MatrixSet) -> list[pytest.MarkDecorator]:
    """Sets that install the same release with its dependencies (a torch of several GB) run on
    one pytest-xdist worker, one after the other: spread over two, the second waited out the
    first's install on the cache's lock (55 s of a worker idle on a fresh machine) instead of
    running other tests meanwhile."""
    if not matrix_set.deps:
        return []
    return [pytest.mark.xdist_group(f"matrix sets installing {' '.join(sorted(matrix_set.deps))}")]


@pytest.mark.parametrize("matrix_set", [pytest.param(s, marks=_shared_install(s)) for s in SETS],
                         ids=[s.name for s in SETS])
def test_release_set_gets_its_expected_verdicts(matrix_set: MatrixSet, tmp_path: Path) -> None:
    reason = not_swept_here(matrix_set)
    if reason is not None:
        pytest.skip(reason)
    # Warm ranks (forked from a server that imported torch) where the rank start allows them:
    # tests/evidence/test_rank_start.py shows that they give each case the outcome a fresh
    # start gives, and every receipt below says which start it had.
    result = run_set(matrix_set, cache=CACHE, runs_root=tmp_path, jobs=2, rank_start="warm")
    assert result.ok, result.mismatches
    # 0, or 32 | 4 where a bug outlives its gate (still-affected is loud by its exit bit)
    assert result.exit_code == sweep_exit_code(exit_bits(matrix_set.expect.values()))
    # the run directory is complete evidence: every receipt names the release it ran on (of
    # its entry's target distribution, and of torch)
    registry = load_registries([ROOT / "registry.yaml"])
    for receipt in (result.run_dir / "receipts").glob("*.json"):
        text = receipt.read_text()
        data = json.loads(text)
        entry = registry.get(data["entry_id"])
        refused = warm_allowed(entry, data["lane"], bool(read_spec(entry).bad_side)
                               and data["mode"] == "without")
        assert data["provenance"]["rank_start"] == ("fresh" if refused else "warm"), receipt
        assert data["provenance"].get("warm_refused") == refused, receipt
        target = entry.target.distribution
        for spec in matrix_set.install:
            dist, version = spec.split("==")
            if dist not in (target, "torch"):
                continue
            # "2.15.0" or a local build label of it ("2.15.0+cu132")
            assert re.search(rf'"{re.escape(version)}(\+[^"]*)?"', text), (receipt, spec)
    # and where an entry guards, its cases failed for the reason the entry is about, on this
    # set's release (tests/releases/case_checks.py): the same run, read back
    for entry_id, verdict in matrix_set.expect.items():
        if verdict is not Verdict.GUARDING or entry_id not in case_checks.CHECKS:
            continue
        version = _installed(matrix_set, registry.get(entry_id).target.distribution)
        cases = case_checks.recorded_cases(result.run_dir, entry_id)
        assert cases, f"{entry_id} guards in {matrix_set.name} but no case of it was read back"
        for without, with_ in cases.values():
            case_checks.check_cases(entry_id, without, with_, version)


def _installed(matrix_set: MatrixSet, distribution: str) -> str:
    version = next((spec.split("==")[1] for spec in matrix_set.install
                    if spec.split("==")[0] == distribution), None)
    assert version is not None, f"{matrix_set.name} installs no {distribution}"
    return version


@pytest.mark.parametrize("entry_id", sorted(case_checks.CHECKS))
def test_every_case_check_runs_on_some_set_of_the_cpu_lane(entry_id: str) -> None:
    """A check no set applies could never fail: each entry with one guards in at least one set
    of the matrix that the CPU lane sweeps, so the suite applies it."""
    guarding = [s for s in SETS if "cpu" in s.lanes
                and s.expect.get(entry_id) is Verdict.GUARDING]
    assert guarding, f"{entry_id} has a case check but guards in no CPU set of matrix.yaml"


def test_a_case_check_refuses_a_failure_for_another_reason() -> None:
    """The checks read what the case says, not only its outcome: a reproducer that fails on an
    import error is not the bug, and a case run on another release is not this set's."""
    audit = {"decision": {"outcome": "skipped: disabled", "installed": "0.16.1"}, "hits": 0}
    applied = {"decision": {"outcome": "applied", "installed": "0.16.1"}, "hits": 2}
    right = case_checks.Case(RunOutcome.FAIL, "fault checkpoint lost the rerun state: "
                             "RuntimeError: Missing key in checkpoint state_dict: "
                             "rerun_state_machine_state/shard_0_1", [{"audit": audit}])
    passed = case_checks.Case(RunOutcome.PASS, "reproducer passed", [{"audit": applied}])
    case_checks.check_cases("mcore_rerun_sentinel", right, passed, "0.16.1")
    other = case_checks.Case(RunOutcome.FAIL, "ImportError: cannot import name 'GPTModel'",
                             [{"audit": audit}])
    with pytest.raises(AssertionError, match="Missing key"):
        case_checks.check_cases("mcore_rerun_sentinel", other, passed, "0.16.1")
    with pytest.raises(AssertionError, match="another release"):
        case_checks.check_cases("mcore_rerun_sentinel", right, passed, "0.17.1")
    silent = case_checks.Case(RunOutcome.PASS, "reproducer passed", [])
    with pytest.raises(AssertionError, match="no rank reported"):
        case_checks.check_cases("mcore_rerun_sentinel", right, silent, "0.16.1")

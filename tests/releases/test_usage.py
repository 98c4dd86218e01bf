"""`patchlane usage` on the reports of a real job: `patchlane run --reports DIR -- torchrun
--nproc-per-node 2 usage_train.py` (never imports patchlane) on the installed liger-kernel and
megatron-core, CPU, gloo. Each rank computes a loss through liger's fused linear
cross-entropy (the liger_flce_weighted_none overlay is hit) and imports megatron-core's DSA
module without calling it: the DSA entries whose gates admit the installed release are applied
and never hit (flagged, exit 17), those whose gates exclude it are not flagged.

What `usage` says is checked against the rank reports themselves (hits, decisions) and against
the job's own interpreter and torch (the stacks), so it holds on Python 3.11 (megatron-core
0.16.1) and 3.12 (0.19.2) alike.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from ..conftest import free_port
from .conftest import requires_megatron

pytestmark = [pytest.mark.upstream, pytest.mark.slow, requires_megatron]

SCRIPT = Path(__file__).with_name("usage_train.py")
LIGER = "liger_flce_weighted_none"
DEAD = "mcore_dsa_indexer_loss_graph_safe"  # gate >=0.16,<0.20: both interpreters' releases

try:
    LIGER_VERSION: str | None = metadata.version("liger-kernel")
except metadata.PackageNotFoundError:
    LIGER_VERSION = None


def _cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args], env=env,
                          cwd=cwd, capture_output=True, text=True, timeout=500)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, dict[str, Any]]]:
    """One real 2-rank job's reports folder, and each rank's own report."""
    if LIGER_VERSION is None:
        pytest.skip("liger-kernel is not installed")
    tmp = tmp_path_factory.mktemp("usage-job")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PYTHONWARNINGS"] = "ignore"
    reports = tmp / "reports"
    out = _cli("run", "--reports", str(reports), "--", sys.executable, "-m",
               "torch.distributed.run", "--nproc-per-node", "2", "--master-port",
               str(free_port()), str(SCRIPT), str(tmp / "out"), env=env, cwd=tmp)
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    for rank in (0, 1):  # the step really ran through liger, and agrees with plain PyTorch
        losses = json.loads((tmp / "out" / f"rank{rank}.json").read_text())
        assert abs(losses["liger"] - losses["torch"]) < 1e-4, losses
    ranks = {}
    for path in reports.glob("*.json"):
        data = json.loads(path.read_text())
        if data["process"]["rank"] is not None:
            ranks[int(data["process"]["rank"])] = data
    assert sorted(ranks) == [0, 1], sorted(p.name for p in reports.iterdir())
    return reports, ranks


def _decisions(ranks: dict[int, dict[str, Any]], entry_id: str) -> list[dict[str, Any]]:
    return [next(e for e in r["entries"] if e["id"] == entry_id) for r in ranks.values()]


def test_every_rank_report_names_its_job_and_stack(
        job: tuple[Path, dict[int, dict[str, Any]]]) -> None:
    import torch

    _, ranks = job
    jobs = {r["process"]["job"] for r in ranks.values()}
    assert len(jobs) == 1 and next(iter(jobs)).startswith("run:"), jobs
    for report in ranks.values():
        assert report["process"]["stack"] == {
            "python": platform.python_version(), "implementation": "cpython",
            "torch": torch.__version__, "cuda": torch.version.cuda}


def test_usage_adds_up_the_ranks_of_a_real_job(
        job: tuple[Path, dict[int, dict[str, Any]]]) -> None:
    import torch

    reports, ranks = job
    out = _cli("usage", str(reports), "--json", env=dict(os.environ), cwd=reports.parent)
    assert out.returncode == 17, out.stdout + out.stderr  # something applied was never hit
    usage = json.loads(out.stdout)
    assert (len(usage["jobs"]), usage["ranks"], usage["launchers"]) == (1, 2, 1)
    assert usage["unreadable"] == []
    by_id = {e["id"]: e for e in usage["entries"]}

    liger = by_id[LIGER]
    rank_hits = [d["hits"] for d in _decisions(ranks, LIGER)]
    assert all(h >= 1 for h in rank_hits), rank_hits
    assert (liger["state"], liger["flagged"], liger["hits"]) == ("hit", False, sum(rank_hits))
    assert (liger["jobs"], liger["ranks"], liger["ranks_applied"], liger["ranks_hit"]) == \
        (1, 2, 2, 2)
    assert liger["stacks"] == [{"python": platform.python_version(), "torch": torch.__version__,
                                "release": f"liger-kernel {LIGER_VERSION}", "ranks": 2,
                                "ranks_applied": 2, "hits": sum(rank_hits)}]
    assert liger["first_seen"] <= liger["last_hit"] <= liger["last_seen"]  # ISO 8601, UTC

    dead = by_id[DEAD]
    assert [d["decision"]["outcome"] for d in _decisions(ranks, DEAD)] == ["applied"] * 2
    assert (dead["state"], dead["flagged"], dead["ranks_applied"], dead["hits"]) == \
        ("dead", True, 2, 0)
    assert "a retirement or review candidate" in dead["note"]
    assert DEAD in usage["flagged"] and LIGER not in usage["flagged"]

    # Gated out on this release (which entries depends on the installed megatron-core): never
    # applied, so never called dead, and the note says it was the gate.
    gated = [e for e in usage["entries"]
             if {d["decision"]["outcome"] for d in _decisions(ranks, e["id"])
                 if d["decision"]} == {"skipped: gate"}]
    assert gated, "expected a DSA entry whose gate excludes the installed megatron-core"
    for entry in gated:
        assert (entry["state"], entry["flagged"]) == ("not applied", False), entry
        assert "gated out on 2 ranks (megatron-core " in entry["note"], entry["note"]
    # an entry whose module the job never imported: not applied, not flagged, said so
    never = by_id["mcore_strict_load_idle_rerun_shard"]
    assert (never["state"], never["flagged"]) == ("not applied", False)
    assert "its module was never imported on 2 ranks" in never["note"]
    # every flagged entry was applied on some rank and hit on none
    for entry_id in usage["flagged"]:
        seen = _decisions(ranks, entry_id)
        assert any(d["applied"] for d in seen) and not any(d["hits"] for d in seen), entry_id


def test_the_terminal_says_which_entries_are_dead(
        job: tuple[Path, dict[int, dict[str, Any]]]) -> None:
    reports, _ = job
    out = _cli("usage", str(reports), env=dict(os.environ), cwd=reports.parent)
    assert out.returncode == 17, out.stderr
    assert out.stdout.startswith("3 report(s): 1 job(s), 2 rank(s), 1 launcher process(es)")
    row = next(ln for ln in out.stdout.splitlines() if ln.startswith(DEAD + " "))
    assert "  dead  " in row and row.endswith("is the patched code path still taken?)"), row
    flagged = next(ln for ln in out.stdout.splitlines() if ln.startswith("DEAD OR MISAPPLIED"))
    assert DEAD in flagged and LIGER not in flagged

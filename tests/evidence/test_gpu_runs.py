"""The runs recorded on a GPU (``gpu-runs/``), read as evidence: records of past runs, not a
test that runs CUDA.

Every recorded cuda row names an entry of the registry and a machine its receipts describe;
every ``broken`` or ``error`` row is explained: either by a fix this test finds in today's code
(named below), or listed as open in docs/entries.md. The table in docs/entries.md says what the
records say.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

from patchlane.registry import load_registries
from patchlane.sweep.recorded import RecordedRun, recorded_runs

ROOT = Path(__file__).resolve().parents[2]
RUNS = recorded_runs(ROOT / "gpu-runs")
FIRST = "h100-2026-11-27"
AFTER = "h100-2026-11-27-gpu-check"


def _source(relative: str) -> str:
    return (ROOT / relative).read_text(encoding="utf-8")


def _capture_replays() -> bool:
    from patchlane.testing.capture import check_step
    from patchlane.testing.capture.check import CaptureCheck
    from patchlane.testing.capture.cuda import RealCapture

    exit_source = inspect.getsource(CaptureCheck.__exit__)
    return (hasattr(RealCapture, "replay") and "self._capture.replay()" in exit_source
            and callable(check_step)
            and all("check_step(" in _source(f"reproducers/{name}.py") for name in (
                "mcore_dsa_indexer_loss_graph_safe", "mcore_dsa_naive_loss_bwd_capture_gate")))


def _seeds_cuda_rng() -> bool:
    return "model_parallel_cuda_manual_seed" in _source(
        "reproducers/mcore_strict_load_idle_rerun_shard.py")


def _warm_memory() -> bool:
    from patchlane.testing.memprofile import peak_bytes

    return inspect.signature(peak_bytes).parameters["warmup"].default == 1


def _atomics_tolerance() -> bool:
    source = _source("reproducers/mcore_dsa_indexer_loss_graph_safe.py")
    return 'mismatches(rtol=0.0 if ctx.lane == "cpu" else 1e-5)' in source


FIXES: dict[str, Callable[[], bool]] = {
    "the capture check replays what it captured before anything is compared": _capture_replays,
    "the strict-load reproducer seeds megatron's CUDA RNG tracker on the GPU": _seeds_cuda_rng,
    "memory is measured on a warm call (cuBLAS's workspace stays out)": _warm_memory,
    "key/value gradients compared to fp32 rounding on CUDA (atomics)": _atomics_tolerance,
}

EXPLAINED: dict[tuple[str, str, str], str] = {
    # (folder, run directory, entry id) -> the fix; world size 1 in every case
    (FIRST, "mc0192-lk081", "mcore_dsa_indexer_loss_graph_safe"):
        "the capture check replays what it captured before anything is compared",
    (FIRST, "mc0161-lk082", "mcore_dsa_indexer_loss_graph_safe"):
        "the capture check replays what it captured before anything is compared",
    (FIRST, "mc0192-lk081", "mcore_dsa_naive_loss_bwd_capture_gate"):
        "the capture check replays what it captured before anything is compared",
    (FIRST, "mc0192-lk081", "mcore_strict_load_idle_rerun_shard"):
        "the strict-load reproducer seeds megatron's CUDA RNG tracker on the GPU",
    (FIRST, "mc0161-lk082", "mcore_dsa_streamed_index_scores"):
        "memory is measured on a warm call (cuBLAS's workspace stays out)",
    (AFTER, "first-pass/gpu-megatron-core-0.19.2-liger-kernel-0.8.1-py3.12",
     "mcore_dsa_indexer_loss_graph_safe"):
        "key/value gradients compared to fp32 rounding on CUDA (atomics)",
}


def _open_in_docs() -> str:
    text = _source("docs/entries.md")
    return text[text.index("## On a GPU"):text.index("## Release matrix")]


def test_both_recorded_runs_are_read() -> None:
    folders = {run.folder for run in RUNS}
    assert folders == {FIRST, AFTER}, folders
    assert sum(len(run.rows) for run in RUNS) >= 50


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.folder}/{r.run}")
def test_rows_name_registry_entries_and_the_machine(run: RecordedRun) -> None:
    registry = load_registries([ROOT / "registry.yaml"])
    for row in run.rows:
        registry.get(row.entry_id)  # an entry since renamed or deleted raises, naming it
        assert row.lane == "cuda"
    assert (run.gpu, run.cuda, run.driver) == ("NVIDIA H100 80GB HBM3", "13.0", "580.159.04")
    assert run.torch.startswith("2.11.0")


@pytest.mark.parametrize("run", RUNS, ids=lambda r: f"{r.folder}/{r.run}")
def test_every_broken_or_error_row_is_explained(run: RecordedRun) -> None:
    docs = _open_in_docs()
    for row in run.rows:
        if row.verdict.value not in ("broken", "error"):
            continue
        key = (run.folder, run.run, row.entry_id)
        fix = EXPLAINED.get(key)
        if fix is None:
            assert f"`{row.entry_id}`" in docs.split("Open:")[1], (
                f"{key}: {row.verdict.value} ({row.reason[:120]}) is neither explained by a "
                "fix here nor listed as open in docs/entries.md")
            continue
        assert FIXES[fix](), f"{key}: the fix ({fix}) is no longer in the code"


def test_the_explanations_are_all_used() -> None:
    rows = {(run.folder, run.run, row.entry_id) for run in RUNS for row in run.rows
            if row.verdict.value in ("broken", "error")}
    assert set(EXPLAINED) == rows


def test_the_latest_runs_have_no_broken_or_error_row() -> None:
    latest = [run for run in RUNS if run.folder == AFTER and run.run.startswith("run-dirs/")]
    assert len(latest) == 2
    for run in latest:
        bad = [(row.entry_id, row.verdict.value) for row in run.rows
               if row.verdict.value in ("broken", "error")]
        assert not bad, (run.run, bad)


def test_the_entries_doc_says_what_the_records_say() -> None:
    table = [line for line in _open_in_docs().splitlines() if line.startswith("| `")]
    assert len(table) >= 14
    for line in table:
        entry, release, _cpu, first, after = (c.strip() for c in line.strip("|").split("|"))
        version = release.split()[1]
        for folder, want in ((FIRST, first), (AFTER, after)):
            got = {row.verdict.value for run in RUNS if run.folder == folder
                   and (folder == FIRST or run.run.startswith("run-dirs/"))
                   for row in run.rows if row.entry_id == entry.strip("`")
                   and row.world_size == 1 and row.installed == version}
            assert got == {want}, (line, folder, got)


def test_the_page_shows_them_beside_a_runs_own_rows() -> None:
    from patchlane.runs.index import RunIndex
    from patchlane.sweep.reports.page import page

    run_dir = ROOT / "gpu-runs" / FIRST / "mc0192-lk081"  # any index with these entries
    index = RunIndex.load(run_dir)
    html = page(index, [], RUNS)
    section = html[html.index('<section id="gpu">'):]
    section = section[:section.index("</section>")]
    assert "NVIDIA H100 80GB HBM3, driver 580.159.04, torch 2.11.0+cu130 (CUDA 13.0)" in section
    assert section.count("<th title=") == len(RUNS)
    assert "mcore_strict_load_idle_rerun_shard" in section and ">error<" in section
    assert '<section id="gpu">' not in page(index, [])

"""Runs recorded on a GPU and kept as evidence (``gpu-runs/`` beside the default registry in a
checkout): their cuda rows, and the machine each ran on as its receipts say it.

CI has no GPU, so what a GPU showed lives in the repository as past runs, not as a lane the
suite re-runs. The sweep's page shows these rows beside its own, the test suite checks them
against the registry, and ``docs/entries.md`` lists them. A folder under ``gpu-runs/`` is one
machine and date; every ``index.json`` at most three folders below it is one run directory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..runs.index import IndexRow, RunIndex

__all__ = ["RecordedRun", "recorded_runs"]


@dataclass(frozen=True)
class RecordedRun:
    """One recorded run directory: where, on what machine, and its cuda rows."""

    folder: str
    """The machine-and-date folder (``h100-2026-11-27``)."""
    run: str
    """The run directory, relative to ``folder``."""
    gpu: str
    cuda: str
    driver: str
    torch: str
    created: str
    rows: tuple[IndexRow, ...]

    @property
    def machine(self) -> str:
        return f"{self.gpu}, driver {self.driver}, torch {self.torch} (CUDA {self.cuda})"


def _machine(run_dir: Path) -> tuple[str, str, str, str]:
    """(GPU, CUDA, driver, torch) from the first receipt that names a GPU."""
    for receipt in sorted((run_dir / "receipts").glob("*.json")):
        try:
            data = json.loads(receipt.read_text(encoding="utf-8"))
            torch = data["provenance"]["runtime"]["torch"]
            gpus = torch.get("gpus") or []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if gpus:
            return (str(gpus[0].get("name")), str(torch.get("cuda")), str(torch.get("driver")),
                    str(torch.get("version")))
    return ("unknown", "unknown", "unknown", "unknown")


def recorded_runs(root: Path) -> list[RecordedRun]:
    """Every run directory under ``root`` (a ``gpu-runs/`` folder) with its cuda rows, in
    folder and path order; an unreadable one is left out (the test suite names it)."""
    runs: list[RecordedRun] = []
    if not root.is_dir():
        return runs
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        for index in sorted(folder.glob("*/index.json")) + sorted(folder.glob("*/*/index.json")):
            run_dir = index.parent
            try:
                loaded = RunIndex.load(run_dir)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            cuda_rows = tuple(row for row in loaded.rows if row.lane == "cuda")
            if not cuda_rows:
                continue
            gpu, cuda, driver, torch = _machine(run_dir)
            runs.append(RecordedRun(folder.name, str(run_dir.relative_to(folder)), gpu, cuda,
                                    driver, torch, loaded.created, cuda_rows))
    return runs

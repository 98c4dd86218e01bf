"""Sweep wall time vs the slowest single case, measured in the same run (goal <= 1.3x).

A) scheduler: 12 cases (6 fake entries x both modes) whose reproducers sleep 3 s, --jobs 12:
   what the sweep itself adds (planning, subprocess start, receipts, manifest writes).
B) the real default registry on the CPU lane (megatron-core reproducers, CPU-bound), with the
   machine's cores: how far parallel cases are from the slowest one on this hardware.

Prints a table and ends with `RESULT {json}`. Never asserts a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _sleep_registry import write_sleep_registry


def fake_registry(root: Path, n: int, seconds: float) -> tuple[Path, str]:
    cases = [(f"bench_sleep_{i}", seconds) for i in range(n)]
    return write_sleep_registry(root, "plbench_sweep", cases), str(root)


def sweep(run_dir: Path, jobs: int, env: dict[str, str]) -> tuple[float, float, int, float]:
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--run-dir", str(run_dir),
           "--jobs", str(jobs), "--quiet", "--json"]
    started = time.monotonic()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if out.returncode != 0 and not 32 <= out.returncode < 40:  # 32 | bits: verdicts, not faults
        raise SystemExit(f"sweep failed ({out.returncode}):\n{out.stderr[-2000:]}")
    seconds = [json.loads(p.read_text())["seconds"] for p in (run_dir / "receipts").glob("*.json")]
    return wall, max(seconds, default=0.0), len(seconds), sum(seconds)


def main() -> int:
    results: dict[str, object] = {"bench": "sweep", "cpus": os.cpu_count()}
    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    base["PYTHONWARNINGS"] = "ignore"
    with tempfile.TemporaryDirectory() as tmp:
        registry, pythonpath = fake_registry(Path(tmp) / "fake", 6, 3.0)
        env = dict(base, PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_REGISTRY=str(registry),
                   PYTHONPATH=pythonpath)
        wall, slowest, cases, total = sweep(Path(tmp) / "run-a", 12, env)
        results.update(a_cases=cases, a_wall_s=round(wall, 2), a_slowest_s=round(slowest, 2),
                       a_ratio=round(wall / slowest, 3))
        print(f"A) scheduler: {cases} sleeping cases, --jobs 12: wall {wall:.2f}s, slowest case "
              f"{slowest:.2f}s, ratio {wall / slowest:.2f}x (goal <= 1.3x)")
        jobs = os.cpu_count() or 1
        wall, slowest, cases, total = sweep(Path(tmp) / "run-b", jobs, base)
        # No order beats max(slowest, total / jobs); on few cores the second term is the bound.
        bound = max(slowest, total / jobs)
        results.update(b_cases=cases, b_jobs=jobs, b_wall_s=round(wall, 2),
                       b_slowest_s=round(slowest, 2), b_ratio=round(wall / slowest, 3),
                       b_total_s=round(total, 2), b_ratio_bound=round(wall / bound, 3))
        print(f"B) real registry: {cases} CPU-bound cases, --jobs {jobs}: wall {wall:.2f}s, "
              f"slowest case {slowest:.2f}s, ratio {wall / slowest:.2f}x; total / jobs "
              f"{total / jobs:.2f}s, wall / max(slowest, total / jobs) {wall / bound:.2f}x "
              "(goal <= 1.3x)")
    print("RESULT " + json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What `patchlane run` adds to every process it reaches: interpreter start-up (`python -c
pass`) with the bootstrap sitecustomize on PYTHONPATH against without, side by side in one run
(interleaved rounds, medians). Every torchrun rank, its agent and each spawned worker pays this
once. Goal (read by a person): under 100 ms absolute, the same order as `import patchlane`
itself (bench_import.py). Prints figures; asserts nothing.

    python benchmarks/bench_launch.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from patchlane.launch.command import launch_env  # noqa: E402


def _once(env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    base["PYTHONPATH"] = str(ROOT)  # patchlane from this checkout in both variants
    variants = {"plain": base, "patchlane run": launch_env(base)}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.rounds + 1):
        for name in (list(variants) if round_ % 2 else list(reversed(variants))):
            t = _once(variants[name])
            if round_:  # the first round warms the OS caches
                times[name].append(t)
    med = {name: statistics.median(v) for name, v in times.items()}
    added = med["patchlane run"] - med["plain"]
    print(f"python -c pass: plain {med['plain'] * 1e3:.1f} ms, under patchlane run "
          f"{med['patchlane run'] * 1e3:.1f} ms: +{added * 1e3:.1f} ms per process "
          f"({med['patchlane run'] / med['plain']:.2f}x; goal: under 100 ms added)")
    print("RESULT " + json.dumps({"bench": "launch", "plain_ms": round(med["plain"] * 1e3, 1),
                                  "run_ms": round(med["patchlane run"] * 1e3, 1),
                                  "added_ms": round(added * 1e3, 1), "rounds": args.rounds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

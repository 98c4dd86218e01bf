"""What lending one warm-rank server to a matrix's child sweeps saves: the same release-matrix
sets swept with warm ranks, each set in its child interpreter as ``patchlane matrix`` runs them,
once with this process lending its server to every child (:func:`patchlane.sweep.rank_start.lend`,
what the matrix does) and once with each child starting its own (the matrix before it lent),
side by side in one run, in rounds whose order alternates. Prints the wall and CPU seconds of
each way (the CPU of every process it started: the child sweeps, their servers and ranks) and
their ratios, then one ``RESULT {json}`` line. Asserts nothing; a set that does not get its
expected verdicts either way stops it (exit 1: the benchmark could not run).

    python benchmarks/bench_matrix_lend.py [--set NAME ...] [--rounds 2]

Default sets: the first three megatron-core sets of matrix.yaml this interpreter runs (the
3.12 venv's 0.16.1-0.19.2; their releases installed in .cache/releases, as the tests leave
them).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", dest="sets", help="a matrix.yaml set's name")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    # what a warm rank leaves behind comes back here and is counted (bench_rank_start's way)
    from bench_rank_start import _adopt_orphans, _children_cpu

    _adopt_orphans()
    from patchlane.releases import matrix
    from patchlane.sweep import rank_start

    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    sets = [s for s in matrix.load_matrix(ROOT / "matrix.yaml")
            if (not s.python or here in s.python) and not s.deps and "cpu" in s.lanes]
    if args.sets:
        sets = [s for s in sets if s.name in args.sets]
    else:
        sets = [s for s in sets if all(i.startswith("megatron-core==") for i in s.install)][:3]
    if not sets:
        print("no matrix set to run on this interpreter", file=sys.stderr)
        return 2
    print(f"sets: {', '.join(s.name for s in sets)} (Python {here}, warm ranks, 2 jobs)")
    cache = ROOT / ".cache" / "releases"
    totals: dict[str, list[tuple[float, float]]] = {"lent": [], "own": []}
    for round_ in range(args.rounds):
        for way in (("lent", "own") if round_ % 2 == 0 else ("own", "lent")):
            rank_start.shutdown()
            lending = (contextlib.nullcontext() if way == "lent"
                       else mock.patch.object(matrix, "_warm_cases", return_value=False))
            cpu0, wall0 = _children_cpu(), time.monotonic()
            with lending, tempfile.TemporaryDirectory() as runs:
                for matrix_set in sets:
                    result = matrix.run_set(matrix_set, cache=cache, runs_root=Path(runs),
                                            jobs=2, rank_start="warm")
                    if not result.ok:
                        print(f"{matrix_set.name} ({way}): {result.mismatches}", file=sys.stderr)
                        return 1
                rank_start.shutdown()  # the lent server's CPU is counted with its way
            wall, cpu = time.monotonic() - wall0, _children_cpu() - cpu0
            totals[way].append((wall, cpu))
            print(f"round {round_ + 1} {way:4}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s")
    # each way's mean (wall, CPU); the ratios of means are those of the sums (same rounds)
    mean = {way: tuple(sum(r[i] for r in runs_of) / len(runs_of) for i in (0, 1))
            for way, runs_of in totals.items()}
    for way, (wall, cpu) in mean.items():
        print(f"mean {way:4}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s")
    wall_ratio, cpu_ratio = (mean["lent"][i] / mean["own"][i] for i in (0, 1))
    print(f"lent / own: wall {wall_ratio:.2f}x, CPU {cpu_ratio:.2f}x")
    print("RESULT " + json.dumps({
        "sets": [s.name for s in sets], "rounds": args.rounds,
        "wall_ratio": round(wall_ratio, 3), "cpu_ratio": round(cpu_ratio, 3),
        **{f"{way}_{what}_s": round(mean[way][i], 1)
           for way in mean for i, what in enumerate(("wall", "cpu"))}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

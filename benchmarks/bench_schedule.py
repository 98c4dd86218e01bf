"""Longest-first vs registry order: sweep wall time against max(slowest case, total / jobs).

No schedule finishes a sweep before its slowest case, nor before total case time / jobs; the
larger of the two is the lower bound, and the goal is a wall time <= 1.3x that bound. The same
cases are swept twice in one run, once per order (`PATCHLANE_SCHEDULE=registry` /
`longest-first`), through the real command line (`patchlane sweep --runs-root ROOT`): each
longest-first sweep reads its estimates from the earlier sweeps of this benchmark in ROOT.

A) fake skewed cases: entries whose reproducers sleep (mostly 1 s, a few long ones, the long
   ones last in the registry, as newly added heavy entries are), --jobs 4. Rounds alternate
   which order goes first.
B) the real default registry on the CPU lane (megatron-core reproducers, CPU-bound), --jobs =
   CPU count; `--only ID` (repeatable) limits it to a subset, `--skip-real` leaves it out.
B') a simulation on B's own case durations (plan order, from the registry-order sweep's
   manifest): a FIFO pool of 2, 4 and 8 jobs, registry order vs longest first, as on a machine
   with that many free cores (durations taken as fixed, which CPU-bound cases on fewer cores
   are not). Arithmetic only; it says what the order would do where the cores are not the
   bound.
C) what reading the history costs the planner: `plan_schedule` for 20 cases over a runs root
   of 500 earlier runs (20 receipts each), when the newest run has every case of this release
   (the nightly case), and when none has (a new release: 32 runs read, every receipt parsed).

Per sweep: wall (the command as a whole), slowest and total case time from the receipts, and
the ratios wall / slowest and wall / max(slowest, total / jobs). Ends with `RESULT {json}`.
Never asserts a time.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _sleep_registry import write_sleep_registry

# Registry order: seven 1 s entries, then 2, 3 and 8 s (each entry runs twice: both modes).
SKEWED = [1.0] * 7 + [2.0, 3.0, 8.0]
ORDERS = ("registry", "longest-first")


def fake_registry(root: Path, sleeps: list[float]) -> Path:
    cases = [(f"bench_sched_{i:02d}_{seconds:g}s".replace(".", "_"), seconds)
             for i, seconds in enumerate(sleeps)]
    return write_sleep_registry(root, "plbench_sched", cases)


def sweep(root: Path, name: str, order: str, jobs: int, env: dict[str, str],
          extra: list[str]) -> dict[str, Any]:
    run_dir = root / name
    cmd = [sys.executable, "-m", "patchlane.cli.main", "sweep", "--runs-root", str(root),
           "--run-dir", str(run_dir), "--jobs", str(jobs), "--lane", "cpu", "--quiet",
           "--json", *extra]
    started = time.monotonic()
    out = subprocess.run(cmd, env=dict(env, PATCHLANE_SCHEDULE=order), capture_output=True,
                         text=True, check=False)
    wall = time.monotonic() - started
    if out.returncode != 0 and not 32 <= out.returncode < 40:
        raise SystemExit(f"sweep {name} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    seconds = [json.loads(p.read_text())["seconds"] for p in (run_dir / "receipts").glob("*.json")]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    schedule = manifest.get("schedule") or {}
    slowest, total = max(seconds, default=0.0), sum(seconds)
    bound = max(slowest, total / jobs)
    known = [i for i in schedule.get("order", []) if i.get("estimate_s") is not None]
    return {"order": order, "wall_s": round(wall, 2), "cases": len(seconds),
            "slowest_s": round(slowest, 2), "total_s": round(total, 2),
            "bound_s": round(bound, 2),
            "vs_slowest": round(wall / slowest, 3) if slowest else None,
            "vs_bound": round(wall / bound, 3) if bound else None,
            "estimated": len(known), "source_runs": schedule.get("source_runs", []),
            "first": [i["case"].split("--")[0] for i in schedule.get("order", [])[:3]]}


def makespan(durations: list[float], jobs: int) -> float:
    """When the last case of a FIFO pool of ``jobs`` workers ends, cases started in order."""
    free = [0.0] * jobs
    for took in durations:
        start = heapq.heappop(free)
        heapq.heappush(free, start + took)
    return max(free)


def simulate(run_dir: Path) -> dict[str, Any]:
    cases = json.loads((run_dir / "manifest.json").read_text())["cases"]
    plan = [float(c["seconds"]) for c in cases.values() if "seconds" in c]
    longest = sorted(plan, reverse=True)  # stable: ties keep plan order, as the planner does
    out: dict[str, Any] = {"cases": len(plan), "total_s": round(sum(plan), 2)}
    for jobs in (2, 4, 8):
        bound = max(max(plan, default=0.0), sum(plan) / jobs)
        reg, lpt = makespan(plan, jobs), makespan(longest, jobs)
        out[f"jobs{jobs}"] = {"bound_s": round(bound, 2), "registry_vs_bound":
                              round(reg / bound, 3), "longest_first_vs_bound":
                              round(lpt / bound, 3)}
        print(f"  simulated --jobs {jobs}: bound {bound:6.2f}s  registry {reg / bound:.2f}x  "
              f"longest-first {lpt / bound:.2f}x", flush=True)
    return out


def compare(label: str, root: Path, rounds: int, jobs: int, env: dict[str, str],
            extra: list[str]) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {o: [] for o in ORDERS}
    for r in range(rounds):
        # Alternate which order goes first, so neither always runs on a warmer machine. The
        # very first sweep is registry order: longest-first has nothing to read before it.
        for order in ORDERS if r % 2 == 0 else tuple(reversed(ORDERS)):
            result = sweep(root, f"{label}-{r}-{order}", order, jobs, env, extra)
            runs[order].append(result)
            print(f"  {label} round {r} {order:>13}: wall {result['wall_s']:7.2f}s  "
                  f"slowest {result['slowest_s']:6.2f}s  total/jobs "
                  f"{result['total_s'] / jobs:7.2f}s  -> {result['vs_slowest']:.2f}x slowest, "
                  f"{result['vs_bound']:.2f}x bound  (estimates for {result['estimated']}/"
                  f"{result['cases']} cases; first: {', '.join(result['first'])})", flush=True)
    summary: dict[str, Any] = {"jobs": jobs, "rounds": rounds}
    for order in ORDERS:
        key = order.replace("-", "_")
        summary[f"{key}_wall_s"] = round(statistics.median(x["wall_s"] for x in runs[order]), 2)
        summary[f"{key}_vs_slowest"] = round(statistics.median(
            x["vs_slowest"] for x in runs[order]), 3)
        summary[f"{key}_vs_bound"] = round(statistics.median(
            x["vs_bound"] for x in runs[order]), 3)
    last = runs["longest-first"][-1]
    summary.update(cases=last["cases"], slowest_s=last["slowest_s"], total_s=last["total_s"],
                   bound_s=last["bound_s"])
    print(f"{label}: median of {rounds}: registry {summary['registry_vs_bound']:.2f}x bound "
          f"({summary['registry_vs_slowest']:.2f}x slowest), longest-first "
          f"{summary['longest_first_vs_bound']:.2f}x bound "
          f"({summary['longest_first_vs_slowest']:.2f}x slowest); goal <= 1.3x bound",
          flush=True)
    return summary


def history_cost(root: Path, runs: int = 500, cases: int = 20) -> dict[str, Any]:
    from patchlane.sweep.schedule import plan_schedule

    release = {"megatron-core": "0.16.1", "torch": "2.13.0+cpu"}
    ids = [f"entry_{i:02d}--cpu--ws1--{m}" for i in range(cases // 2) for m in ("without", "with")]
    for r in range(runs):
        run = root / f"run{r:04d}"
        (run / "receipts").mkdir(parents=True)
        (run / "manifest.json").write_text("{}")
        for i, case in enumerate(ids):
            # about the size of a real receipt (3-5 KiB)
            body = {"case_id": case, "seconds": 1.0 + i, "outcome": "fail", "stage": None,
                    "comparison_key": {"lane": "cpu", "distributions": release},
                    "padding": "x" * 3500}
            (run / "receipts" / f"{case}.json").write_text(json.dumps(body))
        os.utime(run / "manifest.json", (1_800_000_000 + r, 1_800_000_000 + r))
    out: dict[str, Any] = {"runs": runs, "cases": cases}
    for label, want in (("same_release", release), ("new_release", dict(release, torch="9"))):
        times = []
        for _ in range(5):
            started = time.perf_counter()
            block = plan_schedule([(c, want) for c in ids], history=root)
            times.append(time.perf_counter() - started)
        out[f"{label}_ms"] = round(statistics.median(times) * 1000, 2)
        out[f"{label}_runs_read"] = len(block["source_runs"])
    print(f"C) history read: {runs} runs x {cases} receipts under the root; planning {cases} "
          f"cases: {out['same_release_ms']:.1f} ms when the newest run matches "
          f"({out['same_release_runs_read']} run read), {out['new_release_ms']:.1f} ms for a "
          f"new release ({out['new_release_runs_read']} runs read)", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs-fake", type=int, default=4)
    parser.add_argument("--rounds-fake", type=int, default=2)
    parser.add_argument("--jobs-real", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds-real", type=int, default=1)
    parser.add_argument("--only", action="append", default=[], metavar="ID",
                        help="real part: only these entries (repeatable)")
    parser.add_argument("--skip-real", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {"bench": "schedule", "cpus": os.cpu_count(),
                               "python": ".".join(map(str, sys.version_info[:2]))}
    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    base["PYTHONWARNINGS"] = "ignore"
    here = str(Path(__file__).resolve().parents[1])  # this checkout's patchlane, in every child
    with tempfile.TemporaryDirectory() as tmp:
        registry = fake_registry(Path(tmp) / "fake", SKEWED)
        env = dict(base, PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_REGISTRY=str(registry),
                   PYTHONPATH=os.pathsep.join([str(Path(tmp) / "fake"), here]))
        print(f"A) fake skewed cases: sleeps {SKEWED} s x 2 modes, --jobs {args.jobs_fake}",
              flush=True)
        results["fake"] = compare("fake", Path(tmp) / "runs-fake", args.rounds_fake,
                                  args.jobs_fake, env, [])
        if not args.skip_real:
            extra = [x for entry_id in args.only for x in ("--only", entry_id)]
            subset = f" (only {', '.join(args.only)})" if args.only else ""
            print(f"B) real registry, CPU lane{subset}, --jobs {args.jobs_real}", flush=True)
            results["real"] = compare("real", Path(tmp) / "runs-real", args.rounds_real,
                                      args.jobs_real, dict(base, PYTHONPATH=here), extra)
            results["real"]["only"] = args.only or None
            print("B') simulation on B's durations (registry-order sweep of round 0)")
            results["real_simulated"] = simulate(Path(tmp) / "runs-real" / "real-0-registry")
        results["history"] = history_cost(Path(tmp) / "runs-history")
    print("RESULT " + json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

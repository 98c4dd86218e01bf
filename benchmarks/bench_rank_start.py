"""What a sweep rank's start costs: each case run as the sweep runs it, with fresh ranks (each a
new ``python -m patchlane.sweep.runner``) and with warm ones (``--rank-start warm``: forked from
the server that imported torch once, :mod:`patchlane.sweep.rank_start`), side by side in one
run, in rounds whose order alternates. Prints, per case, the wall seconds and the outcome both
ways, the ranks' peak RSS, and for each start the CPU seconds of everything it ran (the ranks,
what they spawned, the shims and, for warm, the server with its one preload), per case: this
process adopts what a rank leaves behind, so nothing it started goes uncounted. Asserts nothing.

    python benchmarks/bench_rank_start.py [--entry ID --mode without ...] [--rounds 2]

Default cases: four megatron-core cases of the default registry (needs torch and megatron-core
installed, and gates that admit it: the 3.12 venv's 0.19.2).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_CASES = (("mcore_tokenizer_alias_recursion", "without"),
                 ("mcore_dsa_indexer_loss_graph_safe", "without"),
                 ("mcore_dsa_indexer_loss_graph_safe", "with"),
                 ("mcore_strict_load_idle_rerun_shard", "with"))


def _children_cpu() -> float:
    _reap_orphans()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _adopt_orphans() -> None:
    """Make this process the subreaper of what it starts (Linux): a process a rank started and
    left (a warm rank ends with ``os._exit``, and what it spawned outlives it until the case's
    end kills it) comes back here and is counted once reaped, not lost to init."""
    import ctypes

    pr_set_child_subreaper = 36
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _reap_orphans() -> None:
    """Reap every adopted process that has ended, so RUSAGE_CHILDREN holds its CPU."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", action="append", default=[])
    parser.add_argument("--mode", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    _adopt_orphans()
    from patchlane import startup
    from patchlane.sweep import rank_start
    from patchlane.sweep.rank_start import RankStart
    from patchlane.sweep.reproduce import Mode, read_spec, run_case

    registry = startup.current().registry
    known = {e.id for e in registry.entries}
    cases = [c for c in (list(zip(args.entry, args.mode or ["without"] * len(args.entry),
                                  strict=False)) or list(DEFAULT_CASES)) if c[0] in known]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p))
    walls: dict[tuple[str, str], dict[str, list[float]]] = {}
    outcomes: dict[tuple[str, str], dict[str, set[str]]] = {}
    rss: dict[tuple[str, str], dict[str, list[float]]] = {}
    cpu = {"fresh": 0.0, "warm": 0.0}
    preloaded: list[str] = []
    for round_ in range(args.rounds):
        order = ["fresh", "warm"] if round_ % 2 == 0 else ["warm", "fresh"]
        for how in order:
            before = _children_cpu()
            for entry_id, mode in cases:
                entry = registry.get(entry_id)
                size = max(read_spec(entry).world_sizes)
                started = time.perf_counter()
                result = run_case(entry, Mode(mode), world_size=size, env=env,
                                  start=RankStart(how))
                walls.setdefault((entry_id, mode), {}).setdefault(how, []).append(
                    time.perf_counter() - started)
                outcomes.setdefault((entry_id, mode), {}).setdefault(how, set()).add(
                    f"{result.outcome.value}/{result.rank_start.get('rank_start')}")
                rss.setdefault((entry_id, mode), {}).setdefault(how, []).extend(
                    float(r.get("peak_memory", {}).get("rss_mib") or 0) for r in result.ranks)
                preloaded = result.rank_start.get("preloaded", preloaded)
            rank_start.shutdown()  # a server's CPU is counted once it is reaped: each round
            cpu[how] += _children_cpu() - before
    print(f"{'case':58} {'fresh wall':>10} {'warm wall':>9} {'ratio':>6}  outcome/start "
          "(fresh | warm)  rank RSS MiB (fresh / warm)")
    summary = []
    for (entry_id, mode), by in walls.items():
        fresh, warm = statistics.median(by["fresh"]), statistics.median(by["warm"])
        seen = outcomes[(entry_id, mode)]
        agree = {o.split("/")[0] for o in seen["fresh"]} == {o.split("/")[0] for o in seen["warm"]}
        mib = rss[(entry_id, mode)]
        print(f"{entry_id + ' (' + mode + ')':58} {fresh:10.2f} {warm:9.2f} {fresh / warm:5.1f}x"
              f"  {','.join(sorted(seen['fresh']))} | {','.join(sorted(seen['warm']))}"
              f"{'' if agree else '  DIFFER'}  {statistics.median(mib['fresh']):.0f} / "
              f"{statistics.median(mib['warm']):.0f}")
        summary.append({"case": f"{entry_id} ({mode})", "fresh_wall_s": round(fresh, 2),
                        "warm_wall_s": round(warm, 2), "outcomes_agree": agree})
    per_case = {how: cpu[how] / (args.rounds * len(cases)) for how in cpu}
    print(f"CPU seconds per case, everything each start ran (warm: the server's preload "
          f"included, once a round): fresh {per_case['fresh']:.2f}, warm {per_case['warm']:.2f}, "
          f"ratio {per_case['fresh'] / per_case['warm']:.1f}x; preloaded: {preloaded}")
    print("RESULT " + json.dumps({"bench": "rank_start", "rounds": args.rounds,
                                  "cpu_per_case_s": {k: round(v, 2) for k, v in per_case.items()},
                                  "cases": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

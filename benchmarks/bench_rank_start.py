"""What a sweep rank's start costs, and what a warm start would save: each case's rank run as
the sweep runs it (a fresh ``python -m patchlane.sweep.runner``) against the same rank forked
from a server that has imported torch and the torch modules megatron-core imports (but neither
megatron nor patchlane), side by side in one run, interleaved. Prints each rank's CPU seconds
(its own, from ``wait4``), wall seconds, outcome and peak RSS both ways, and whether the two
outcomes agree. Asserts nothing: a forked rank is not what the sweep runs, and this measures
whether it could be.

    python benchmarks/bench_rank_start.py [--entry ID --mode without ...] [--rounds 2]

Default cases: the entries of the default registry whose gate admits the installed release, one
case each, without the overlay (upstream as shipped) and with it. Needs torch; megatron-core
for the megatron entries.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_CASES = (("mcore_tokenizer_alias_recursion", "without"),
                 ("mcore_dsa_indexer_loss_graph_safe", "without"),
                 ("mcore_dsa_indexer_loss_graph_safe", "with"),
                 ("mcore_strict_load_idle_rerun_shard", "with"))

# The server: imports what every megatron rank imports first (torch, and the torch modules
# megatron.core pulls in: -X importtime puts them at most of megatron.core's import), then forks
# one rank per request line and answers with the rank's own usage once it exited. One rank at a
# time: the figures are per rank, not a schedule. The child looks as the sweep's rank does: its
# own session, the case's environment, `-m patchlane.sweep.runner` as __main__ (so that a
# spawned multiprocessing child, as megatron's async checkpoint save starts, finds its main).
SERVER = r"""
import json, os, runpy, sys, time
import torch, torch._dynamo, torch._inductor.compile_fx, torch.distributed.tensor
import torch.distributed.checkpoint
assert "patchlane" not in sys.modules and "megatron" not in sys.modules
print(json.dumps({"ready": True, "threads": len(os.listdir("/proc/self/task"))}), flush=True)
for line in sys.stdin:
    request = json.loads(line)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setsid()
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = list(request["argv"])  # argv[0] becomes the file, as with -m
            runpy.run_module("patchlane.sweep.runner", run_name="__main__", alter_sys=True)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            code = 1
        os._exit(code)
    os.close(log)
    _, status, usage = os.wait4(pid, 0)
    print(json.dumps({"cpu": usage.ru_utime + usage.ru_stime,
                      "wall": time.perf_counter() - started,
                      "status": os.waitstatus_to_exitcode(status)}), flush=True)
"""


def _case_env(entry_id: str, mode: str, base: dict[str, str]) -> dict[str, str]:
    from patchlane import startup
    from patchlane.sweep.reproduce import Mode, case_env

    entry = startup.current().registry.get(entry_id)
    env = case_env(entry, Mode(mode), base)
    env.update(MASTER_ADDR="127.0.0.1", PYTHONWARNINGS="ignore")
    return env


def _rank_record(workdir: Path) -> dict[str, object]:
    data = json.loads((workdir / "rank0.json").read_text())
    return {"outcome": data.get("outcome"), "rss_mib": data.get("peak_memory", {}).get("rss_mib")}


def _fresh(env: dict[str, str], argv: list[str], log: Path) -> dict[str, float]:
    started = time.perf_counter()
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", *argv], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    return {"cpu": usage.ru_utime + usage.ru_stime, "wall": time.perf_counter() - started,
            "status": proc.returncode}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entry", action="append", default=[])
    parser.add_argument("--mode", action="append", default=[])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    cases = list(zip(args.entry, args.mode or ["without"] * len(args.entry), strict=False)) \
        or list(DEFAULT_CASES)
    from patchlane import startup

    known = {e.id for e in startup.current().registry.entries}
    cases = [c for c in cases if c[0] in known]
    base = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    # patchlane from this checkout both ways; each rank starts in the same folder
    base.update(PYTHONWARNINGS="ignore",
                PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), base.get("PYTHONPATH")) if p))
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-c", SERVER], env=base, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    assert server.stdin is not None and server.stdout is not None
    ready = json.loads(server.stdout.readline())
    preload = time.perf_counter() - t0
    results: dict[str, dict[str, list[dict[str, object]]]] = {}
    port = 29800
    with tempfile.TemporaryDirectory(prefix="bench-rank-start-") as scratch:
        for round_ in range(args.rounds):
            for entry_id, mode in cases:
                name = f"{entry_id} ({mode})"
                order = ["fresh", "warm"] if round_ % 2 == 0 else ["warm", "fresh"]
                for how in order:
                    port += 1
                    workdir = Path(scratch, f"{round_}-{entry_id}-{mode}-{how}")
                    workdir.mkdir()
                    env = {**_case_env(entry_id, mode, base), "MASTER_PORT": str(port)}
                    rank = ["patchlane.sweep.runner", "--entry", entry_id, "--mode", mode,
                            "--workdir", str(workdir)]
                    if how == "fresh":
                        usage: dict[str, object] = dict(_fresh(env, rank, workdir / "log"))
                    else:
                        server.stdin.write(json.dumps({"env": env, "argv": rank,
                                                       "log": str(workdir / "log")}) + "\n")
                        server.stdin.flush()
                        usage = json.loads(server.stdout.readline())
                    usage.update(_rank_record(workdir))
                    results.setdefault(name, {}).setdefault(how, []).append(usage)
    server.stdin.close()
    server.wait()
    print(f"server: torch and megatron's torch modules imported in {preload:.1f} s; "
          f"{ready['threads']} OS thread(s) in it when it forks")
    print(f"{'case':58} {'fresh cpu':>9} {'warm cpu':>9} {'ratio':>6} {'fresh wall':>10} "
          f"{'warm wall':>9}  outcomes (fresh/warm)  rss MiB (fresh/warm)")
    summary = []
    for name, runs in results.items():
        def med(how: str, key: str, runs: dict[str, list[dict[str, object]]] = runs) -> float:
            return statistics.median(float(str(r[key])) for r in runs[how])
        outcomes = ({str(r["outcome"]) for r in runs["fresh"]},
                    {str(r["outcome"]) for r in runs["warm"]})
        rss = (med("fresh", "rss_mib"), med("warm", "rss_mib"))
        ratio = med("fresh", "cpu") / med("warm", "cpu")
        agree = outcomes[0] == outcomes[1] and len(outcomes[0]) == 1
        print(f"{name:58} {med('fresh', 'cpu'):9.2f} {med('warm', 'cpu'):9.2f} {ratio:5.1f}x "
              f"{med('fresh', 'wall'):10.2f} {med('warm', 'wall'):9.2f}  "
              f"{'/'.join(sorted(outcomes[0]))}/{'/'.join(sorted(outcomes[1]))}"
              f"{'' if agree else ' DIFFER'}  {rss[0]:.0f}/{rss[1]:.0f}")
        summary.append({"case": name, "fresh_cpu_s": round(med("fresh", "cpu"), 2),
                        "warm_cpu_s": round(med("warm", "cpu"), 2), "ratio": round(ratio, 1),
                        "outcomes_agree": agree, "fresh_rss_mib": round(rss[0]),
                        "warm_rss_mib": round(rss[1])})
    print("RESULT " + json.dumps({"bench": "rank_start", "rounds": args.rounds,
                                  "preload_s": round(preload, 2), "cases": summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

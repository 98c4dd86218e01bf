"""One rank of one reproducer case, in a fresh interpreter
(``python -m patchlane.evidence.runner``).

The parent (:func:`patchlane.evidence.reproduce.run_case`) sets ``PATCHLANE_ONLY`` /
``PATCHLANE_DISABLE``
so that ``import patchlane`` below applies the overlay, or deliberately does not. The rank writes
``rank<N>.json`` with its outcome, the stage it reached (bootstrap, import, setup, run, verify),
timings, peak memory, provenance and the audit of what was applied.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _write(workdir: Path, rank: int, data: dict[str, Any]) -> None:
    tmp = workdir / f".rank{rank}.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    os.replace(tmp, workdir / f"rank{rank}.json")


def _peak_memory(lane: str) -> dict[str, Any]:
    # ru_maxrss is KiB on Linux: the peak resident set of this rank's interpreter.
    peak: dict[str, Any] = {"rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                              / 1024, 1)}
    torch = sys.modules.get("torch")
    if lane == "cuda" and torch is not None and torch.cuda.is_available():
        peak["cuda_max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return peak


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="patchlane.evidence.runner")
    parser.add_argument("--entry", required=True)
    parser.add_argument("--mode", choices=("with", "without"), required=True)
    parser.add_argument("--lane", default="cpu")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    stage = "bootstrap"
    timings: dict[str, float] = {}
    clock = time.monotonic()
    result: dict[str, Any] = {"entry_id": args.entry, "mode": args.mode, "lane": args.lane,
                              "rank": args.rank}

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[name] = round(now - clock, 3)
        clock = now

    try:
        import patchlane
        from patchlane import _startup
        from patchlane.evidence.reproduce import Mode, ReproContext
        from patchlane.importer import _load_file

        lane = _startup.current()
        entry = lane.registry.get(args.entry)
        assert entry.reproducer is not None
        lap("bootstrap")
        stage = "import"
        module = _load_file(entry.id, "reproducer", entry.reproducer)
        ctx = ReproContext(
            entry_id=entry.id, mode=Mode(args.mode), lane=args.lane, rank=args.rank,
            world_size=args.world_size, workdir=args.workdir,
            init_method=(args.workdir / "rendezvous").resolve().as_uri(),
        )
        lap("import")
        setup = getattr(module, "setup", None)
        if setup is not None:
            stage = "setup"
            setup(ctx)
            lap("setup")
        stage = "run"
        try:
            module.run(ctx)
            outcome, message = "pass", "reproducer passed"
        except AssertionError as exc:
            outcome, message = "fail", str(exc) or "assertion failed"
            result["traceback"] = traceback.format_exc()
        lap("run")
        stage = "verify"
        report = patchlane.report()
        decision = next(e for e in report["entries"] if e["id"] == entry.id)
        result["audit"] = decision
        outcome_seen = (decision["decision"] or {}).get("outcome")
        if args.mode == "with":
            if outcome_seen == "upstream-fixed":
                message += " (overlay stayed out: probe reports upstream-fixed)"
            elif outcome_seen != "applied":
                raise RuntimeError(f"expected the overlay applied, audit says {outcome_seen!r}")
            elif decision["hits"] < 1:
                raise RuntimeError("the overlay was applied but never ran: the reproducer does "
                                   "not exercise the patched code")
        elif outcome_seen not in ("skipped: disabled", "retired") or decision["applied"]:
            raise RuntimeError(f"expected the overlay disabled, audit says {outcome_seen!r}")
        if args.rank == 0:
            from patchlane.evidence.provenance import environment_overlay, runtime
            from patchlane.evidence.record import verify_distribution

            result["runtime"] = runtime([entry.target.distribution, "torch"])
            result["record"] = verify_distribution(entry.target.distribution).as_dict()
            result["environment"] = environment_overlay()
        lap("verify")
        result.update(outcome=outcome, message=message, stage="")
    except BaseException as exc:  # torch's CheckpointException is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        low = str(exc).lower()
        oom = isinstance(exc, MemoryError) or "out of memory" in low
        lap(stage)
        result.update(outcome="error", stage="oom" if oom else stage,
                      message=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        # Into the rank log as well, as an uncaught exception would be: the log tail the sweep
        # puts in the receipt then shows the why for every error, reported or not.
        sys.stderr.write(result["traceback"])
        sys.stderr.flush()
    result["timings"] = timings
    result["peak_memory"] = _peak_memory(args.lane)
    _write(args.workdir, args.rank, result)
    print(json.dumps({k: result.get(k) for k in ("outcome", "stage", "message")}))
    return {"pass": 0, "fail": 1}.get(result["outcome"], 2)


if __name__ == "__main__":
    sys.exit(main())

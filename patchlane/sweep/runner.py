"""One rank of one reproducer case, in a fresh interpreter
(``python -m patchlane.sweep.runner``).

The parent (:func:`patchlane.sweep.reproduce.run_case`) sets ``PATCHLANE_ONLY`` /
``PATCHLANE_DISABLE`` so that ``import patchlane`` applies the overlay, or deliberately does
not. ``python -m`` imports the ``patchlane`` package before this module runs: a failure there
(a rejected registry in strict mode, a registry plugin that raises) ends the rank before it can
report, and the parent classifies it as ``bootstrap`` from the exit status and the log. From
here on the rank writes ``rank<N>.json`` with its outcome, the stage it reached (bootstrap,
import, setup, run, verify), timings, peak memory, provenance and the audit of what was applied.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import sys
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import patchlane
from patchlane import startup
from patchlane.common.files import atomic_write_json
from patchlane.deciding.audit import Outcome
from patchlane.loading import load_file
from patchlane.registry import Entry
from patchlane.registry.kinds import KINDS
from patchlane.reproducer import LANES, Lane, Mode, ReproContext, RunOutcome, parse_lane
from patchlane.sweep.provenance import environment_overlay, runtime
from patchlane.sweep.record import verify_distribution
from patchlane.sweep.reproduce import (
    CASE_DEADLINE,
    MESSAGE_HEAD_CHARS,
    MESSAGE_TAIL_CHARS,
    TRACEBACK_HEAD_CHARS,
    TRACEBACK_TAIL_CHARS,
    clip,
)

__all__ = ["main"]

# What the audit must say for this entry once the reproducer ran, per mode.
_WITHOUT_OK = (Outcome.SKIPPED_DISABLED, Outcome.RETIRED)
# A ledger entry with it: in force, or not needed here (upstream's default caught up, its
# `when:` does not hold), which is the ledger's upstream-fixed.
_LEDGER_IN_FORCE = (Outcome.CONFIG_APPLIED, Outcome.LEDGER_OK)
_LEDGER_NOT_NEEDED = (Outcome.UPSTREAM_FIXED, Outcome.SKIPPED_NOT_APPLICABLE)


def _foreign_assertion(exc: AssertionError, reproducer: Path) -> str | None:
    """Where ``exc`` was raised (``file:line``) when that is neither the reproducer's file nor
    patchlane's own helpers for reproducers (``patchlane.testing``); None when it is the
    reproducer's assertion. A reproducer that means an upstream assertion as the bug catches
    it and raises its own, saying why."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return None
    last = Path(frames[-1].filename).resolve()
    ours = (reproducer.resolve(), Path(__file__).resolve().parents[1] / "testing")
    if last == ours[0] or last.is_relative_to(ours[1]):
        return None
    return f"{last}:{frames[-1].lineno}"


def _peak_memory(lane: Lane) -> dict[str, Any]:
    # ru_maxrss is KiB on Linux: the peak resident set of this rank's interpreter.
    peak: dict[str, Any] = {"rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                                              / 1024, 1)}
    torch = sys.modules.get("torch")
    if lane == "cuda" and torch is not None and torch.cuda.is_available():
        peak["cuda_max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return peak


def _audited(decision: Mapping[str, Any]) -> Outcome | None:
    """The outcome the audit recorded for the entry (None before any decision)."""
    outcome = (decision["decision"] or {}).get("outcome")
    return None if outcome is None else Outcome(outcome)


def _said(outcome: Outcome | None) -> str:
    """How an error message quotes an audited outcome: as the audit writes it."""
    return repr(None if outcome is None else outcome.value)


def _probe_view(entry: Any) -> dict[str, Any] | None:
    """Without the overlay: what the overlay's probe says of the imported target, asked after
    the run and never acted on. Past the gate this is the only probe evidence retirement can
    have (the overlay is never applied there). None when there is no probe or no target."""
    module = sys.modules.get(entry.target.module or "")
    if entry.overlay is None or module is None:
        return None
    try:
        probe = getattr(load_file(entry.id, "overlay", entry.overlay), "probe", None)
        if probe is None:
            return None
        fixed = bool(probe(module))
    except Exception as exc:  # the probe's own failure is evidence, not a crash of the case
        return {"outcome": "error", "detail": f"{type(exc).__name__}: {exc}"}
    return {"outcome": Outcome.UPSTREAM_FIXED.value if fixed else "needed",
            "detail": "probe asked without the overlay applied"}


def _message(text: str) -> str:
    # Within the caps (patchlane.sweep.reproduce): the message goes into every record.
    return clip(text, MESSAGE_HEAD_CHARS, MESSAGE_TAIL_CHARS)


def _traceback() -> str:
    return clip(traceback.format_exc(), TRACEBACK_HEAD_CHARS, TRACEBACK_TAIL_CHARS)


def _watch_deadline(value: str | None) -> None:
    """End this rank (its whole session) past ``deadline`` or once its parent is gone
    (``PATCHLANE_CASE_DEADLINE``, :data:`patchlane.sweep.reproduce.CASE_DEADLINE`)."""
    try:
        deadline_text, _, parent_text = (value or "").partition(":")
        deadline, parent = float(deadline_text), int(parent_text)
    except ValueError:
        return

    def watch() -> None:
        while True:
            if time.time() > deadline or os.getppid() != parent:
                with contextlib.suppress(OSError):
                    os.killpg(os.getpgrp(), signal.SIGKILL)
                os._exit(137)
            time.sleep(1.0)

    threading.Thread(target=watch, name="patchlane-case-deadline", daemon=True).start()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="patchlane.sweep.runner")
    parser.add_argument("--entry", required=True)
    parser.add_argument("--mode", choices=[m.value for m in Mode], required=True)
    parser.add_argument("--lane", choices=LANES, default="cpu")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world-size", type=int, default=1)
    parser.add_argument("--workdir", type=Path, required=True)
    args = parser.parse_args(argv)
    args.workdir = args.workdir.absolute()  # before the reproducer can change directory
    return args


def main(argv: list[str] | None = None) -> int:
    _watch_deadline(os.environ.get(CASE_DEADLINE))
    args = _arguments(argv)
    mode, lane = Mode(args.mode), parse_lane(args.lane)
    stage = "bootstrap"
    timings: dict[str, float] = {}
    clock = time.monotonic()
    result: dict[str, Any] = {"entry_id": args.entry, "mode": mode.value, "lane": lane,
                              "rank": args.rank}
    outcome = RunOutcome.ERROR

    def lap(name: str) -> None:
        nonlocal clock
        now = time.monotonic()
        timings[name] = round(now - clock, 3)
        clock = now

    try:
        entry = startup.current().registry.get(args.entry)
        if entry.reproducer is None:
            raise LookupError(f"registry entry {entry.id!r} declares no reproducer")
        lap("bootstrap")
        stage = "import"
        module = load_file(entry.id, "reproducer", entry.reproducer)
        ctx = ReproContext(
            entry_id=entry.id, mode=mode, lane=lane, rank=args.rank,
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
            outcome, message = RunOutcome.PASS, "reproducer passed"
        except AssertionError as exc:
            foreign = _foreign_assertion(exc, entry.reproducer)
            if foreign is not None:
                # Upstream's own `assert` is not the reproducer saying "the bug shows": a
                # release that refuses the reproducer's input (liger-kernel 0.6.1's "reduction
                # must be 'mean' or 'sum'") would read as affected. An error, with where.
                raise RuntimeError(f"AssertionError raised in {foreign}, not by the "
                                   f"reproducer: {exc}") from exc
            outcome, message = RunOutcome.FAIL, _message(str(exc) or "assertion failed")
            result["traceback"] = _traceback()
        lap("run")
        stage = "verify"
        message += _verify_decision(entry, mode, result)
        if args.rank == 0:
            result["runtime"] = runtime([entry.target.distribution, "torch"])
            result["record"] = verify_distribution(entry.target.distribution).as_dict()
            result["environment"] = environment_overlay()
        lap("verify")
        result.update(outcome=outcome.value, message=message, stage="")
    except BaseException as exc:  # torch's CheckpointException is a BaseException
        if isinstance(exc, KeyboardInterrupt):
            raise
        low = str(exc).lower()
        oom = isinstance(exc, MemoryError) or "out of memory" in low
        lap(stage)
        outcome = RunOutcome.ERROR
        result.update(outcome=outcome.value, stage="oom" if oom else stage,
                      message=_message(f"{type(exc).__name__}: {exc}"), traceback=_traceback())
        # Into the rank log as well, as an uncaught exception would be: the log tail the sweep
        # puts in the receipt then shows the why for every error, reported or not.
        sys.stderr.write(result["traceback"])
        sys.stderr.flush()
    result["timings"] = timings
    result["peak_memory"] = _peak_memory(lane)
    atomic_write_json(args.workdir / f"rank{args.rank}.json", result)
    print(json.dumps({k: result.get(k) for k in ("outcome", "stage", "message")}))
    # The parent reads the JSON; the status is for a person running one rank by hand.
    return outcome.exit_code


def _no_hit(entry: Entry, applied: bool) -> str:
    """An applied overlay that counted no call: which is true, said so (an error), or a value,
    whose reads cannot be counted (what the message adds)."""
    target = entry.target.object_path
    if not applied:
        raise RuntimeError(f"the overlay was applied but is not on the call path now: a lookup "
                           f"of {target} no longer reaches it (something replaced it after "
                           "patchlane placed it), so the reproducer ran upstream's code")
    from patchlane.targets import resolve

    module = sys.modules.get(entry.target.module or "")
    shape = resolve(module, entry.target.qualname or "").shape if module is not None else None
    if shape is not None and not shape.counts_hits:
        return f" ({target} is {shape.described}: its reads are not counted)"
    what = f" ({shape.described})" if shape is not None else ""
    raise RuntimeError(f"the overlay is on the call path of {target}{what} but was never "
                       "called: the reproducer does not exercise the patched code")


def _verify_decision(entry: Entry, mode: Mode, result: dict[str, Any]) -> str:
    """Check that the case ran as its mode says, from the decider's own audit: with the entry
    in force (an overlay applied and run, or a ledger entry satisfied), or without it. Raises
    when not (the case is an error, never a verdict); returns what the message adds."""
    report = patchlane.report()
    decision = next(e for e in report["entries"] if e["id"] == entry.id)
    result["audit"] = decision
    seen = _audited(decision)
    if mode is Mode.WITH and not KINDS[entry.kind].with_overlay:
        # A ledger entry in force: a setting assigned (or upstream's default already the
        # same), a floor or pin checked and satisfied (or not applicable here).
        if seen in _LEDGER_NOT_NEEDED:
            return f" (the entry was not needed: audit says {_said(seen)})"
        if seen not in _LEDGER_IN_FORCE:
            raise RuntimeError(f"expected the {entry.kind.value} entry in force, audit says "
                               f"{_said(seen)}: the reproducer does not exercise it")
        return ""
    if mode is Mode.WITH:
        if seen is Outcome.UPSTREAM_FIXED:
            return " (overlay stayed out: probe reports upstream-fixed)"
        if seen is not Outcome.APPLIED:
            raise RuntimeError(f"expected the overlay applied, audit says {_said(seen)}")
        if decision["hits"] < 1:
            return _no_hit(entry, decision["applied"])
        return ""
    if seen not in _WITHOUT_OK or decision["applied"]:
        raise RuntimeError(f"expected the overlay disabled, audit says {_said(seen)}")
    result["probe"] = _probe_view(entry)
    return ""


if __name__ == "__main__":
    sys.exit(main())

"""The lazy start: what ``import patchlane`` and ``patchlane run`` cost a process that imports no
target, what they add to a real megatron import, and whether that stays flat in the registry's
size. Four goals measured side by side in one run, on the interpreter that runs this script:

  1. ``python -c pass`` in the environment ``patchlane run`` gives its command (launch_env of a
     clean environment, warm lazy index) vs bare ``python -c pass``          goal <= 1.3x
     (also shown: the eager path, PATCHLANE_LAZY=0, and PATCHLANE_RUN_SUMMARY=0)
  2. the whole ``python bin/patchlane run -- python -c pass`` (the command's own interpreter,
     then the exec'd one) vs bare ``python -c pass``                          goal <= 2.5x
     (also shown: PATCHLANE_LAZY=0)
  3. ``import patchlane; import megatron.core.rerun_state_machine`` vs the megatron import alone,
     timed inside the child (perf_counter)                                    goal <= 1.02x
     plus a steadier estimate from in-process pieces (see below)
  4. goal 1's bootstrapped start (summary on and off) and the in-process ``import patchlane``
     with the default registry (13 entries today), 50, 200 and 2,000 (bench_import_scale's
     generator), warm index: ratio 2000/default                              goal ~1.0 (flat)

Method (as bench_import.py): fresh child interpreters (``sys.executable``, cwd a temp dir,
``PATCHLANE_*`` unset), patchlane imported from a byte-compiled staged copy of this checkout
(also the ``bin/patchlane`` script), medians over interleaved rounds whose order rotates (for
1, 2 and 4 one warm-up round discarded). Start-up figures (1, 2, 4) are the wall time of
``subprocess.run`` in this process; every variant, bare included, has the staged copy (only)
on PYTHONPATH, as an installed patchlane would be, and no PYTHONWARNINGS (which alone imports
``warnings`` at start). The validated-registry cache and the lazy index live in a private temp
dir (``PATCHLANE_REGISTRY_CACHE``, mode 0700), filled by one warm-up child per registry set; a
check child per variant, before and after the timed rounds, records whether it really took the
lazy path (``arm.why_not()`` is None), and an index file rewritten meanwhile is named.

3. is time-boxed (``--budget-s``): each round imports torch + megatron twice, seconds each. Its
measured ratio is one of two multi-second medians and moves by several percent with load. The
estimated ratio is (alone + lazy + marginal + finder) / alone: lazy is ``import patchlane`` timed
in-process in the c2 children (the lazy start only arms its hook), marginal is ``import
patchlane`` timed right after the target import in the c1 children (the whole startup loads at
once and decides + applies the overlay; dependencies torch/megatron load anyway are not counted
twice), finder is the post-import hook's finder (patchlane.import_hook) asked about every
import after the lane loaded in c2 (count x per-call cost, both measured there). The lane's
load itself, timed inside the c2 children (around the lazy hook's load), is printed too: it
includes the deps torch would load.

    python benchmarks/bench_lazy_start.py [--rounds 15] [--budget-s 60] [--rounds-mcore 10]
                                         [--skip-megatron]

Prints figures and ratios next to their goals; asserts nothing; exits 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# bench_import.py's staging and child helper, bench_import_scale.py's registry generator, so the
# benchmarks measure the same way
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import _child, _stage
from bench_import_scale import DEFAULT_ENTRIES, generate

REPO = Path(__file__).resolve().parent.parent
MCORE_MODULE = "megatron.core.rerun_state_machine"
MCORE_ENTRY = "mcore_rerun_sentinel"
SIZES = (DEFAULT_ENTRIES, 50, 200, 2000)
SETS = (*SIZES, -SIZES[-1])
"""The sizes, then the largest again with its entries under 16 top-level packages (negative)."""


def _label(size: int) -> str:
    return f"{-size} (16 pkgs)" if size < 0 else str(size)
GOAL_BOOT = 1.3
GOAL_RUN = 2.5
GOAL_MCORE = 1.02
GOAL_FLAT = 1.0
RUN_LAZY = "run env (lazy)"
RUN_OFF = "run env, PATCHLANE_RUN_SUMMARY=0"
RUN_EAGER = "run env, PATCHLANE_LAZY=0"
CMD_LAZY = "bin/patchlane run (lazy)"
CMD_EAGER = "bin/patchlane run, LAZY=0"

# -- child programs -------------------------------------------------------------------------
# Each prints exactly one line `CHILD {json}` on stdout (bench_import._child reads it).

# In a bootstrapped interpreter (sitecustomize already imported patchlane): which path it took.
CHECK_BOOT = r"""
import json, sys
from patchlane.lazy import arm
print("CHILD " + json.dumps({"why_not": arm.why_not(), "bootstrapped": "sitecustomize" in
    sys.modules, "lane_loaded": "patchlane.startup" in sys.modules,
    "modules": len(sys.modules)}))
"""

# A plain interpreter: `import patchlane` timed in-process, what it loaded, which path it took.
PLAIN = r"""
import json, sys, time
before = set(sys.modules)
t0 = time.perf_counter()
import patchlane
t1 = time.perf_counter()
from patchlane.lazy import arm
loaded = sorted(set(sys.modules) - before)
print("CHILD " + json.dumps({"own_ms": 1e3 * (t1 - t0), "why_not": arm.why_not(),
                             "loaded": loaded}))
"""

MCORE = r"""
import json, sys, time
t0 = time.perf_counter()
import {mod}
t1 = time.perf_counter()
# After the measured import (so it cannot touch it): what `import patchlane` adds on top of an
# already-imported target: the whole startup loads at once, the overlay is decided and applied.
import patchlane
t2 = time.perf_counter()
print("CHILD " + json.dumps({{"total_ms": 1e3 * (t1 - t0), "marginal_ms": 1e3 * (t2 - t1)}}))
"""

PATCHLANE_MCORE = r"""
import json, sys, time, timeit
t0 = time.perf_counter()
import patchlane
t1 = time.perf_counter()
from patchlane.lazy import arm, watch
why_not = arm.why_not()
# Time the startup's load where the lazy hook runs it (the first watched import), and count the
# imports that follow it (each one asks the post-import hook's finder, on sys.meta_path from then
# on: patchlane.import_hook).
load_at = {{}}
hook = watch._watch
if hook is not None:
    real_load = hook.load
    def timed_load():
        s = time.perf_counter()
        try:
            return real_load()
        finally:
            load_at["ms"] = 1e3 * (time.perf_counter() - s)
            load_at["modules"] = len(sys.modules)
    hook.load = timed_load
t2 = time.perf_counter()
import {mod}
t3 = time.perf_counter()
after = len(sys.modules) - load_at["modules"] if load_at else None
finders = [f for f in sys.meta_path if type(f).__module__ == "patchlane.import_hook"]
finder_us = None
if finders:
    call = lambda: finders[0].find_spec("plbench_never_hooked")
    finder_us = 1e6 * min(timeit.repeat(call, number=5000, repeat=5)) / 5000
outcome = {{e["id"]: (e["decision"] or {{}}).get("outcome")
           for e in patchlane.report()["entries"] if e["id"] == "{entry}"}}
applied = {{e["id"]: e["applied"] for e in patchlane.report()["entries"] if e["id"] == "{entry}"}}
print("CHILD " + json.dumps({{
    "total_ms": 1e3 * ((t1 - t0) + (t3 - t2)),  # the instrumenting above is not counted
    "patchlane_ms": 1e3 * (t1 - t0),
    "why_not": why_not,
    "load_ms": load_at.get("ms"),
    "imported_after_load": after,
    "finder_us": finder_us,
    "outcome": outcome.get("{entry}"),
    "applied": applied.get("{entry}"),
}}))
"""


# -- helpers --------------------------------------------------------------------------------


def _stage_all(dest: Path) -> Path:
    """bench_import's byte-compiled staged checkout, plus the ``bin/patchlane`` script (run
    as ``python bin/patchlane``; it has no module to compile, it imports patchlane.cli.entry)."""
    _stage(dest)
    (dest / "bin").mkdir()
    shutil.copy2(REPO / "bin" / "patchlane", dest / "bin" / "patchlane")
    return dest


def _clean_env(stage: Path, cache: Path) -> dict[str, str]:
    """This environment without ``PATCHLANE_*`` and without its PYTHONPATH / PYTHONWARNINGS;
    the staged copy alone on PYTHONPATH (an installed patchlane, not activated), the cache in
    the private temp dir, and bytecode read from the stage, never written."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PATCHLANE_") and k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    env["PYTHONPATH"] = str(stage)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PATCHLANE_REGISTRY_CACHE"] = str(cache)
    return env


def _launch_env(env: dict[str, str], stage: Path, cwd: str) -> dict[str, str]:
    """``env`` as ``patchlane run`` gives it to its command: the staged copy's launch_env,
    built in a child (started in ``cwd``, so ``-c``'s current directory on sys.path cannot
    shadow the stage) so that this process never imports patchlane."""
    code = ("import json, os; from patchlane.launch.environment import launch_env; "
            "print('CHILD ' + json.dumps(launch_env(os.environ)))")
    out = _child(code, env, cwd)
    out.pop("stderr", None)
    first = out["PYTHONPATH"].split(os.pathsep)[0]
    if not Path(first).resolve().is_relative_to(stage.resolve()):
        raise RuntimeError(f"launch_env put {first} first, not the staged bootstrap")
    return out


def _index_stamps(cache: Path) -> dict[str, int]:
    """mtime of each lazy index file: one that changes during the timed rounds was rewritten
    by a child that found it stale (it took the eager path)."""
    return {p.name: p.stat().st_mtime_ns for p in cache.glob("*.lazy")}


def _wall(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """Wall time in ms of one child, measured here."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=120)
    took = 1e3 * (time.perf_counter() - start)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} failed (rc={proc.returncode}):\n{proc.stderr.decode()}")
    return took


def _rounds(variants: dict, rounds: int, run, deadline: float | None = None) -> dict:
    """``rounds`` interleaved rounds (order rotated each round). Without a ``deadline``, after
    one discarded warm-up round; with one (time.monotonic: the multi-second megatron rounds,
    where a warm-up round would eat the budget, as in bench_import.py) no round starts that
    would likely end past it, and at least one runs."""
    names = list(variants)
    res: dict[str, list] = {n: [] for n in names}
    warmup = deadline is None
    for i in range(rounds + warmup):
        start = time.monotonic()
        k = i % len(names)
        for name in names[k:] + names[:k]:
            got = run(variants[name])
            if i or not warmup:
                res[name].append(got)
        if deadline is not None and time.monotonic() + (time.monotonic() - start) > deadline:
            break
    return res


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _lazy_word(why_not: str | None) -> str:
    return "lazy" if why_not is None else f"eager ({why_not})"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--rounds", type=int, default=15,
                        help="interleaved rounds for the start-up goals 1, 2 and 4")
    parser.add_argument("--budget-s", type=float, default=60.0,
                        help="wall time for goal 3's megatron rounds (seconds each)")
    parser.add_argument("--rounds-mcore", type=int, default=10,
                        help="at most this many goal-3 rounds (the budget usually stops first)")
    parser.add_argument("--skip-megatron", action="store_true", help="leave goal 3 out")
    args = parser.parse_args()
    py = sys.executable

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-lazy-") as tmp:
        cwd = str(Path(tmp) / "cwd")
        os.mkdir(cwd)
        stage = _stage_all(Path(tmp) / "stage")
        cache = Path(tmp) / "cache"
        cache.mkdir(mode=0o700)
        os.chmod(cache, 0o700)
        base = _clean_env(stage, cache)
        eager = base | {"PATCHLANE_LAZY": "0"}
        cmd = [py, str(stage / "bin" / "patchlane"), "run", "--"]
        sized: dict[int, dict[str, str]] = {DEFAULT_ENTRIES: base}
        for size in SIZES[1:]:
            extra = generate(Path(tmp) / f"gen{size}", size - DEFAULT_ENTRIES)
            sized[size] = base | {"PATCHLANE_REGISTRY": str(extra)}
        # The same largest size with its entries under 16 top-level packages, as a real
        # registry's share torch and megatron: the index's watched names stay few.
        shared = generate(Path(tmp) / "gen-shared", SIZES[-1] - DEFAULT_ENTRIES, packages=16)
        sized[-SIZES[-1]] = base | {"PATCHLANE_REGISTRY": str(shared)}

        # Warm-up: one full start per registry set writes its validated cache and lazy index
        # (and the page cache gets the staged files).
        for env in sized.values():
            _child(PLAIN, env, cwd)
        boot = {s: _launch_env(e, stage, cwd) for s, e in sized.items()}
        off = {"PATCHLANE_RUN_SUMMARY": "0"}

        # Goals 1, 2 and 4, interleaved in one set of rounds: (argv, env). Each ends in
        # `-c pass`; its check child runs CHECK_BOOT there instead.
        pass_ = [py, "-c", "pass"]
        start_variants: dict[str, tuple[list[str], dict[str, str]]] = {
            "bare": (pass_, base),
            RUN_LAZY: (pass_, boot[DEFAULT_ENTRIES]),
            RUN_OFF: (pass_, boot[DEFAULT_ENTRIES] | off),
            RUN_EAGER: (pass_, boot[DEFAULT_ENTRIES] | {"PATCHLANE_LAZY": "0"}),
            CMD_LAZY: (cmd + pass_, base),
            CMD_EAGER: (cmd + pass_, eager),
        }
        for size in SETS[1:]:
            start_variants[f"size {_label(size)}"] = (pass_, boot[size])
            start_variants[f"size {_label(size)}, summary off"] = (pass_, boot[size] | off)

        def paths() -> dict[str, str | None]:
            """Which path each variant's command interpreter takes (arm.why_not())."""
            return {name: _child_argv([*argv[:-1], CHECK_BOOT], env, cwd)["why_not"]
                    for name, (argv, env) in start_variants.items() if name != "bare"}

        before = paths()
        indexes = _index_stamps(cache)
        start = _rounds(start_variants, args.rounds, lambda v: _wall(v[0], v[1], cwd))
        # The steadier in-process figure for goal 4 (plain `import patchlane`), own rounds.
        inproc = _rounds(sized, args.rounds, lambda e: _child(PLAIN, e, cwd))
        rewritten = sorted(n for n, t in _index_stamps(cache).items() if indexes.get(n) != t)
        after = paths()
        plain_lazy = _child(PLAIN, base, cwd)
        plain_eager = _child(PLAIN, eager, cwd)

        have_mcore = subprocess.run(
            [py, "-c", "import importlib.util as u, sys; "
             "sys.exit(u.find_spec('megatron') is None or u.find_spec('torch') is None)"],
            env=base, cwd=cwd).returncode == 0
        mres: dict[str, list[dict]] = {}
        if have_mcore and not args.skip_megatron:
            menv = base | {"PYTHONWARNINGS": "ignore"}  # megatron's own warnings, as elsewhere
            began = time.monotonic()
            mres = _rounds({
                "alone": MCORE.format(mod=MCORE_MODULE),
                "patchlane": PATCHLANE_MCORE.format(mod=MCORE_MODULE, entry=MCORE_ENTRY),
            }, args.rounds_mcore, lambda code: _child(code, menv, cwd),
                deadline=began + args.budget_s)

    # -- report -----------------------------------------------------------------------------
    med = {n: _med(v) for n, v in start.items()}
    bare = med["bare"]
    result: dict = {"bench": "lazy_start", "python": sys.version.split()[0],
                    "rounds": args.rounds, "bare_ms": round(bare, 2)}
    print(f"the lazy start  (python {sys.version.split()[0]}, {py}; staged, byte-compiled copy; "
          f"{args.rounds} interleaved rounds, medians)")
    def path(name: str) -> str:
        """'lazy' / 'eager (why)' before the timed rounds, and after them if it changed."""
        was, now = _lazy_word(before[name]), _lazy_word(after[name])
        return was if was == now else f"{was}; after the rounds: {now}"

    print(f"\n  {'variant (python -c pass unless said)':<40}{'median ms':>10}{'min':>8}"
          f"{'ratio':>8}   path")
    for name in ("bare", RUN_LAZY, RUN_OFF, RUN_EAGER, CMD_LAZY, CMD_EAGER):
        print(f"  {name:<40}{med[name]:10.1f}{min(start[name]):8.1f}"
              f"{med[name] / bare:7.2f}x   {'-' if name == 'bare' else path(name)}")
    g1, g2 = med[RUN_LAZY] / bare, med[CMD_LAZY] / bare
    print(f"  goal 1: {RUN_LAZY + ' / bare':<32}{g1:6.2f}x   (goal <= {GOAL_BOOT}x; "
          f"+{med[RUN_LAZY] - bare:.1f} ms per process; summary off "
          f"{med[RUN_OFF] / bare:.2f}x, eager {med[RUN_EAGER] / bare:.2f}x)")
    print(f"  goal 2: {CMD_LAZY + ' / bare':<32}{g2:6.2f}x   (goal <= {GOAL_RUN}x; "
          f"eager {med[CMD_EAGER] / bare:.2f}x)")
    result.update({
        "variants_ms": {n: round(v, 2) for n, v in med.items()},
        "goal1_ratio": round(g1, 3), "goal1_goal": GOAL_BOOT,
        "goal1_summary_off_ratio": round(med[RUN_OFF] / bare, 3),
        "goal1_eager_ratio": round(med[RUN_EAGER] / bare, 3),
        "goal2_ratio": round(g2, 3), "goal2_goal": GOAL_RUN,
        "goal2_eager_ratio": round(med[CMD_EAGER] / bare, 3),
        "paths_before": before, "paths_after": after, "indexes_rewritten": rewritten,
    })

    lazy_loaded = plain_lazy["loaded"]
    print(f"\n  target-free `import patchlane` ({_lazy_word(plain_lazy['why_not'])}) loaded "
          f"{len(lazy_loaded)} modules: {', '.join(lazy_loaded)}")
    print(f"  the same with PATCHLANE_LAZY=0 ({_lazy_word(plain_eager['why_not'])}): "
          f"{len(plain_eager['loaded'])} modules (wrapt: {'wrapt' in plain_eager['loaded']}, "
          f"yaml: {'yaml' in plain_eager['loaded']})")
    result["lazy_import_modules"] = lazy_loaded
    result["eager_import_module_count"] = len(plain_eager["loaded"])

    # Goal 4: the default set's bootstrapped figures are goal 1's rows.
    boot_name = {s: RUN_LAZY if s == DEFAULT_ENTRIES else f"size {_label(s)}" for s in SETS}
    off_name = {s: RUN_OFF if s == DEFAULT_ENTRIES else f"size {_label(s)}, summary off"
                for s in SETS}
    by_boot = {s: med[boot_name[s]] for s in SETS}
    by_off = {s: med[off_name[s]] for s in SETS}
    by_own = {s: _med([r["own_ms"] for r in inproc[s]]) for s in SETS}
    plain_lazy_by = {s: sum(r["why_not"] is None for r in inproc[s]) for s in SETS}
    print("\n  goal 4: registry size, warm index (median ms; run env: python -c pass as in goal 1;"
          " import: `import patchlane` in-process, plain interpreter)")
    print(f"  {'entries':>14}{'run env':>10}{'summary off':>13}{'import':>9}   "
          "path: run env / summary off / plain (lazy rounds)")
    for s in SETS:
        print(f"  {_label(s):>14}{by_boot[s]:10.1f}{by_off[s]:13.1f}{by_own[s]:9.2f}   "
              f"{path(boot_name[s])} / {path(off_name[s])} / "
              f"{plain_lazy_by[s]} of {len(inproc[s])} lazy")
    top, low = SIZES[-1], SIZES[0]
    flat = {"boot": by_boot[top] / by_boot[low], "summary_off": by_off[top] / by_off[low],
            "import": by_own[top] / by_own[low]}
    print(f"  ratio {top}/{low}: run env {flat['boot']:.2f}x, summary off "
          f"{flat['summary_off']:.2f}x, in-process import {flat['import']:.2f}x   "
          f"(goal: flat, ~{GOAL_FLAT}x)")
    shared = -top
    flat_shared = {"boot": by_boot[shared] / by_boot[low],
                   "summary_off": by_off[shared] / by_off[low],
                   "import": by_own[shared] / by_own[low]}
    print(f"  ratio {_label(shared)}/{low}: run env {flat_shared['boot']:.2f}x, summary off "
          f"{flat_shared['summary_off']:.2f}x, in-process import "
          f"{flat_shared['import']:.2f}x   (entries under 16 top-level packages)")
    if rewritten:
        print(f"  NOTE: {len(rewritten)} lazy index file(s) rewritten during the timed rounds "
              "(a child found its index stale and took the eager path): "
              + ", ".join(rewritten))
    result.update({
        "size_boot_ms": {str(s): round(v, 2) for s, v in by_boot.items()},
        "size_summary_off_ms": {str(s): round(v, 2) for s, v in by_off.items()},
        "size_import_ms": {str(s): round(v, 3) for s, v in by_own.items()},
        "size_import_lazy_rounds": {str(s): v for s, v in plain_lazy_by.items()},
        "goal4_ratio_boot": round(flat["boot"], 3),
        "goal4_ratio_summary_off": round(flat["summary_off"], 3),
        "goal4_ratio_import": round(flat["import"], 3),
        "goal4_shared_ratio_boot": round(flat_shared["boot"], 3),
        "goal4_shared_ratio_summary_off": round(flat_shared["summary_off"], 3),
        "goal4_shared_ratio_import": round(flat_shared["import"], 3),
    })

    if mres:
        alone, both = mres["alone"], mres["patchlane"]
        m1 = _med([r["total_ms"] for r in alone])
        m2 = _med([r["total_ms"] for r in both])
        marginal = _med([r["marginal_ms"] for r in alone])
        lazy_ms = _med([r["patchlane_ms"] for r in both])
        loads = [r["load_ms"] for r in both if r["load_ms"] is not None]
        load_ms = _med(loads) if loads else float("nan")
        after_rows = [r for r in both if r["imported_after_load"] is not None
                      and r["finder_us"] is not None]
        finder_ms = _med([r["imported_after_load"] * r["finder_us"] / 1e3
                          for r in after_rows]) if after_rows else 0.0
        est = (m1 + lazy_ms + marginal + finder_ms) / m1
        first = both[0]
        print(f"\n  goal 3: {MCORE_MODULE}, in-child perf_counter   {len(alone)} rounds "
              f"(--budget-s {args.budget_s:g})")
        print(f"    alone                           {m1:9.1f} ms  "
              f"({min(r['total_ms'] for r in alone):.0f} .. "
              f"{max(r['total_ms'] for r in alone):.0f})")
        print(f"    import patchlane; then it       {m2:9.1f} ms  "
              f"({min(r['total_ms'] for r in both):.0f} .. "
              f"{max(r['total_ms'] for r in both):.0f})   "
              f"path: {_lazy_word(first['why_not'])}")
        print(f"    measured ratio                  {m2 / m1:9.3f}x   (goal <= {GOAL_MCORE}x)")
        print(f"    estimated ratio                 {est:9.3f}x   = ({m1:.0f} + {lazy_ms:.2f} + "
              f"{marginal:.1f} + {finder_ms:.1f}) / {m1:.0f}")
        print(f"      {lazy_ms:.2f} ms: `import patchlane` in the c2 children (lazy: arms the "
              "hook)")
        print(f"      {marginal:.1f} ms: `import patchlane` right after the target in the c1 "
              f"children (lane load + decide + apply)")
        print(f"      {finder_ms:.1f} ms: the hook's finder x the imports after the lane loaded")
        print(f"    lane load at the first watched import, timed in c2: {load_ms:.1f} ms "
              f"(includes deps torch/megatron would load anyway)")
        print(f"    {MCORE_ENTRY}: outcome {first['outcome']!r}, applied {first['applied']}"
              + ("" if first["applied"] else "  (not applied: see its applies_to for this "
                 "release)"))
        result.update({
            "rounds_mcore": len(alone), "mcore_ms": round(m1, 1),
            "patchlane_mcore_ms": round(m2, 1), "goal3_ratio": round(m2 / m1, 4),
            "goal3_ratio_estimated": round(est, 4), "goal3_goal": GOAL_MCORE,
            "mcore_lazy_import_ms": round(lazy_ms, 3), "mcore_marginal_ms": round(marginal, 2),
            "mcore_finder_ms": round(finder_ms, 2), "mcore_lane_load_ms": round(load_ms, 2),
            "mcore_path": first["why_not"], "mcore_entry_outcome": first["outcome"],
            "mcore_entry_applied": first["applied"],
        })
    else:
        why = "--skip-megatron" if args.skip_megatron else "torch/megatron not importable here"
        print(f"\n  goal 3 skipped: {why}")
        result.update({"goal3_ratio": None, "goal3_goal": GOAL_MCORE})

    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


def _child_argv(argv: list[str], env: dict[str, str], cwd: str) -> dict:
    """bench_import._child for a whole command line (``bin/patchlane run -- python -c ...``)."""
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    for line in proc.stdout.splitlines():
        if line.startswith("CHILD "):
            return json.loads(line[len("CHILD "):])
    raise RuntimeError(f"child failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


if __name__ == "__main__":
    sys.exit(main())

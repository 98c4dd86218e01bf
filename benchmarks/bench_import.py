"""What does ``import patchlane`` cost, and what does the real overlay add to a megatron import?

Every figure comes from fresh child interpreters (same ``sys.executable``, cwd a temp dir,
``PYTHONWARNINGS=ignore``), timed with ``time.perf_counter`` around the imports inside the child,
repeated and reduced to medians. Variants are interleaved (the order rotates every round) so
drift on a busy machine hits them all alike. Nothing here asserts a time: it prints figures and
ratios measured side by side in this one run.

  a)  floor (deps)  the non-stdlib modules patchlane imports at module level, plus importlib.*
                    (discovered from patchlane's own source, not hard-coded)
  a') floor (full)  the same plus every stdlib module patchlane imports at module level
  b)  floor (deps) + ``import patchlane``; patchlane's own cost = b - a   (goal <= 15 ms)
  c)  ``import megatron.core.rerun_state_machine`` alone vs after ``import patchlane``, which
      applies the real overlay at import time; ratio c2 / c1              (goal <= 1.03x)

By default patchlane is imported from a byte-compiled staged copy of this checkout (package,
registry, overlays, reproducers: the source-checkout layout) so the figures are those of an
installed package. ``--as-is`` imports the checkout exactly as the environment gives it instead;
with ``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` (the repo's scripts write one for
their venvs) that re-compiles patchlane every time.

    python benchmarks/bench_import.py [--repeats 15] [--repeats-mcore 5] [--budget-s 50] [--as-is]

c) is time-boxed: each round imports torch + megatron twice (seconds each), so rounds stop once
``--budget-s`` of wall time is likely spent; the table shows how many ran. Its measured ratio is
a ratio of two multi-second medians and moves by several percent with machine load. The
estimated ratio is steadier: (alone + marginal + finder) / alone, where marginal is
``import patchlane`` timed in-process right after the target import in the c1 children (the
hook fires at once, so deciding and applying the overlay is included, and patchlane's deps that
torch or megatron load anyway are not counted twice, as in a real job), and finder is what
the post-import hook's finder costs the imports that follow ``import patchlane`` in c2 (their count
times its per-call cost, both measured in the c2 children).
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MCORE_MODULE = "megatron.core.rerun_state_machine"
GOAL_OWN_MS = 15.0
GOAL_RATIO = 1.03

# -- child programs -------------------------------------------------------------------------
# Each prints exactly one line `CHILD {json}` on stdout.

DISCOVER = r"""
import ast, json, sys
before = set(sys.modules)
import patchlane
mods = sorted(m for m in sys.modules if m == "patchlane" or m.startswith("patchlane."))
found = set()

def visit(body):
    for node in body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level or node.module == "__future__":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in sys.modules else node.module)
        elif isinstance(node, ast.Try):
            visit(node.body)
            for h in node.handlers:
                visit(h.body)
            visit(node.orelse)
            visit(node.finalbody)
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            visit(node.body)
            visit(node.orelse)

for name in mods:
    path = getattr(sys.modules[name], "__file__", None)
    if path and path.endswith(".py"):
        visit(ast.parse(open(path, encoding="utf-8").read()).body)
found = {m for m in found if m.split(".")[0] != "patchlane"}
stdlib = sys.stdlib_module_names
deps = sorted(m for m in found if m.split(".")[0] not in stdlib or m.startswith("importlib"))
std = sorted(m for m in found if m not in deps)
print("CHILD " + json.dumps({"patchlane_modules": mods, "deps": deps, "stdlib": std,
                             "file": patchlane.__file__}))
"""

FLOOR = r"""
import json, sys, time
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
print("CHILD " + json.dumps({{"total_ms": 1e3 * (t1 - t0)}}))
"""

WITH_PATCHLANE = r"""
import json, sys, time
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
floor = set(sys.modules)
import patchlane
t2 = time.perf_counter()
extra = sorted(m for m in set(sys.modules) - floor
               if m != "patchlane" and not m.startswith(("patchlane.", "_patchlane_")))
print("CHILD " + json.dumps({{
    "total_ms": 1e3 * (t2 - t0),
    "own_ms": 1e3 * (t2 - t1),
    "torch": "torch" in sys.modules,
    "megatron": any(m == "megatron" or m.startswith("megatron.") for m in sys.modules),
    "extra_modules": extra,
    "file": patchlane.__file__,
    "summary": patchlane.report()["summary"],
}}))
"""

MCORE = r"""
import json, sys, time
t0 = time.perf_counter()
import {mod}
t1 = time.perf_counter()
sys.stderr.write("--- patchlane ---\n")  # stderr above this line is the target's own
# After the measured import (so it cannot touch it): what `import patchlane` adds on top of an
# already-imported target, hook firing at once included. In-process, so a steady figure.
import patchlane
t2 = time.perf_counter()
print("CHILD " + json.dumps({{"total_ms": 1e3 * (t1 - t0), "marginal_ms": 1e3 * (t2 - t1)}}))
"""

PATCHLANE_MCORE = r"""
import json, sys, time, timeit
t0 = time.perf_counter()
import patchlane
t1 = time.perf_counter()
n1 = len(sys.modules)
import {mod}
t2 = time.perf_counter()
imported_after = len(sys.modules) - n1
# With a hook registered before the target is imported, the post-import hook's finder
# (patchlane.import_hook) sits on sys.meta_path and is asked about every later import. Its cost
# per miss, timed in-process:
finders = [f for f in sys.meta_path if type(f).__module__ == "patchlane.import_hook"]
finder_us = None
if finders:
    call = lambda: finders[0].find_spec("plbench_never_hooked")
    finder_us = 1e6 * min(timeit.repeat(call, number=5000, repeat=5)) / 5000
from patchlane import startup
lane = startup.current()
latest = lane.audit.latest()
entries = [e for e in lane.registry.entries if e.target.module == "{mod}"]
outcomes = {{e.id: latest[e.id].outcome.value for e in entries if e.id in latest}}
# The in-process cost of deciding + applying the overlay again (gate, probe, fingerprint, wrap;
# the overlay file is already loaded): revert, then time Lane.decide. Best of a few.
redecide = []
for entry in entries:
    if not lane.is_applied(entry.id):
        continue
    module = sys.modules[entry.target.module]
    for _ in range(5):
        lane.revert(entry.id)
        t = time.perf_counter()
        lane.decide(entry, module)
        redecide.append(1e3 * (time.perf_counter() - t))
print("CHILD " + json.dumps({{
    "total_ms": 1e3 * (t2 - t0),
    "patchlane_ms": 1e3 * (t1 - t0),
    "target_ms": 1e3 * (t2 - t1),
    "outcomes": outcomes,
    "redecide_ms": min(redecide) if redecide else None,
    "imported_after": imported_after,
    "finder_us": finder_us,
}}))
"""


def _stage(dest: Path) -> Path:
    """A byte-compiled copy of the checkout in its source layout (``registry.yaml`` next to the
    package, overlays, reproducers and compat-gate checks beside it), importable from ``dest``
    via PYTHONPATH."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "patchlane", dest / "patchlane", ignore=ignore)
    for name in ("patches", "reproducers", "checks", "drafts"):
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, dest / name, ignore=ignore)
    shutil.copy2(REPO / "registry.yaml", dest / "registry.yaml")
    for path in (dest / "patchlane").rglob("*.py"):
        # The default invalidation mode (timestamp) is what pip and the import system use.
        py_compile.compile(str(path), doraise=True)
    return dest


def _env(stage: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONWARNINGS"] = "ignore"
    for key in [k for k in env if k.startswith("PATCHLANE_")]:
        del env[key]  # measure the defaults, not whatever this shell has set
    if stage is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(stage), *filter(None, [os.environ.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"  # read the staged .pyc, never write anywhere
    return env


def _child(code: str, env: dict[str, str], cwd: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    for line in proc.stdout.splitlines():
        if line.startswith("CHILD "):
            data = json.loads(line[len("CHILD "):])
            data["stderr"] = proc.stderr
            return data
    raise RuntimeError(f"child failed (rc={proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


def _imports(modules: list[str]) -> str:
    return "\n".join(f"import {m}" for m in modules) or "pass"


def _run_rounds(variants: dict[str, str], rounds: int, env, cwd,
                deadline: float | None = None) -> dict[str, list[dict]]:
    """``rounds`` rounds of every variant, order rotated each round. With a ``deadline``
    (time.monotonic), no round is started that would likely end past it (at least one runs)."""
    names = list(variants)
    results: dict[str, list[dict]] = {n: [] for n in names}
    for i in range(rounds):
        start = time.monotonic()
        k = i % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(_child(variants[name], env, cwd))
        if deadline is not None and time.monotonic() + (time.monotonic() - start) > deadline:
            break
    return results


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def _spread(rows: list[dict], key: str) -> str:
    values = sorted(r[key] for r in rows)
    return f"{values[0]:8.1f} .. {values[-1]:8.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15, help="rounds for a), a'), b)")
    parser.add_argument("--repeats-mcore", type=int, default=5,
                        help="rounds for c) (each child imports torch + megatron: seconds)")
    parser.add_argument("--budget-s", type=float, default=50.0,
                        help="stop starting c) rounds once this much wall time is likely spent")
    parser.add_argument("--as-is", action="store_true",
                        help="import the checkout as the environment gives it (no staged .pyc)")
    args = parser.parse_args()
    began = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-") as tmp:
        cwd = str(Path(tmp) / "cwd")
        os.mkdir(cwd)
        stage = None if args.as_is else _stage(Path(tmp) / "stage")
        env = _env(stage)

        info = _child(DISCOVER, env, cwd)
        deps, std = info["deps"], info["stdlib"]
        floor_deps = _imports(deps)
        floor_full = _imports(deps + std)
        small = {
            "floor_deps": FLOOR.format(imports=floor_deps),
            "floor_full": FLOOR.format(imports=floor_full),
            "patchlane": WITH_PATCHLANE.format(imports=floor_deps),
        }
        for code in small.values():  # warm the page cache; discarded
            _child(code, env, cwd)
        res = _run_rounds(small, args.repeats, env, cwd)

        have_mcore = subprocess.run(
            [sys.executable, "-c", f"import importlib.util as u; "
             f"raise SystemExit(u.find_spec('{MCORE_MODULE.split('.')[0]}') is None)"],
            env=env, cwd=cwd).returncode == 0
        mres: dict[str, list[dict]] = {}
        if have_mcore and args.repeats_mcore > 0:
            mres = _run_rounds({
                "mcore": MCORE.format(mod=MCORE_MODULE),
                "patchlane_mcore": PATCHLANE_MCORE.format(mod=MCORE_MODULE),
            }, args.repeats_mcore, env, cwd, deadline=began + args.budget_s)

    fd = _median(res["floor_deps"], "total_ms")
    ff = _median(res["floor_full"], "total_ms")
    pl = _median(res["patchlane"], "total_ms")
    own_inproc = _median(res["patchlane"], "own_ms")
    torch_seen = any(r["torch"] for r in res["patchlane"])
    mega_seen = any(r["megatron"] for r in res["patchlane"])
    extra = sorted({m for r in res["patchlane"] for m in r["extra_modules"]})
    extra_nonstd = [m for m in extra if m.split(".")[0] not in sys.stdlib_module_names]

    where = "checkout as-is" if args.as_is else "staged, byte-compiled copy"
    print(f"patchlane import cost  ({where}: {info['file']})")
    print(f"  python {sys.version.split()[0]}  {sys.executable}")
    print(f"  floor (deps):   {', '.join(deps)}")
    print(f"  floor (+stdlib): {', '.join(std)}")
    print(f"  {'variant':<38}{'median ms':>10}   {'min .. max ms':>20}   n")
    rows = (("a)  floor (deps)", "floor_deps"), ("a') floor (deps + stdlib)", "floor_full"),
            ("b)  floor (deps) + import patchlane", "patchlane"))
    for label, key in rows:
        print(f"  {label:<38}{_median(res[key], 'total_ms'):10.1f}   "
              f"{_spread(res[key], 'total_ms'):>20}   {len(res[key])}")
    print(f"  patchlane own cost b - a              {pl - fd:10.1f} ms   "
          f"(goal <= {GOAL_OWN_MS:g} ms)")
    print(f"  patchlane own cost b - a'             {pl - ff:10.1f} ms   (stdlib imports excluded)")
    print(f"  patchlane own cost, in-process        {own_inproc:10.1f} ms   "
          f"(perf_counter around `import patchlane` in b)")
    print(f"  `import patchlane` imported torch: {torch_seen}, megatron: {mega_seen}")
    listed = ": " + ", ".join(extra_nonstd) if extra_nonstd else ""
    print(f"  modules it loaded beyond floor (deps): {len(extra)} "
          f"({len(extra_nonstd)} non-stdlib{listed})")
    print(f"  startup summary: {res['patchlane'][0]['summary']}")

    result: dict = {
        "bench": "import",
        "python": sys.version.split()[0],
        "mode": "as-is" if args.as_is else "staged-pyc",
        "repeats": args.repeats,
        "floor_deps_modules": deps,
        "floor_stdlib_modules": std,
        "floor_deps_ms": round(fd, 2),
        "floor_full_ms": round(ff, 2),
        "with_patchlane_ms": round(pl, 2),
        "patchlane_own_ms": round(pl - fd, 2),
        "patchlane_own_ms_vs_full_floor": round(pl - ff, 2),
        "patchlane_own_ms_inprocess": round(own_inproc, 2),
        "goal_own_ms": GOAL_OWN_MS,
        "imports_torch": torch_seen,
        "imports_megatron": mega_seen,
        "extra_modules_nonstdlib": extra_nonstd,
    }

    if mres:
        m1 = _median(mres["mcore"], "total_ms")
        m2 = _median(mres["patchlane_mcore"], "total_ms")
        pm = _median(mres["patchlane_mcore"], "patchlane_ms")
        redecide = [r["redecide_ms"] for r in mres["patchlane_mcore"] if r["redecide_ms"]]
        rd = statistics.median(redecide) if redecide else None
        marginal = _median(mres["mcore"], "marginal_ms")
        after = _median(mres["patchlane_mcore"], "imported_after")
        finder_rows = [r for r in mres["patchlane_mcore"] if r["finder_us"] is not None]
        finder_us = _median(finder_rows, "finder_us") if finder_rows else 0.0
        finder_ms = after * finder_us / 1e3
        est = (m1 + marginal + finder_ms) / m1
        outcomes = mres["patchlane_mcore"][0]["outcomes"]
        probe_log = sorted({line.strip() for r in mres["patchlane_mcore"]
                            for line in r["stderr"].splitlines() if line.strip()}
                           - {line.strip() for r in mres["mcore"]
                              for line in r["stderr"].split("--- patchlane ---")[0].splitlines()})
        print(f"\n  {'c) ' + MCORE_MODULE:<50}{'median ms':>10}   {'min .. max ms':>20}   n")
        print(f"  {'   alone':<50}{m1:10.1f}   {_spread(mres['mcore'], 'total_ms'):>20}   "
              f"{len(mres['mcore'])}")
        both = mres["patchlane_mcore"]
        print(f"  {'   import patchlane; then it':<50}{m2:10.1f}   "
              f"{_spread(both, 'total_ms'):>20}   {len(both)}")
        print(f"  ratio                                         {m2 / m1:10.3f}x  "
              f"(goal <= {GOAL_RATIO:g}x)")
        print(f"  estimated ratio (alone + in-process pieces)  {est:10.3f}x  "
              f"= ({m1:.0f} + {marginal:.1f} + {finder_ms:.1f}) / {m1:.0f}")
        print(f"    {marginal:.1f} ms: import patchlane timed right after the target "
              f"(hook fires at once: decide + apply included)")
        print(f"    {finder_ms:.1f} ms: the hook's finder asked about {after:.0f} later "
              f"imports x {finder_us:.2f} µs")
        print(f"  in-process pieces: import patchlane first {pm:.1f} ms (deps included); "
              f"decide + apply the overlay again {rd if rd is not None else float('nan'):.1f} ms "
              f"(best of 5)")
        print(f"  overlay outcome: {outcomes}")
        if probe_log:
            print("  stderr lines only seen with patchlane: " + " | ".join(probe_log[:3]))
        result.update({
            "repeats_mcore": len(mres["mcore"]),
            "mcore_ms": round(m1, 1),
            "patchlane_mcore_ms": round(m2, 1),
            "mcore_ratio": round(m2 / m1, 4),
            "mcore_patchlane_import_ms": round(pm, 2),
            "mcore_redecide_ms": round(rd, 2) if rd is not None else None,
            "mcore_marginal_ms": round(marginal, 2),
            "mcore_finder_ms": round(finder_ms, 2),
            "mcore_imports_after_patchlane": after,
            "mcore_ratio_estimated": round(est, 4),
            "goal_ratio": GOAL_RATIO,
            "mcore_outcomes": outcomes,
            "stderr_only_with_patchlane": probe_log,
        })
    else:
        why = "--repeats-mcore 0" if have_mcore else f"{MCORE_MODULE} is not importable here"
        print(f"\n  c) skipped: {why}")
        result.update({"mcore_ratio": None, "goal_ratio": GOAL_RATIO})

    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

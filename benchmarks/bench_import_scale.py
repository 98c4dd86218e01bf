"""Does ``import patchlane``'s own work stay flat as the registry grows (9 -> 50 -> 200 entries)?

Same method as ``bench_import.py`` (fresh child interpreters, a byte-compiled staged copy of the
checkout, ``PATCHLANE_*`` unset, ``time.perf_counter`` inside the child, medians over interleaved
rounds whose order rotates), on three registry sets measured side by side in one run:

  9    the default registry alone
  50   the default registry + a generated one of 41 entries (``PATCHLANE_REGISTRY``)
  200  the default registry + a generated one of 191 entries

Generated entries mimic a large real registry: mostly ``source_patch`` entries on fake module
names (never imported, so their hooks stay pending as a real job's do until the target loads),
plus ``version_floor``, ``packaging_pin`` (half of them with a ``when:`` condition), ``config``
and ``compat_gate`` entries. Overlays, reproducers and check files exist, named after their id,
as registry validation requires. Two figures per set: patchlane's own cost in-process
(perf_counter around ``import patchlane`` after its dependencies are imported: the steady one)
and b - a (the child's total minus the dependency floor's, as bench_import.py reports). Goal:
<= 15 ms at every size, ratio 200/9 close to 1.

Each set runs twice: ``warm``, the normal start, with the validated registry cached from an
earlier process (``PATCHLANE_REGISTRY_CACHE``, a temp dir here, filled once before timing), and
``cold``, with the cache off (``PATCHLANE_REGISTRY_CACHE=0``): every YAML file parsed and every
entry validated, as on the first start after a registry changes.

    python benchmarks/bench_import_scale.py [--repeats 15] [--profile ['200 cold']]

``--profile [SET]`` also runs one child of that set (default ``200``) under cProfile and prints
the heaviest functions (cumulative time), to find whatever grows with the registry.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

# bench_import.py's child programs and helpers, so both benchmarks measure the same way
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_import import (
    DISCOVER,
    FLOOR,
    _child,
    _env,
    _imports,
    _stage,
)

GOAL_OWN_MS = 15.0
GOAL_2000_MS = 50.0  # issue 14: 2,000 entries, warm registry cache
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_ENTRIES = len(yaml.safe_load((ROOT / "registry.yaml").read_text())["entries"])
SIZES = (DEFAULT_ENTRIES, 200, 2000)
BASE, MID = str(DEFAULT_ENTRIES), "200"

PROFILE = r"""
import cProfile, io, json, pstats, sys
{imports}
prof = cProfile.Profile()
prof.enable()
import patchlane
prof.disable()
out = io.StringIO()
stats = pstats.Stats(prof, stream=out).sort_stats("cumulative")
stats.print_stats(r"patchlane|wrapt|yaml|packaging|audit|importlib", 25)
print("CHILD " + json.dumps({{"profile": out.getvalue(),
                             "entries": len(patchlane.report()["entries"])}}))
"""

# bench_import.py's b) child, plus the CPU time of `import patchlane` (time.process_time): on a
# shared machine other processes stretch wall time but not this process's own CPU time.
SCALE = r"""
import json, sys, time
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
c1 = time.process_time()
import patchlane
c2 = time.process_time()
t2 = time.perf_counter()
print("CHILD " + json.dumps({{"total_ms": 1e3 * (t2 - t0), "own_ms": 1e3 * (t2 - t1),
                             "own_cpu_ms": 1e3 * (c2 - c1), "torch": "torch" in sys.modules}}))
"""

COUNT = r"""
import json, patchlane
r = patchlane.report()
print("CHILD " + json.dumps({"entries": len(r["entries"]), "startup_error": r["startup_error"]}))
"""


def common(entry_id: str, kind: str) -> dict[str, object]:
    return {"id": entry_id, "kind": kind, "summary": f"generated {kind} for the scale benchmark",
            "upstream": {"issue": f"https://github.com/example/bench/issues/{entry_id[-4:]}",
                         "forwarded": "no"},
            "owner": "bench", "added": "2026-11-22", "status": "active"}


def generate(root: Path, count: int, packages: int | None = None) -> Path:
    """A registry of ``count`` entries (and the files they name) under ``root``. Each entry
    targets a top-level module of its own, or, with ``packages``, a module under one of that
    many top-level packages (as a real registry's entries share torch, megatron, ...)."""
    def mod(i: int) -> str:
        return f"plbench_mod_{i}" if packages is None else f"plbench_pkg_{i % packages}.mod_{i}"

    for folder in ("patches", "reproducers", "drafts"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, object]] = []
    for i in range(count):
        slot = i % 10
        if slot < 6:  # 60 % source patches, as in a real registry
            entry_id = f"bench_patch_{i:04d}"
            entry = {**common(entry_id, "source_patch"),
                     "upstream": {"issue": f"https://github.com/example/bench/issues/{i}",
                                  "forwarded": "no", "draft": f"drafts/{entry_id}.md"},
                     "target": {"distribution": f"plbench-dist-{i}",
                                "object": f"{mod(i)}.core:Thing.method"},
                     "applies_to": ">=1.0,<2.0",
                     "retire_when": {"release": ">=2.0", "probe": True},
                     "overlay": f"patches/{entry_id}.py",
                     "reproducer": f"reproducers/{entry_id}.py",
                     "fingerprint": {"policy": "refuse",
                                     "sha256": [f"sha256-v2:{i:032x}"],
                                     "covers": ["Thing.helper"]}}
            (root / "patches" / f"{entry_id}.py").write_text(
                "def overlay(wrapped, instance, args, kwargs):\n"
                "    return wrapped(*args, **kwargs)\n")
            (root / "reproducers" / f"{entry_id}.py").write_text(
                "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\n\ndef run(ctx):\n    pass\n")
            (root / "drafts" / f"{entry_id}.md").write_text("# draft\n")
        elif slot == 6:
            entry_id = f"bench_floor_{i:04d}"
            entry = {**common(entry_id, "version_floor"),
                     "target": {"distribution": f"plbench-dist-{i}",
                                "object": mod(i)},
                     "requires": ">=1.0", "policy": "warn",
                     "retire_when": {"upstream_released": True}}
        elif slot == 7:
            entry_id = f"bench_pin_{i:04d}"
            entry = {**common(entry_id, "packaging_pin"),
                     "target": {"distribution": f"plbench-dist-{i}"},
                     "pin": "<3", "policy": "warn",
                     "retire_when": {"upstream_released": True}}
            if i % 20 == 7:
                entry["when"] = {"imported": mod(i),
                                 "env": {"PLBENCH_INTERPRET": "1"}}
        elif slot == 8:
            entry_id = f"bench_config_{i:04d}"
            entry = {**common(entry_id, "config"),
                     "target": {"distribution": f"plbench-dist-{i}"},
                     "applies_to": ">=1.0",
                     "settings": {f"{mod(i)}.config.limit": 64},
                     "retire_when": {"probe": True}}
        else:
            entry_id = f"bench_gate_{i:04d}"
            entry = {**common(entry_id, "compat_gate"),
                     "check": f"patches/{entry_id}.py:check", "policy": "error",
                     "retire_when": {"upstream_released": True}}
            (root / "patches" / f"{entry_id}.py").write_text(
                "def check(config):\n    return None\n")
        entries.append(entry)
    path = root / "registry.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "entries": entries}, sort_keys=False))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--profile", nargs="?", const="200", choices=list(
        f"{n}{c}" for n in SIZES for c in ("", " cold")),
        help="also print a cProfile of `import patchlane` on one set (default: 200, warm)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-scale-") as tmp:
        cwd = str(Path(tmp) / "cwd")
        os.mkdir(cwd)
        stage = _stage(Path(tmp) / "stage")
        base = _env(stage)
        envs: dict[str, dict[str, str]] = {}
        for size in SIZES:
            env = dict(base)
            if size > DEFAULT_ENTRIES:
                extra = generate(Path(tmp) / f"gen{size}", size - DEFAULT_ENTRIES)
                env["PATCHLANE_REGISTRY"] = str(extra)
            envs[str(size)] = env | {"PATCHLANE_REGISTRY_CACHE": str(Path(tmp) / "cache")}
            envs[f"{size} cold"] = env | {"PATCHLANE_REGISTRY_CACHE": "0"}
        for name, env in envs.items():  # every set loads cleanly and has the size it claims;
            got = _child(COUNT, env, cwd)  # and this fills the warm sets' cache
            if got["startup_error"] or got["entries"] != int(name.split()[0]):
                raise RuntimeError(f"registry set {name}: {got}")

        info = _child(DISCOVER, base, cwd)
        floor_deps = _imports(info["deps"])
        floor = FLOOR.format(imports=floor_deps)
        with_pl = SCALE.format(imports=floor_deps)
        variants = [("floor", floor, base)] + [(n, with_pl, e) for n, e in envs.items()]
        for _, code, env in variants:  # warm the page cache; discarded
            _child(code, env, cwd)
        res: dict[str, list[dict]] = {n: [] for n, _, _ in variants}
        for i in range(args.repeats):
            k = i % len(variants)
            for name, code, env in variants[k:] + variants[:k]:
                res[name].append(_child(code, env, cwd))

        profile = _child(PROFILE.format(imports=floor_deps), envs[args.profile], cwd) \
            if args.profile else None

    floor_ms = statistics.median(r["total_ms"] for r in res["floor"])
    own = {n: statistics.median(r["own_ms"] for r in res[n]) for n in envs}
    low = {n: min(r["own_ms"] for r in res[n]) for n in envs}
    cpu = {n: statistics.median(r["own_cpu_ms"] for r in res[n]) for n in envs}
    diff = {n: statistics.median(r["total_ms"] for r in res[n]) - floor_ms for n in envs}
    torch_seen = any(r["torch"] for n in envs for r in res[n])
    print(f"patchlane import cost vs registry size  (staged, byte-compiled; python "
          f"{sys.version.split()[0]}; {args.repeats} interleaved rounds)")
    print(f"  floor (deps): {floor_ms:.1f} ms median")
    print("  own cost of `import patchlane`, in-process, ms:")
    print(f"  {'entries':>10}  {'wall median':>11}  {'wall min':>8}  {'CPU median':>10}  "
          f"{'b - a':>7}")
    for n in envs:
        print(f"  {n:>10}  {own[n]:11.2f}  {low[n]:8.2f}  {cpu[n]:10.2f}  {diff[n]:7.1f}")
    ratios = {"wall_median": own["2000"] / own[BASE], "wall_min": low["2000"] / low[BASE],
              "cpu_median": cpu["2000"] / cpu[BASE],
              "cold_cpu_median": cpu["2000 cold"] / cpu[f"{BASE} cold"]}
    print(f"  ratio 2000/{BASE} (warm): wall median {ratios['wall_median']:.2f}x, wall min "
          f"{ratios['wall_min']:.2f}x, CPU median {ratios['cpu_median']:.2f}x   "
          f"(cold: CPU {ratios['cold_cpu_median']:.2f}x)")
    print(f"  goals: <= {GOAL_OWN_MS:g} ms up to {MID} entries, <= {GOAL_2000_MS:g} ms at 2000 "
          f"(warm): {own['2000']:.1f} ms. b - a is a difference of two process totals (noisy "
          "on a shared machine)")
    print(f"  `import patchlane` imported torch: {torch_seen}")
    if profile is not None:
        print(f"\ncProfile of `import patchlane` with {profile['entries']} entries:")
        print(profile["profile"])
    result = {
        "bench": "import_scale",
        "python": sys.version.split()[0],
        "repeats": args.repeats,
        "floor_deps_ms": round(floor_ms, 2),
        "own_ms_inprocess": {n: round(v, 2) for n, v in own.items()},
        "own_ms_inprocess_min": {n: round(v, 2) for n, v in low.items()},
        "own_cpu_ms_inprocess": {n: round(v, 2) for n, v in cpu.items()},
        "own_ms_b_minus_a": {n: round(v, 2) for n, v in diff.items()},
        "ratio_2000_over_default": {k: round(v, 3) for k, v in ratios.items()},
        "goal_own_ms": GOAL_OWN_MS,
        "goal_2000_ms": GOAL_2000_MS,
        "imports_torch": torch_seen,
    }
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

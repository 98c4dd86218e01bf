"""Per-call overhead of a patchlane overlay wrapper, against the unwrapped original and bare wrapt.

A throw-away target distribution (``plbench_target`` 1.0.0, with ``.dist-info/METADATA`` so the
version gate can read it) is written to a temp dir together with a one-entry schema-1 registry
and a pass-through overlay (``return wrapped(*args, **kwargs)``). A real
:class:`patchlane.deciding.decider.Decider` is started on that registry, the target is imported (the
post-import hook applies the overlay), and then, interleaved, best of several repeats:

  original    ``obj.method(1)`` on a class holding the unwrapped function (same code object)
  bare wrapt  the same through ``wrapt.FunctionWrapper(original, pass_through)``
  patchlane   ``obj.method(1)`` on the patched target class (lane wrapper: hit counter + overlay)

plus, for context, the plain module-level function unwrapped and under bare wrapt (no descriptor
binding). Reports ns/call and the overhead patchlane - original in µs (goal <= 3 µs). Prints
figures measured side by side in this run; asserts no timing.

    python benchmarks/bench_wrapper.py [--number 200000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import tempfile
import textwrap
import timeit
from pathlib import Path

# Only our own Decider matters here: keep the process-wide decider that `import patchlane` builds
# from reading the default registry or scanning entry points.
os.environ.setdefault("PATCHLANE_DEFAULT_REGISTRY", "0")
os.environ.setdefault("PATCHLANE_ENTRY_POINTS", "0")

import wrapt

import patchlane.deciding.controls
import patchlane.deciding.decider
import patchlane.installed.fingerprint
import patchlane.registry

DIST = "plbench_target"
VERSION = "1.0.0"
MODULE = f"{DIST}.mod"
QUALNAME = "Thing.method"
ENTRY_ID = "bench_passthrough"
GOAL_US = 3.0

TARGET_SOURCE = textwrap.dedent('''
    """A stand-in upstream module."""


    class Thing:
        def __init__(self):
            self.base = 1

        def method(self, x):
            return self.base + x


    def func(x):
        return x + 1
''')

OVERLAY_SOURCE = textwrap.dedent('''
    """Pass-through overlay: the cheapest overlay there can be."""


    def overlay(wrapped, instance, args, kwargs):
        return wrapped(*args, **kwargs)
''')

REPRODUCER_SOURCE = '"""Benchmark entry: no reproducer is ever run."""\n'


def _write_target(site: Path) -> None:
    pkg = site / DIST
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(TARGET_SOURCE)
    info = site / f"{DIST}-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {VERSION}\n")
    (info / "RECORD").write_text("")


def _fingerprint(site: Path) -> str:
    # Fingerprint the target's source without importing it under its real name: the decider must
    # see the first real import. A private copy of the module is loaded from the same file.
    spec = importlib.util.spec_from_file_location("_plbench_fp", site / DIST / "mod.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return patchlane.installed.fingerprint.compute(module, (QUALNAME,))


def _write_registry(root: Path, sha: str) -> Path:
    (root / "patches").mkdir()
    (root / "reproducers").mkdir()
    (root / "patches" / f"{ENTRY_ID}.py").write_text(OVERLAY_SOURCE)
    (root / "reproducers" / f"{ENTRY_ID}.py").write_text(REPRODUCER_SOURCE)
    path = root / "registry.yaml"
    path.write_text(textwrap.dedent(f"""\
        schema: 1
        entries:
          - id: {ENTRY_ID}
            kind: source_patch
            summary: pass-through overlay for the per-call overhead benchmark
            target:
              distribution: {DIST}
              object: "{MODULE}:{QUALNAME}"
            applies_to: ">=1.0,<2.0"
            upstream:
              forwarded: not-needed
            retire_when:
              probe: true
            overlay: patches/{ENTRY_ID}.py
            reproducer: reproducers/{ENTRY_ID}.py
            fingerprint:
              policy: refuse
              sha256: ["{sha}"]
            owner: benchmarks
            added: 2026-01-01
            status: active
        """))
    return path


def _pass_through(wrapped, instance, args, kwargs):
    return wrapped(*args, **kwargs)


def _bench(cases: dict[str, tuple[str, dict]], number: int, repeat: int) -> dict[str, float]:
    """Best-of-``repeat`` ns/call per case; cases interleaved, order rotated every repeat."""
    names = list(cases)
    timers = {n: timeit.Timer(stmt, globals=g) for n, (stmt, g) in cases.items()}
    best = {n: float("inf") for n in names}
    for timer in timers.values():  # warm up (specialising interpreter, caches)
        timer.timeit(number // 10 or 1)
    for i in range(repeat):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            best[name] = min(best[name], timers[name].timeit(number) / number * 1e9)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per timing")
    parser.add_argument("--repeat", type=int, default=9, help="timings per case (best kept)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="patchlane-bench-") as tmp:
        site, reg_root = Path(tmp) / "site", Path(tmp) / "registry"
        reg_root.mkdir()
        _write_target(site)
        sha = _fingerprint(site)
        registry_path = _write_registry(reg_root, sha)

        sys.path.insert(0, str(site))
        importlib.invalidate_caches()
        try:
            registry = patchlane.registry.load_registries([registry_path])
            controls = patchlane.deciding.controls.Controls.from_env({})
            lane = patchlane.deciding.decider.Decider(registry, controls)
            lane.start()
            before = lane.audit.latest()[ENTRY_ID].outcome.value
            target = importlib.import_module(MODULE)
            decision = lane.audit.latest()[ENTRY_ID]
            if not lane.is_applied(ENTRY_ID):
                print(f"overlay not applied: {decision.outcome.value}: {decision.reason}")
                return 1

            patched = vars(target.Thing)["method"]
            original = patched.__wrapped__
            assert isinstance(patched, wrapt.FunctionWrapper)
            assert original.__qualname__ == QUALNAME and original.__module__ == MODULE

            def init(self):
                self.base = 1

            Original = type("Original", (), {"__init__": init, "method": original})
            Bare = type("Bare", (), {"__init__": init,
                                     "method": wrapt.FunctionWrapper(original, _pass_through)})
            func = target.func
            bare_func = wrapt.FunctionWrapper(func, _pass_through)

            assert Original().method(1) == Bare().method(1) == target.Thing().method(1) == 2

            cases = {
                "original": ("o.method(1)", {"o": Original()}),
                "bare_wrapt": ("o.method(1)", {"o": Bare()}),
                "patchlane": ("o.method(1)", {"o": target.Thing()}),
                "func_original": ("f(1)", {"f": func}),
                "func_bare_wrapt": ("f(1)", {"f": bare_func}),
            }
            hits0 = lane.audit.hits[ENTRY_ID]
            ns = _bench(cases, args.number, args.repeat)
            hits = lane.audit.hits[ENTRY_ID] - hits0
            expected_hits = (args.number // 10 or 1) + args.number * args.repeat
            lane.revert(ENTRY_ID)
        finally:
            sys.path.remove(str(site))
            for name in [m for m in sys.modules if m == DIST or m.startswith(DIST + ".")]:
                del sys.modules[name]

    overhead_us = (ns["patchlane"] - ns["original"]) / 1e3
    wrapt_us = (ns["bare_wrapt"] - ns["original"]) / 1e3
    lane_us = (ns["patchlane"] - ns["bare_wrapt"]) / 1e3
    ext = wrapt.FunctionWrapper.__module__ != "wrapt.wrappers"  # pure Python lives there

    print(f"patchlane overlay wrapper, per call  (python {sys.version.split()[0]}, wrapt "
          f"{wrapt.__version__} {'C extension' if ext else 'pure Python'}, "
          f"best of {args.repeat} x {args.number:,} calls)")
    print(f"  decision: {before} -> {decision.outcome.value}: {decision.reason}")
    print(f"  {'case':<44}{'ns/call':>9}{'vs original':>13}")
    rows = (("original      Thing.method (unwrapped)", "original"),
            ("bare wrapt    FunctionWrapper pass-through", "bare_wrapt"),
            ("patchlane     lane wrapper (counter+overlay)", "patchlane"))
    for label, key in rows:
        print(f"  {label:<44}{ns[key]:9.1f}{ns[key] / ns['original']:12.2f}x")
    print(f"  {'func          plain function (unwrapped)':<44}{ns['func_original']:9.1f}")
    print(f"  {'func          bare wrapt FunctionWrapper':<44}{ns['func_bare_wrapt']:9.1f}"
          f"{ns['func_bare_wrapt'] / ns['func_original']:12.2f}x")
    print(f"  overhead patchlane - original   {overhead_us:7.3f} µs/call  (goal <= {GOAL_US:g} µs)")
    print(f"    of which wrapt (bare - orig)  {wrapt_us:7.3f} µs/call")
    print(f"    of which patchlane's layer    {lane_us:7.3f} µs/call  (hit counter + overlay call)")
    print(f"  hit counter: {hits:,} hits for {expected_hits:,} patched calls")

    result = {
        "bench": "wrapper",
        "python": sys.version.split()[0],
        "wrapt": wrapt.__version__,
        "wrapt_c_extension": ext,
        "number": args.number,
        "repeat": args.repeat,
        "decision": decision.outcome.value,
        "ns_original": round(ns["original"], 1),
        "ns_bare_wrapt": round(ns["bare_wrapt"], 1),
        "ns_patchlane": round(ns["patchlane"], 1),
        "ns_func_original": round(ns["func_original"], 1),
        "ns_func_bare_wrapt": round(ns["func_bare_wrapt"], 1),
        "overhead_us": round(overhead_us, 4),
        "wrapt_overhead_us": round(wrapt_us, 4),
        "patchlane_layer_us": round(lane_us, 4),
        "goal_us": GOAL_US,
        "hits_counted": hits,
        "hits_expected": expected_hits,
    }
    print("RESULT " + json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

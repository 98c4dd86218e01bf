"""Per-use cost of an overlay in each target shape, against upstream's own object.

For each shape a pass-through overlay (it calls or reads upstream's and returns it) is placed
with patchlane's own code (``patchlane.targets``: the resolver, the shape's build, the placing
that checks a lookup reaches it), on a throw-away module, and the use is timed side by side with
the same use on an unpatched copy of the module: interleaved, best of several repeats. Prints
ns per use and the ratio; asserts no timing.

    python benchmarks/bench_target_shapes.py [--number 200000] [--repeat 7]

A value's read runs no code of ours (ratio ~1.0: nothing to count); a class's grafted method
costs what a wrapped method costs; a property's read adds a Python-level accessor and a bound
method for ``wrapped``.
"""

from __future__ import annotations

import argparse
import json
import sys
import timeit
import types
from collections import Counter

from patchlane.targets import resolve
from patchlane.targets.place import place

SOURCE = '''
import functools
LIMIT = 8

def func(x):
    return x + 1

class Thing:
    base = 1
    def method(self, x):
        return self.base + x
    @classmethod
    def make(cls, x):
        return x
    @staticmethod
    def pure(x):
        return x
    @property
    def prop(self):
        return self.base
    @prop.setter
    def prop(self, value):
        self.base = value

class Desc:
    def __get__(self, instance, owner=None):
        return 1

class Holder:
    desc = Desc()
'''

PASS = "def overlay(wrapped, instance, args, kwargs):\n    return wrapped(*args, **kwargs)\n"
SETTER = "def overlay_setter(wrapped, instance, args, kwargs):\n    return wrapped(*args)\n"

CASES = [  # (label, qualname, overlay source, statement on `m` and `o`)
    ("function", "func", PASS, "m.func(1)"),
    ("method", "Thing.method", PASS, "o.method(1)"),
    ("classmethod", "Thing.make", PASS, "m.Thing.make(1)"),
    ("staticmethod", "Thing.pure", PASS, "m.Thing.pure(1)"),
    ("property read", "Thing.prop", PASS, "o.prop"),
    ("property write", "Thing.prop", SETTER, "o.prop = 1"),
    ("descriptor read", "Holder.desc", PASS, "h.desc"),
    ("class (grafted method)", "Thing",
     "class Overlay:\n    def method(self, x):\n        return self.base + x\n", "o.method(1)"),
    ("attribute read", "LIMIT", "def overlay(original):\n    return original + 0.0\n",
     "m.LIMIT"),
]


def _module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(SOURCE, module.__dict__)
    return module


def _overlay(source: str) -> types.ModuleType:
    overlay = types.ModuleType("bench_overlay")
    overlay.__file__ = "bench_overlay.py"
    exec(source, overlay.__dict__)
    return overlay


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    hits: Counter[str] = Counter()
    rows = []
    for label, qualname, source, stmt in CASES:
        upstream, patched = _module("bench_upstream"), _module("bench_patched")
        target = resolve(patched, qualname)

        def hit() -> bool:
            hits["bench"] += 1
            return True  # the decider's answer while the entry is applied

        placements = place(target.shape.build(target.found, _overlay(source), "bench", hit),
                           target.target)
        assert placements
        timers = {
            which: timeit.Timer(stmt, globals={"m": mod, "o": mod.Thing(), "h": mod.Holder()})
            for which, mod in (("upstream", upstream), ("patched", patched))}
        best = {which: float("inf") for which in timers}
        for timer in timers.values():
            timer.timeit(args.number // 10 or 1)
        for i in range(args.repeat):
            order = list(timers) if i % 2 == 0 else list(reversed(timers))
            for which in order:
                best[which] = min(best[which], timers[which].timeit(args.number) /
                                  args.number * 1e9)
        rows.append({"shape": label, "shape_name": target.shape.name,
                     "ns_upstream": round(best["upstream"], 1),
                     "ns_patched": round(best["patched"], 1),
                     "ratio": round(best["patched"] / best["upstream"], 2),
                     "counted": target.shape.counts_hits})
    print(f"overlay per use, pass-through, by target shape (python {sys.version.split()[0]}, "
          f"best of {args.repeat} x {args.number:,})")
    print(f"  {'shape':<26}{'upstream ns':>12}{'patched ns':>12}{'ratio':>8}  counted")
    for row in rows:
        print(f"  {row['shape']:<26}{row['ns_upstream']:12.1f}{row['ns_patched']:12.1f}"
              f"{row['ratio']:7.2f}x  {'yes' if row['counted'] else 'no (a read)'}")
    print("RESULT " + json.dumps({"bench": "target_shapes", "python": sys.version.split()[0],
                                  "rows": rows}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

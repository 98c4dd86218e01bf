"""Every shape of target (patchlane.targets) through the real decider, on a fake upstream
module (framework mechanics, never evidence that a fix works): applied means a lookup through
the owner reaches the overlay; calls are counted; revert puts back the very object; the walk is
idempotent, honours PATCHLANE_DISABLE, waits for the import (the lazy start), refuses drift and
re-applies after a revert. And every target no shape can carry is refused, never applied."""

from __future__ import annotations

import functools
import importlib
import textwrap
from dataclasses import dataclass
from typing import Any

import pytest

from patchlane.common.errors import StrictOverlayError
from patchlane.deciding.audit import Outcome
from patchlane.targets import SHAPE_NAMES, resolve, shape_named

from ..conftest import FakeTarget

SHAPES_SOURCE = '''
"""A fake upstream module with one target of every shape."""

import functools

TABLE = {"a": 1}
LIMIT = 8


def shout(text):
    return text.upper()


class Greeter:
    GREETING = "hello"

    def greet(self, name):
        return f"{self.GREETING} {name}"

    @classmethod
    def make(cls, name):
        return (cls.__name__, name)

    @staticmethod
    def norm(name):
        return name.strip()

    @property
    def title(self):
        return self._title

    @title.setter
    def title(self, value):
        self._title = value

    @functools.cached_property
    def cached(self):
        return 42


class Loud(Greeter):
    pass
'''


@dataclass
class Case:
    qualname: str
    shape: str
    overlay: str
    use: str  # an expression on `m` (the module) whose value shows the overlay ran
    upstream: Any  # its value without the overlay
    patched: Any  # its value with it


CASES = [
    Case("shout", "function",
         "def overlay(wrapped, instance, args, kwargs):\n    return wrapped(*args) + '!'\n",
         "m.shout('hi')", "HI", "HI!"),
    Case("Greeter.greet", "method",
         "def overlay(wrapped, instance, args, kwargs):\n"
         "    return (type(instance).__name__, wrapped(*args, **kwargs))\n",
         "m.Loud().greet('a')", "hello a", ("Loud", "hello a")),
    Case("Greeter.make", "classmethod",
         "def overlay(wrapped, instance, args, kwargs):\n"
         "    return ('via', instance.__name__, wrapped(*args))\n",
         "m.Loud.make('b')", ("Loud", "b"), ("via", "Loud", ("Loud", "b"))),
    Case("Greeter.norm", "staticmethod",
         "def overlay(wrapped, instance, args, kwargs):\n"
         "    return (instance, wrapped(*args).title())\n",
         "m.Greeter().norm(' x ')", "x", (None, "X")),
    Case("Greeter.title", "property",
         "def overlay(wrapped, instance, args, kwargs):\n"
         "    return wrapped().upper()\n"
         "def overlay_setter(wrapped, instance, args, kwargs):\n"
         "    wrapped(args[0] + '?')\n",
         "(lambda g: (setattr(g, 'title', 'dr'), g.title)[1])(m.Greeter())", "dr", "DR?"),
    Case("Greeter.cached", "descriptor",
         "def overlay(wrapped, instance, args, kwargs):\n"
         "    return wrapped() + 1\n",
         "m.Greeter().cached", 42, 43),
    Case("Greeter", "class",
         "class Overlay:\n"
         "    GREETING = 'hi'\n"
         "    def greet(self, name):\n"
         "        return f'{self.GREETING}, {name}!'\n"
         "    @property\n"
         "    def title(self):\n"
         "        return 'untitled'\n",
         "(m.Loud().greet('c'), m.Loud().title)", ("hello c", None), ("hi, c!", "untitled")),
    Case("TABLE", "attribute",
         "def overlay(original):\n    return {**original, 'b': 2}\n",
         "m.TABLE", {"a": 1}, {"a": 1, "b": 2}),
    Case("Greeter.GREETING", "attribute",
         "def overlay(original):\n    return original + ' there'\n",
         "m.Loud().greet('d')", "hello d", "hello there d"),
]


def _use(fake: FakeTarget, case: Case) -> Any:
    module = fake.import_target()
    if case.shape == "class" and case.upstream[1] is None:
        # upstream's title has no _title until set: read it as upstream would fail
        try:
            return eval(case.use, {"m": module})
        except AttributeError:
            return (module.Loud().greet("c"), None)
    return eval(case.use, {"m": module})


def _setup(fake: FakeTarget, case: Case, **entry: Any) -> None:
    fake.target_file.write_text(SHAPES_SOURCE)
    fake.write_overlay(case.overlay)
    fake.write_registry(fake.entry(
        target={"distribution": fake.distribution, "object": f"{fake.module}:{case.qualname}",
                "shape": case.shape},
        fingerprint={"policy": "refuse", "sha256": [fake.fingerprint((case.qualname,))]},
        **entry))


def _stored(fake: FakeTarget, case: Case) -> Any:
    module = fake.import_target()
    *owner, name = case.qualname.split(".")
    holder = getattr(module, owner[0]) if owner else module
    return vars(holder).get(name)


def test_every_shape_has_a_case() -> None:
    assert {c.shape for c in CASES} == set(SHAPE_NAMES)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.shape}-{c.qualname}" for c in CASES])
def test_each_shape_applies_hits_reverts_and_reapplies(fake_target: FakeTarget,
                                                       case: Case) -> None:
    _setup(fake_target, case)
    decider = fake_target.decider()  # started before the import: the lazy start
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.PENDING
    module = fake_target.import_target()
    *owner, name = case.qualname.split(".")
    holder = getattr(module, owner[0]) if owner else module
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.APPLIED, decision.reason
    assert shape_named(case.shape).described in decision.reason
    assert decider.is_applied(fake_target.entry_id)
    assert _use(fake_target, case) == case.patched
    counted = shape_named(case.shape).counts_hits
    hits = decider.audit.hits[fake_target.entry_id]
    assert (hits >= 1) if counted else (hits == 0)

    placed = {p.attribute: vars(p.owner).get(p.attribute)
              for p in decider._applied[fake_target.entry_id]}
    for _ in range(3):  # idempotent: nothing new is stacked
        decider.apply()
    assert {p.attribute: vars(p.owner).get(p.attribute)
            for p in decider._applied[fake_target.entry_id]} == placed

    originals = {p.attribute: (p.owner, p.had_own, p.original)
                 for p in decider._applied[fake_target.entry_id]}
    assert decider.revert(fake_target.entry_id).outcome is Outcome.REVERTED
    for attribute, (owner, had_own, original) in originals.items():
        if had_own:
            assert vars(owner)[attribute] is original  # the very object, back
        else:
            assert attribute not in vars(owner)
    assert not decider.is_applied(fake_target.entry_id)
    assert _use(fake_target, case) == case.upstream

    decider.apply()  # applied again after a revert
    assert decider.is_applied(fake_target.entry_id)
    assert _use(fake_target, case) == case.patched
    assert name in vars(holder)


def _shout_applied_beside(fake: FakeTarget, more_source: str) -> tuple[Any, Any]:
    """The function case's target, with ``more_source`` after it in its module: the imported
    module and the entry's decision, which must be applied."""
    _setup(fake, next(c for c in CASES if c.shape == "function"))
    fake.target_file.write_text(SHAPES_SOURCE + more_source)
    fake.write_registry(fake.entry(
        target={"distribution": fake.distribution, "object": f"{fake.module}:shout",
                "shape": "function"},
        fingerprint={"policy": "refuse", "sha256": [fake.fingerprint(("shout",))]}))
    decider = fake.decider()
    module = fake.import_target()
    decision = decider.audit.latest()[fake.entry_id]
    assert decision.outcome is Outcome.APPLIED, decision.reason
    return module, decision


def test_a_table_the_module_built_from_the_function_is_named_in_the_decision(
        fake_target: FakeTarget, caplog: pytest.LogCaptureFixture) -> None:
    """Upstream's module kept its own function in a table and an alias while it ran, before the
    overlay was placed: calls through those skip the overlay. Applied (a lookup reaches it),
    and the decision and a warning say where it does not reach."""
    module, decision = _shout_applied_beside(
        fake_target, "\nDISPATCH = {'loud': shout, 'n': 1}\nROUTES = [len, shout]\n")
    assert module.shout("hi") == "HI!" and module.DISPATCH["loud"]("hi") == "HI"
    where = f"{fake_target.module}.DISPATCH['loud'], {fake_target.module}.ROUTES[1]"
    assert decision.reason.endswith(f"; but {where} still holds upstream's function (taken "
                                    "when its module ran): calls through it skip the overlay")
    assert any(r.levelname == "WARNING" and where in r.getMessage() for r in caplog.records)


def test_a_function_named_where_a_package_re_exports_it_says_where_it_is_defined(
        fake_target: FakeTarget, caplog: pytest.LogCaptureFixture) -> None:
    """Named through the package that re-exports it (how a user spells it), the function is
    patched on the package only: the module that defines it, and every module that imported
    it from there, keep upstream's. Applied (a lookup through the package reaches it), and the
    decision and a warning say where it does not, and where to name the target instead."""
    fake = fake_target
    _setup(fake, next(c for c in CASES if c.shape == "function"))
    (fake.root / fake.package / "__init__.py").write_text("from .target import shout\n")
    fake.write_registry(fake.entry(
        target={"distribution": fake.distribution, "object": f"{fake.package}:shout",
                "shape": "function"},
        fingerprint={"policy": "refuse", "sha256": [fake.fingerprint(("shout",))]}))
    decider = fake.decider()
    package = importlib.import_module(fake.package)
    decision = decider.audit.latest()[fake.entry_id]
    assert decision.outcome is Outcome.APPLIED, decision.reason
    assert package.shout("hi") == "HI!" and fake.import_target().shout("hi") == "HI"
    said = (f"; but {fake.module}.shout still holds upstream's function (taken when its module "
            f"ran): calls through it skip the overlay; fix: name the target where it is "
            f"defined, `{fake.module}:shout`, so it is patched before other modules import it")
    assert decision.reason.endswith(said), decision.reason
    assert any(r.levelname == "WARNING" and f"`{fake.module}:shout`" in r.getMessage()
               for r in caplog.records)


def test_looking_for_copies_only_reads_a_modules_globals(fake_target: FakeTarget) -> None:
    """A global whose methods run code (transformers' lazy mappings import a module per key
    in items(); a proxy computes its __class__) is read, never run: the target imports, the
    entry is applied, and a copy in such a table is still found."""
    module, decision = _shout_applied_beside(fake_target, textwrap.dedent("""
        RAN = []
        class LazyMapping(dict):
            def items(self):
                RAN.append("items")
                raise ImportError("a model's optional dependency is missing")
            def values(self):
                RAN.append("values")
                raise ImportError("a model's optional dependency is missing")
        class Proxy:
            @property
            def __class__(self):
                RAN.append("__class__")
                raise RuntimeError("evaluated")
        MAPPING = LazyMapping(loud=shout)
        LAZY = Proxy()
        """))
    assert module.RAN == []
    assert f"{fake_target.module}.MAPPING['loud']" in decision.reason


def test_a_module_without_copies_says_nothing_of_them(fake_target: FakeTarget) -> None:
    case = next(c for c in CASES if c.shape == "function")
    _setup(fake_target, case)
    decider = fake_target.decider()
    fake_target.import_target()
    assert "still holds" not in decider.audit.latest()[fake_target.entry_id].reason


PASSING_THROUGH = [c for c in CASES if shape_named(c.shape).off_when_reverted]


@pytest.mark.parametrize("case", PASSING_THROUGH,
                         ids=[f"{c.shape}-{c.qualname}" for c in PASSING_THROUGH])
def test_a_layer_put_back_after_its_revert_passes_straight_through(fake_target: FakeTarget,
                                                                   case: Case) -> None:
    """Another library kept what it found while the overlay was applied and puts it back after
    `patchlane.revert()` (`unittest.mock.patch.object` entered before the revert and left
    after it does): a use through it is upstream's, uncounted, and applying the entry again
    places a new layer (it read "already wrapped" from the old one: "applied", the overlay
    off)."""
    assert {c.shape for c in PASSING_THROUGH} == {
        "function", "method", "classmethod", "staticmethod", "property", "descriptor"}
    _setup(fake_target, case)
    decider = fake_target.decider()
    module = fake_target.import_target()
    *owner, name = case.qualname.split(".")
    holder = getattr(module, owner[0]) if owner else module
    assert _use(fake_target, case) == case.patched
    kept = vars(holder)[name]
    assert decider.revert(fake_target.entry_id).outcome is Outcome.REVERTED
    setattr(holder, name, kept)
    hits = decider.audit.hits[fake_target.entry_id]
    assert _use(fake_target, case) == case.upstream
    assert decider.audit.hits[fake_target.entry_id] == hits
    decider.apply()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.APPLIED and "already wrapped" not in decision.reason
    assert decider.is_applied(fake_target.entry_id)
    assert _use(fake_target, case) == case.patched  # once: the old layer passes through
    assert decider.audit.hits[fake_target.entry_id] > hits


def test_a_revert_after_a_reload_turns_off_the_layer_placed_before_it(
        fake_target: FakeTarget) -> None:
    """`from target import f` taken before an `importlib.reload` holds the first layer; the
    reload placed a second on the fresh function. While applied, both run the overlay; once
    reverted, neither does (the first one ran on, counted, after the revert)."""
    import importlib

    case = next(c for c in CASES if c.shape == "function")
    _setup(fake_target, case)
    decider = fake_target.decider()
    module = fake_target.import_target()
    kept = module.shout
    importlib.reload(module)
    assert module.shout is not kept
    assert kept("hi") == "HI!" and module.shout("hi") == "HI!"  # applied: both run it
    decider.revert(fake_target.entry_id)
    hits = decider.audit.hits[fake_target.entry_id]
    assert kept("hi") == "HI" and module.shout("hi") == "HI"
    assert decider.audit.hits[fake_target.entry_id] == hits


def test_a_class_overlays_member_kept_after_a_revert_is_counted_as_it_runs(
        fake_target: FakeTarget) -> None:
    """A class's grafted member runs the override itself: one a caller kept still runs it
    after the revert (the class's own members are upstream's again), and is counted."""
    case = next(c for c in CASES if c.shape == "class")
    _setup(fake_target, case)
    decider = fake_target.decider()
    module = fake_target.import_target()
    kept = module.Loud().greet
    decision = decider.revert(fake_target.entry_id)
    assert decision.outcome is Outcome.REVERTED
    assert module.Loud().greet("c") == "hello c"
    hits = decider.audit.hits[fake_target.entry_id]
    assert kept("c") == "hello, c!"  # the override's own format, upstream's GREETING again
    assert decider.audit.hits[fake_target.entry_id] == hits + 1


def test_a_revert_under_another_librarys_wrapper_says_so_and_turns_the_overlay_off(
        fake_target: FakeTarget) -> None:
    """Another library wrapped the overlaid function since (a profiler, a decorator applied at
    run time): revert cannot take it back, and said "restored the original" while the overlay
    still ran inside it. The overlay is off now, and the decision says what was left."""
    case = next(c for c in CASES if c.shape == "function")
    _setup(fake_target, case)
    decider = fake_target.decider()
    module = fake_target.import_target()
    ours = module.shout
    module.shout = lambda text: ("traced", ours(text))
    assert module.shout("hi") == ("traced", "HI!")
    decision = decider.revert(fake_target.entry_id)
    assert decision.outcome is Outcome.REVERTED
    assert decision.reason == (
        "patchlane.revert(): " + fake_target.module + ".shout was replaced since by another "
        "library, and is left as it is; the overlay is off: a call that still reaches it "
        "(through that object, or a reference taken before) goes straight to upstream's code")
    hits = decider.audit.hits[fake_target.entry_id]
    assert module.shout("hi") == ("traced", "HI")
    assert decider.audit.hits[fake_target.entry_id] == hits
    # Applied again, it reads the library's function where upstream's was: drift, refused
    # (it read "already wrapped": applied, with the overlay off).
    decider.apply()
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.REFUSED_DRIFT


@pytest.mark.parametrize("case", CASES, ids=[f"{c.shape}-{c.qualname}" for c in CASES])
def test_each_shape_disabled_leaves_the_target_alone(fake_target: FakeTarget,
                                                     case: Case) -> None:
    _setup(fake_target, case)
    fake_target.target_file.write_text(SHAPES_SOURCE)
    module = fake_target.import_target()
    before = _stored(fake_target, case)
    decider = fake_target.decider({"PATCHLANE_DISABLE": fake_target.entry_id})
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.SKIPPED_DISABLED
    assert _stored(fake_target, case) is before
    assert not decider.is_applied(fake_target.entry_id)
    assert module is fake_target.import_target()


@pytest.mark.parametrize("case", CASES, ids=[f"{c.shape}-{c.qualname}" for c in CASES])
def test_each_shape_refuses_drift_and_places_nothing(fake_target: FakeTarget,
                                                     case: Case) -> None:
    _setup(fake_target, case)
    # Upstream changes the target's own source: its fingerprint moves.
    changed = {
        "shout": ("return text.upper()", "return text.upper().strip()"),
        "Greeter.greet": ('return f"{self.GREETING} {name}"', 'return f"{self.GREETING}  {name}"'),
        "Greeter.make": ("return (cls.__name__, name)", "return (cls.__qualname__, name)"),
        "Greeter.norm": ("return name.strip()", "return name.lstrip()"),
        "Greeter.title": ("self._title = value", "self._title = str(value)"),
        "Greeter.cached": ("return 42", "return 41"),
        "Greeter": ('GREETING = "hello"', 'GREETING = "hey"'),
        "TABLE": ('TABLE = {"a": 1}', 'TABLE = {"a": 2}'),
        "Greeter.GREETING": ('GREETING = "hello"', 'GREETING = "hey"'),
    }[case.qualname]
    assert changed[0] in SHAPES_SOURCE
    fake_target.target_file.write_text(SHAPES_SOURCE.replace(*changed))
    decider = fake_target.decider()
    fake_target.import_target()
    before = _stored(fake_target, case)
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.REFUSED_DRIFT
    assert not decider.is_applied(fake_target.entry_id)
    assert _stored(fake_target, case) is before


def test_source_and_import_fingerprint_alike_for_every_shape(fake_target: FakeTarget) -> None:
    from patchlane.installed.fingerprint import compute, compute_from_source

    fake_target.target_file.write_text(SHAPES_SOURCE)
    module = fake_target.import_target()
    for case in CASES:
        assert compute(module, [case.qualname]) == \
            compute_from_source(SHAPES_SOURCE, [case.qualname]), case.qualname
    # a property's setter is part of its fingerprint
    assert compute_from_source(SHAPES_SOURCE, ["Greeter.title"]) != compute_from_source(
        SHAPES_SOURCE.replace("self._title = value", "self._title = None"), ["Greeter.title"])


# -- refusals ------------------------------------------------------------------------------

REFUSALS_SOURCE = SHAPES_SOURCE + '''
import os

greet_bound = Greeter().greet
Number = int


class Meta(type):
    @property
    def shadowed(cls):
        return "the metaclass's"

    @property
    def frozen(cls):
        return 0

    @shadowed.setter
    def shadowed(cls, value):
        pass  # swallows the assignment: the class's own attribute never changes


class WithMeta(metaclass=Meta):
    shadowed = "the class's"
    frozen = 1


def __getattr__(name):
    if name == "computed":
        return shout
    raise AttributeError(name)
'''


@dataclass
class Refusal:
    qualname: str
    says: str  # a fragment of the reason (with its fix)
    overlay: str = "def overlay(wrapped, instance, args, kwargs):\n    return 'never'\n"
    shape: str | None = None


REFUSALS = [
    Refusal("Greeter.title.fget", "target the property itself"),
    Refusal("shout.__code__", "not a class or module"),
    Refusal("Number.bit_length", "a type built in C"),
    Refusal("os", "a module is imported"),
    Refusal("greet_bound", "a method bound to"),
    Refusal("computed", "module-level __getattr__"),
    Refusal("WithMeta.shadowed", "calls would not reach it",
            overlay="def overlay(original):\n    return original + '!'\n"),
    Refusal("WithMeta.frozen", "refuses the assignment",
            overlay="def overlay(original):\n    return original + 1\n"),
    Refusal("shout", "target.shape says property", shape="property"),
    Refusal("Greeter.cached", "has no __set__",
            overlay="def overlay_setter(wrapped, instance, args, kwargs):\n    pass\n"),
    Refusal("Greeter.title", "defines none of overlay",
            overlay="def over_lay(wrapped, instance, args, kwargs):\n    pass\n"),
    Refusal("Greeter", "has no member 'gret'",
            overlay="class Overlay:\n    def gret(self, name):\n        return name\n"),
    Refusal("Greeter", "a forgotten @property",
            overlay="class Overlay:\n    def title(self):\n        return 't'\n"),
    Refusal("Greeter", "calls super()",
            overlay="class Overlay:\n    def greet(self, name):\n"
                    "        return super().greet(name)\n"),
    Refusal("TABLE", "returned upstream's own object",
            overlay="def overlay(original):\n    original['b'] = 2\n    return original\n"),
]


@pytest.mark.parametrize("refusal", REFUSALS, ids=[r.says for r in REFUSALS])
def test_a_target_no_shape_carries_is_refused_never_applied(fake_target: FakeTarget,
                                                            refusal: Refusal) -> None:
    fake_target.target_file.write_text(REFUSALS_SOURCE)
    fake_target.write_overlay(refusal.overlay)
    target: dict[str, Any] = {"distribution": fake_target.distribution,
                              "object": f"{fake_target.module}:{refusal.qualname}"}
    if refusal.shape:
        target["shape"] = refusal.shape
    fake_target.write_registry(fake_target.entry(
        target=target, fingerprint={"policy": "warn", "sha256": ["sha256-v2:" + "0" * 32]}))
    module = fake_target.import_target()
    before = dict(vars(module))
    classes = {n: dict(vars(c)) for n, c in vars(module).items() if isinstance(c, type)
               and c.__module__ == module.__name__}
    decider = fake_target.decider()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR, decision.reason
    assert refusal.says in decision.reason
    assert not decider.is_applied(fake_target.entry_id)
    # nothing is left half-applied
    assert all(vars(module)[k] is v for k, v in before.items())
    for name, members in classes.items():
        assert vars(getattr(module, name)).keys() == members.keys()
        assert all(vars(getattr(module, name))[k] is v for k, v in members.items()
                   if k != "__dict__")
    with pytest.raises(StrictOverlayError, match="PATCHLANE_STRICT"):
        fake_target.decider({"PATCHLANE_STRICT": "1"})


def test_new_writes_a_stub_for_every_shape_that_the_decider_takes(fake_target: FakeTarget
                                                                  ) -> None:
    """The stub of each shape compiles, and for a callable or descriptor target it applies as
    a pass-through; a value's or a class's stub is refused until the fix is written."""
    fake_target.target_file.write_text(SHAPES_SOURCE)
    module = fake_target.import_target()
    for case in CASES:
        resolved = resolve(module, case.qualname)
        assert resolved.shape.name == case.shape
        body = resolved.shape.stub(f"{fake_target.module}:{case.qualname}")
        header = "from typing import Any\n"
        compile(header + body, f"stub-{case.shape}", "exec")
    refused_until_written = {"attribute", "class"}
    for case in CASES:
        if case.shape in refused_until_written:
            continue
        stub = shape_named(case.shape).stub(case.qualname)
        namespace: dict[str, Any] = {}
        exec("from typing import Any\n" + stub, namespace)
        # a pass-through: calling through it gives upstream's answer
        wrapped = functools.partial(lambda *a: ("upstream", a))
        assert namespace["overlay"](wrapped, None, (1,), {}) == ("upstream", (1,))


def test_unknown_target_shape_in_the_registry_is_a_clear_error(fake_target: FakeTarget) -> None:
    from patchlane.common.errors import RegistryError
    from patchlane.registry import load_registries

    fake_target.write_registry(fake_target.entry(
        target={"distribution": fake_target.distribution,
                "object": f"{fake_target.module}:shout", "shape": "fuction"}))
    with pytest.raises(RegistryError) as caught:
        load_registries([fake_target.registry])
    said = str(caught.value)
    assert "target.shape" in said and "fuction" in said and "function" in said


def test_the_issue_trace_one_more_shape_touches_two_files() -> None:
    """Adding a shape is a module in patchlane/targets/ and its place in SHAPES: nothing else
    names the shapes (the schema reads SHAPE_NAMES, new reads each shape's stub)."""
    import pathlib

    import patchlane

    root = pathlib.Path(patchlane.__file__).parent
    naming = [p.relative_to(root).as_posix() for p in root.rglob("*.py")
              if "ATTRIBUTE" in p.read_text() and "targets/" not in p.as_posix()]
    assert naming == []
    assert textwrap.dedent("x") == "x"


def test_a_c_classmethod_inherited_by_a_python_class_is_a_classmethod() -> None:
    """torch 2.15's autograd ``Function.apply`` is a C classmethod (``classmethod_descriptor``)
    inherited by Python subclasses: a classmethod, wrapped as wrapt wraps one and set on the
    subclass (revert deletes it again), never mistaken for a generic descriptor."""
    import types

    from patchlane.targets.place import place, unplace

    module = types.ModuleType("plshape_cdesc")
    exec("class Table(dict):\n    pass\n", module.__dict__)
    target = resolve(module, "Table.fromkeys")
    assert target.shape.name == "classmethod" and not target.found.own
    overlay = types.ModuleType("plshape_cdesc_overlay")
    overlay.__file__ = "overlay.py"
    overlay.overlay = lambda wrapped, instance, args, kwargs: {"via": wrapped(*args, **kwargs)}
    hits: list[int] = []

    def hit() -> bool:
        hits.append(1)
        return True  # on: the overlay runs

    placements = place(target.shape.build(target.found, overlay, "e", hit), target.target)
    assert module.Table.fromkeys("ab") == {"via": {"a": None, "b": None}} and hits == [1]
    for placement in placements:
        unplace(placement)
    assert "fromkeys" not in vars(module.Table) and module.Table.fromkeys("a") == {"a": None}


@pytest.mark.parametrize("class_first", [False, True], ids=["method-first", "class-first"])
def test_a_class_override_never_replaces_another_entrys_layer(fake_target: FakeTarget,
                                                              class_first: bool) -> None:
    """A method entry on Greeter.greet, and a class entry whose Overlay overrides greet too.
    Grafted second, the override would replace the method entry's layer: that fix would no
    longer run while it read "applied". It is refused, naming the entry. Grafted first, the
    method entry finds the override's code where its fingerprint expects upstream's: refused
    as drift. Either way no entry reads "applied" while its fix does not run."""
    fake = fake_target
    cls_id = "greeter_class_fix"
    (fake.root / "patches" / f"{cls_id}.py").write_text(
        "class Overlay:\n    def greet(self, name):\n        return f'hey {name}'\n")
    (fake.root / "reproducers" / f"{cls_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n    pass\n")
    method = fake.entry()
    whole = fake.entry(id=cls_id, overlay=f"patches/{cls_id}.py",
                       reproducer=f"reproducers/{cls_id}.py",
                       target={"distribution": fake.distribution,
                               "object": f"{fake.module}:Greeter", "shape": "class"},
                       fingerprint={"policy": "refuse", "sha256": [fake.fingerprint(("Greeter",))]})
    fake.write_registry(*([whole, method] if class_first else [method, whole]))
    decider = fake.decider()
    module = fake.import_target()
    latest = decider.audit.latest()
    if class_first:
        assert latest[cls_id].outcome is Outcome.APPLIED, latest[cls_id].reason
        assert latest[fake.entry_id].outcome is Outcome.REFUSED_DRIFT
        assert module.Greeter().greet("a") == "hey a"
        assert decider.is_applied(cls_id) and not decider.is_applied(fake.entry_id)
    else:
        assert latest[fake.entry_id].outcome is Outcome.APPLIED
        assert latest[cls_id].outcome is Outcome.FAILED_ERROR
        assert f"Greeter.greet is already patched by {fake.entry_id}" in latest[cls_id].reason
        assert module.Greeter().greet("a") == "patched hello a"
        assert decider.is_applied(fake.entry_id) and decider.audit.hits[fake.entry_id] == 1

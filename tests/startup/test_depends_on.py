"""depends_on: a source patch that builds on another applies only where that one is applied,
and does not bind where the dependency's gate excludes the release. Mechanics on a fake target
(the real pair, mcore_rerun_sentinel and its #7428 follow-up, run in tests/releases)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from patchlane.common.errors import RegistryError
from patchlane.deciding.audit import AuditLog, Outcome
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.registry import load_registries
from patchlane.sweep.reproduce import Mode, case_env
from patchlane.training.ranks import compare_patch_sets

from ..conftest import FakeTarget

FOLLOW = "follow_up_fix"


def follow_up(fake: FakeTarget, **overrides: Any) -> dict[str, Any]:
    """A second patch on the fake module's shout(), depending on the fake's own entry."""
    (fake.root / "patches" / f"{FOLLOW}.py").write_text(
        "def overlay(wrapped, instance, args, kwargs):\n"
        "    return wrapped(*args, **kwargs) + '!'\n")
    (fake.root / "reproducers" / f"{FOLLOW}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n    pass\n")
    entry = fake.entry(id=FOLLOW, overlay=f"patches/{FOLLOW}.py",
                       reproducer=f"reproducers/{FOLLOW}.py",
                       target={"distribution": fake.distribution,
                               "object": f"{fake.module}:shout"},
                       fingerprint={"policy": "refuse",
                                    "sha256": [fake.fingerprint(("shout",))]},
                       upstream={"issue": "https://example.invalid/issues/2",
                                 "forwarded": "https://example.invalid/pull/3"},
                       depends_on=[fake.entry_id])
    entry.update(overrides)
    return entry


def decide(fake: FakeTarget, env: dict[str, str], *entries: dict[str, Any]) -> dict[str, Any]:
    fake.write_registry(*entries)
    decider = Decider(load_registries([fake.registry]), Controls.from_env(env), AuditLog())
    decider.start()
    fake.import_target()
    return decider.audit.latest()


def test_applies_after_its_dependency(fake_target: FakeTarget) -> None:
    latest = decide(fake_target, {}, fake_target.entry(), follow_up(fake_target))
    assert latest[fake_target.entry_id].outcome is Outcome.APPLIED
    assert latest[FOLLOW].outcome is Outcome.APPLIED
    assert fake_target.import_target().shout("a") == "A!"


def test_skipped_when_the_dependency_is_not_applied(fake_target: FakeTarget) -> None:
    latest = decide(fake_target, {"PATCHLANE_DISABLE": fake_target.entry_id},
                    fake_target.entry(), follow_up(fake_target))
    assert latest[FOLLOW].outcome is Outcome.SKIPPED_DEPENDENCY
    assert f"depends on {fake_target.entry_id}, whose gate admits 1.2.0" in latest[FOLLOW].reason
    assert "skipped: disabled" in latest[FOLLOW].reason
    assert fake_target.import_target().shout("a") == "A"


def test_does_not_bind_where_the_dependency_gate_excludes_the_release(
        fake_target: FakeTarget) -> None:
    # Upstream ships the behaviour itself from 1.1 on: the dependency is gated out, the
    # follow-up still applies (its own gate decides).
    latest = decide(fake_target, {}, fake_target.entry(applies_to=">=1.0,<1.1"),
                    follow_up(fake_target))
    assert latest[fake_target.entry_id].outcome is Outcome.SKIPPED_GATE
    assert latest[FOLLOW].outcome is Outcome.APPLIED


@pytest.mark.parametrize("dep_gate", [">=1.0,<1.9", ">=1.0,<1.1"])
def test_the_dependency_is_judged_by_what_its_walk_recorded(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch, dep_gate: str) -> None:
    # Its gate (open, or excluding the release) is evaluated once, by its own walk; the
    # follow-up reads that record instead of evaluating the dependency's gate again.
    import patchlane.registry.records as records  # Entry.read_gate: every gate an entry reads

    asked: list[str] = []
    real = records.check_gate

    def spy(distribution: str, spec: Any, *args: Any) -> Any:
        asked.append(str(spec))
        return real(distribution, spec, *args)

    monkeypatch.setattr(records, "check_gate", spy)
    latest = decide(fake_target, {}, fake_target.entry(applies_to=dep_gate),
                    follow_up(fake_target))
    assert asked.count(str(SpecifierSet(dep_gate))) == 1, asked
    applied = dep_gate == ">=1.0,<1.9"
    assert latest[fake_target.entry_id].outcome is (
        Outcome.APPLIED if applied else Outcome.SKIPPED_GATE)
    assert latest[FOLLOW].outcome is Outcome.APPLIED


@pytest.mark.parametrize(("deps", "message", "found"), [
    (["no_such_entry"], "unknown dependency", "no_such_entry"),
    ([FOLLOW], "an entry cannot depend on itself", FOLLOW),
    (["Not-An-Id"], "not an entry id", "Not-An-Id"),
])
def test_bad_dependencies_are_named(fake_target: FakeTarget, deps: list[str], message: str,
                                    found: str) -> None:
    fake_target.write_registry(fake_target.entry(), follow_up(fake_target, depends_on=deps))
    with pytest.raises(RegistryError, match=message) as info:
        load_registries([fake_target.registry])
    assert info.value.entry_id == FOLLOW and info.value.key == "depends_on"
    assert info.value.found == found


def test_a_cycle_and_a_misspelling_are_named(fake_target: FakeTarget) -> None:
    first = fake_target.entry(depends_on=[FOLLOW])
    fake_target.write_registry(first, follow_up(fake_target))
    with pytest.raises(RegistryError, match="dependency cycle") as info:
        load_registries([fake_target.registry])
    assert info.value.found in (f"{fake_target.entry_id} -> {FOLLOW} -> {fake_target.entry_id}",
                                f"{FOLLOW} -> {fake_target.entry_id} -> {FOLLOW}")
    fake_target.write_registry(fake_target.entry(),
                               follow_up(fake_target, depends_on=[fake_target.entry_id + "x"]))
    with pytest.raises(RegistryError, match=f"did you mean '{fake_target.entry_id}'"):
        load_registries([fake_target.registry])


def test_a_case_applies_the_dependency_in_both_modes(fake_target: FakeTarget) -> None:
    fake_target.write_registry(fake_target.entry(), follow_up(fake_target))
    entry = load_registries([fake_target.registry]).get(FOLLOW)
    for mode in Mode:
        env = case_env(entry, mode, {})
        assert env["PATCHLANE_ONLY"] == f"{FOLLOW},{fake_target.entry_id}"
    assert case_env(entry, Mode.WITHOUT, {})["PATCHLANE_DISABLE"] == FOLLOW


def test_ranks_that_differ_on_a_dependency_say_it_is_the_cause(tmp_path: Path) -> None:
    def record(dep: str, follow: str) -> dict[str, Any]:
        base = {"status": "active", "enabled": True, "installed": "0.16.1", "gate_open": True,
                "fingerprint": None}
        return {"patchlane": "x", "registry_digest": "d", "entries": {
            "dep": {**base, "decision": dep, "depends_on": []},
            FOLLOW: {**base, "decision": follow, "depends_on": ["dep"]}}}

    problems = compare_patch_sets([record("applied", "applied"),
                                   record("skipped: disabled", "skipped: dependency")])
    assert problems[0].startswith("entry dep decision: ranks 0 = \"applied\"")
    assert problems[1].endswith("(follows from dep, which it depends on)")


def test_a_dependency_whose_module_is_still_importing_is_waited_for(
        fake_target: FakeTarget) -> None:
    # The dependency's module imports the follow-up's module in its body (DSA's dsa.py imports
    # dsa_layout): the follow-up's hook fires first, waits, and is decided right after.
    pkg = fake_target.root / fake_target.package
    (pkg / "dep_mod.py").write_text("from . import follow_mod\n\n\nclass A:\n"
                                    "    def f(self):\n        return 'a'\n")
    (pkg / "follow_mod.py").write_text("def g():\n    return 'b'\n")
    from patchlane.installed.fingerprint import compute_from_source

    def entry(entry_id: str, module: str, qualname: str, **extra: Any) -> dict[str, Any]:
        for folder, body in (("patches", "def overlay(w, i, a, k):\n    return w(*a, **k) + '!'\n"),
                             ("reproducers", "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                                             "def run(ctx):\n    pass\n")):
            (fake_target.root / folder / f"{entry_id}.py").write_text(body)
        source = (pkg / f"{module}.py").read_text()
        return fake_target.entry(
            id=entry_id, overlay=f"patches/{entry_id}.py", reproducer=f"reproducers/{entry_id}.py",
            target={"distribution": fake_target.distribution,
                    "object": f"{fake_target.package}.{module}:{qualname}"},
            fingerprint={"policy": "refuse", "sha256": [compute_from_source(source, (qualname,))]},
            upstream={"forwarded": "https://example.invalid/pull/9"}, **extra)

    fake_target.write_registry(entry("dep_entry", "dep_mod", "A.f"),
                               entry("follow_entry", "follow_mod", "g",
                                     depends_on=["dep_entry"]))
    decider = Decider(load_registries([fake_target.registry]), Controls.from_env({}), AuditLog())
    decider.start()
    import importlib

    module = importlib.import_module(f"{fake_target.package}.dep_mod")
    latest = decider.audit.latest()
    assert latest["dep_entry"].outcome is Outcome.APPLIED
    assert latest["follow_entry"].outcome is Outcome.APPLIED, latest["follow_entry"].reason
    waited = [d for d in decider.audit.history() if d.entry_id == "follow_entry"
              and d.outcome is Outcome.PENDING]
    assert any("still being imported" in d.reason for d in waited)
    assert module.A().f() == "a!" and module.follow_mod.g() == "b!"


def test_a_dependency_in_a_package_still_importing_is_waited_for_not_imported(
        fake_target: FakeTarget) -> None:
    # The package's __init__ imports the follow-up's module, then defines a name, then imports
    # the dependency's module, which reads that name (torch/__init__ importing torch.nn before
    # torch.utils.checkpoint). Importing the dependency from the follow-up's hook would import
    # it from a half-run package: an ImportError raised in the job's own `import pkg`.
    import importlib

    decider = _package_pair(
        fake_target, "from . import follow_mod\nLATE = 1\nfrom . import dep_mod\n",
        f"from {fake_target.package} import LATE\n\n\nclass A:\n"
        "    def f(self):\n        return 'a'\n")
    package = importlib.import_module(fake_target.package)
    latest = decider.audit.latest()
    assert latest["dep_entry"].outcome is Outcome.APPLIED
    assert latest["follow_entry"].outcome is Outcome.APPLIED, latest["follow_entry"].reason
    waited = [d.reason for d in decider.audit.history() if d.entry_id == "follow_entry"
              and d.outcome is Outcome.PENDING]
    assert any(f"{fake_target.package} is still being imported" in r for r in waited), waited
    assert package.dep_mod.A().f() == "a!" and package.follow_mod.g() == "b!"


def _package_pair(fake: FakeTarget, init: str, dep_source: str,
                  drifted: bool = False) -> Decider:
    """dep_entry on pkg.dep_mod's A.f, follow_entry on pkg.follow_mod's g depending on it;
    the package's ``__init__`` is ``init``. ``drifted``: dep_entry's fingerprint is wrong."""
    from patchlane.installed.fingerprint import compute_from_source

    pkg = fake.root / fake.package
    (pkg / "__init__.py").write_text(init)
    (pkg / "dep_mod.py").write_text(dep_source)
    (pkg / "follow_mod.py").write_text("def g():\n    return 'b'\n")
    entries = []
    for entry_id, module, qualname, deps in (("dep_entry", "dep_mod", "A.f", []),
                                             ("follow_entry", "follow_mod", "g", ["dep_entry"])):
        for folder, body in (("patches", "def overlay(w, i, a, k):\n    return w(*a, **k) + '!'\n"),
                             ("reproducers", "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                                             "def run(ctx):\n    pass\n")):
            (fake.root / folder / f"{entry_id}.py").write_text(body)
        value = compute_from_source((pkg / f"{module}.py").read_text(), (qualname,))
        if drifted and entry_id == "dep_entry":
            value = "sha256-v2:" + "0" * 32
        entries.append(fake.entry(
            id=entry_id, overlay=f"patches/{entry_id}.py", reproducer=f"reproducers/{entry_id}.py",
            target={"distribution": fake.distribution,
                    "object": f"{fake.package}.{module}:{qualname}"},
            fingerprint={"policy": "refuse", "sha256": [value]},
            upstream={"forwarded": "https://example.invalid/pull/9"}, depends_on=deps))
    fake.write_registry(*entries)
    decider = Decider(load_registries([fake.registry]), Controls.from_env(
        {"PATCHLANE_STRICT": "1"} if drifted else {}), AuditLog())
    decider.start()
    return decider


def test_a_dependency_a_loading_package_never_imports_is_imported_and_decided(
        fake_target: FakeTarget) -> None:
    # The package's __init__ imports only the follow-up's module: the dependency's module
    # imports fine from the follow-up's hook, and both apply (waiting would leave both
    # pending for good, and the follow-up's fix off)
    import importlib

    decider = _package_pair(fake_target, "from . import follow_mod\n",
                            "class A:\n    def f(self):\n        return 'a'\n")
    package = importlib.import_module(fake_target.package)
    latest = decider.audit.latest()
    assert latest["dep_entry"].outcome is Outcome.APPLIED, latest["dep_entry"].reason
    assert latest["follow_entry"].outcome is Outcome.APPLIED, latest["follow_entry"].reason
    assert package.follow_mod.g() == "b!"


def test_a_dependencys_strict_refusal_is_raised_through_the_dependent(
        fake_target: FakeTarget) -> None:
    # Strict mode: the dependency's drift, met while the dependent's hook imports it, is the
    # DriftError it is (exit 4), never recorded as the dependent's skip
    import importlib

    from patchlane.common.errors import DriftError

    _package_pair(fake_target, "", "class A:\n    def f(self):\n        return 'a'\n",
                  drifted=True)
    with pytest.raises(DriftError, match="dep_entry"):
        importlib.import_module(f"{fake_target.package}.follow_mod")


# -- a chain whose root imports its top ----------------------------------------------------


def _chain(fake: FakeTarget, root_body: str = "") -> dict[str, str]:
    """top -> mid -> root (each depends on the next), on three fake modules; root's module
    imports top's while it loads. ``root_body`` runs in root's module before that import.
    Returns entry id -> module name."""
    from patchlane.installed.fingerprint import compute_from_source

    pkg = fake.root / fake.package
    sources = {"top_mod": "def t():\n    return 't'\n",
               "mid_mod": "def m():\n    return 'm'\n",
               "root_mod": root_body + "from . import top_mod\n\n\ndef r():\n    return 'r'\n"}
    for name, source in sources.items():
        (pkg / f"{name}.py").write_text(source)
    entries = []
    for entry_id, module, qualname, deps in (("top_entry", "top_mod", "t", ["mid_entry"]),
                                             ("mid_entry", "mid_mod", "m", ["root_entry"]),
                                             ("root_entry", "root_mod", "r", [])):
        for folder, body in (("patches", "def overlay(w, i, a, k):\n    return w(*a, **k) + '!'\n"),
                             ("reproducers", "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n"
                                             "def run(ctx):\n    pass\n")):
            (fake.root / folder / f"{entry_id}.py").write_text(body)
        entries.append(fake.entry(
            id=entry_id, overlay=f"patches/{entry_id}.py", reproducer=f"reproducers/{entry_id}.py",
            target={"distribution": fake.distribution,
                    "object": f"{fake.package}.{module}:{qualname}"},
            fingerprint={"policy": "refuse",
                         "sha256": [compute_from_source(sources[module], (qualname,))]},
            upstream={"forwarded": "https://example.invalid/pull/9"}, depends_on=deps))
    fake.write_registry(*entries)
    return {"top_entry": f"{fake.package}.top_mod", "mid_entry": f"{fake.package}.mid_mod",
            "root_entry": f"{fake.package}.root_mod"}


def _assert_chain_applied(decider: Decider, modules: dict[str, str]) -> None:
    import sys

    latest = decider.audit.latest()
    for entry_id in modules:
        assert latest[entry_id].outcome is Outcome.APPLIED, (entry_id, latest[entry_id].reason)
    assert decider.audit.pending() == 0
    assert sys.modules[modules["top_entry"]].t() == "t!"
    assert sys.modules[modules["mid_entry"]].m() == "m!"
    assert sys.modules[modules["root_entry"]].r() == "r!"


def test_an_entry_whose_dependency_waits_waits_too(fake_target: FakeTarget) -> None:
    # root's module imports top's: top's hook fires first, imports mid's module, and mid waits
    # for root (still loading). top must wait for mid, not settle as skipped: decided once
    # root is, after mid.
    import importlib

    modules = _chain(fake_target)
    decider = Decider(load_registries([fake_target.registry]), Controls.from_env({}), AuditLog())
    decider.start()
    importlib.import_module(modules["root_entry"])
    _assert_chain_applied(decider, modules)
    skipped = [d for d in decider.audit.history() if d.outcome is Outcome.SKIPPED_DEPENDENCY]
    assert skipped == []
    waited = [d.reason for d in decider.audit.history()
              if d.entry_id == "top_entry" and d.outcome is Outcome.PENDING]
    assert any("waiting for mid_entry" in reason for reason in waited), waited


@pytest.mark.parametrize("release", ["after the others", "at once"])
@pytest.mark.parametrize("attempt", range(3))
def test_a_chain_imported_by_many_threads_settles_the_same_way(
        fake_target: FakeTarget, release: str, attempt: int) -> None:
    # Every rank must decide the same: 32 threads import top's, mid's or root's module at
    # once while root's module is held mid-load (it waits on an event before it imports
    # top's). Whatever the interleaving, all three end applied. "after the others" lets every
    # top/mid import finish first (top and mid can only wait); "at once" races the release
    # against them. A short switch interval makes the threads interleave often.
    import importlib
    import sys
    import threading

    modules = _chain(fake_target, root_body="from . import hold as _hold\n"
                                            "_hold.entered.set()\n"
                                            "_hold.release.wait(60)\n")
    (fake_target.root / fake_target.package / "hold.py").write_text(
        "import threading\nentered = threading.Event()\nrelease = threading.Event()\n")
    decider = Decider(load_registries([fake_target.registry]), Controls.from_env({}), AuditLog())
    decider.start()
    hold = importlib.import_module(f"{fake_target.package}.hold")
    errors: list[BaseException] = []

    def load(name: str, barrier: threading.Barrier | None = None) -> None:
        try:
            if barrier is not None:
                barrier.wait(60)
            importlib.import_module(name)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        loader = threading.Thread(target=load, args=(modules["root_entry"],))
        loader.start()
        assert hold.entered.wait(60)
        barrier = threading.Barrier(32)
        names = [modules["top_entry"], modules["mid_entry"], modules["root_entry"]]
        threads = [threading.Thread(target=load, args=(names[i % 3], barrier))
                   for i in range(32)]
        for thread in threads:
            thread.start()
        if release == "after the others":
            for i, thread in enumerate(threads):
                if i % 3 != 2:
                    thread.join(60)
            assert decider.audit.latest()["top_entry"].outcome is Outcome.PENDING
        hold.release.set()
        for thread in [loader, *threads]:
            thread.join(60)
            assert not thread.is_alive()
    finally:
        sys.setswitchinterval(interval)
        hold.release.set()
    assert errors == []
    _assert_chain_applied(decider, modules)

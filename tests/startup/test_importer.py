"""Import-time mechanics on a fake target: lazy hooks, idempotence, threads, revert, drift,
strict mode, controls, probe and audit. (Framework mechanics only; see tests/releases/.)"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import wrapt

from patchlane.common.errors import OverlayError, StrictModeError
from patchlane.deciding.audit import Outcome
from patchlane.installed.fingerprint import compute

from ..conftest import FakeTarget


def wrapper_depth(obj: Any) -> int:
    """How many wrapt FunctionWrappers sit between the attribute and the plain function."""
    depth = 0
    while isinstance(obj, wrapt.FunctionWrapper):
        depth += 1
        obj = obj.__wrapped__
    return depth


def greet_attr(module: Any) -> Any:
    return vars(module.Greeter)["greet"]


def test_applies_lazily_when_the_target_is_imported(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    assert fake_target.module not in sys.modules  # import patchlane must not import targets
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.PENDING
    module = fake_target.import_target()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.APPLIED, decision
    assert decision.installed == "1.2.0"
    assert decision.fingerprint_found in decision.fingerprint_expected
    assert module.Greeter().greet("x") == "patched hello x"
    assert decider.audit.hits[fake_target.entry_id] == 1


def test_applies_at_once_when_the_target_is_already_imported(fake_target: FakeTarget) -> None:
    module = fake_target.import_target()
    assert module.Greeter().greet("x") == "hello x"
    decider = fake_target.decider()
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.APPLIED
    assert module.Greeter().greet("x") == "patched hello x"


def test_import_twice_and_apply_twice_leave_exactly_one_wrapper(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    module = fake_target.import_target()
    importlib.import_module(fake_target.module)
    decider.apply()
    decider.apply()
    decider.start()
    assert wrapper_depth(greet_attr(module)) == 1
    applied = [d for d in decider.audit.history() if d.outcome is Outcome.APPLIED]
    assert len(applied) == 1
    assert module.Greeter().greet("y") == "patched hello y"


def test_reload_reapplies_exactly_one_wrapper(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    module = fake_target.import_target()
    old_class = module.Greeter
    module = importlib.reload(module)
    assert module.Greeter is not old_class  # the reload built a fresh, unwrapped class
    assert wrapper_depth(greet_attr(module)) == 1
    assert module.Greeter().greet("z") == "patched hello z"
    importlib.reload(module)
    decider.apply()
    assert wrapper_depth(greet_attr(module)) == 1


def test_a_purge_from_sys_modules_then_a_fresh_import_reapplies(fake_target: FakeTarget) -> None:
    """Code that drops a module from sys.modules and imports it again (test isolation,
    plugin reloaders) gets a fresh module with fresh classes: the overlay follows them."""
    decider = fake_target.decider()
    module = fake_target.import_target()
    for name in [n for n in sys.modules if n == fake_target.package
                 or n.startswith(fake_target.package + ".")]:
        del sys.modules[name]
    fresh = importlib.import_module(fake_target.module)
    assert fresh is not module and fresh.Greeter is not module.Greeter
    assert wrapper_depth(greet_attr(fresh)) == 1
    assert fresh.Greeter().greet("p") == "patched hello p"
    decider.apply()
    assert wrapper_depth(greet_attr(fresh)) == 1


def test_the_post_import_hook_fires_at_import_reload_and_reimport_and_can_be_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from patchlane import import_hook

    name = f"plhook_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []

    def hook(module: object) -> None:
        seen.append(id(module))

    import_hook.when_imported(name, hook)
    assert import_hook.is_installed() and seen == []
    first = importlib.import_module(name)
    assert seen == [id(first)]
    assert type(first.__loader__).__name__ == "SourceFileLoader"  # the real loader, restored
    importlib.reload(first)
    assert seen == [id(first)] * 2
    del sys.modules[name]
    again = importlib.import_module(name)
    assert seen == [id(first)] * 2 + [id(again)]
    import_hook.when_imported(name, hook)  # the same callback again: nothing added...
    assert len(seen) == 3  # ...nor fired
    import_hook.remove(name, hook)
    importlib.reload(again)
    assert len(seen) == 3
    # a callback named "module:function" is imported only when it first fires
    (tmp_path / f"{name}_cb.py").write_text("CALLS = []\ndef hook(m):\n    CALLS.append(m)\n")
    import_hook.when_imported(name, f"{name}_cb:hook")
    calls = sys.modules[f"{name}_cb"].CALLS
    assert calls == [again]  # imported already: fired at once
    importlib.reload(again)
    assert calls == [again, again]
    import_hook.remove(name, f"{name}_cb:hook")


def test_a_second_decider_never_stacks_a_second_wrapper(fake_target: FakeTarget) -> None:
    first = fake_target.decider()
    module = fake_target.import_target()
    second = fake_target.decider()
    assert wrapper_depth(greet_attr(module)) == 1
    assert first.is_applied(fake_target.entry_id)
    assert "another patchlane decider" in second.audit.latest()[fake_target.entry_id].reason


def test_eight_threads_importing_at_once_end_with_one_wrapper(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            importlib.import_module(fake_target.module)
            decider.apply()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    module = sys.modules[fake_target.module]
    assert wrapper_depth(greet_attr(module)) == 1
    assert len([d for d in decider.audit.history() if d.outcome is Outcome.APPLIED]) == 1


def test_revert_restores_the_original_and_apply_brings_it_back(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    module = fake_target.import_target()
    original = wrapper_depth(greet_attr(module))
    assert original == 1
    decision = decider.revert(fake_target.entry_id)
    assert decision.outcome is Outcome.REVERTED
    assert wrapper_depth(greet_attr(module)) == 0
    assert module.Greeter().greet("a") == "hello a"
    assert not decider.is_applied(fake_target.entry_id)
    with pytest.raises(OverlayError, match="nothing to revert"):
        decider.revert(fake_target.entry_id)
    decider.apply()
    assert module.Greeter().greet("a") == "patched hello a"


def test_revert_of_an_inherited_attribute_removes_the_shadow(fake_target: FakeTarget) -> None:
    fake_target.target_file.write_text(fake_target.target_file.read_text() + (
        "\n\nclass Base:\n    def greet(self, name):\n        return 'base ' + name\n"
        "\n\nclass Child(Base):\n    pass\n"))
    module = fake_target.import_target()
    # Child.greet is Base.greet reached through Child: only the imported module can say so.
    entry = fake_target.entry(target={"distribution": fake_target.distribution,
                                      "object": f"{fake_target.module}:Child.greet"})
    entry["fingerprint"] = {"sha256": [compute(module, ("Child.greet",))]}
    fake_target.write_registry(entry)
    decider = fake_target.decider()
    decision = decider.audit.latest()[fake_target.entry_id]
    if decision.outcome is Outcome.FAILED_ERROR:
        pytest.fail(decision.reason)
    assert module.Child().greet("b") == "patched base b"
    assert module.Base().greet("b") == "base b"  # the parent class is untouched
    decider.revert(fake_target.entry_id)
    assert "greet" not in vars(module.Child)


# -- arrange one variation, import the target, assert the decision: one table ---------------

HI = ('f"hello {name}"', 'f"hi {name}"')


def _edit_target(old: str, new: str) -> Callable[[FakeTarget], None]:
    def arrange(fake: FakeTarget) -> None:
        fake.write_registry()  # the fingerprint of the release we verified
        fake.target_file.write_text(fake.target_file.read_text().replace(old, new))
    return arrange


def _warn_and_edit(fake: FakeTarget) -> None:
    entry = fake.entry()
    entry["fingerprint"]["policy"] = "warn"
    fake.write_registry(entry)
    fake.target_file.write_text(fake.target_file.read_text().replace(*HI))


def _registry(**changes: Any) -> Callable[[FakeTarget], None]:
    def arrange(fake: FakeTarget) -> None:
        fake.write_registry(fake.entry(**changes))
    return arrange


def _overlay(text: str) -> Callable[[FakeTarget], None]:
    def arrange(fake: FakeTarget) -> None:
        fake.write_overlay(text)
    return arrange


def _nothing(fake: FakeTarget) -> None:
    pass


DOCSTRING_ADDED = ("    def greet(self, name):\n",
                   "    def greet(self, name):  # a comment\n"
                   "        \"\"\"Docstring added.\"\"\"\n\n")

# arrange, env ({id}: the entry id), outcome, the reason contains, greet("x") afterwards,
# whether one wrapper sits on the target
DECISIONS = [
    pytest.param(_edit_target(*HI), {}, Outcome.REFUSED_DRIFT, "patchlane fingerprint {id}",
                 "hi x", False, id="drift-refused-by-default"),
    pytest.param(_warn_and_edit, {}, Outcome.APPLIED, "drift tolerated", "patched hi x", True,
                 id="drift-with-policy-warn-applies-and-says-so"),
    pytest.param(_edit_target(*DOCSTRING_ADDED), {}, Outcome.APPLIED, "fingerprint",
                 "patched hello x", True, id="reformatting-is-not-drift"),
    pytest.param(_nothing, {"PATCHLANE_DISABLE": "{id}"}, Outcome.SKIPPED_DISABLED,
                 "PATCHLANE_DISABLE", "hello x", False, id="disable"),
    pytest.param(_nothing, {"PATCHLANE_DISABLE": "other,{id} "}, Outcome.SKIPPED_DISABLED,
                 "PATCHLANE_DISABLE", "hello x", False, id="disable-in-a-list"),
    pytest.param(_nothing, {"PATCHLANE_ONLY": "other_entry"}, Outcome.SKIPPED_DISABLED,
                 "PATCHLANE_ONLY", "hello x", False, id="only-another-entry"),
    pytest.param(_nothing, {"PATCHLANE_ONLY": "{id}"}, Outcome.APPLIED, "fingerprint",
                 "patched hello x", True, id="only-this-entry-applies-it"),
    pytest.param(_registry(applies_to=">=1.3,<2.0"), {}, Outcome.SKIPPED_GATE,
                 "1.2.0 is outside", "hello x", False, id="gate-closed"),
    pytest.param(_edit_target("FIXED = False", "FIXED = True"), {}, Outcome.UPSTREAM_FIXED,
                 "probe", "hello x", False, id="probe-reports-upstream-fixed"),
    pytest.param(_overlay("def not_the_overlay(*a):\n    pass\n"), {}, Outcome.FAILED_ERROR,
                 "defines no callable `overlay`", "hello x", False,
                 id="overlay-without-overlay-function"),
    pytest.param(_overlay("raise ImportError('needs a kernel library')\n"), {},
                 Outcome.FAILED_ERROR, "needs a kernel library", "hello x", False,
                 id="overlay-raising-on-load"),
    pytest.param(_registry(status="retired"), {}, Outcome.RETIRED, "retired", "hello x", False,
                 id="retired-recorded-never-applied"),
]


@pytest.mark.parametrize(("arrange", "env", "outcome", "reason", "greets", "wrapped"),
                         DECISIONS)
def test_decision_table(fake_target: FakeTarget, arrange: Callable[[FakeTarget], None],
                        env: dict[str, str], outcome: Outcome, reason: str, greets: str,
                        wrapped: bool) -> None:
    arrange(fake_target)
    decider = fake_target.decider({k: v.format(id=fake_target.entry_id) for k, v in env.items()})
    module = fake_target.import_target()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is outcome, decision
    assert reason.format(id=fake_target.entry_id) in decision.reason
    assert module.Greeter().greet("x") == greets
    assert wrapper_depth(greet_attr(module)) == int(wrapped)
    if outcome is Outcome.REFUSED_DRIFT:
        assert decision.fingerprint_found not in decision.fingerprint_expected


@pytest.mark.parametrize("case", ["drift", "gate", "error"])
def test_strict_mode_raises_on_every_problem(fake_target: FakeTarget, case: str) -> None:
    if case == "drift":
        fake_target.write_registry(fake_target.entry(
            fingerprint={"sha256": ["sha256:" + "0" * 32]}))
    elif case == "gate":  # a gate that cannot be evaluated: no distribution metadata
        entry = fake_target.entry()
        entry["target"] = {**entry["target"], "distribution": "plfake-not-installed"}
        fake_target.write_registry(entry)
    else:
        fake_target.write_overlay("def overlay(w, i, a, k):\n    return w(*a, **k)\n"
                                  "def probe(m):\n    raise ValueError('probe broke')\n")
    decider = fake_target.decider({"PATCHLANE_STRICT": "1"})
    with pytest.raises(StrictModeError) as info:
        fake_target.import_target()
    assert info.value.entry_id == fake_target.entry_id
    assert "PATCHLANE_STRICT" in str(info.value)
    # the failed import left no half-initialised module behind
    assert fake_target.module not in sys.modules
    # raised by cause, each with its own exit code; all stay StrictModeErrors
    raised, code = {"drift": ("DriftError", 4), "error": ("StrictOverlayError", 5),
                    "gate": ("StrictModeError", 6)}[case]
    assert type(info.value).__name__ == raised and int(info.value.exit_code) == code
    assert isinstance(info.value, OverlayError) == (case == "error")
    # the message carries the audit's reason whole: one text for the log and the error
    assert decider.audit.latest()[fake_target.entry_id].reason in str(info.value)


def test_strict_mode_accepts_a_gate_that_excludes_the_installed_release(
        fake_target: FakeTarget) -> None:
    # a registry carries entries for several releases: one for another release is no error
    fake_target.write_registry(fake_target.entry(applies_to=">=2.0,<3.0"))
    decider = fake_target.decider({"PATCHLANE_STRICT": "1"})
    module = fake_target.import_target()
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.SKIPPED_GATE
    assert module.Greeter().greet("g") == "hello g"


def test_strict_mode_does_not_raise_for_requested_or_good_outcomes(
        fake_target: FakeTarget) -> None:
    decider = fake_target.decider({"PATCHLANE_STRICT": "1",
                                   "PATCHLANE_DISABLE": fake_target.entry_id})
    fake_target.import_target()
    assert decider.audit.latest()[fake_target.entry_id].outcome is Outcome.SKIPPED_DISABLED


def test_each_decision_is_logged(fake_target: FakeTarget,
                                 caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="patchlane")
    fake_target.decider()
    fake_target.import_target()
    messages = [r.getMessage() for r in caplog.records if r.name == "patchlane"]
    assert any(fake_target.entry_id in m and "applied" in m for m in messages), messages


def test_hit_counter_counts_calls_of_the_overlay_only(fake_target: FakeTarget) -> None:
    decider = fake_target.decider()
    module = fake_target.import_target()
    for _ in range(5):
        module.Greeter().greet("h")
    module.shout("not patched")
    assert decider.audit.hits[fake_target.entry_id] == 5


def test_two_entries_on_one_module_are_each_pending_then_decided(
        fake_target: FakeTarget) -> None:
    second = fake_target.entry(
        id=fake_target.entry_id + "_b", overlay=f"patches/{fake_target.entry_id}_b.py",
        reproducer=f"reproducers/{fake_target.entry_id}.py",
        target={"distribution": fake_target.distribution,
                "object": f"{fake_target.module}:shout"},
        fingerprint={"sha256": [fake_target.fingerprint(("shout",))]})
    (fake_target.root / "patches" / f"{fake_target.entry_id}_b.py").write_text(
        "def overlay(w, i, a, k):\n    return 'loud ' + w(*a, **k)\n")
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}_b.py").write_text("")
    second["reproducer"] = f"reproducers/{fake_target.entry_id}_b.py"
    fake_target.write_registry(fake_target.entry(), second)
    decider = fake_target.decider()
    latest = decider.audit.latest()
    assert latest[fake_target.entry_id].outcome is Outcome.PENDING
    assert latest[second["id"]].outcome is Outcome.PENDING
    module = fake_target.import_target()
    latest = decider.audit.latest()
    assert latest[second["id"]].outcome is Outcome.APPLIED, latest[second["id"]]
    assert module.shout("x") == "loud X"
    assert module.Greeter().greet("y") == "patched hello y"


@pytest.mark.parametrize("ranks", [None, ("0", "4"), ("3", "4")])
def test_a_training_process_logging_at_info_reads_each_line_once_with_its_rank(
        fake_target: FakeTarget, ranks: tuple[str, str] | None) -> None:
    """Under ``logging.basicConfig(level=INFO)`` (a training script's usual set-up) a decision
    reads ``INFO:patchlane:<id> applied: ...``: the logger's name once, never ``patchlane:
    patchlane:``; under a launcher with several ranks, with ``rank N:``, and from rank 0 only
    (the ranks hold one patch set); at DEBUG every rank says everything."""
    import subprocess
    import sys

    fake_target.write_registry()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0",
               PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root), env.get("PYTHONPATH", "")]))
    env.pop("RANK", None)
    if ranks is not None:
        env.update(RANK=ranks[0], WORLD_SIZE=ranks[1])
    code = ("import logging; logging.basicConfig(level=logging.INFO)\n"
            f"import patchlane, {fake_target.module}\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.startswith("INFO:patchlane:")]
    mine = [line for line in lines if fake_target.entry_id in line and "applied" in line]
    if ranks is not None and ranks[0] != "0":
        assert not lines, out.stderr  # rank 0 speaks for the ranks at INFO
        debug = subprocess.run([sys.executable, "-c", code.replace("INFO", "DEBUG")], env=env,
                               capture_output=True, text=True, timeout=120, check=False)
        assert f"DEBUG:patchlane:rank {ranks[0]}: patchlane" in debug.stderr, debug.stderr
        assert f"INFO:patchlane:rank {ranks[0]}: {fake_target.entry_id} applied" \
            in debug.stderr, debug.stderr
        return
    assert mine, out.stderr
    # one startup line, one per overlay applied, one when every entry is decided: no skips
    assert len(lines) == 3, lines
    assert lines[0].split("patchlane:", 1)[1].lstrip().removeprefix("rank 0: ") \
        .startswith("patchlane 0") and "1 entry (" in lines[0], lines
    assert "patchlane settled [default]: applied: " + fake_target.entry_id in lines[2], lines
    assert not any("patchlane: patchlane" in line or ":patchlane:patchlane:" in line
                   for line in lines), lines
    prefix = f"INFO:patchlane:rank {ranks[0]}: " if ranks else "INFO:patchlane:"
    assert mine[0].startswith(prefix + fake_target.entry_id), mine[0]


def test_with_no_logging_configured_a_warning_is_named(fake_target: FakeTarget) -> None:
    """No handler anywhere: patchlane's warnings still print, named (``patchlane: ...``), as
    Python's last resort would print them bare."""
    import subprocess
    import sys

    fake_target.write_registry(fake_target.entry(
        fingerprint={"policy": "refuse", "sha256": ["sha256-v2:" + "0" * 32]}))  # drift
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update(PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0",
               PATCHLANE_REGISTRY=str(fake_target.registry),
               PYTHONPATH=os.pathsep.join([str(fake_target.root), env.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", f"import patchlane, {fake_target.module}"],
                         env=env, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert f"patchlane: {fake_target.entry_id} refused: drift:" in out.stderr, out.stderr


@pytest.mark.parametrize(("source", "step", "line"), [
    ("import os\nraise RuntimeError('boom at import')\n", "running the overlay file's top level",
     2),
    ("def overlay(wrapped, instance, args, kwargs):\n    return wrapped(*args, **kwargs)\n\n\n"
     "def probe(module):\n    raise ValueError('probe boom')\n", "the overlay's probe(module)", 6),
], ids=["top-level", "probe"])
def test_an_overlay_that_raises_is_named_with_the_step_the_line_and_the_fix(
        fake_target: FakeTarget, source: str, step: str, line: int) -> None:
    # It said only "RuntimeError: boom": no file, no line, nothing of what ran
    fake_target.write_overlay(source)
    decider = fake_target.decider()
    fake_target.import_target()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR
    overlay = fake_target.root / "patches" / f"{fake_target.entry_id}.py"
    assert decision.reason.startswith(f"{step} raised "), decision.reason
    assert f" at {overlay}:{line}; fix: correct the overlay file, or leave the entry out with " \
        f"PATCHLANE_DISABLE={fake_target.entry_id}" in decision.reason, decision.reason


def test_after_loading_calls_back_once_the_package_has_finished(tmp_path: Path) -> None:
    """What a depends_on wait parked on a package still running (torch/__init__) is woken by:
    called once, after the package's last line, with the spec's own class back."""
    from patchlane import import_hook

    pkg = tmp_path / "pl_after_loading_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from patchlane import import_hook\n"
        "SEEN = []\n"
        "ARMED = import_hook.after_loading(__name__, lambda: SEEN.append(DONE))\n"
        "DONE = 'the whole body ran'\n")
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("pl_after_loading_pkg")
        assert module.ARMED is True and module.SEEN == ["the whole body ran"]
        assert type(module.__spec__).__name__ == "ModuleSpec"
        assert module.__spec__._initializing is False
        assert import_hook.after_loading("pl_after_loading_pkg", lambda: None) is False
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("pl_after_loading_pkg", None)


def test_a_missing_target_and_a_syntax_error_are_named_where_they_are(
        fake_target: FakeTarget) -> None:
    # A target gone from the release is no fault of the overlay file, and a file that does not
    # compile is named at its own line, not inside patchlane
    fake_target.write_registry(fake_target.entry(
        target={"distribution": fake_target.distribution,
                "object": f"{fake_target.module}:Greeter.nope"}))
    decider = fake_target.decider()
    fake_target.import_target()
    reason = decider.audit.latest()[fake_target.entry_id].reason
    assert reason.startswith("finding the target raised ") or "Greeter.nope" in reason, reason
    assert "patchlane/" not in reason and "correct the overlay file" not in reason, reason


def test_an_overlay_that_does_not_compile_is_named_at_its_line(fake_target: FakeTarget) -> None:
    fake_target.write_overlay("def overlay(wrapped, instance, args, kwargs):\n    return (\n")
    decider = fake_target.decider()
    fake_target.import_target()
    reason = decider.audit.latest()[fake_target.entry_id].reason
    overlay = fake_target.root / "patches" / f"{fake_target.entry_id}.py"
    assert f"{overlay}" in reason and "patchlane/deciding" not in reason, reason

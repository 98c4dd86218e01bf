"""patchlane.loading: files loaded by path under a name that carries their entry id, which is
how every overlay learns its id; the real overlays and reproducers meet their Protocols."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.loading import entry_id, load_file, module_name
from patchlane.protocols import OverlayModule, ReproducerModule
from patchlane.targets import shape_named

from ..conftest import FakeTarget


def test_entry_id_comes_from_the_module_name_the_startup_gives() -> None:
    for role in ("overlay", "reproducer", "check"):
        assert entry_id(module_name(role, "some_fix")) == "some_fix"
    with pytest.raises(ImportError, match="was not loaded by patchlane"):
        entry_id("patches.some_fix")
    with pytest.raises(ImportError):
        entry_id(module_name("overlay", ""))


def test_a_loaded_file_knows_its_id_and_a_failed_load_leaves_nothing(tmp_path: Path) -> None:
    good = tmp_path / "demo_fix.py"
    good.write_text("from patchlane.loading import entry_id\nENTRY_ID = entry_id(__name__)\n")
    module = load_file("demo_fix", "overlay", good)
    assert module.ENTRY_ID == "demo_fix"
    assert load_file("demo_fix", "overlay", good) is module  # once
    bad = tmp_path / "broken_fix.py"
    bad.write_text("raise RuntimeError('broken at import')\n")
    with pytest.raises(RuntimeError, match="broken at import"):
        load_file("broken_fix", "overlay", bad)
    assert module_name("overlay", "broken_fix") not in sys.modules


@pytest.mark.parametrize("entry", [e for e in startup.current().registry.entries
                                   if e.overlay is not None], ids=lambda e: e.id)
def test_every_shipped_overlay_meets_the_overlay_protocol(entry: object) -> None:
    from patchlane.registry import Entry

    assert isinstance(entry, Entry) and entry.overlay is not None
    module = load_file(entry.id, "overlay", entry.overlay)
    # what the file defines is its target's shape's (patchlane.targets): wrapt's overlay for a
    # function or method (OverlayModule), `class Overlay` for a class ...
    shape = shape_named(entry.target.shape or "function")
    assert any(hasattr(module, name) for name in shape.overlay_names), shape.name
    if shape.name in ("function", "method", "classmethod", "staticmethod"):
        assert isinstance(module, OverlayModule)
    # an overlay that names its id (for hit paths) takes it from the startup, never spells it
    assert getattr(module, "ENTRY_ID", entry.id) == entry.id


@pytest.mark.parametrize("entry", [e for e in startup.current().registry.entries
                                   if e.reproducer is not None], ids=lambda e: e.id)
def test_every_shipped_reproducer_meets_the_reproducer_protocol(entry: object) -> None:
    from patchlane.registry import Entry

    assert isinstance(entry, Entry) and entry.reproducer is not None
    pytest.importorskip("torch")
    module = load_file(entry.id, "reproducer", entry.reproducer)
    assert isinstance(module, ReproducerModule)
    assert set(module.LANES) <= {"cpu", "cuda"} and all(n >= 1 for n in module.WORLD_SIZES)


def test_an_overlay_that_imports_its_target_at_the_top_says_so(fake_target: FakeTarget) -> None:
    """Loaded before its target (a test loading the file): its top-level import fires the
    target's hook, which asks for the half-run file: said as the circular import it is, with
    the fix, never as "defines no overlay"."""
    fake_target.write_overlay(f"import {fake_target.module}\n\n"
                              "def overlay(wrapped, instance, args, kwargs):\n"
                              "    return wrapped(*args, **kwargs)\n")
    fake_target.write_registry()
    decider = fake_target.decider()
    load_file(fake_target.entry_id, "overlay",
              fake_target.root / "patches" / f"{fake_target.entry_id}.py")
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome.value == "failed: error"
    assert "still being loaded" in decision.reason and "circular import" in decision.reason
    assert "import the target inside the functions" in decision.reason

"""patchlane.loading: files loaded by path under a name that carries their entry id, which is
how every overlay learns its id; the real overlays and reproducers meet their Protocols."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.loading import entry_id, load_file, module_name
from patchlane.protocols import OverlayModule, ReproducerModule


def test_entry_id_comes_from_the_module_name_the_startup_gives() -> None:
    for kind in ("overlay", "reproducer", "check"):
        assert entry_id(module_name(kind, "some_fix")) == "some_fix"
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

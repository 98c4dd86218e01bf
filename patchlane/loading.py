"""Loading files by path and resolving qualnames: the one leaf both the startup lane and the
evidence side use, so neither reaches into the other's private helpers."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_file", "module_name", "resolve"]


def module_name(kind: str, entry_id: str) -> str:
    """The private ``sys.modules`` name an entry's overlay, reproducer or check file gets."""
    return f"_patchlane_{kind}_{entry_id}"


def load_file(entry_id: str, kind: str, path: Path) -> ModuleType:
    """Import ``path`` (once) under :func:`module_name`; a failed import leaves no module."""
    name = module_name(kind, entry_id)
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, "__file__", None) == str(path):
        return cached
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        # ImportError, not a patchlane error: this leaf imports nothing of patchlane's.
        raise ImportError(f"{entry_id}: cannot load {kind} file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def resolve(module: ModuleType, qualname: str) -> object:
    """``module.A.b`` for ``qualname`` ``"A.b"``; AttributeError names the missing part."""
    obj: object = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj

"""Loading files by path: the one leaf both the startup layer and the evidence side use, so
neither reaches into the other's private helpers. (Where a target lives is
:mod:`patchlane.targets`.)

What a loaded file must provide is written down in :mod:`patchlane.protocols`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["entry_id", "load_file", "module_name"]


_executing: set[str] = set()
"""Names whose file is running now (its body not finished)."""


def module_name(role: str, entry_id: str) -> str:
    """The private ``sys.modules`` name an entry's overlay, reproducer or check file gets."""
    return f"_patchlane_{role}_{entry_id}"


def entry_id(name: str) -> str:
    """The entry id of a file the startup loaded, from its module ``__name__``: how an overlay
    gets its id without spelling (or misspelling) it, ``ENTRY_ID = entry_id(__name__)``."""
    for role in ("overlay", "reproducer", "check"):
        prefix = module_name(role, "")
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix):]
    raise ImportError(f"{name!r} was not loaded by patchlane (patchlane.loading.load_file): an "
                      "overlay, reproducer or check file is loaded through its registry entry, "
                      "which gives it its id")


def load_file(entry_id: str, role: str, path: Path, source: bytes | None = None) -> ModuleType:
    """Run ``path`` as the module :func:`module_name` names, once per content; a failed run
    leaves no module.

    ``source``: the file's bytes as the caller read them (and, under
    ``PATCHLANE_REQUIRE_EVIDENCE``, as the proof hashed them); default: read here. Those bytes
    are compiled and run, never a ``.pyc`` from ``__pycache__`` (bytecode another user may have
    written, which no hash covered), and a module already loaded from other bytes is not handed
    out: the file is run again from what it holds now."""
    import hashlib

    name = module_name(role, entry_id)
    if source is None:
        source = path.read_bytes()
    digest = hashlib.sha256(source).hexdigest()
    cached = sys.modules.get(name)
    if cached is not None and getattr(cached, "__file__", None) == str(path) \
            and getattr(cached, _SOURCE_MARK, None) == digest:
        if name in _executing:
            # The file's own top-level import of its target fired the target's import hook,
            # which asks for this file again: it is half-run (nothing after that import is
            # defined yet), and handing it out would read as "defines no overlay".
            raise ImportError(f"{entry_id}: {path} is still being loaded: an import at its top "
                              "imports the target module, whose import decides this entry and "
                              "loads this file again (a circular import). Fix: import the "
                              "target inside the functions that use it, not at the top of "
                              "the file")
        return cached
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None:
        # ImportError, not a patchlane error: this leaf imports nothing of patchlane's.
        raise ImportError(f"{entry_id}: cannot load {role} file {path}")
    try:
        code = compile(source, str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise ImportError(f"{entry_id}: {role} file {path} does not compile: {exc}") from exc
    module = importlib.util.module_from_spec(spec)
    module.__cached__ = None  # type: ignore[attr-defined]  # no bytecode was read or written
    setattr(module, _SOURCE_MARK, digest)
    previous = sys.modules.get(name)
    sys.modules[name] = module
    _executing.add(name)
    try:
        exec(code, module.__dict__)  # the entry's own file, run as its import would run it
    except BaseException:
        if previous is not None:
            sys.modules[name] = previous
        else:
            sys.modules.pop(name, None)
        raise
    finally:
        _executing.discard(name)
    return module


_SOURCE_MARK = "__patchlane_source_sha256__"
"""The SHA-256 of the bytes a loaded file's module was run from."""

"""Loading registries: files read (:mod:`.reader`), parsed (:mod:`.safe_yaml`), validated
(:mod:`.schema`) and combined all-or-nothing into one :class:`~.records.Registry`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..common.errors import RegistryError
from .reader import decode, read_registry_bytes
from .records import Entry, Registry
from .safe_yaml import load_document
from .schema import check_continuations, check_dependencies, validate_document

__all__ = ["load_registries", "parse_registry"]


def parse_registry(path: Path, text: str | None = None, *, drafts_required: bool = True,
                   checked: list[tuple[Path, Path]] | None = None) -> tuple[Entry, ...]:
    """Parse and validate one registry file. Raises :class:`RegistryError` on any problem.
    ``drafts_required=False`` lets ``patchlane draft`` read an entry whose draft it is about
    to write; ``checked`` collects the files whose existence validation checked."""
    path = Path(path).resolve()
    if text is None:
        text = decode(path, read_registry_bytes(path))
    return validate_document(path, load_document(path, text), drafts_required=drafts_required,
                             checked=checked)


def load_registries(paths: Sequence[Path], *, drafts_required: bool = True,
                    isolated: bool = False) -> Registry:
    """Load several registry files as one. Duplicate ids across files are an error.

    ``isolated`` (how a process starts): each file is read and validated on its own, and a
    file that fails is refused alone, its error kept in ``Registry.rejected``, while the other
    files' entries load. A file declaring an id an earlier file declares is refused whole (the
    earlier file wins: the catalog, then ``PATCHLANE_REGISTRY`` in order, then entry points),
    and so is a file whose entries depend on, or continue, an entry of a refused file. Without
    it (the tools that edit or sweep a registry set) any error refuses them all."""
    entries: dict[Path, tuple[Entry, ...]] = {}
    contents: dict[Path, bytes] = {}
    owners: dict[str, Path] = {}
    resolved: list[Path] = []
    checked: dict[Path, list[tuple[Path, Path]]] = {}
    rejected: list[RegistryError] = []
    for raw_path in paths:
        path = Path(raw_path).resolve()
        if path in resolved or any(Path(e.path) == path for e in rejected):
            continue  # the same file named twice (default + env) is one registry
        try:
            try:
                raw = read_registry_bytes(path)
            except RegistryError as exc:
                if Path(raw_path).is_absolute() or path.exists():
                    raise
                import os

                raise RegistryError(path, "no such registry file", found=str(raw_path),
                                    expected=f"a file; a relative path is read from the working "
                                    f"directory ({os.getcwd()})",
                                    fix="give PATCHLANE_REGISTRY an absolute path") from exc
            found: list[tuple[Path, Path]] = []
            parsed = parse_registry(path, decode(path, raw), drafts_required=drafts_required,
                                    checked=found)
            for entry in parsed:
                if entry.id in owners:
                    raise RegistryError(
                        path, "duplicate id across registries", entry_id=entry.id, key="id",
                        found=entry.id,
                        expected=f"an id not already declared in {owners[entry.id]}",
                        fix="rename one of them or drop one registry from PATCHLANE_REGISTRY "
                        "(the first registry to declare an id keeps it; this file is refused "
                        "whole)")
        except RegistryError as exc:
            if not isolated:
                raise
            rejected.append(exc)
            continue
        resolved.append(path)
        contents[path] = raw
        checked[path] = found
        entries[path] = parsed
        owners.update((entry.id, path) for entry in parsed)
    # Cross-file rules, once every file is in: a dependency may live in another registry. A
    # file whose entry needs one of a refused file is refused in turn, until the rest holds.
    while True:
        kept = [entry for path in resolved for entry in entries[path]]
        try:
            check_dependencies(kept, [Path(e.path) for e in rejected])
            check_continuations(kept)
            break
        except RegistryError as exc:
            if not isolated or Path(exc.path).resolve() not in entries:
                raise
            rejected.append(exc)
            resolved.remove(Path(exc.path).resolve())
    return Registry(entries=tuple(e for path in resolved for e in entries[path]),
                    sources=tuple(resolved), contents=tuple(contents[p] for p in resolved),
                    checked=tuple(dict.fromkeys(c for p in resolved for c in checked[p])),
                    rejected=tuple(rejected))

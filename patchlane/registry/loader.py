"""Loading registries: files read (:mod:`.reader`), parsed (:mod:`.safe_yaml`), validated
(:mod:`.schema`) and combined all-or-nothing into one :class:`~.records.Registry`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..errors import RegistryError
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


def load_registries(paths: Sequence[Path], *, drafts_required: bool = True) -> Registry:
    """Load several registry files as one. Duplicate ids across files are an error."""
    entries: list[Entry] = []
    contents: list[bytes] = []
    owners: dict[str, Path] = {}
    resolved: list[Path] = []
    checked: list[tuple[Path, Path]] = []
    for raw_path in paths:
        path = Path(raw_path).resolve()
        if path in resolved:
            continue  # the same file named twice (default + env) is one registry
        resolved.append(path)
        raw = read_registry_bytes(path)
        parsed = parse_registry(path, decode(path, raw), drafts_required=drafts_required,
                                checked=checked)
        contents.append(raw)
        for entry in parsed:
            if entry.id in owners:
                raise RegistryError(
                    path,
                    "duplicate id across registries",
                    entry_id=entry.id,
                    key="id",
                    found=entry.id,
                    expected=f"an id not already declared in {owners[entry.id]}",
                    fix="rename one of them or drop one registry from PATCHLANE_REGISTRY",
                )
            owners[entry.id] = path
            entries.append(entry)
    # Cross-file rules, once every file is in: a dependency may live in another registry.
    check_dependencies(entries)
    check_continuations(entries)
    return Registry(entries=tuple(entries), sources=tuple(resolved), contents=tuple(contents),
                    checked=tuple(dict.fromkeys(checked)))

"""What an entry *is*, as content hashes: the identity a proof is tied to.

A sweep's receipt records the hashes of the entry it ran (``content``), and "proven here" holds
only for a passing run of the same content: an overlay rewritten after its sweep, a reproducer
changed, a gate widened, is ``stale`` until swept again, and the answer says which part
changed. The parts:

``overlay``     the overlay file, and the shared code it imports from ``patchlane.overlaylib``
                (followed transitively: the DSA overlays' behaviour lives there);
``reproducer``  the reproducer file;
``check``       a compat gate's check file;
``entry``       the registry block's behaviour: kind, target, gate (as written), fingerprints
                and their policy, the kind's own settings, ``depends_on`` and ``continued_by``.
                Not its text (summary, notes, evidence, upstream links, owner): editing those
                changes nothing that ran.

Each is ``sha256:<hex>``; the same file read twice gives the same hash, whatever the
filesystem or its timestamps.
"""

from __future__ import annotations

import ast
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .records import Entry

__all__ = ["PARTS", "changed_parts", "entry_content"]

PARTS = ("overlay", "reproducer", "check", "entry")
_OVERLAYLIB = Path(__file__).resolve().parents[1] / "overlaylib"


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _overlaylib_imports(source: str, package_relative: bool) -> set[str]:
    """Module names of ``patchlane.overlaylib`` that ``source`` imports (at any depth of the
    file: imports inside functions count, the DSA overlay imports its kernels on first use)."""
    names: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if module == "patchlane.overlaylib" or (package_relative and node.level == 1
                                                     and not module):
                names.update(alias.name for alias in node.names)
            elif module.startswith("patchlane.overlaylib."):
                names.add(module.split(".")[2])
            elif package_relative and node.level == 1 and module:
                names.add(module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("patchlane.overlaylib."):
                    names.add(alias.name.split(".")[2])
    return names


def _library_files(name: str) -> list[tuple[str, Path]]:
    """The files an import of ``patchlane.overlaylib.<name>`` runs or may run: the module, or
    for a subpackage every module in it (its ``__init__`` and whatever it imports)."""
    folder = _OVERLAYLIB / name
    if folder.is_dir():
        return [(f"{name}/{p.relative_to(folder).as_posix()}", p)
                for p in sorted(folder.rglob("*.py"))]
    path = _OVERLAYLIB / f"{name}.py"
    return [(name, path)] if path.is_file() else []


def _overlay_hash(overlay: Path, source: bytes | None = None) -> str:
    """The overlay file and every file of ``patchlane.overlaylib`` its imports run, followed
    transitively: the package's own ``__init__`` (run by any import from it), each module, and
    each subpackage whole. An edit to any of them changes the hash."""
    digest = hashlib.sha256()
    source = overlay.read_bytes() if source is None else source
    digest.update(source)
    seen: set[str] = set()
    todo = sorted(_overlaylib_imports(source.decode("utf-8", "replace"), False))
    if todo:
        init = _OVERLAYLIB / "__init__.py"
        digest.update(b"\0__init__\0")
        digest.update(init.read_bytes() if init.is_file() else b"")
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for label, path in _library_files(name):
            data = path.read_bytes()
            digest.update(f"\0{label}\0".encode())
            digest.update(data)
            todo.extend(sorted(_overlaylib_imports(data.decode("utf-8", "replace"), True)
                               - seen))
    return "sha256:" + digest.hexdigest()


def _behaviour(entry: Entry) -> dict[str, Any]:
    fingerprint = entry.fingerprint
    spec: Any = entry.spec
    if spec is not None and hasattr(spec, "_asdict"):
        # A file a kind names (a compat gate's check) by its name: its bytes are a part of
        # their own, and where the checkout lies (the nightly box, a laptop) is not what ran.
        spec = {k: v.name if isinstance(v, Path) else v for k, v in spec._asdict().items()}
    return {
        "id": entry.id, "kind": entry.kind.value,
        "target": list(entry.target),
        "applies_to": entry.applies_to_shown,
        "fingerprint": None if fingerprint is None else {
            "sha256": list(fingerprint.sha256), "policy": str(fingerprint.policy),
            "covers": list(fingerprint.covers), "objects": list(fingerprint.objects)},
        "spec": spec,
        "depends_on": list(entry.depends_on), "continued_by": entry.continued_by,
    }


def entry_content(entry: Entry, overlay_source: bytes | None = None) -> dict[str, str]:
    """The content hashes of ``entry`` (see the module docstring): a part whose file is gone
    is ``missing``. ``overlay_source``: the overlay file's bytes as read once by the caller,
    who runs exactly those."""
    out: dict[str, str] = {}
    files: dict[str, Path | None] = {"overlay": entry.overlay, "reproducer": entry.reproducer,
                                     "check": getattr(entry.spec, "check_file", None)}
    for part, path in files.items():
        if path is None:
            continue
        try:
            out[part] = _overlay_hash(path, overlay_source) if part == "overlay" \
                else _sha(path.read_bytes())
        except OSError:
            out[part] = "missing"
    out["entry"] = _sha(json.dumps(_behaviour(entry), sort_keys=True, default=str).encode())
    return out


def changed_parts(recorded: Mapping[str, Any] | None, current: Mapping[str, str]) -> list[str]:
    """The parts of ``current`` that ``recorded`` (a receipt's ``content``) does not match;
    every part when the receipt recorded none (a run from before content hashes)."""
    if not isinstance(recorded, Mapping):
        return [p for p in PARTS if p in current]
    return [p for p in PARTS if p in current and recorded.get(p) != current[p]]

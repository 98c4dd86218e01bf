"""What an entry *is*, as content hashes: the identity a proof is tied to.

A sweep's receipt records the hashes of the entry it ran (``content``), and "proven here" holds
only for a passing run of the same content: an overlay rewritten after its sweep, a reproducer
changed, a gate widened, is ``stale`` until swept again, and the answer says which part
changed. The parts:

``overlay``     the overlay file, and the shared code it imports from ``patchlane.overlaylib``
                (followed transitively: the DSA overlays' behaviour lives there);
``reproducer``  the reproducer file;
``check``       a compat gate's check file;

                each of the three with the team's own modules it imports: a module or package
                that lies in the registry file's folder or the file's own folder (a team's
                ``helpers.py`` beside its ``registry.yaml``), followed transitively. Code from
                installed packages is not in it (upstream's is what the gate and fingerprints
                answer for);
``entry``       the registry block's behaviour: kind, target, gate (as written), fingerprints
                and their policy, the kind's own settings, ``depends_on`` and ``continued_by``.
                Not its text (summary, notes, evidence, upstream links, owner): editing those
                changes nothing that ran.

Each is ``sha256:<hex>``; the same file read twice gives the same hash, whatever the
filesystem or its timestamps.
"""

from __future__ import annotations

import ast
import functools
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


def _overlaylib_imports(source: bytes, package_relative: bool) -> set[str]:
    """Module names of ``patchlane.overlaylib`` that ``source`` imports (at any depth of the
    file: imports inside functions count, the DSA overlay imports its kernels on first use).
    ``package_relative``: ``source`` is a module of that package, whose relative imports name
    its siblings. Read from :func:`_imported`, which the team-module rule parses the same file
    with."""
    prefix = "patchlane.overlaylib."
    imported = _imported(source, prefix[:-1] if package_relative else "")
    return {name[len(prefix):].split(".")[0] for name in imported if name.startswith(prefix)}


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
    todo = sorted(_overlaylib_imports(source, False))
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
            todo.extend(sorted(_overlaylib_imports(data, True) - seen))
    return "sha256:" + digest.hexdigest()


@functools.lru_cache(maxsize=512)
def _imported(source: bytes, package: str) -> frozenset[str]:
    """Module names ``source`` imports, at any depth of the file, relative imports resolved
    against ``package`` (the importing module's package; ``""`` for a top-level one). For
    ``from a import b`` both ``a`` and ``a.b`` (``b`` may be a submodule). Cached by content:
    every entry's parts, on every rank, read the same helpers."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                if node.level - 1 > len(parts):
                    continue  # beyond the top: fails at import, nothing of ours to hash
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join([*parts, *([base] if base else [])])
            if base:
                names.add(base)
            names.update(f"{base}.{alias.name}" if base else alias.name
                         for alias in node.names if alias.name != "*")
    return frozenset(names)


@functools.lru_cache(maxsize=1)
def _not_the_teams() -> frozenset[str]:
    """Top-level names whose code is never a team's own: every installed distribution's
    (upstream's, or a package installed elsewhere: the gate and the fingerprints answer for
    those, not the proof), and the source trees patchlane reads a version from (a registry at
    the root of a Megatron-LM fork holds ``megatron/``: hashing it would read the whole tree
    at every start, and make every proof stale at each upstream merge)."""
    from importlib import metadata

    from ..installed.gates import KNOWN_TREE_VERSIONS

    trees = {where.split(":")[0].split(".")[0] for where in KNOWN_TREE_VERSIONS.values()}
    return frozenset(metadata.packages_distributions()) | frozenset(trees)


def _module_files(root: Path, name: str) -> list[tuple[Path, str]]:
    """The files of ``root`` that importing ``name`` from it runs, each with its package: each
    package's ``__init__.py`` on the way and the module itself; none when ``root`` lacks it."""
    found: list[tuple[Path, str]] = []
    folder = root
    parts = name.split(".")
    for depth, part in enumerate(parts):
        package = ".".join(parts[:depth])
        module, inner = folder / f"{part}.py", folder / part
        # Python's own order: a package, then a module, then a namespace package's folder
        if (inner / "__init__.py").is_file():
            found.append((inner / "__init__.py", ".".join(parts[:depth + 1])))
            folder = inner
        elif module.is_file():
            found.append((module, package))
            break  # a module, not a package: what follows its name is an attribute
        elif inner.is_dir():
            folder = inner
        else:
            break
    return found


def _own_modules(path: Path, source: bytes, roots: tuple[Path, ...],
                 upstream: frozenset[str]) -> list[tuple[str, bytes]]:
    """The team's own modules a file imports (see the module docstring), followed
    transitively: ``(label, bytes)`` each, in a fixed order. ``upstream``: top-level names
    never followed: patchlane's (``overlaylib`` is hashed on its own rule) and the target's
    (a source tree of it beside the registry is upstream's code, which the gate and the
    fingerprints answer for, and following it would read the whole tree)."""
    seen: dict[Path, tuple[str, bytes]] = {}
    done: set[str] = set()

    def ours(names: frozenset[str]) -> list[str]:
        return sorted(n for n in names - done if n.split(".")[0] not in upstream)

    todo = ours(_imported(source, ""))
    while todo:
        name = todo.pop()
        if name in done:
            continue
        done.add(name)
        for root in roots:
            files = _module_files(root, name)
            if files and name.split(".")[0] in _not_the_teams():
                continue  # looked up only when the folder holds it: most names are not there
            for file, package in files:
                resolved = file.resolve()
                if resolved in seen or resolved == path.resolve():
                    continue
                data = file.read_bytes()
                seen[resolved] = (file.relative_to(root).as_posix(), data)
                todo.extend(ours(_imported(data, package)))
    return [seen[key] for key in sorted(seen, key=lambda p: seen[p][0])]


def _file_hash(path: Path, roots: tuple[Path, ...], upstream: frozenset[str],
               source: bytes | None = None, overlay: bool = False) -> str:
    """A part's hash: its file (an overlay with its ``patchlane.overlaylib`` code), then the
    team's own modules it imports, each under its name. A file that imports none of those
    hashes as before they counted."""
    source = path.read_bytes() if source is None else source
    base = _overlay_hash(path, source) if overlay else _sha(source)
    own = _own_modules(path, source, roots, upstream)
    if not own:
        return base
    digest = hashlib.sha256(base.encode())
    for label, data in own:
        digest.update(f"\0own:{label}\0".encode())
        digest.update(data)
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
    upstream = frozenset({"patchlane", (entry.target.module or "").split(".")[0]} - {""})
    for part, path in files.items():
        if path is None:
            continue
        roots = tuple(dict.fromkeys((entry.source.parent, path.parent)))
        try:
            out[part] = _file_hash(path, roots, upstream,
                                   overlay_source if part == "overlay" else None,
                                   overlay=part == "overlay")
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

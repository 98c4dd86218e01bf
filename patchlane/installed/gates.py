"""The version gate: the installed release checked against ``applies_to``.

Where the version comes from (``GateResult.source``):

``metadata``     the distribution's installed metadata, when the imported module is that
                 distribution's own file (a wheel in site-packages, a ``pip --target`` dir).
``source tree``  the version the imported tree declares (``target.version_from``; for
                 megatron-core ``megatron/core/package_info.py``), when there is no metadata
                 or the metadata describes another copy than the one imported: a Megatron-LM
                 checkout on ``PYTHONPATH`` shadowing (or standing in for) an install.

Versions go through :mod:`packaging` only, parsed by :mod:`patchlane.common.versions` (an installed
version that cannot be compared makes the gate unevaluable, never an exception). Pre-releases
are matched deliberately (``prereleases=True``): a ``0.16.2.dev0`` or ``2.13.0a0+git`` build
inside the declared range is exactly the build a training team runs, and PEP 440 already keeps
``0.18.0rc1`` out of ``<0.18``. Local labels (``+cu128``) are ignored for ordering, as PEP 440
says.
"""

from __future__ import annotations

import importlib.util
import os
import re
import runpy
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Literal

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from ..common.versions import parse_version, shown, why_not_version

__all__ = ["KNOWN_TREE_VERSIONS", "GateResult", "GateSide", "VersionSource", "check_gate",
           "distribution_roots", "gate_side", "installed_version", "locate_source",
           "resolve_version"]

# Where a source tree of a known distribution declares its version ("module:attribute"), used
# when an entry's target sets no `version_from` of its own.
KNOWN_TREE_VERSIONS = {
    "megatron-core": "megatron.core.package_info:__version__",
    # a `when.installed: {triton: ...}` scope (the numpy pin) read from a triton checkout
    "triton": "triton:__version__",
}


class VersionSource:
    """Where a gate's version came from: the distribution's ``metadata``, a ``source tree``
    (``path``: the file that declares the version), or ``none`` (no version found). ``str()``
    is the text audit records, receipts and JSON have always carried (``metadata``,
    ``source tree (<file>)``, ``none``), so those stay byte-identical while code reads
    ``origin`` and ``path`` instead of taking that text apart again.

    Immutable, compared by value. Written out rather than a frozen dataclass or NamedTuple:
    this module loads at every ``import patchlane``, and building either class costs 20 to
    100 times what this one does."""

    __slots__ = ("origin", "path")
    origin: Literal["metadata", "source tree", "none"]
    path: str | None

    def __init__(self, origin: Literal["metadata", "source tree", "none"],
                 path: str | None = None) -> None:
        object.__setattr__(self, "origin", origin)
        object.__setattr__(self, "path", path)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"VersionSource is immutable: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VersionSource) and (self.origin, self.path) == (other.origin,
                                                                               other.path)

    def __hash__(self) -> int:
        return hash((self.origin, self.path))

    def __repr__(self) -> str:
        return f"VersionSource({self.origin!r}, {self.path!r})"

    def __str__(self) -> str:
        return f"source tree ({self.path})" if self.origin == "source tree" else self.origin

    @classmethod
    def tree(cls, path: str) -> VersionSource:
        return cls("source tree", path)


METADATA = VersionSource("metadata")
NO_VERSION = VersionSource("none")


@dataclass(frozen=True)
class GateResult:
    distribution: str
    required: str
    found: str | None
    """The installed version string, or None when no version could be found."""
    open: bool
    reason: str
    comparable: bool = True
    """False when the installed version is not PEP 440 (the gate could not be evaluated)."""
    source: VersionSource = METADATA
    """Where ``found`` came from (``str()`` of it: ``metadata`` or ``source tree (<file>)``)."""


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _owns(dist: metadata.Distribution, module: ModuleType | None,
          version_from: str | None) -> bool:
    """Whether ``module`` (or, before any import, the package that ``version_from`` names, as
    it would be found on ``sys.path``) comes from the files ``dist``'s metadata describes."""
    file = getattr(module, "__file__", None) if module is not None else None
    if module is None and version_from:
        # the sweep's planner and doctor decide before importing: find where the package
        # would come from without importing it (a checkout on PYTHONPATH shadows the wheel)
        located = locate_source(version_from.partition(":")[0])
        file = str(located) if located is not None else None
    if not file:
        return True  # a namespace or built-in module: nothing better than the metadata
    try:
        here = Path(file).resolve()
        if any(here.is_relative_to(root) for root in distribution_roots(dist)):
            return True
        # A site directory of symlinks (Spack and Nix views, Bazel's symlink trees): each
        # package a link to its real prefix, the metadata a link beside it. Resolved, the
        # module leaves the folder its metadata names; as imported, it is in it.
        beside = Path(os.path.abspath(str(dist.locate_file(""))))
        return Path(os.path.abspath(file)).is_relative_to(beside)
    except (OSError, ValueError, RuntimeError):
        return True


def distribution_roots(dist: metadata.Distribution) -> list[Path]:
    """The folders ``dist``'s code is imported from: beside its metadata, and for an
    editable install (``pip install -e``) its project folder."""
    roots = [Path(str(dist.locate_file(""))).resolve()]
    editable = _editable_root(dist)
    return roots + ([editable] if editable is not None else [])


def _editable_root(dist: metadata.Distribution) -> Path | None:
    """The project folder of an editable install (``pip install -e``), whose files live there
    and not beside the metadata: PEP 610's ``direct_url.json`` says so."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    import json  # only for a module imported from outside its distribution's folder
    import urllib.parse

    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not (record.get("dir_info") or {}).get("editable"):
        return None
    url = urllib.parse.urlparse(str(record.get("url", "")))
    if url.scheme != "file":
        return None
    return Path(urllib.parse.unquote(url.path)).resolve()


def locate_source(module_name: str) -> Path | None:
    """The ``.py`` file of ``module_name`` on ``sys.path``, found without importing it (or its
    package: importing ``megatron.core`` would import torch); None when not found."""
    top, _, rest = module_name.partition(".")
    spec = importlib.util.find_spec(top)  # a top-level lookup imports nothing
    if spec is None:
        return None
    if not rest:
        return Path(spec.origin) if spec.origin and spec.origin.endswith(".py") else None
    for base in spec.submodule_search_locations or []:
        for candidate in (Path(base, *rest.split(".")).with_suffix(".py"),
                          Path(base, *rest.split("."), "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def _tree_version(version_from: str) -> tuple[str, VersionSource] | tuple[None, str]:
    """(the version a source tree declares, where) or (None, why there is none)."""
    module_name, _, attr = version_from.partition(":")
    attr = attr or "__version__"
    module = sys.modules.get(module_name)
    if module is not None:
        value, where = getattr(module, attr, None), getattr(module, "__file__", module_name)
    else:
        # Not imported (the sweep's planner, doctor): run the version file by path instead of
        # importing it, which would import the whole package (megatron.core imports torch).
        file = locate_source(module_name)
        if file is None:
            return None, f"no {module_name} on sys.path"
        try:
            value, where = runpy.run_path(str(file)).get(attr), str(file)
        except Exception as exc:  # a broken tree: no version, said plainly
            return None, f"cannot read {file}: {type(exc).__name__}: {exc}"
    if not isinstance(value, str) or not value:
        return None, f"{where} declares no {attr}"
    return value, VersionSource.tree(str(where))


def resolve_version(distribution: str, module: ModuleType | None = None,
                    version_from: str | None = None) -> tuple[str | None, str]:
    """(version, source) for the copy of ``distribution`` that ``module`` was imported from;
    (None, why) when there is none to gate on. ``source`` as text (what receipts record);
    :func:`check_gate` gives it typed."""
    found, source = _resolve(distribution, module, version_from)
    return found, str(source)


def _resolve(distribution: str, module: ModuleType | None,
             version_from: str | None) -> tuple[str, VersionSource] | tuple[None, str]:
    version_from = version_from or KNOWN_TREE_VERSIONS.get(distribution)
    try:
        dist: metadata.Distribution | None = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        dist = None
    if dist is not None and _owns(dist, module, version_from):
        return dist.version, METADATA
    if version_from:
        tree = _tree_version(version_from)
        if tree[0] is not None:
            return tree
        why = tree[1]
    else:
        why = "the target declares no `version_from` to read a source tree's version"
    if dist is not None:
        # Reached with a module (imported from elsewhere) or without one (the planner found a
        # tree first on sys.path): either way the metadata describes another copy.
        copy = (f"{module.__name__} is imported from {module.__file__}" if module is not None
                else f"{distribution} would be imported from a tree first on sys.path")
        return None, (f"{copy}, not from the installed {distribution} {dist.version} at "
                      f"{dist.locate_file('')}, and the tree's version is unknown: {why}")
    if module is None and not _on_path(distribution, version_from):
        return None, f"{distribution} is not installed"  # no metadata, no tree: nothing at all
    return None, (f"{distribution} is not installed as a distribution (no metadata) and the "
                  f"imported tree's version is unknown: {why}")


# Where a distribution's import name is not its own name normalized ('-' and '.' -> '_'): the
# module a version floor or pin waits for when the entry names no module (`target.object`,
# `when.imported`) itself, and the package a gate looks for on sys.path.
KNOWN_IMPORT_NAMES = {
    "megatron-core": "megatron.core",
    "pytorch-triton": "triton",
    "pyyaml": "yaml",
}


def import_name(distribution: str) -> str:
    """The module a distribution is imported as (``megatron-core`` -> ``megatron.core``)."""
    name = distribution.lower()
    return KNOWN_IMPORT_NAMES.get(name) or re.sub(r"[-.]+", "_", name)


def _on_path(distribution: str, version_from: str | None) -> bool:
    """Whether an import of ``distribution`` (or of its ``version_from`` module) would find
    anything on ``sys.path``; top-level lookups only, which import nothing."""
    names = [import_name(distribution), *([version_from] if version_from else [])]
    return any(importlib.util.find_spec(name.partition(":")[0].partition(".")[0]) is not None
               for name in names)


def check_gate(distribution: str, spec: SpecifierSet | None, module: ModuleType | None = None,
               version_from: str | None = None) -> GateResult:
    required = str(spec) if spec is not None else "any"
    resolved = _resolve(distribution, module, version_from)
    if resolved[0] is None:
        return GateResult(distribution, required, None, False, resolved[1], source=NO_VERSION)
    found, source = resolved
    origin = "" if source == METADATA else f" (from the {source})"
    if spec is None:
        return GateResult(distribution, required, found, True, f"{distribution} {found}{origin}",
                          source=source)
    version = parse_version(found)
    if version is None:
        return GateResult(distribution, required, found, False,
                          f"{distribution} reports version {shown(found)!r}{origin}, which "
                          f"{why_not_version(found)}", comparable=False, source=source)
    if spec.contains(version, prereleases=True):
        return GateResult(distribution, required, found, True,
                          f"{distribution} {found}{origin} is in {required}", source=source)
    return GateResult(distribution, required, found, False,
                      f"{distribution} {found}{origin} is outside {required}", source=source)


GateSide = Literal["inside", "below", "above", "excluded"]
"""Where a release stands against a gate: ``inside`` it, ``below`` its lower bound (a release
from before the bug), ``above`` its upper bound (a release the gate has not reached yet:
upstream may or may not have fixed the bug there), or ``excluded`` by a ``!=`` clause (or an
``===`` one): deliberately left out, never assumed to be either side."""

_UPPER = ("<", "<=")
_LOWER = (">", ">=")
_PINS = ("==", "~=")


def gate_side(spec: SpecifierSet | None, version: str | Version) -> GateSide:
    """Which side of ``spec`` ``version`` falls on; see :data:`GateSide`.

    A release that fails a lower bound is ``below`` whatever else it fails (a gate's lower
    bound is where the bug starts: nothing is known from before it). A failed ``==`` / ``~=``
    (wildcards too) is below or above its version. ``above`` needs every failed clause to
    put the release above."""
    if spec is None:
        return "inside"
    parsed = version if isinstance(version, Version) else parse_version(version)
    if parsed is None:  # not comparable: never assumed to be on either side
        return "excluded"
    found = parsed
    sides: set[str] = set()
    for clause in spec:
        if clause.contains(found, prereleases=True):
            continue
        if clause.operator in _LOWER:
            return "below"
        if clause.operator in _UPPER:
            sides.add("above")
        elif clause.operator in _PINS:
            pinned = Version(clause.version.removesuffix(".*"))
            sides.add("below" if found < pinned else "above")
        else:  # "!=" and "===": a deliberate exclusion
            sides.add("excluded")
    if not sides:
        return "inside"
    if "below" in sides:
        return "below"
    return "above" if sides == {"above"} else "excluded"

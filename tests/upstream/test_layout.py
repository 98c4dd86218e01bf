"""The upstream package's own rules, checked on its source: one module per concept that
imports no private name from another, reads the evidence side only through the run index (the
typed model of what a sweep wrote, with its Verdict; for retirement, the index checked against
the manifest and receipts it was written from), and a public API whose ``__all__`` is sorted
and resolves."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import patchlane.upstream

PACKAGE = Path(patchlane.upstream.__file__).parent
MODULES = sorted(PACKAGE.glob("*.py"))
ROOT = PACKAGE.parents[1]
SOURCES = [*MODULES, ROOT / "patchlane" / "cli" / "upstream.py"]


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(absolute module, imported names)`` for every ``from ... import`` in ``path``."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.append((module, [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_private_name_is_imported_from_another_module(path: Path) -> None:
    # A private module is its own package's business (the CLI's common helpers); a private
    # name, or a private module of another package, is not.
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    private = [f"{module}.{name}" for module, names in imports(path) for name in names
               if module != "__future__" and (_private(name) or any(
                   _private(part) and ".".join(module.split(".")[:i]) != package
                   for i, part in enumerate(module.split("."))))]
    assert private == []


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_the_evidence_side_is_read_only_through_the_run_index(path: Path) -> None:
    evidence = {module for module, _ in imports(path) if module.startswith("patchlane.sweep")}
    assert evidence <= {"patchlane.runs.index", "patchlane.runs.verdicts",
                        "patchlane.runs.verify"}


def test_one_enum_named_verdict_and_it_is_not_here() -> None:
    classes = [(path.name, node.name) for path in MODULES
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
               if isinstance(node, ast.ClassDef)]
    assert not [c for c in classes if c[1] == "Verdict"]
    assert ("records.py", "UpstreamState") in classes


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_all_is_sorted_and_resolves(path: Path) -> None:
    name = "patchlane.upstream" + ("" if path.stem == "__init__" else f".{path.stem}")
    module = importlib.import_module(name)
    exported = list(module.__all__)
    # ruff's RUF022 order: CONSTANTS, then CamelCase, then the rest, each alphabetical.
    assert exported == sorted(exported, key=lambda n: (
        0 if n.isupper() else 1 if n[0].isupper() else 2, n))
    assert [n for n in exported if not hasattr(module, n)] == []

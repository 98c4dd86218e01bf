"""Fingerprints of a target's normalized source.

The source is parsed and re-dumped through :mod:`ast`, so formatting, comments and docstrings
do not move the hash, while any change to what the code does does. A fingerprint covers the
patched object plus the ``covers`` qualnames the overlay also relies on.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Iterable
from types import ModuleType

__all__ = ["compute", "compute_from_source", "resolve"]


def resolve(module: ModuleType, qualname: str) -> object:
    from .importer import _resolve

    return _resolve(module, qualname)


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]


def _dump(node: ast.AST) -> str:
    _strip_docstrings(node)
    return ast.dump(node, include_attributes=False)


def normalized_source(obj: object) -> str:
    if isinstance(obj, property) and obj.fget is not None:
        obj = obj.fget  # a property's source is its getter's (as the source-file path sees it)
    # Unwrap our own (or anyone's) wrapt wrapper: the fingerprint is of the upstream code.
    obj = inspect.unwrap(obj)  # type: ignore[arg-type]
    source = textwrap.dedent(inspect.getsource(obj))  # type: ignore[arg-type]
    return _dump(ast.parse(source).body[0])


def _find(tree: ast.Module, qualname: str) -> ast.AST:
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next((n for n in reversed(body) if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == part), None)
        if node is None:
            raise LookupError(f"{qualname!r}: no definition of {part!r} in the source")
        body = node.body
    assert node is not None
    return node


def _digest(parts: Iterable[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for qualname, dumped in parts:
        digest.update(qualname.encode() + b"\0" + dumped.encode() + b"\0")
    return "sha256:" + digest.hexdigest()[:32]


def compute(module: ModuleType, qualnames: Iterable[str]) -> str:
    """Fingerprint of the named objects of an imported module."""
    return _digest((q, normalized_source(resolve(module, q))) for q in qualnames)


def compute_from_source(source: str, qualnames: Iterable[str]) -> str:
    """The same fingerprint, read from a module's source text without importing it: for
    releases that cannot be installed here (another Python, another platform)."""
    tree = ast.parse(source)
    return _digest((q, _dump(_find(tree, q))) for q in qualnames)

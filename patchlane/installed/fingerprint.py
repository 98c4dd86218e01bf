"""Fingerprints of a target's normalized source, the same on every Python interpreter.

The source is parsed with :mod:`ast` and serialised by our own canonical walk, so formatting,
comments and docstrings do not move the hash, while any change to what the code does does.

Why not ``ast.dump``: its text is not stable across interpreters. Python 3.12 adds
``type_params=[]`` to every function and class node and 3.13 leaves out empty fields, so a
hash of ``ast.dump`` recorded on 3.11 never matches the same file on 3.12 (how every megatron
patch was refused as drift in the NGC containers users train in). The canonical walk drops
``None`` and empty-list fields, which is exactly where those interpreters differ, and keeps
every field that carries code.

Formats, named by the value's prefix:

``sha256-v2:<32 hex>``  format 2 (current): the canonical walk; interpreter-independent.
``sha256:<32 hex>``     format 1 (legacy): a hash of ``ast.dump`` on the interpreter that
                        recorded it. Still read, by recomputing format 1 on this interpreter, so
                        a team registry keeps working where it was recorded; elsewhere it shows
                        as drift whose reason names the fix (re-record with
                        ``patchlane fingerprint ID``).

What is hashed is the source of what the overlay replaces, per shape of target
(:mod:`patchlane.targets`): a function's or method's own definition (a classmethod's or
staticmethod's function); a class's class statement; a property's getter, setter and deleter,
in that order (each definition of that name in the class body); any other descriptor or value
the statement that binds it in the source of the module that defines its owner (``TABLE =
{...}``, ``x: int = 3``, ``cp = cached_property(...)``, or the decorated definition). Read
from an imported module or from a source file, the same nodes are hashed, so the two agree.

The hashing imports only the standard library, so the cross-interpreter test can load it in a
bare interpreter (the target resolver is imported on use).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from collections.abc import Iterable
from types import ModuleType

__all__ = ["FORMAT", "LEGACY_PREFIX", "PREFIX", "compute", "compute_from_source", "format_of",
           "matches"]

FORMAT = 2
PREFIX = "sha256-v2:"
LEGACY_PREFIX = "sha256:"


def format_of(value: str) -> int:
    """1 or 2, from the value's prefix."""
    return FORMAT if value.startswith(PREFIX) else 1


def _strip_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                    and isinstance(body[0].value.value, str)):
                node.body = body[1:] or [ast.Pass()]


def _canonical(node: object, out: list[str]) -> None:
    # Node type, then each non-empty field by name, in the node's own field order. Positions
    # (lineno, col_offset) are attributes, not fields, so moving code does not count.
    if isinstance(node, ast.AST):
        out.append(type(node).__name__)
        out.append("(")
        for name in node._fields:
            value = getattr(node, name, None)
            if value is None or (isinstance(value, list) and not value):
                continue  # 3.12's type_params=[], 3.13's omitted defaults: no code there
            out.append(name)
            out.append("=")
            _canonical(value, out)
            out.append(",")
        out.append(")")
    elif isinstance(node, list):
        out.append("[")
        for item in node:
            _canonical(item, out)
            out.append(",")
        out.append("]")
    else:
        # Constants: str, bytes, int, float, complex, bool, None, Ellipsis; repr is stable.
        out.append(repr(node))


def _serialise(node: ast.AST, fmt: int) -> str:
    _strip_docstrings(node)
    if fmt == 1:
        return ast.dump(node, include_attributes=False)
    out: list[str] = []
    _canonical(node, out)
    return "".join(out)


def _source_node(obj: object) -> ast.AST:
    # Unwrap our own (or anyone's) wrapt wrapper: the fingerprint is of the upstream code.
    obj = inspect.unwrap(obj)  # type: ignore[arg-type]
    source = textwrap.dedent(inspect.getsource(obj))  # type: ignore[arg-type]
    return ast.parse(source).body[0]


def _binds(node: ast.AST, name: str) -> bool:
    """Whether statement ``node`` binds ``name``: a def or class of that name, or an
    assignment to it."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def _is_accessor(node: ast.AST) -> bool:
    """A def decorated ``@property`` or ``@<name>.setter`` / ``.deleter`` / ``.getter``."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for deco in node.decorator_list:
        if isinstance(deco, ast.Name) and deco.id == "property":
            return True
        if isinstance(deco, ast.Attribute) and deco.attr in ("setter", "deleter", "getter"):
            return True
    return False


def _find_all(tree: ast.Module, qualname: str) -> list[ast.AST]:
    """The statements of ``tree`` that bind ``qualname``: its last definition, or a property's
    accessors (each def of that name, in order) when the last one is one."""
    *owners, name = qualname.split(".")
    body: list[ast.stmt] = tree.body
    if owners:
        owner = _find(tree, ".".join(owners))
        body = owner.body  # type: ignore[attr-defined]
    found = [n for n in body if _binds(n, name)]
    if not found:
        _find(tree, qualname)  # raises the LookupError that names what is missing
    if _is_accessor(found[-1]):
        return [n for n in found if _is_accessor(n)]
    return [found[-1]]


def _find(tree: ast.Module, qualname: str) -> ast.AST:
    body: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    done: list[str] = []
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for i, part in enumerate(qualname.split(".")):
        last = i == len(qualname.split(".")) - 1
        node = next((n for n in reversed(body)
                     if (isinstance(n, kinds) and n.name == part)
                     or (last and _binds(n, part))), None)
        if node is None:
            import difflib  # only on this error: not on `import patchlane`'s path

            names = [n.name for n in body if isinstance(n, kinds)]
            close = difflib.get_close_matches(part, names, n=1)
            where = f"in {'.'.join(done)!r}" if done else "at the top level"
            raise LookupError(f"{qualname!r}: no definition of {part!r} {where}"
                              + (f" (did you mean {close[0]!r}?)" if close else ""))
        done.append(part)
        body = getattr(node, "body", [])  # a binding statement is the last part: no body
    assert node is not None
    return node


def _serialise_all(nodes: list[ast.AST], fmt: int) -> str:
    # One node serialises as it always has, so every recorded value of a function stays valid.
    return "\x1e".join(_serialise(node, fmt) for node in nodes)


def _live_nodes(module: ModuleType, qualname: str) -> list[ast.AST]:
    """What :func:`compute` hashes for ``qualname`` of an imported module (module doc)."""
    import sys

    from ..targets.find import Refused, defining_module, find, lookup, source_qualname
    from ..targets.protocol import innermost

    try:
        found = find(module, qualname)
    except Refused:
        return [_source_node(lookup(module, qualname))]  # named for its source alone
    raw = innermost(found.raw)  # under any layer an overlay placed: upstream's own object
    if isinstance(raw, (classmethod, staticmethod)):
        raw = raw.__func__
    if inspect.isfunction(raw) or inspect.isclass(raw) or inspect.ismethod(raw):
        return [_source_node(raw)]
    # A property, another descriptor or a value: the statements binding it, where its owner is
    # defined (as a source file is read).
    owner_module = sys.modules[defining_module(found)]
    tree = ast.parse(inspect.getsource(owner_module))
    return _find_all(tree, source_qualname(found))


def _digest(parts: Iterable[tuple[str, str]], fmt: int) -> str:
    digest = hashlib.sha256()
    for qualname, dumped in parts:
        digest.update(qualname.encode() + b"\0" + dumped.encode() + b"\0")
    return (PREFIX if fmt == FORMAT else LEGACY_PREFIX) + digest.hexdigest()[:32]


def compute(module: ModuleType, qualnames: Iterable[str], fmt: int = FORMAT) -> str:
    """Fingerprint of the named objects of an imported module."""
    return _digest(((q, _serialise_all(_live_nodes(module, q), fmt)) for q in qualnames), fmt)


def compute_from_source(source: str, qualnames: Iterable[str], fmt: int = FORMAT) -> str:
    """The same fingerprint, read from a module's source text without importing it: for
    releases that cannot be installed here (another Python, another platform). A value read
    this way is evidence of what the source says, not that anything ran."""
    tree = ast.parse(source)
    return _digest(((q, _serialise_all(_find_all(tree, q), fmt)) for q in qualnames), fmt)


def matches(module: ModuleType, qualnames: Iterable[str],
            recorded: Iterable[str]) -> tuple[str, bool]:
    """This target's current format-2 fingerprint and whether it matches a recorded value.

    Format-1 values are compared by recomputing format 1 here (only once one is recorded), so
    an old registry still matches on the interpreter it was recorded on."""
    names = tuple(qualnames)
    recorded = tuple(recorded)
    found = compute(module, names)
    if found in recorded:
        return found, True
    if any(format_of(v) == 1 for v in recorded):
        legacy = compute(module, names, fmt=1)
        if legacy in recorded:
            return legacy, True
    return found, False

"""The safe YAML reader: a registry file's text parsed into a document, and nothing more.

Only safe loaders are used (no arbitrary object construction), and what plain safe loading
lets through is refused with a :class:`RegistryError` naming the file: duplicate keys, aliases
that expand without bound, a document that is not a mapping. What the mapping holds is
:mod:`.schema`'s business. Imported only to parse: a start the validated-registry cache serves
never loads PyYAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..common.errors import RegistryError

__all__ = ["load_document"]

try:  # The C loader is ~10x faster; both are *safe* loaders (no arbitrary object construction).
    _BaseLoader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - pyyaml built without libyaml
    _BaseLoader = yaml.SafeLoader


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _SafeLoader(_BaseLoader):  # type: ignore[misc]
    """A safe loader that refuses duplicate mapping keys: YAML's last-one-wins would let a
    second ``entries:`` or ``owner:`` silently replace the first."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(problem=f"duplicate key {key!r}",
                                    problem_mark=key_node.start_mark)
            seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))


_SafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                            _SafeLoader.construct_mapping)


def load_document(path: Path, text: str) -> dict[str, Any]:
    """The YAML document in ``text`` (read from ``path``, which errors name): a mapping whose
    aliases expand within bounds."""
    try:
        data = yaml.load(text, Loader=_SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise RegistryError(path, f"invalid YAML{where}: {getattr(exc, 'problem', exc)}",
                            fix="fix the YAML syntax") from None
    if not isinstance(data, dict):
        empty = data is None
        raise RegistryError(path, "registry must be a mapping", found=type(data).__name__,
                            expected="a mapping with `schema: 1` and `entries: [...]`",
                            fix=("the file is empty: write `schema: 1` and `entries: []` in "
                                 "it, or drop it from PATCHLANE_REGISTRY" if empty else
                                 "start the file with `schema: 1`, then `entries:` with the "
                                 "entries under it (docs/adding-an-entry.md)"))
    _refuse_shared(path, data)
    return data


def _refuse_shared(path: Path, data: Any) -> None:
    """YAML anchors and aliases are allowed (teams share an ``upstream:`` or ``when:`` block),
    but not the "billion laughs": a few hundred bytes of nested aliases that expand to
    gigabytes wherever the value is walked or echoed. The expanded size is counted without
    expanding (each list or mapping once, memoised), so this is linear in the document; a
    recursive alias is refused too."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    # Iterative post-order walk: (value, children pushed?)
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        value, expanded = stack.pop()
        if not isinstance(value, (dict, list)) or (not expanded and id(value) in sizes):
            continue
        children = list(value.values()) if isinstance(value, dict) else value
        if expanded:
            on_path.discard(id(value))
            sizes[id(value)] = 1 + sum(sizes.get(id(c), 1) for c in children)
            continue
        if id(value) in on_path:
            raise _recursive_alias(path)
        on_path.add(id(value))
        stack.append((value, True))
        for child in children:
            if isinstance(child, (dict, list)):
                if id(child) in on_path:
                    raise _recursive_alias(path)
                stack.append((child, False))
    expanded_size, unique = sizes.get(id(data), 1), len(sizes)
    if expanded_size > 10 * unique + 10_000:
        raise RegistryError(path, "YAML aliases expand too far",
                            found=f"{expanded_size} nodes from {unique} written",
                            expected="aliases that expand at most ~10x",
                            fix="write the values out; nested aliases of aliases (the \"billion "
                            "laughs\") are refused because they expand without bound")


def _recursive_alias(path: Path) -> RegistryError:
    return RegistryError(path, "recursive YAML alias", found="*alias", expected="a finite value",
                         fix="write the value out instead of referring to itself")

"""Fingerprints: formatting, comments and docstrings do not move them; code changes do."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import textwrap
import uuid
import warnings
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import wrapt

from patchlane import fingerprint
from patchlane.fingerprint import compute, compute_from_source

Loader = Callable[[str], ModuleType]


@pytest.fixture
def load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Loader:
    """``load(source)`` writes the source to a fresh file and imports it under a unique name."""

    def _load(source: str) -> ModuleType:
        name = f"_patchlane_fp_{uuid.uuid4().hex}"
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        monkeypatch.setitem(sys.modules, name, module)
        spec.loader.exec_module(module)
        return module

    return _load


BASE = '''
import functools


def scale(x, factor=2):
    total = x * factor
    return total


class Box:
    def __init__(self, value):
        self.value = value

    def get(self, default=None):
        if self.value is None:
            return default
        return self.value

    class Inner:
        async def fetch(self):
            return [1, 2, 3]


@functools.lru_cache(maxsize=8)
def cached(n):
    return n + 1
'''

QUALNAMES = ["scale", "Box.get", "Box.Inner.fetch", "cached"]

# Same code, different text: every qualname keeps its fingerprint.
SAME = {
    "reformatted": '''
import functools
def scale( x , factor = 2 ):
    total = (x
             * factor)
    return (total)
class Box:
    def __init__(self, value): self.value = value
    def get(
        self,
        default=None,
    ):
        if (self.value is None): return default
        return self.value
    class Inner:
        async def fetch(self):
            return [
                1,
                2,
                3,
            ]
@functools.lru_cache(
    maxsize=8,
)
def cached(n): return n + 1
''',
    "comments": '''
import functools  # stdlib


# A comment before the function.
def scale(x, factor=2):  # trailing comment
    # inside the body
    total = x * factor  # multiply
    return total


class Box:
    def __init__(self, value):
        self.value = value

    def get(self, default=None):
        # FIXME: nothing to fix
        if self.value is None:
            return default  # the fallback
        return self.value

    class Inner:
        async def fetch(self):
            return [1, 2, 3]  # constant


@functools.lru_cache(maxsize=8)  # small cache
def cached(n):
    return n + 1
''',
    "docstrings": '''
"""A module docstring that the original did not have."""
import functools


def scale(x, factor=2):
    """Scale x by a factor."""
    total = x * factor
    return total


class Box:
    """A box."""

    def __init__(self, value):
        self.value = value

    def get(self, default=None):
        """Return the value, or the default.

        Several lines of documentation.
        """
        if self.value is None:
            return default
        return self.value

    class Inner:
        """Nested."""

        async def fetch(self):
            'single-quoted docstring'
            return [1, 2, 3]


@functools.lru_cache(maxsize=8)
def cached(n):
    """Cached."""
    return n + 1
''',
    "unrelated-code-around": '''
import functools

UNRELATED = 1


def helper():
    return "changed freely"


def scale(x, factor=2):
    total = x * factor
    return total


class Box:
    def __init__(self, value, other=0):
        self.value = value + other

    def get(self, default=None):
        if self.value is None:
            return default
        return self.value

    def more(self):
        return 3

    class Inner:
        async def fetch(self):
            return [1, 2, 3]


@functools.lru_cache(maxsize=8)
def cached(n):
    return n + 1
''',
}

# One-token changes: (qualname that must change, old text, new text).
CHANGED = [
    pytest.param("scale", "x * factor", "x + factor", id="operator"),
    pytest.param("scale", "factor=2", "factor=3", id="default-value"),
    pytest.param("scale", "return total", "return -total", id="unary"),
    pytest.param("scale", "def scale(x, factor=2)", "def scale(y, factor=2)", id="param-name"),
    pytest.param("Box.get", "is None", "is not None", id="comparison"),
    pytest.param("Box.get", "return default", "return None", id="return-value"),
    pytest.param("Box.Inner.fetch", "[1, 2, 3]", "[1, 2, 4]", id="nested-constant"),
    pytest.param("Box.Inner.fetch", "async def fetch", "def fetch", id="async-dropped"),
    pytest.param("cached", "maxsize=8", "maxsize=9", id="decorator-argument"),
]


def test_base_fingerprints_are_well_formed_and_distinct(load: Loader) -> None:
    module = load(BASE)
    values = [compute(module, [q]) for q in QUALNAMES]
    for value in values:
        assert value.startswith("sha256:")
        assert len(value) == len("sha256:") + 32
        int(value.removeprefix("sha256:"), 16)
    assert len(set(values)) == len(values)
    assert compute(module, QUALNAMES) == compute(load(BASE), QUALNAMES)  # deterministic


@pytest.mark.parametrize("variant", list(SAME), ids=list(SAME))
@pytest.mark.parametrize("qualname", QUALNAMES)
def test_text_only_changes_keep_the_fingerprint(load: Loader, variant: str, qualname: str) -> None:
    base, other = load(BASE), load(SAME[variant])
    assert compute(other, [qualname]) == compute(base, [qualname])
    assert compute_from_source(SAME[variant], [qualname]) == compute(base, [qualname])


def test_all_variants_really_differ_as_text() -> None:
    texts = {BASE.strip(), *(v.strip() for v in SAME.values())}
    assert len(texts) == len(SAME) + 1


@pytest.mark.parametrize(("qualname", "old", "new"), CHANGED)
def test_one_token_change_moves_the_fingerprint(
    load: Loader, qualname: str, old: str, new: str
) -> None:
    assert BASE.count(old) == 1
    changed_source = BASE.replace(old, new)
    base, changed = load(BASE), load(changed_source)
    assert compute(changed, [qualname]) != compute(base, [qualname])
    assert compute_from_source(changed_source, [qualname]) != compute(base, [qualname])
    # Only the changed object moves: the others keep theirs.
    for other in QUALNAMES:
        if other != qualname and not qualname.startswith(other + ".") \
                and not other.startswith(qualname + "."):
            assert compute(changed, [other]) == compute(base, [other]), other


def test_covers_order_and_extra_qualnames_change_it(load: Loader) -> None:
    module = load(BASE)
    alone = compute(module, ["Box.get"])
    with_cover = compute(module, ["Box.get", "scale"])
    reversed_order = compute(module, ["scale", "Box.get"])
    with_two = compute(module, ["Box.get", "scale", "cached"])
    assert len({alone, with_cover, reversed_order, with_two}) == 4


def test_a_change_in_a_covered_qualname_moves_it(load: Loader) -> None:
    base = load(BASE)
    changed = load(BASE.replace("maxsize=8", "maxsize=16"))
    assert compute(changed, ["Box.get"]) == compute(base, ["Box.get"])
    assert compute(changed, ["Box.get", "cached"]) != compute(base, ["Box.get", "cached"])


def test_qualname_is_part_of_the_hash(load: Loader) -> None:
    # Two byte-identical bodies under different names still fingerprint differently.
    module = load("def a(x):\n    return x\n\n\ndef b(x):\n    return x\n")
    assert compute(module, ["a"]) != compute(module, ["b"])


@pytest.mark.parametrize(
    "qualnames",
    [["scale"], ["Box.get"], ["Box.Inner.fetch"], ["cached"], ["Box"], QUALNAMES,
     ["Box.Inner.fetch", "scale"], ["Box.__init__", "Box.get"]],
    ids=lambda q: "+".join(q),
)
def test_compute_from_source_equals_compute(
    load: Loader, qualnames: list[str]
) -> None:
    module = load(BASE)
    file_text = Path(module.__file__ or "").read_text()
    assert compute_from_source(file_text, qualnames) == compute(module, qualnames)


def test_compute_from_source_takes_the_last_definition(load: Loader) -> None:
    source = "def f():\n    return 1\n\n\ndef f():\n    return 2\n"
    module = load(source)
    assert module.f() == 2
    assert compute_from_source(source, ["f"]) == compute(module, ["f"])
    assert compute_from_source(source, ["f"]) != compute_from_source(
        "def f():\n    return 1\n", ["f"]
    )


def _passthrough(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return wrapped(*args, **kwargs)


@pytest.mark.parametrize("qualname", ["scale", "Box.get", "Box.Inner.fetch"])
def test_wrapt_wrapped_function_fingerprints_like_the_original(
    load: Loader, qualname: str
) -> None:
    module = load(BASE)
    before = compute(module, [qualname])
    parent_path, _, attr = qualname.rpartition(".")
    parent = fingerprint.resolve(module, parent_path) if parent_path else module
    original = vars(parent)[attr]
    wrapper = wrapt.wrap_function_wrapper(module, qualname, _passthrough)
    assert isinstance(wrapper, wrapt.FunctionWrapper)
    assert vars(parent)[attr] is wrapper and wrapper is not original  # really wrapped
    assert wrapper.__wrapped__ is original
    assert compute(module, [qualname]) == before
    assert compute(module, QUALNAMES) == compute(load(BASE), QUALNAMES)


def test_wrapped_twice_still_fingerprints_like_the_original(load: Loader) -> None:
    module = load(BASE)
    before = compute(module, ["scale"])
    wrapt.wrap_function_wrapper(module, "scale", _passthrough)
    wrapt.wrap_function_wrapper(module, "scale", _passthrough)
    assert module.scale(3) == 6
    assert compute(module, ["scale"]) == before


def test_functools_wraps_wrapper_fingerprints_like_the_original(load: Loader) -> None:
    # Anyone's wrapper that sets __wrapped__ is looked through, not just wrapt's.
    module = load(BASE)
    before = compute(module, ["scale"])
    original = module.scale

    @functools.wraps(original)
    def logged(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs)

    module.scale = logged
    assert module.scale is not original and module.scale.__wrapped__ is original
    assert compute(module, ["scale"]) == before


@pytest.mark.parametrize(
    ("qualnames", "missing"),
    [
        (["nope"], "nope"),
        (["Box.nope"], "nope"),
        (["Box.Inner.nope"], "nope"),
        (["Nope.get"], "Nope"),
        (["scale", "Box.gett"], "gett"),
        (["functools"], "functools"),  # an import is not a definition
    ],
)
def test_compute_from_source_missing_qualname_raises_lookup_error(
    qualnames: list[str], missing: str
) -> None:
    with pytest.raises(LookupError, match=f"no definition of {missing!r}"):
        compute_from_source(textwrap.dedent(BASE), qualnames)


def test_compute_missing_qualname_raises_attribute_error(load: Loader) -> None:
    module = load(BASE)
    with pytest.raises(AttributeError):
        compute(module, ["Box.nope"])


def test_property_qualname_fingerprints_from_module_and_source(load: Loader) -> None:
    source = "class C:\n    @property\n    def p(self):\n        return 1\n"
    module = load(source)
    assert compute(module, ["C.p"]) == compute_from_source(source, ["C.p"])


# -- the real upstream -----------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
RERUN_QUALNAMES = [
    "RerunStateMachine.state_dict",
    "RerunStateMachine.validate_state_dict",
    "RerunStateMachine.load_state_dict",
]


@pytest.mark.upstream
def test_megatron_core_0_16_rerun_state_dict_fingerprint_is_recorded() -> None:
    try:
        version = metadata.version("megatron-core")
    except metadata.PackageNotFoundError:
        pytest.skip("megatron-core is not installed")
    if not version.startswith("0.16."):
        pytest.skip(f"megatron-core {version} is not 0.16.x")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Transformer Engine and Apex are not installed"
        rsm = importlib.import_module("megatron.core.rerun_state_machine")

    from patchlane.registry import parse_registry

    entry = {e.id: e for e in parse_registry(REPO / "registry.yaml")}["mcore_rerun_sentinel"]
    assert entry.fingerprint is not None and entry.target.qualname is not None
    qualnames = [entry.target.qualname, *entry.fingerprint.covers]
    assert qualnames == RERUN_QUALNAMES

    found = compute(rsm, qualnames)
    assert found in entry.fingerprint.sha256
    assert found == "sha256:ca8d10f0d3fbfe5362f1a8851b7aece7"  # the 0.16.x value
    # The release's own file text, read without the import machinery, agrees.
    source = Path(rsm.__file__ or "").read_text()
    assert compute_from_source(source, qualnames) == found
    # Dropping a covered qualname (or reordering) would not match the recorded value.
    assert compute(rsm, qualnames[:1]) not in entry.fingerprint.sha256
    assert compute(rsm, qualnames[::-1]) not in entry.fingerprint.sha256


"""Fingerprints: formatting, comments and docstrings do not move them; code changes do."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
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

from patchlane.installed import fingerprint
from patchlane.installed.fingerprint import compute, compute_from_source
from patchlane.targets import lookup

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
        assert value.startswith("sha256-v2:")
        assert len(value) == len("sha256-v2:") + 32
        int(value.removeprefix("sha256-v2:"), 16)
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
    parent = lookup(module, parent_path) if parent_path else module
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

REPO = Path(__file__).resolve().parents[2]
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
    assert found == "sha256-v2:e64893c0780af2f6f46461a3cc1a4c79"  # the 0.16.x value
    assert entry.fingerprint.releases[version] == found
    # The release's own file text, read without the import machinery, agrees.
    source = Path(rsm.__file__ or "").read_text()
    assert compute_from_source(source, qualnames) == found
    # Dropping a covered qualname (or reordering) would not match the recorded value.
    assert compute(rsm, qualnames[:1]) not in entry.fingerprint.sha256
    assert compute(rsm, qualnames[::-1]) not in entry.fingerprint.sha256



# -- formats: format 2 is interpreter-independent; format 1 is still read --------------------


def test_format_1_values_are_still_read_on_the_interpreter_that_recorded_them(
        load: Loader) -> None:
    module = load(BASE)
    legacy = compute(module, ["Box.get"], fmt=1)
    assert legacy.startswith("sha256:") and fingerprint.format_of(legacy) == 1
    assert fingerprint.matches(module, ["Box.get"], [legacy]) == (legacy, True)
    current = compute(module, ["Box.get"])
    assert fingerprint.format_of(current) == 2
    assert fingerprint.matches(module, ["Box.get"], [current]) == (current, True)
    # a stale value of either format is drift, reported with the current format-2 value
    assert fingerprint.matches(module, ["Box.get"], ["sha256:" + "0" * 32]) == (current, False)


def test_drift_message_names_the_format_fix_for_format_1_values() -> None:
    from patchlane.common.errors import DriftError

    old = str(DriftError("x_entry", ("sha256:" + "0" * 32,), "sha256-v2:" + "1" * 32))
    assert "format 1" in old and "patchlane fingerprint x_entry" in old
    new = str(DriftError("x_entry", ("sha256-v2:" + "0" * 32,), "sha256-v2:" + "1" * 32))
    assert "format 1" not in new


def _interpreters() -> list[Path]:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found: dict[str, Path] = {}
    for minor in ("3.10", "3.11", "3.12", "3.13"):
        for candidate in sorted(root.glob(f"{minor}.*/bin/python")):
            found[minor] = candidate
        which = shutil.which(f"python{minor}")
        if minor not in found and which:
            found[minor] = Path(which)
    found[f"{sys.version_info.major}.{sys.version_info.minor}"] = Path(sys.executable)
    return list(found.values())


# Fingerprints every function and class of a source corpus in a bare interpreter: the module is
# loaded as part of a synthetic package so nothing but the standard library is imported.
_CORPUS_SCRIPT = r"""
import ast, importlib, json, sys, types, pathlib
pkg = types.ModuleType("plpkg"); pkg.__path__ = [sys.argv[1]]; sys.modules["plpkg"] = pkg
fp = importlib.import_module("plpkg.fingerprint")
out = {}
def defs(body, prefix=""):
    for n in body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield prefix + n.name, n
            if isinstance(n, ast.ClassDef):
                yield from defs(n.body, prefix + n.name + ".")
for name in sys.argv[3:]:
    path = pathlib.Path(sys.argv[2]) / name
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for qualname, node in defs(tree.body):
        for fmt in (1, 2):
            out[f"{fmt}|{name}:{qualname}"] = fp._digest(
                [(qualname, fp._serialise(node, fmt))], fmt)
json.dump(out, sys.stdout)
"""


def test_one_fingerprint_per_source_on_every_interpreter() -> None:
    """Real upstream sources (the installed megatron-core, liger-kernel and torch files this
    suite runs against) fingerprint to one value under Python 3.10-3.13; format 1 (ast.dump)
    did not, which is why it was replaced."""
    interpreters = _interpreters()
    if len(interpreters) < 2:
        pytest.skip("needs at least two Python interpreters (pyenv 3.10-3.13)")
    corpus: list[tuple[Path, list[str]]] = []
    for package, names in (
        ("megatron", ["core/rerun_state_machine.py", "core/transformer/transformer_config.py",
                      "core/dist_checkpointing/strategies/torch.py"]),
        ("liger_kernel", ["ops/fused_linear_cross_entropy.py", "ops/cross_entropy.py"]),
        ("torch", ["nn/modules/linear.py", "distributed/distributed_c10d.py"]),
    ):
        try:
            spec = importlib.util.find_spec(package)
        except ImportError:
            spec = None
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        corpus.append((root, [n for n in names if (root / n).is_file()]))
    if not corpus:
        pytest.skip("no upstream package installed to read sources from")
    package_dir = str(Path(fingerprint.__file__).parent)
    results: dict[str, dict[str, str]] = {}
    for python in interpreters:
        merged: dict[str, str] = {}
        for root, names in corpus:
            out = subprocess.run([str(python), "-I", "-c", _CORPUS_SCRIPT, package_dir,
                                  str(root), *names], capture_output=True, text=True,
                                 check=True, timeout=300)
            merged.update({f"{root.name}/{k}": v for k, v in json.loads(out.stdout).items()})
        results[str(python)] = merged
    keys = set.intersection(*(set(r) for r in results.values()))
    v2 = sorted(k for k in keys if "|" in k and k.split("|")[0].endswith("2"))
    assert len(v2) > 200, f"corpus too small to mean anything: {len(v2)} definitions"
    split = [k for k in v2 if len({r[k] for r in results.values()}) != 1]
    assert not split, f"format 2 differs between interpreters for {split[:5]}"
    versions = {subprocess.run([str(p), "-c", "import sys; print(sys.version_info[:2])"],
                               capture_output=True, text=True, check=True).stdout
                for p in interpreters}
    if len(versions) > 1 and any(v.strip() in ("(3, 12)", "(3, 13)") for v in versions):
        v1 = [k for k in keys if k.split("|")[0].endswith("1")]
        assert any(len({r[k] for r in results.values()}) != 1 for k in v1), \
            "format 1 should differ across these interpreters; the test would not catch a split"

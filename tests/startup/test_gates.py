"""``check_gate``: installed metadata versions against ``applies_to``, PEP 440 all the way.

Fake distributions are ``<name>-<version>.dist-info/METADATA`` folders in a temporary directory
put first on ``sys.path``; :mod:`importlib.metadata` finds them like installed ones.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from patchlane.installed.gates import GateResult, VersionSource, check_gate, installed_version

_names = itertools.count()


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Returns ``install(version) -> distribution name`` for a fresh fake distribution."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def _install(version: str) -> str:
        n = next(_names)
        name = f"patchlane-fakedist-{n}"
        info = site / f"patchlane_fakedist_{n}-0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        )
        assert sys.path[0] == str(site)
        return name

    return _install


RANGE = ">=0.14,<0.18"

# (installed version, applies_to, gate open?)
CASES = [
    pytest.param("0.16.1", RANGE, True, id="in-range"),
    pytest.param("0.14", RANGE, True, id="lower-bound-included"),
    pytest.param("0.14.0", RANGE, True, id="lower-bound-padded"),
    pytest.param("0.17.99", RANGE, True, id="just-below-upper"),
    pytest.param("0.13.9", RANGE, False, id="below"),
    pytest.param("0.14.0rc1", RANGE, False, id="rc-of-lower-bound-is-below-it"),
    pytest.param("0.19.0", RANGE, False, id="above"),
    pytest.param("0.18.0", RANGE, False, id="upper-bound-excluded"),
    pytest.param("0.18", RANGE, False, id="upper-bound-excluded-short"),
    pytest.param("0.18.0.post1", RANGE, False, id="post-release-of-upper-bound"),
    pytest.param("0.16.2.dev0", RANGE, True, id="dev-release-inside"),
    pytest.param("0.17.0rc2", RANGE, True, id="rc-inside"),
    pytest.param("0.18.0rc1", "<0.18", False, id="rc-of-upper-bound-excluded"),
    pytest.param("0.18.0.dev3", RANGE, False, id="dev-of-upper-bound-excluded"),
    pytest.param("0.16.1+cu128", RANGE, True, id="local-version-inside"),
    pytest.param("0.16.1+cu128", "==0.16.1", True, id="local-ignored-by-equality"),
    pytest.param("2.13.0+cpu", "<2.13.0", False, id="local-of-upper-bound-excluded"),
    pytest.param("2.12.1+cpu", ">=2.4,<2.13.0", True, id="local-below-upper"),
    pytest.param("2.13.0a0+git1234abc", ">=2.12,<2.14", True, id="nightly-torch-inside"),
    pytest.param("0.16.1", "~=0.16.0", True, id="compatible-release-in"),
    pytest.param("0.17.0", "~=0.16.0", False, id="compatible-release-out"),
    pytest.param("0.15.3", ">=0.14,<0.18,!=0.15.3", False, id="excluded-release"),
]


@pytest.mark.parametrize(("version", "spec", "is_open"), CASES)
def test_gate_semantics(install, version: str, spec: str, is_open: bool) -> None:
    name = install(version)
    specifier = SpecifierSet(spec)
    result = check_gate(name, specifier)

    assert isinstance(result, GateResult)
    assert result.open is is_open
    assert result.found == version  # the exact installed string, local label and all
    assert result.distribution == name
    assert result.required == str(specifier)
    relation = "is in" if is_open else "is outside"
    assert result.reason == f"{name} {version} {relation} {specifier}"


def test_not_installed_is_closed(install) -> None:
    install("0.16.1")  # some other distribution is installed; this one is not
    name = "patchlane-fakedist-never-installed"
    assert installed_version(name) is None
    result = check_gate(name, SpecifierSet(RANGE))
    assert result.open is False
    assert result.found is None
    assert result.required == str(SpecifierSet(RANGE))
    # nothing on sys.path either: said plainly, not as a tree whose version is unknown
    assert result.reason == f"{name} is not installed"


def test_liger_kernel_not_installed_is_said_plainly(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The sweep's planner asks before anything is imported (module None). With liger-kernel's
    # metadata and package off sys.path, as on a machine without it:
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (
        Path(p, "liger_kernel").exists() or any(Path(p).glob("liger_kernel-*.dist-info")))])
    for name in [m for m in sys.modules if m == "liger_kernel" or m.startswith("liger_kernel.")]:
        monkeypatch.delitem(sys.modules, name)
    result = check_gate("liger-kernel", SpecifierSet(">=0.6.3,<0.8.6"))
    assert (result.open, result.found) == (False, None)
    assert result.reason == "liger-kernel is not installed"


def test_a_tree_without_metadata_or_version_is_not_called_not_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Something is on sys.path (a checkout, no dist-info) but its version cannot be read:
    # that is not "not installed", and the message keeps saying why.
    (tmp_path / "patchlane_fakedist_tree").mkdir()
    (tmp_path / "patchlane_fakedist_tree" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = check_gate("patchlane-fakedist-tree", SpecifierSet(RANGE))
    assert result.reason.startswith("patchlane-fakedist-tree is not installed as a "
                                    "distribution (no metadata) and the imported tree's version "
                                    "is unknown: the target declares no `version_from`")


def test_not_installed_is_closed_even_without_spec() -> None:
    result = check_gate("patchlane-fakedist-never-installed", None)
    assert result.open is False
    assert result.found is None
    assert result.required == "any"
    assert "is not installed" in result.reason


@pytest.mark.parametrize("version", ["banana", "0.16.1-nvidia-custom", "16.01 beta", "v0.16.1x"])
def test_non_pep440_version_is_closed(install, version: str) -> None:
    name = install(version)
    result = check_gate(name, SpecifierSet(RANGE))
    assert result.open is False
    assert result.found == version
    assert result.reason == f"{name} reports version {version!r}, which is not PEP 440"


def test_no_spec_is_open_for_any_installed_version(install) -> None:
    name = install("0.0.1.dev0")
    result = check_gate(name, None)
    assert result.open is True
    assert result.found == "0.0.1.dev0"
    assert result.required == "any"
    assert result.reason == f"{name} 0.0.1.dev0"


def test_name_is_normalized_like_pip(install) -> None:
    name = install("0.16.1")
    variant = name.replace("-", "_").upper()
    assert variant != name
    result = check_gate(variant, SpecifierSet(RANGE))
    assert result.open is True
    assert result.found == "0.16.1"


def test_fake_distribution_is_found_only_through_sys_path(tmp_path: Path) -> None:
    site = tmp_path / "elsewhere"
    info = site / "patchlane_fakedist_scoped-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: patchlane-fakedist-scoped\nVersion: 0.16.1\n"
    )
    name = "patchlane-fakedist-scoped"
    assert check_gate(name, SpecifierSet(RANGE)).found is None
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(site))
        assert check_gate(name, SpecifierSet(RANGE)).open is True
    assert check_gate(name, SpecifierSet(RANGE)).found is None


def test_a_shadowing_tree_without_a_readable_version_is_said_plainly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The planner (no module imported yet) finds a tree first on sys.path, ahead of the
    installed wheel, whose version file cannot be run: no version, a reason naming both
    copies, never an assertion error."""
    from patchlane.installed.gates import resolve_version

    site, tree = tmp_path / "site", tmp_path / "tree"
    (site / "plshadowx").mkdir(parents=True)
    (site / "plshadowx" / "__init__.py").write_text("")
    (site / "plshadowx-1.0.dist-info").mkdir()
    (site / "plshadowx-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: plshadowx\nVersion: 1.0\n")
    (tree / "plshadowx").mkdir(parents=True)
    (tree / "plshadowx" / "__init__.py").write_text("")
    (tree / "plshadowx" / "version.py").write_text("raise RuntimeError('no version here')\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(tree))  # first: the checkout shadows the wheel
    found, why = resolve_version("plshadowx", None, "plshadowx.version:__version__")
    assert found is None
    assert "would be imported from a tree first on sys.path" in why
    assert "installed plshadowx 1.0" in why and "no version here" in why


@pytest.mark.parametrize(
    ("spec", "version", "side"),
    [(">=0.14.0,<0.18.0", "0.16.1", "inside"),
     (">=0.14.0,<0.18.0", "0.18.2", "above"),
     (">=0.14.0,<0.18.0", "0.13.1", "below"),
     (">=0.16,<0.19", "0.19.0rc1", "above"),
     ("<=0.8.5", "0.8.6", "above"),
     ("==0.16.1", "0.17.0", "above"),
     ("==0.16.1", "0.15.0", "below"),
     ("==0.16.*", "0.17.0", "above"),
     ("~=0.16.1", "0.16.0", "below"),
     ("~=0.16.1", "0.17.0", "above"),
     (">=0.1,!=0.5", "0.5", "excluded"),
     ("<0.9,!=0.5", "0.9", "above"),
     (">=0.3,<0.9", "0.1", "below")],
)
def test_gate_side(spec: str, version: str, side: str) -> None:
    from packaging.specifiers import SpecifierSet

    from patchlane.installed.gates import gate_side

    assert gate_side(SpecifierSet(spec), version) == side


def test_a_version_source_reads_as_the_text_records_always_had(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert str(VersionSource("metadata")) == "metadata"
    assert str(VersionSource("none")) == "none"
    assert str(VersionSource.tree("/x/pkg/version.py")) == "source tree (/x/pkg/version.py)"
    # a tree without metadata: typed for code, the same text for the audit and JSON
    (tmp_path / "pltreeonly").mkdir()
    (tmp_path / "pltreeonly" / "__init__.py").write_text("")
    (tmp_path / "pltreeonly" / "version.py").write_text("__version__ = '0.3.1'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    gate = check_gate("pltreeonly", None, None, "pltreeonly.version:__version__")
    assert gate.found == "0.3.1" and gate.source.origin == "source tree"
    assert gate.source.path == str(tmp_path / "pltreeonly" / "version.py")
    assert gate.reason == f"pltreeonly 0.3.1 (from the {gate.source})"
    missing = check_gate("pltreeonly-not-installed", None)
    assert missing.source == VersionSource("none") and str(missing.source) == "none"


def test_a_version_source_is_an_immutable_value() -> None:
    a, b = VersionSource.tree("/x/v.py"), VersionSource("source tree", "/x/v.py")
    assert a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert a != VersionSource("metadata") and a != "source tree (/x/v.py)"
    assert repr(a) == "VersionSource('source tree', '/x/v.py')"
    with pytest.raises(AttributeError, match="immutable"):
        a.path = "/y"


HUGE = "1." + "9" * 5000
"""A version component past Python's integer-digit limit: packaging raises a bare ValueError."""


def test_a_version_with_a_5000_digit_number_is_not_comparable(install) -> None:
    from patchlane.installed.gates import gate_side

    name = install(HUGE)
    result = check_gate(name, SpecifierSet(RANGE))
    assert (result.open, result.comparable, result.found) == (False, False, HUGE)
    assert result.reason.startswith(f"{name} reports version '1.99999")
    assert "(5002 characters)', which has a number longer than 640 digits" in result.reason
    assert gate_side(SpecifierSet(RANGE), HUGE) == "excluded"  # never assumed either side


@pytest.mark.parametrize("strict", [False, True])
def test_a_target_with_a_5000_digit_version_is_decided_not_raised(fake_target,
                                                                  strict: bool) -> None:
    """The training job's `import` of the target: a failed entry in default mode, the
    strict refusal of an unevaluable gate (exit 6) in strict mode; never a bare ValueError."""
    from patchlane.common.errors import StrictModeError
    from patchlane.deciding.audit import Outcome

    meta = next(fake_target.root.glob("*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace(f"Version: {fake_target.version}",
                                             f"Version: {HUGE}"))
    decider = fake_target.decider({"PATCHLANE_STRICT": "1"} if strict else {})
    if strict:
        with pytest.raises(StrictModeError, match="cannot evaluate the gate") as info:
            fake_target.import_target()
        assert info.value.exit_code == 6
        return
    fake_target.import_target()
    decision = decider.audit.latest()[fake_target.entry_id]
    assert decision.outcome is Outcome.FAILED_ERROR
    assert "longer than 640 digits" in decision.reason


def test_a_site_directory_of_symlinks_still_owns_its_modules(fake_target: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    # Spack and Nix views, Bazel's symlink trees: each package and its metadata a link into
    # the real prefix. Resolved, the module left the folder its metadata names: the gate said
    # "not from the installed" release and the entry failed
    import importlib

    view = tmp_path / "view"
    view.mkdir()
    for item in fake_target.root.iterdir():
        if item.name == fake_target.package or item.name.endswith(".dist-info"):
            (view / item.name).symlink_to(item, target_is_directory=True)
    monkeypatch.syspath_prepend(str(view))
    importlib.invalidate_caches()
    module = fake_target.import_target()
    assert module.__file__.startswith(str(view))
    result = check_gate(fake_target.distribution, SpecifierSet(">=1.0,<2.0"), module)
    assert result.open and result.found == "1.2.0", result.reason

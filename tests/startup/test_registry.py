"""Registry parsing and validation: every malformed registry is refused with a precise error.

Each malformed case is the valid registry below with one thing changed, so a case fails for the
reason it names and nothing else. The messages are part of the contract: they must name the file,
the entry id (when there is one) and the key, and say what was found and what was expected.
"""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from patchlane.common.errors import PatchlaneError, RegistryError, bounded
from patchlane.registry import (
    Entry,
    FingerprintPolicy,
    FingerprintSpec,
    Kind,
    RetireWhen,
    Status,
    Target,
    Upstream,
    load_registries,
    parse_registry,
)

REPO = Path(__file__).resolve().parents[2]

ENTRY_ID = "demo_fix"
FP_A = "sha256:" + "0123456789abcdef" * 2
FP_B = "sha256:" + "fedcba9876543210" * 2


# -- building registries ---------------------------------------------------------------------


def patch_entry(entry_id: str = ENTRY_ID) -> dict[str, Any]:
    """A complete, valid source_patch entry (as YAML would load it)."""
    return {
        "id": entry_id,
        "kind": "source_patch",
        "summary": "Demo fix for a demo bug.",
        "target": {"distribution": "demo-dist", "object": "demo_pkg.mod:Thing.method"},
        "applies_to": ">=0.14,<0.18",
        "upstream": {
            "issue": "https://github.com/example/demo/issues/1",
            "pr": "https://github.com/example/demo/pull/2",
            "forwarded": "https://github.com/example/demo/pull/2",
            "applied_upstream": "demo-dist 0.18.0",
        },
        "retire_when": {"release": ">=0.18", "probe": True},
        "overlay": f"patches/{entry_id}.py",
        "reproducer": f"reproducers/{entry_id}.py",
        "fingerprint": {"sha256": [FP_A, FP_B], "policy": "warn", "covers": ["Thing.helper"]},
        "owner": "training-infra",
        "added": dt.date(2026, 11, 22),
        "status": "active",
    }


def common(entry_id: str, kind: str) -> dict[str, Any]:
    return {
        "id": entry_id,
        "kind": kind,
        "summary": f"a {kind} entry",
        "upstream": {"forwarded": "not-needed"},
        "retire_when": {"release": ">=3.0"},
        "owner": "training-infra",
        "added": "2026-11-22",
        "status": "active",
    }


def version_floor_entry(entry_id: str = "demo_floor") -> dict[str, Any]:
    return {**common(entry_id, "version_floor"), "target": {"distribution": "torch"},
            "requires": ">=2.4", "policy": "error"}


def packaging_pin_entry(entry_id: str = "demo_pin") -> dict[str, Any]:
    return {**common(entry_id, "packaging_pin"), "target": {"distribution": "transformer-engine"},
            "pin": "==2.8.0", "source": "https://example.com/te-2.8.0.whl"}


def compat_gate_entry(entry_id: str = "demo_gate") -> dict[str, Any]:
    return {**common(entry_id, "compat_gate"), "check": f"patches/{entry_id}.py:validate"}


def config_entry(entry_id: str = "demo_config") -> dict[str, Any]:
    return {**common(entry_id, "config"),
            "settings": {"torch._dynamo.config.recompile_limit": 64}}


def write_files(root: Path, entry_id: str) -> None:
    """The overlay and reproducer an entry names, with placeholder content."""
    for folder in ("patches", "reproducers"):
        (root / folder).mkdir(exist_ok=True)
        (root / folder / f"{entry_id}.py").write_text(f'"""{folder[:-1]} for {entry_id}."""\n')


def write_registry(
    root: Path,
    entries: list[Any] | None = None,
    *,
    top: dict[str, Any] | None = None,
    name: str = "registry.yaml",
) -> Path:
    """Write a registry (default: the one valid patch entry) and the files its entries name."""
    entries = [patch_entry()] if entries is None else entries
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            write_files(root, entry["id"])
    doc = {"schema": 1, "entries": entries} if top is None else top
    path = root / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_text(root: Path, text: str, name: str = "registry.yaml") -> Path:
    write_files(root, ENTRY_ID)
    path = root / name
    path.write_text(text)
    return path


_DROP = object()


def mutate(entry: dict[str, Any], dotted: str, value: Any = _DROP) -> dict[str, Any]:
    """A deep copy of ``entry`` with ``a.b.c`` set to ``value`` (or removed when no value)."""
    out = copy.deepcopy(entry)
    *parents, last = dotted.split(".")
    node = out
    for part in parents:
        node = node[part]
    if value is _DROP:
        del node[last]
    else:
        node[last] = value
    return out


# -- the valid registry ----------------------------------------------------------------------


def test_valid_registry_parses_into_entry(tmp_path: Path) -> None:
    path = write_registry(tmp_path)
    (entry,) = parse_registry(path)
    assert isinstance(entry, Entry)
    assert entry.id == ENTRY_ID
    assert entry.kind is Kind.SOURCE_PATCH
    assert entry.summary == "Demo fix for a demo bug."
    assert entry.target == Target("demo-dist", "demo_pkg.mod", "Thing.method")
    assert entry.target.object_path == "demo_pkg.mod:Thing.method"
    assert isinstance(entry.applies_to, SpecifierSet)
    assert entry.applies_to == SpecifierSet(">=0.14,<0.18")
    assert "0.16.1" in entry.applies_to and "0.18.0" not in entry.applies_to
    assert entry.upstream == Upstream(
        issue="https://github.com/example/demo/issues/1",
        pr="https://github.com/example/demo/pull/2",
        forwarded="https://github.com/example/demo/pull/2",
        applied_upstream="demo-dist 0.18.0",
    )
    assert entry.retire_when == RetireWhen(release=SpecifierSet(">=0.18"), probe=True)
    assert entry.fingerprint == FingerprintSpec(
        sha256=(FP_A, FP_B), policy=FingerprintPolicy.WARN, covers=("Thing.helper",)
    )
    assert entry.overlay == (tmp_path / "patches" / f"{ENTRY_ID}.py").resolve()
    assert entry.overlay.is_absolute() and entry.overlay.is_file()
    assert entry.reproducer == (tmp_path / "reproducers" / f"{ENTRY_ID}.py").resolve()
    assert entry.owner == "training-infra"
    assert entry.added == dt.date(2026, 11, 22)
    assert entry.status is Status.ACTIVE and entry.active
    assert entry.source == path.resolve()


def test_overlay_resolved_against_registry_file_not_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    path = write_registry(sub)
    monkeypatch.chdir(tmp_path)
    (entry,) = parse_registry(Path("conf") / path.name)
    assert entry.overlay == (sub / "patches" / f"{ENTRY_ID}.py").resolve()
    assert entry.source == path.resolve()


def test_real_default_registry_parses() -> None:
    entries = parse_registry(REPO / "registry.yaml")
    by_id = {e.id: e for e in entries}
    entry = by_id["mcore_rerun_sentinel"]
    assert entry.kind is Kind.SOURCE_PATCH
    assert entry.target.distribution == "megatron-core"
    assert entry.target.object_path == (
        "megatron.core.rerun_state_machine:RerunStateMachine.state_dict"
    )
    assert entry.applies_to is not None and "0.16.1" in entry.applies_to
    assert "0.18.0" not in entry.applies_to
    assert entry.overlay == REPO / "patches" / "mcore_rerun_sentinel.py"
    assert entry.reproducer == REPO / "reproducers" / "mcore_rerun_sentinel.py"
    assert entry.fingerprint is not None and len(entry.fingerprint.sha256) >= 1
    assert isinstance(entry.added, dt.date)


def test_registry_digest_is_sha256_of_file_bytes(tmp_path: Path) -> None:
    path = write_registry(tmp_path)
    registry = load_registries([path])
    assert registry.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert registry.sources == (path.resolve(),)
    assert registry.get(ENTRY_ID).id == ENTRY_ID
    with pytest.raises(KeyError, match="nope"):
        registry.get("nope")


# -- malformed registries --------------------------------------------------------------------

Builder = Callable[[Path], list[Path]]
UNSET = object()


@dataclass(frozen=True)
class Bad:
    build: Builder
    message: str
    """A fragment of the message that says what is wrong."""
    key: str | None
    entry_id: str | None = ENTRY_ID
    found: Any = UNSET
    """The value the error reports as found (UNSET: not checked, e.g. YAML syntax errors)."""
    expected: str | None = None
    """A fragment of what the error says was expected."""


def entry_with(dotted: str, value: Any = _DROP) -> Builder:
    return lambda root: [write_registry(root, [mutate(patch_entry(), dotted, value)])]


def entries(*items: Any) -> Builder:
    return lambda root: [write_registry(root, [copy.deepcopy(i) for i in items])]


def top(doc: dict[str, Any]) -> Builder:
    def build(root: Path) -> list[Path]:
        write_files(root, ENTRY_ID)
        return [write_registry(root, top=copy.deepcopy(doc))]
    return build


def text(body: str) -> Builder:
    return lambda root: [write_text(root, body)]


def missing_file(folder: str) -> Builder:
    def build(root: Path) -> list[Path]:
        path = write_registry(root)
        (root / folder / f"{ENTRY_ID}.py").unlink()
        return [path]
    return build


def looping_overlay(root: Path) -> list[Path]:
    """The overlay a symlink to itself: resolving it raises (RuntimeError on 3.11)."""
    path = write_registry(root)
    overlay = root / "patches" / f"{ENTRY_ID}.py"
    overlay.unlink()
    overlay.symlink_to(overlay.name)
    return [path]


def misnamed_overlay(root: Path) -> list[Path]:
    path = write_registry(root, [mutate(patch_entry(), "overlay", "patches/other_fix.py")])
    (root / "patches" / "other_fix.py").write_text("# the right content under the wrong name\n")
    return [path]


def duplicate_across_files(root: Path) -> list[Path]:
    first = write_registry(root, name="a.yaml")
    second = write_registry(root, [compat_gate_entry(), patch_entry()], name="b.yaml")
    return [first, second]


BAD: dict[str, Bad] = {
    # -- the file as a whole
    "yaml-syntax": Bad(
        text("schema: 1\nentries:\n  - id: demo_fix\n    kind: source_patch\n"
             "    summary: x: y: z\n    owner: a\n"),
        "invalid YAML at line 5", key=None, entry_id=None),
    "top-level-list": Bad(
        text("- schema: 1\n- entries: []\n"), "registry must be a mapping", key=None,
        entry_id=None, found="list", expected="`schema: 1`"),
    "top-level-empty": Bad(
        text("# nothing but a comment\n"), "registry must be a mapping", key=None,
        entry_id=None, found="NoneType", expected="a mapping"),
    "missing-schema": Bad(
        top({"entries": [patch_entry()]}), "missing required key in the registry", key="schema",
        entry_id=None, found=None, expected="a value"),
    "schema-2": Bad(
        top({"schema": 2, "entries": [patch_entry()]}), "unsupported schema version",
        key="schema", entry_id=None, found=2, expected="1"),
    "schema-string": Bad(
        top({"schema": "1", "entries": []}), "unsupported schema version", key="schema",
        entry_id=None, found="1", expected="1"),
    "entries-mapping": Bad(
        top({"schema": 1, "entries": {ENTRY_ID: patch_entry()}}), "wrong type", key="entries",
        entry_id=None, found={ENTRY_ID: patch_entry()}, expected="a list of entries"),
    "entries-missing": Bad(
        top({"schema": 1}), "missing required key in the registry", key="entries",
        entry_id=None, found=None, expected="a value"),
    "unknown-top-level-key": Bad(
        top({"schema": 1, "entries": [], "version": 2}), "unknown key in the registry",
        key="version", entry_id=None, found="version", expected="['entries', 'schema']"),
    "top-level-typo": Bad(
        top({"schema": 1, "entires": [patch_entry()]}), "unknown key in the registry",
        key="entires", entry_id=None, found="entires", expected="one of"),
    # -- an entry's shape
    "entry-not-mapping": Bad(
        entries(patch_entry(), ENTRY_ID), "wrong type", key="entries[1]", entry_id=None,
        found=ENTRY_ID, expected="a mapping describing one entry (got str)"),
    "entry-id-missing": Bad(
        entry_with("id"), "entries[0] has no valid id", key="id", entry_id=None, found=None,
        expected="a lowercase identifier"),
    "entry-id-invalid": Bad(
        entry_with("id", "Demo-Fix"), "entries[0] has no valid id", key="id", entry_id=None,
        found="Demo-Fix", expected="[a-z][a-z0-9_]"),
    "entry-id-int": Bad(
        entry_with("id", 42), "has no valid id", key="id", entry_id=None, found=42,
        expected="a lowercase identifier"),
    "unknown-kind": Bad(
        entry_with("kind", "source-patch"), "unknown kind", key="kind", found="source-patch",
        expected="'source_patch'"),
    "kind-missing": Bad(
        entry_with("kind"), "unknown kind", key="kind", found=None, expected="'config'"),
    "unknown-entry-key-typo": Bad(
        entry_with("ower", "someone"), "unknown key in a source_patch entry", key="ower",
        found="ower", expected="'owner'"),
    "patch-key-on-config-entry": Bad(
        entries({**config_entry(ENTRY_ID), "overlay": f"patches/{ENTRY_ID}.py"}),
        "unknown key in a config entry", key="overlay", found="overlay", expected="one of"),
    "missing-owner": Bad(
        entry_with("owner"), "missing required key in a source_patch entry", key="owner",
        found=None, expected="a value"),
    "null-owner": Bad(  # there, with no value: "empty", and the fix says to give it one
        entry_with("owner", None), "empty key", key="owner", found=None,
        expected="a value"),
    "missing-fingerprint": Bad(
        entry_with("fingerprint"), "missing required key in a source_patch entry",
        key="fingerprint", found=None, expected="a value"),
    "missing-upstream-forwarded": Bad(
        entry_with("upstream.forwarded"), "missing required key in upstream",
        key="upstream.forwarded", found=None, expected="a value"),
    "unknown-upstream-key": Bad(
        entry_with("upstream.isue", "https://x.example/1"), "unknown key in upstream",
        key="upstream.isue", found="isue", expected="'issue'"),
    # -- versions
    "applies-to-no-upper-bound": Bad(
        entry_with("applies_to", ">=0.14"), "source patches need an upper bound",
        key="applies_to", found=">=0.14", expected="'<'"),
    "applies-to-not-equal-is-no-bound": Bad(
        entry_with("applies_to", ">=0.14,!=0.15.0"), "source patches need an upper bound",
        key="applies_to", found="!=0.15.0,>=0.14", expected="'<'"),
    "applies-to-invalid": Bad(
        entry_with("applies_to", ">=1.0,<"), "invalid PEP 440 specifier", key="applies_to",
        found=">=1.0,<", expected="a PEP 440 specifier"),
    "applies-to-empty": Bad(
        entry_with("applies_to", ""), "empty specifier", key="applies_to", found="",
        expected="at least one clause"),
    "applies-to-float": Bad(
        entry_with("applies_to", 0.16), "wrong type", key="applies_to", found=0.16,
        expected="(got float)"),
    "applies-to-5000-digit-bound": Bad(
        entry_with("applies_to", ">=0.14,<0." + "9" * 5000), "unusable version range",
        key="applies_to", found=">=0.14,<0." + "9" * 5000,
        expected="numbers of at most 640 digits"),
    "applies-to-epoch-admits-every-release": Bad(
        entry_with("applies_to", "<2!1.0"), "unusable version range", key="applies_to",
        found="<2!1.0", expected="a range some release can satisfy"),
    "applies-to-satisfied-by-nothing": Bad(
        entry_with("applies_to", ">=1.3,<1.3"), "unusable version range", key="applies_to",
        found=">=1.3,<1.3", expected="a range some release can satisfy"),
    "retire-release-satisfied-by-nothing": Bad(
        entry_with("retire_when.release", ">2,<1"), "unusable version range",
        key="retire_when.release", found=">2,<1", expected="a range some release can satisfy"),
    "fingerprint-release-5000-digits": Bad(
        entry_with("fingerprint.releases", {"0." + "9" * 5000: FP_A}), "invalid release",
        key="fingerprint.releases", found="0." + "9" * 5000, expected="a quoted release"),
    "retire-release-invalid": Bad(
        entry_with("retire_when.release", "0.18+"), "invalid PEP 440 specifier",
        key="retire_when.release", found="0.18+", expected="a PEP 440 specifier"),
    # -- files
    "duplicate-id-one-file": Bad(
        entries(patch_entry(), compat_gate_entry(), patch_entry()), "duplicate id", key="id",
        found=ENTRY_ID, expected="entries[0] already uses it"),
    "duplicate-id-two-files": Bad(
        duplicate_across_files, "duplicate id across registries", key="id", found=ENTRY_ID,
        expected="a.yaml"),
    "overlay-missing": Bad(
        missing_file("patches"), "file does not exist", key="overlay",
        found=f"patches/{ENTRY_ID}.py", expected="an existing file"),
    "reproducer-missing": Bad(
        missing_file("reproducers"), "file does not exist", key="reproducer",
        found=f"reproducers/{ENTRY_ID}.py", expected="an existing file"),
    "overlay-name-too-long": Bad(  # the lookup itself fails (ENAMETOOLONG): refused alike
        entry_with("overlay", "patches/" + "x" * 300 + ".py"), "cannot look the file up",
        key="overlay", found="patches/" + "x" * 300 + ".py",
        expected="a file the filesystem can find (File name too long)"),
    "overlay-a-symlink-loop": Bad(
        looping_overlay, "cannot look the file up", key="overlay",
        found=f"patches/{ENTRY_ID}.py", expected="a file the filesystem can find"),
    "overlay-not-named-after-id": Bad(
        misnamed_overlay, "named after their entry id", key="overlay",
        found="patches/other_fix.py", expected=f"a file named {ENTRY_ID}.py"),
    "overlay-int": Bad(
        entry_with("overlay", 7), "wrong type", key="overlay", found=7,
        expected="a path relative to the registry file"),
    # -- types
    "owner-int": Bad(
        entry_with("owner", 5), "wrong type", key="owner", found=5, expected="(got int)"),
    "owner-bool": Bad(
        entry_with("owner", True), "wrong type", key="owner", found=True,
        expected="a person or team"),
    "summary-list": Bad(
        entry_with("summary", ["a", "b"]), "wrong type", key="summary", found=["a", "b"],
        expected="(got list)"),
    "sha256-int": Bad(
        entry_with("fingerprint.sha256", 5), "wrong type", key="fingerprint.sha256", found=5,
        expected="a fingerprint string or a list of them"),
    "probe-string-yes": Bad(
        entry_with("retire_when.probe", "yes"), "wrong type", key="retire_when.probe",
        found="yes", expected="true or false"),
    "target-string": Bad(
        entry_with("target", "demo_pkg.mod:Thing.method"), "wrong type", key="target",
        found="demo_pkg.mod:Thing.method", expected="a mapping"),
    "upstream-forwarded-yes": Bad(
        entry_with("upstream.forwarded", True), "wrong type", key="upstream.forwarded",
        found=True, expected="'not-needed'"),
    # -- fingerprints
    "fingerprint-not-hex": Bad(
        entry_with("fingerprint.sha256", [FP_A, "sha256:not-a-digest"]), "invalid fingerprint",
        key="fingerprint.sha256", found="sha256:not-a-digest", expected="32 lowercase hex"),
    "fingerprint-uppercase": Bad(
        entry_with("fingerprint.sha256", FP_A.upper().replace("SHA256", "sha256")),
        "invalid fingerprint", key="fingerprint.sha256",
        found=FP_A.upper().replace("SHA256", "sha256"), expected="lowercase hex"),
    "fingerprint-no-prefix": Bad(
        entry_with("fingerprint.sha256", FP_A.removeprefix("sha256:")), "invalid fingerprint",
        key="fingerprint.sha256", found=FP_A.removeprefix("sha256:"), expected="'sha256:'"),
    "fingerprint-unknown-policy": Bad(
        entry_with("fingerprint.policy", "ignore"), "unknown drift policy",
        key="fingerprint.policy", found="ignore", expected="'refuse' or 'warn'"),
    "fingerprint-bad-covers": Bad(
        entry_with("fingerprint.covers", ["Thing.helper", "Thing:other"]), "invalid qualname",
        key="fingerprint.covers", found="Thing:other", expected="a dotted attribute path"),
    # -- retirement, upstream, dates, targets, status
    "retire-when-empty": Bad(
        entry_with("retire_when", {}), "not machine-checkable", key="retire_when", found={},
        expected="`probe: true`"),
    "retire-when-probe-false": Bad(
        entry_with("retire_when", {"probe": False}), "not machine-checkable",
        key="retire_when", found={"probe": False}, expected="`release: <specifier>`"),
    "issue-not-url": Bad(
        entry_with("upstream.issue", "github.com/example/demo/issues/1"), "not a URL",
        key="upstream.issue", found="github.com/example/demo/issues/1",
        expected="an http(s) URL"),
    "forwarded-no-without-draft": Bad(
        entry_with("upstream.forwarded", "no"),
        "a source patch not forwarded upstream needs a public-ready draft",
        key="upstream.draft", found="forwarded: no and no upstream.draft",
        expected=f"upstream.draft: drafts/{ENTRY_ID}.md (or forwarded: <the PR/issue URL>)"),
    "discussion-not-url": Bad(
        entry_with("upstream.discussion", "see the forum thread"), "not a URL",
        key="upstream.discussion", found="see the forum thread", expected="an http(s) URL"),
    "discussion-not-text": Bad(
        entry_with("upstream.discussion", ["https://example.com/a"]), "wrong type",
        key="upstream.discussion", found=["https://example.com/a"], expected="a URL string"),
    "draft-missing-file": Bad(
        entry_with("upstream.draft", "drafts/nowhere.md"), "draft does not exist",
        key="upstream.draft", found="drafts/nowhere.md"),
    "forwarded-not-url": Bad(
        entry_with("upstream.forwarded", "maybe later"), "not a URL", key="upstream.forwarded",
        found="maybe later", expected="an http(s) URL"),
    "added-bad-date": Bad(
        entry_with("added", "2026-13-45"), "invalid date", key="added", found="2026-13-45",
        expected="an ISO date"),
    "added-int": Bad(
        entry_with("added", 2026), "invalid date", key="added", found=2026,
        expected="an ISO date"),
    "target-object-no-colon": Bad(
        entry_with("target.object", "demo_pkg.mod.Thing.method"), "invalid target object",
        key="target.object", found="demo_pkg.mod.Thing.method", expected="a colon"),
    "target-object-empty-qualname": Bad(
        entry_with("target.object", "demo_pkg.mod:"), "invalid target object",
        key="target.object", found="demo_pkg.mod:", expected="'package.module:Qual.name'"),
    "version-from-dotted-attribute": Bad(
        # the gate reads one attribute of the module (getattr): a dotted one never resolves
        entry_with("target.version_from", "demo_pkg.info:version.public"),
        "invalid version_from", key="target.version_from",
        found="demo_pkg.info:version.public", expected="one attribute name"),
    "target-distribution-invalid": Bad(
        entry_with("target.distribution", "demo dist"), "invalid distribution name",
        key="target.distribution", found="demo dist", expected="a PyPI distribution name"),
    "unknown-status": Bad(
        entry_with("status", "enabled"), "unknown status", key="status", found="enabled",
        expected="'active' or 'retired'"),
    # -- the other kinds: each without its kind-specific key, or with a bad value
    "version-floor-no-requires": Bad(
        entries(mutate(version_floor_entry(ENTRY_ID), "requires")),
        "missing required key in a version_floor entry", key="requires", found=None,
        expected="a value"),
    "version-floor-no-policy": Bad(
        entries(mutate(version_floor_entry(ENTRY_ID), "policy")),
        "missing required key in a version_floor entry", key="policy", found=None,
        expected="a value"),
    "version-floor-bad-policy": Bad(
        entries(mutate(version_floor_entry(ENTRY_ID), "policy", "refuse")), "unknown policy",
        key="policy", found="refuse", expected="'error' or 'warn'"),
    "version-floor-no-target": Bad(
        entries(mutate(version_floor_entry(ENTRY_ID), "target")),
        "missing required key in a version_floor entry", key="target", found=None,
        expected="a value"),
    "packaging-pin-no-pin": Bad(
        entries(mutate(packaging_pin_entry(ENTRY_ID), "pin")),
        "missing required key in a packaging_pin entry", key="pin", found=None,
        expected="a value"),
    "packaging-pin-invalid": Bad(
        entries(mutate(packaging_pin_entry(ENTRY_ID), "pin", "2.8.0")),
        "invalid PEP 440 specifier", key="pin", found="2.8.0", expected="a PEP 440 specifier"),
    "compat-gate-no-check": Bad(
        entries(mutate(compat_gate_entry(ENTRY_ID), "check")),
        "missing required key in a compat_gate entry", key="check", found=None,
        expected="a value"),
    "compat-gate-check-int": Bad(
        entries(mutate(compat_gate_entry(ENTRY_ID), "check", 1)), "wrong type", key="check",
        found=1, expected="'patches/<id>.py:function'"),
    "config-no-settings": Bad(
        entries(mutate(config_entry(ENTRY_ID), "settings")),
        "missing required key in a config entry", key="settings", found=None,
        expected="a value"),
    "config-settings-list": Bad(
        entries(mutate(config_entry(ENTRY_ID), "settings", ["NCCL_NVLS_ENABLE=0"])),
        "wrong type", key="settings", found=["NCCL_NVLS_ENABLE=0"],
        expected="a mapping of 'package.module.attribute' to value"),
}


@pytest.mark.parametrize(("spec", "says"), [
    (">=0.14,<0." + "9" * 5000, "has a number longer than 640 digits"),
    ("<2!1.0", "every release of a lower epoch (any release written without one) sorts below"),
    (">=1.0,<2!0", "must give every bound that epoch and a lower bound in it"),
    (">=1.3,<1.3", "no version satisfies <1.3,>=1.3"),
    ("==1.*,>=2", "no version satisfies"),
    ("~=1.4.5,!=1.4.*", "no version satisfies"),
])
def test_an_unusable_range_says_why(tmp_path: Path, spec: str, says: str) -> None:
    """Ranges packaging accepts but no gate could use as written: the fix says which."""
    (path,) = entry_with("applies_to", spec)(tmp_path)
    with pytest.raises(RegistryError) as info:
        load_registries([path])
    assert info.value.fix is not None and says in info.value.fix
    assert len(str(info.value)) < 1200  # a 5,000-digit bound is cut, not repeated


@pytest.mark.parametrize("spec", [">=2!1.0,<2!2.0", "==1!1.0", ">1.0rc1,<1.0rc2",
                                  ">1.2.999,<1.3", "<=1.0,>=1.0", ">=1.0,<2.0,!=1.0.*",
                                  "~=0.16.0", ">=0.14,<0.18"])
def test_a_usable_range_is_accepted(tmp_path: Path, spec: str) -> None:
    (path,) = entry_with("applies_to", spec)(tmp_path)
    (entry,) = load_registries([path]).entries
    assert entry.applies_to == SpecifierSet(spec)


@pytest.mark.parametrize("case", list(BAD.values()), ids=list(BAD))
def test_malformed_registry_is_refused(tmp_path: Path, case: Bad) -> None:
    paths = case.build(tmp_path)
    culprit = paths[-1].resolve()

    with pytest.raises(RegistryError) as info:
        load_registries(paths)
    err = info.value
    message = str(err)

    # One error type for the CLI to map, and it is still a ValueError for plain callers.
    assert isinstance(err, PatchlaneError) and isinstance(err, ValueError)
    assert err.exit_code == 3
    # The file ...
    assert err.path == str(culprit)
    assert message.startswith(str(culprit))
    # ... the entry ...
    assert err.entry_id == case.entry_id
    if case.entry_id is not None:
        assert f"entry {case.entry_id!r}" in message
    else:
        assert "entry '" not in message
    # ... the key ...
    assert err.key == case.key
    if case.key is not None:
        assert f"key {case.key!r}" in message
    # ... what is wrong, what was found and what was expected.
    assert case.message in message
    if case.found is not UNSET:
        assert err.found == case.found
        assert type(err.found) is type(case.found)
        assert f"found {bounded(case.found)}" in message
    if case.expected is not None:
        assert err.expected is not None and case.expected in err.expected
        assert f"expected {err.expected}" in message
    # ... and the fix: every refusal says what to do
    assert err.fix and message.endswith(f"; fix: {err.fix}"), message

    if len(paths) == 1:  # the single-file parser refuses it with the very same error
        with pytest.raises(RegistryError) as again:
            parse_registry(paths[0])
        assert str(again.value) == message


def test_malformed_table_is_big_enough() -> None:
    assert len(BAD) >= 20


def test_unknown_key_error_says_how_to_fix(tmp_path: Path) -> None:
    path = write_registry(tmp_path, [mutate(patch_entry(), "ower", "someone")])
    with pytest.raises(RegistryError) as info:
        parse_registry(path)
    assert info.value.fix == "remove it or correct its spelling"
    assert "fix: remove it or correct its spelling" in str(info.value)


def test_yaml_syntax_error_reports_line_and_column(tmp_path: Path) -> None:
    body = ("schema: 1\nentries:\n  - id: demo_fix\n    owner: [training-infra\n"
            "    added: 2026-11-22\n    status: active\n\n\n")
    path = write_text(tmp_path, body)
    with pytest.raises(RegistryError, match=r"invalid YAML at line \d+, column \d+") as info:
        parse_registry(path)
    line = int(str(info.value).split("at line ")[1].split(",")[0])
    assert 4 <= line <= len(body.splitlines())
    assert info.value.entry_id is None


# -- valid edge cases ------------------------------------------------------------------------


def test_forwarded_no_is_valid_with_a_draft_and_readable_by_draft_without(
        tmp_path: Path) -> None:
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / f"{ENTRY_ID}.md").write_text("# draft\n")
    entry = mutate(mutate(patch_entry(), "upstream.forwarded", "no"), "upstream.draft",
                   f"drafts/{ENTRY_ID}.md")
    (parsed,) = parse_registry(write_registry(tmp_path, [entry]))
    assert parsed.upstream.draft == (tmp_path / "drafts" / f"{ENTRY_ID}.md").resolve()
    # `patchlane draft` reads an entry whose draft it is about to write
    path = write_registry(tmp_path, [mutate(entry, "upstream.draft")])
    with pytest.raises(RegistryError, match="needs a public-ready draft"):
        parse_registry(path)
    (lenient,) = parse_registry(path, drafts_required=False)
    assert lenient.upstream.draft is None
    # a retired entry is upstream's: no draft needed
    retired = mutate(mutate(entry, "upstream.draft"), "status", "retired")
    retired["retired"] = "2026-11-22"
    assert parse_registry(write_registry(tmp_path, [retired]))[0].upstream.forwarded == "no"


def test_forwarded_bare_no_is_the_string_no(tmp_path: Path) -> None:
    (tmp_path / "drafts").mkdir()
    (tmp_path / "drafts" / f"{ENTRY_ID}.md").write_text("# draft\n")
    path = write_registry(tmp_path, [mutate(mutate(patch_entry(), "upstream.forwarded",
                                                   "FORWARDED"), "upstream.draft",
                                            f"drafts/{ENTRY_ID}.md")])
    body = path.read_text().replace("forwarded: FORWARDED", "forwarded: no")
    assert "    forwarded: no\n" in body  # bare, unquoted
    path.write_text(body)
    # Precondition: YAML 1.1 really does read the bare word as a boolean.
    loaded = yaml.safe_load(body)
    assert loaded["entries"][0]["upstream"]["forwarded"] is False

    (entry,) = parse_registry(path)
    assert entry.upstream.forwarded == "no"
    assert isinstance(entry.upstream.forwarded, str)


@pytest.mark.parametrize(
    ("dotted", "value", "check"),
    [
        pytest.param("upstream.forwarded", "not-needed",
                     lambda e: e.upstream.forwarded == "not-needed", id="forwarded-not-needed"),
        pytest.param("fingerprint.sha256", FP_B,
                     lambda e: e.fingerprint.sha256 == (FP_B,), id="sha256-single-string"),
        pytest.param("fingerprint.policy", _DROP,
                     lambda e: e.fingerprint.policy.value == "refuse", id="policy-defaults-refuse"),
        pytest.param("fingerprint.covers", _DROP,
                     lambda e: e.fingerprint.covers == (), id="covers-default-empty"),
        pytest.param("retire_when", {"probe": True},
                     lambda e: e.retire_when == RetireWhen(None, True), id="retire-probe-only"),
        pytest.param("retire_when", {"release": ">=0.18"},
                     lambda e: e.retire_when == RetireWhen(SpecifierSet(">=0.18"), False),
                     id="retire-release-only"),
        pytest.param("applies_to", "~=0.16.0",
                     lambda e: "0.16.9" in e.applies_to and "0.17.0" not in e.applies_to,
                     id="applies-to-compatible-release-is-bounded"),
        pytest.param("applies_to", "==0.16.*",
                     lambda e: "0.16.1" in e.applies_to, id="applies-to-wildcard-is-bounded"),
        pytest.param("added", "2026-01-05",
                     lambda e: e.added == dt.date(2026, 1, 5), id="added-quoted-string"),
        pytest.param("status", "retired",
                     lambda e: e.status is Status.RETIRED and not e.active, id="status-retired"),
        pytest.param("upstream", {"forwarded": "not-needed"},
                     lambda e: e.upstream == Upstream(None, None, "not-needed", None),
                     id="upstream-minimal"),
        pytest.param("upstream.discussion", "https://forum.example.com/t/demo-bug/42",
                     lambda e: e.upstream.discussion == "https://forum.example.com/t/demo-bug/42"
                     and e.upstream.issue == "https://github.com/example/demo/issues/1",
                     id="upstream-discussion-kept"),
        pytest.param("upstream.discussion", None,
                     lambda e: e.upstream.discussion is None, id="upstream-discussion-null"),
        pytest.param("notes", "free text", lambda e: e.notes == "free text",
                     id="notes-kept"),
    ],
)
def test_valid_edge_cases(
    tmp_path: Path, dotted: str, value: Any, check: Callable[[Entry], bool]
) -> None:
    path = write_registry(tmp_path, [mutate(patch_entry(), dotted, value)])
    (entry,) = parse_registry(path)
    assert check(entry)


@pytest.mark.parametrize(
    ("build", "kind", "extra"),
    [
        pytest.param(version_floor_entry, Kind.VERSION_FLOOR,
                     {"requires": SpecifierSet(">=2.4"), "policy": "error"}, id="version_floor"),
        pytest.param(packaging_pin_entry, Kind.PACKAGING_PIN,
                     {"pin": SpecifierSet("==2.8.0"), "policy": "warn",
                      "source": "https://example.com/te-2.8.0.whl"}, id="packaging_pin"),
        pytest.param(compat_gate_entry, Kind.COMPAT_GATE,
                     {"policy": "error", "check_function": "validate"}, id="compat_gate"),
        pytest.param(config_entry, Kind.CONFIG,
                     {"settings": {"torch._dynamo.config.recompile_limit": 64}},
                     id="config"),
    ],
)
def test_non_patch_kinds_validate(
    tmp_path: Path, build: Callable[[], dict[str, Any]], kind: Kind, extra: dict[str, Any]
) -> None:
    raw = build()
    path = write_registry(tmp_path, [raw])
    (entry,) = parse_registry(path)
    assert entry.id == raw["id"]
    assert entry.kind is kind
    assert entry.spec is not None
    got = {k: v for k, v in entry.spec._asdict().items() if k != "check_file" and v is not None}
    assert got == extra
    if kind is Kind.COMPAT_GATE:
        assert entry.kind is Kind.COMPAT_GATE
        assert entry.spec.check_file == (tmp_path / "patches" / "demo_gate.py").resolve()
    assert entry.overlay is None and entry.fingerprint is None and entry.applies_to is None
    assert entry.upstream.forwarded == "not-needed"
    assert entry.added == dt.date(2026, 11, 22)
    if "target" in raw:
        assert entry.target == Target(raw["target"]["distribution"])
        assert entry.target.object_path is None


def test_all_kinds_in_one_registry(tmp_path: Path) -> None:
    items = [patch_entry(), version_floor_entry(), packaging_pin_entry(), compat_gate_entry(),
             config_entry()]
    path = write_registry(tmp_path, items)
    parsed = parse_registry(path)
    assert [e.id for e in parsed] == [i["id"] for i in items]
    assert {e.kind for e in parsed} == set(Kind)


# -- gaps found while writing these tests, fixed in the library --------------------------------


@pytest.mark.parametrize("schema", [True, 1.0], ids=["bool-true", "float"])
def test_schema_must_be_the_integer_one(tmp_path: Path, schema: Any) -> None:
    path = write_registry(tmp_path, top={"schema": schema, "entries": [patch_entry()]})
    write_files(tmp_path, ENTRY_ID)
    try:
        parse_registry(path)
    except RegistryError as exc:
        assert exc.key == "schema"
    else:
        raise AssertionError(f"schema: {schema!r} was accepted as schema 1")


@pytest.mark.parametrize(
    ("original", "duplicate"),
    [
        pytest.param("  owner: training-infra\n",
                     "  owner: training-infra\n  owner: somebody-else\n", id="entry-key"),
        pytest.param("schema: 1\n", "schema: 1\nentries: []\n", id="second-entries-list"),
    ],
)
def test_duplicate_yaml_keys_are_refused(tmp_path: Path, original: str, duplicate: str) -> None:
    path = write_registry(tmp_path)
    body = path.read_text()
    assert original in body
    path.write_text(body.replace(original, duplicate, 1))
    try:
        parse_registry(path)
    except RegistryError:
        pass
    else:
        raise AssertionError("a registry with a duplicated mapping key was accepted")


def test_empty_fingerprint_list_is_refused(tmp_path: Path) -> None:
    path = write_registry(tmp_path, [mutate(patch_entry(), "fingerprint.sha256", [])])
    try:
        parse_registry(path)
    except RegistryError as exc:
        assert exc.key == "fingerprint.sha256"
    else:
        raise AssertionError("fingerprint.sha256: [] was accepted")


# -- safe loading ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        pytest.param('!!python/object/apply:os.system ["touch {marker}"]\n', id="top-level"),
        pytest.param("schema: 1\nentries:\n  - id: demo_fix\n"
                     '    owner: !!python/object/apply:os.system ["touch {marker}"]\n',
                     id="inside-entry"),
        pytest.param("schema: 1\nentries: !!python/object/apply:subprocess.call\n"
                     '  args: [["touch", "{marker}"]]\n', id="subprocess-call"),
    ],
)
def test_python_tags_are_refused_and_never_run(tmp_path: Path, template: str) -> None:
    marker = tmp_path / "pwned"
    path = write_text(tmp_path, template.format(marker=marker))
    with pytest.raises(RegistryError) as info:
        load_registries([path])
    message = str(info.value)
    assert message.startswith(str(path.resolve()))
    assert "invalid YAML" in message and "python/object/apply" in message
    assert not marker.exists(), "a registry file ran a command"


# -- several files ---------------------------------------------------------------------------


def test_load_registries_is_all_or_nothing(tmp_path: Path) -> None:
    good_dir, bad_dir = tmp_path / "good", tmp_path / "bad"
    good_dir.mkdir()
    bad_dir.mkdir()
    good = write_registry(good_dir, [patch_entry("good_fix")])
    bad = write_registry(bad_dir, [mutate(patch_entry("bad_fix"), "owner", 5)])

    assert [e.id for e in load_registries([good]).entries] == ["good_fix"]  # good alone loads

    for order in ([good, bad], [bad, good]):
        result: Any = "not assigned"
        with pytest.raises(RegistryError) as info:
            result = load_registries(order)
        assert result == "not assigned"
        assert info.value.path == str(bad.resolve())
        assert info.value.entry_id == "bad_fix"
        assert info.value.key == "owner"


def test_same_file_named_twice_loads_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_registry(tmp_path)
    monkeypatch.chdir(tmp_path)
    registry = load_registries([path, path.resolve(), Path(path.name),
                                tmp_path / "patches" / ".." / path.name])
    assert [e.id for e in registry.entries] == [ENTRY_ID]
    assert registry.sources == (path.resolve(),)
    assert registry.digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_files_keep_load_order(tmp_path: Path) -> None:
    first = write_registry(tmp_path, [patch_entry("first_fix")], name="a.yaml")
    second = write_registry(tmp_path, [config_entry("second_cfg")], name="b.yaml")
    registry = load_registries([second, first])
    assert [e.id for e in registry.entries] == ["second_cfg", "first_fix"]
    assert registry.sources == (second.resolve(), first.resolve())
    both = hashlib.sha256(second.read_bytes() + first.read_bytes()).hexdigest()
    assert registry.digest == "sha256:" + both
    assert registry.get("first_fix").source == first.resolve()


def test_unreadable_registry_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(RegistryError) as info:
        load_registries([missing])
    assert info.value.path == str(missing.resolve())
    assert "cannot read registry" in str(info.value)


# -- import time: nothing is half-applied ----------------------------------------------------

_REPORT = "import json, patchlane; print(json.dumps(patchlane.report()))"


def _run_import(registry: Path, *, strict: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({
        "PATCHLANE_DEFAULT_REGISTRY": "0",
        "PATCHLANE_ENTRY_POINTS": "0",
        "PATCHLANE_REGISTRY": str(registry),
    })
    if strict:
        env["PATCHLANE_STRICT"] = "1"
    return subprocess.run([sys.executable, "-c", _REPORT], env=env, capture_output=True,
                          text=True, timeout=120, cwd=registry.parent, check=False)


def _half_bad_registry(root: Path) -> Path:
    good = mutate(patch_entry("good_fix"), "target.object", "patchlane_absent_target:func")
    bad = mutate(patch_entry("bad_fix"), "retire_when", {"probe": "yes"})
    return write_registry(root, [good, bad])


@pytest.mark.slow
def test_control_valid_registry_is_hooked_at_import(tmp_path: Path) -> None:
    good = mutate(patch_entry("good_fix"), "target.object", "patchlane_absent_target:func")
    path = write_registry(tmp_path, [good])
    proc = _run_import(path, strict=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["startup_error"] is None
    assert [e["id"] for e in report["entries"]] == ["good_fix"]
    assert report["entries"][0]["decision"]["outcome"] == "pending"
    assert report["registries"] == [str(path.resolve())]


@pytest.mark.slow
def test_invalid_registry_applies_nothing_at_import(tmp_path: Path) -> None:
    path = _half_bad_registry(tmp_path)
    proc = _run_import(path, strict=False)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["startup_error"] is None  # the process started: only this file is refused
    (refused,) = report["rejected_registries"]
    error = refused["error"]
    assert refused["path"] == str(path.resolve())
    assert "entry 'bad_fix'" in error
    assert "key 'retire_when.probe'" in error
    assert "found 'yes', expected true or false" in error
    assert report["entries"] == []  # the valid first entry of that file was not hooked either
    assert report["history"] == []
    assert report["registries"] == []
    assert report["strict"] is False
    assert f"registry {path.resolve()} refused, its entries not applied" in proc.stderr


def _run_import_with(paths: list[Path], cwd: Path, strict: bool = False
                     ) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_ENTRY_POINTS": "0",
                "PATCHLANE_REGISTRY": os.pathsep.join(map(str, paths))})
    if strict:
        env["PATCHLANE_STRICT"] = "1"
    return subprocess.run([sys.executable, "-c", _REPORT], env=env, capture_output=True,
                          text=True, timeout=120, cwd=cwd, check=False)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown key", "duplicate id", "missing relative path",
                                  "depends on a refused file"])
def test_a_bad_team_file_refuses_only_its_own_entries(tmp_path: Path, case: str) -> None:
    """A team registry beside the catalog: whatever is wrong with the team's file, the other
    file's entries still load and apply; the refused file is named, with its key and fix, on
    stderr and in the report. Strict mode makes it fatal, in one line."""
    good = mutate(patch_entry("good_fix"), "target.object", "patchlane_absent_target:func")
    for folder in ("catalog", "team", "team2"):
        (tmp_path / folder).mkdir()
    catalog = write_registry(tmp_path / "catalog", [good])
    team_dir = tmp_path / "team"
    named: Path
    if case == "unknown key":
        bad = mutate(patch_entry("team_fix"), "summery", "a typo of summary")
        named = write_registry(team_dir, [bad])
        says = "key 'summery'"
    elif case == "duplicate id":
        named = write_registry(team_dir, [mutate(patch_entry("good_fix"), "target.object",
                                                 "patchlane_absent_target:other")])
        says = "duplicate id across registries"
    elif case == "missing relative path":
        named = Path("team.yaml")  # read from the working directory: not there
        says = "a relative path is read from the working directory"
    else:
        broken = write_registry(team_dir, [mutate(patch_entry("team_base"), "summery", "x")])
        leaning = mutate(mutate(patch_entry("team_more"), "target.object",
                                "patchlane_absent_target:more"), "depends_on", ["team_base"])
        dependent = write_registry(tmp_path / "team2", [leaning])
        proc = _run_import_with([catalog, broken, dependent], cwd=tmp_path)
        report = json.loads(proc.stdout)
        assert [e["id"] for e in report["entries"]] == ["good_fix"]
        assert [r["path"] for r in report["rejected_registries"]] == [
            str(broken.resolve()), str(dependent.resolve())]
        error = report["rejected_registries"][1]["error"]
        assert "unknown dependency" in error
        # the file that may hold it is named, and the entry is never its own suggestion
        assert f"if 'team_base' is in {broken.resolve()}, which was refused" in error, error
        assert "did you mean 'team_more'" not in error
        return
    proc = _run_import_with([catalog, named], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert [e["id"] for e in report["entries"]] == ["good_fix"]
    assert report["entries"][0]["decision"]["outcome"] == "pending"  # hooked, as ever
    (refused,) = report["rejected_registries"]
    assert says in refused["error"], refused
    assert report["registries"] == [str(catalog.resolve())]
    assert "refused, its entries not applied (the other registries' apply)" in proc.stderr
    assert says in proc.stderr
    strict = _run_import_with([catalog, named], cwd=tmp_path, strict=True)
    assert strict.returncode == 3 and strict.stdout == "", strict.stderr
    assert len(strict.stderr.splitlines()) == 1 and says in strict.stderr


@pytest.mark.slow
def test_invalid_registry_raises_at_import_in_strict_mode(tmp_path: Path) -> None:
    """Uncaught, the strict failure ends the script as the command line would: one line on
    stderr and the exit code of a rejected registry (docs/cli.md), not a traceback and 1."""
    path = _half_bad_registry(tmp_path)
    proc = _run_import(path, strict=True)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("patchlane: RegistryError: ")
    assert str(path.resolve()) in line
    assert "entry 'bad_fix'" in line and "key 'retire_when.probe'" in line
    assert line.endswith("(stopped at `import patchlane`, exit 3)")


@pytest.mark.slow
def test_a_caught_strict_failure_is_still_the_exception(tmp_path: Path) -> None:
    path = _half_bad_registry(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_ENTRY_POINTS": "0",
                "PATCHLANE_REGISTRY": str(path), "PATCHLANE_STRICT": "1"})
    code = ("try:\n    import patchlane\nexcept Exception as exc:\n"
            "    print(type(exc).__name__, exc.exit_code)\nraise SystemExit(0)\n")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "RegistryError 3\n", "")


def test_non_utf8_registry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "registry.yaml"
    path.write_bytes(b"schema: 1\nentries: []\n# caf\xe9\n")
    with pytest.raises(RegistryError, match="not UTF-8") as info:
        parse_registry(path)
    assert info.value.path == str(path.resolve())


def test_retired_must_be_a_date(tmp_path: Path) -> None:
    write_files(tmp_path, ENTRY_ID)
    path = write_registry(tmp_path, [mutate(patch_entry(), "retired", "last tuesday")])
    with pytest.raises(RegistryError) as info:
        parse_registry(path)
    assert info.value.key == "retired"


def test_the_editor_finds_each_entry_s_lines_by_the_yaml_parser(tmp_path: Path) -> None:
    """entry_block: every entry of the catalog, in LF and CRLF, is exactly the lines from its
    `- id:` to the next entry (or the end), whatever its notes hold."""
    from patchlane.registry.editor import entry_block, stored_lines

    text = (Path(__file__).resolve().parents[2] / "registry.yaml").read_text()
    ids = [e["id"] for e in yaml.safe_load(text)["entries"]]
    for newline in ("\n", "\r\n"):
        lines = stored_lines(text.replace("\n", newline)).lines
        starts = [entry_block(lines, i, tmp_path)[0] for i in ids]
        assert starts == sorted(starts)
        for i, entry_id in enumerate(ids):
            start, end, indent = entry_block(lines, entry_id, tmp_path)
            assert lines[start].lstrip().startswith(f"- id: {entry_id}")
            block = yaml.safe_load("".join(line[indent:] if line.strip() else line
                                           for line in lines[start:end]))
            assert block[0]["id"] == entry_id
            if i + 1 < len(ids):
                following = [ln for ln in lines[end:starts[i + 1]]
                             if ln.strip() and not ln.strip().startswith("#")]
                assert not following, (entry_id, following)

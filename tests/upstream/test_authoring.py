"""``patchlane new`` without the CLI: the block it appends validates, the rest of the registry
keeps its bytes, every refusal names what was found and the fix, and a failure leaves nothing
half-written. The CLI and the sweep on a fresh entry: tests/cli/test_new.py."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import pytest

from patchlane.authoring.new import NewEntryError, Request, new_entry, next_minor_range
from patchlane.common.errors import StrictModeError, UsageError
from patchlane.common.exit_codes import ExitCode
from patchlane.registry import Kind, load_registries, parse_registry

from ..conftest import FakeTarget

TODAY = dt.date(2026, 11, 23)


def request(fake: FakeTarget, entry_id: str = "greet_bug", **kwargs: object) -> Request:
    base: dict[str, object] = {"registry": fake.registry, "target":
                               f"{fake.module}:Greeter.greet", "owner": "tests", "today": TODAY}
    # a kind's own options (its module's OPTIONS) go under `options`, as the CLI puts them
    options = {name: kwargs.pop(name) for name in ("requires", "pin", "settings", "check")
               if name in kwargs}
    base.update(kwargs, options=options)
    return Request(entry_id, **base)  # type: ignore[arg-type]


def refused(req: Request, *needles: str) -> str:
    with pytest.raises(NewEntryError) as caught:
        new_entry(req)
    message = str(caught.value)
    assert isinstance(caught.value, UsageError) and caught.value.exit_code is ExitCode.USAGE
    assert message.startswith(f"patchlane new {req.entry_id}: ")
    for needle in needles:
        assert needle in message, message
    return message


def test_a_source_patch_entry_from_the_installed_release(fake_target: FakeTarget) -> None:
    before = fake_target.write_registry().read_bytes()
    created = new_entry(request(fake_target))
    after = fake_target.registry.read_bytes()
    assert after.startswith(before)  # appended: every byte before it is as it was
    entry = load_registries([fake_target.registry]).get("greet_bug")
    assert entry.kind is Kind.SOURCE_PATCH
    assert str(entry.applies_to) == str(created.entry.applies_to)
    assert created.applies_to == ">=1.2.0,<1.3.0"  # upper-bounded at the next minor
    assert entry.fingerprint is not None
    assert entry.fingerprint.sha256 == (fake_target.fingerprint(),)
    assert dict(entry.fingerprint.releases) == {"1.2.0": fake_target.fingerprint()}
    assert entry.upstream.forwarded == "no" and entry.upstream.draft is not None
    assert entry.retire_when.probe and entry.owner == "tests" and entry.added == TODAY
    assert entry.active
    appended = after[len(before):].decode()
    assert "from the installed" in appended and "not yet verified" in appended
    names = sorted(p.relative_to(fake_target.root).as_posix() for p in created.files)
    assert names == ["drafts/greet_bug.md", "patches/greet_bug.py", "reproducers/greet_bug.py"]
    overlay = (fake_target.root / "patches" / "greet_bug.py").read_text()
    assert "ENTRY_ID = entry_id(__name__)" in overlay
    assert "return wrapped(*args, **kwargs)" in overlay and "return False" in overlay
    reproducer = (fake_target.root / "reproducers" / "greet_bug.py").read_text()
    assert 'LANES = ("cpu",)' in reproducer and "WORLD_SIZES = (1,)" in reproducer
    assert 'raise AssertionError(\n        "write the reproducer' in reproducer
    for path in created.files:
        if path.suffix == ".py":
            compile(path.read_text(), str(path), "exec")
            assert max(len(line) for line in path.read_text().splitlines()) <= 100


def test_the_overlay_skeleton_satisfies_the_protocol(fake_target: FakeTarget) -> None:
    from patchlane.loading import load_file
    from patchlane.protocols import OverlayModule

    new_entry(request(fake_target))
    module = load_file("greet_bug", "overlay", fake_target.root / "patches" / "greet_bug.py")
    assert isinstance(module, OverlayModule)
    assert module.ENTRY_ID == "greet_bug"
    assert module.overlay(lambda *a, **k: (a, k), None, (1,), {"x": 2}) == ((1,), {"x": 2})
    assert module.probe(fake_target.import_target()) is False


def test_links_replace_the_draft(fake_target: FakeTarget) -> None:
    created = new_entry(request(fake_target, issue="https://github.com/o/r/issues/1",
                                pr="https://github.com/o/r/pull/2"))
    upstream = created.entry.upstream
    assert upstream.forwarded == "https://github.com/o/r/pull/2" and upstream.draft is None
    assert upstream.issue == "https://github.com/o/r/issues/1"
    assert not (fake_target.root / "drafts" / "greet_bug.md").exists()


def test_crlf_registry_stays_crlf_and_byte_identical(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    before = fake_target.registry.read_bytes().replace(b"\n", b"\r\n")
    fake_target.registry.write_bytes(before)
    new_entry(request(fake_target))
    after = fake_target.registry.read_bytes()
    assert after.startswith(before)
    assert b"\n" not in after[len(before):].replace(b"\r\n", b"")


def test_items_keep_the_files_indentation(fake_target: FakeTarget) -> None:
    fake_target.write_registry()  # yaml.safe_dump writes the items at column 0
    flow = fake_target.root / "flow.yaml"
    flow.write_text("schema: 1\nentries:\n    - {id: cfg_one, kind: config, summary: s, "
                    "settings: {a.b: 1}, upstream: {forwarded: not-needed}, "
                    "retire_when: {probe: true}, owner: o, added: 2026-01-01, "
                    "status: active}\n")
    for registry in (fake_target.registry, flow):
        new_entry(request(fake_target, registry=registry))
        assert [e.id for e in parse_registry(registry)][-1] == "greet_bug"
        for rel in ("patches/greet_bug.py", "reproducers/greet_bug.py", "drafts/greet_bug.md"):
            (fake_target.root / rel).unlink()


def test_a_new_registry_file_is_started(fake_target: FakeTarget) -> None:
    team = fake_target.root / "team.yaml"
    new_entry(request(fake_target, registry=team))
    (entry,) = parse_registry(team)
    assert entry.id == "greet_bug"
    assert team.stat().st_mode & 0o044  # readable by the team, not atomic_write's 0600


def test_the_default_owner_comes_from_git(fake_target: FakeTarget) -> None:
    created = new_entry(request(fake_target, owner=None))
    assert created.entry.owner  # git's user.name where it is set, else "unknown"


@pytest.mark.parametrize(("version", "expected"), [
    ("1.2.0", ">=1.2.0,<1.3.0"), ("0.16.1", ">=0.16.1,<0.17.0"),
    ("2.13.0+cu128", ">=2.13.0,<2.14.0"), ("0.18.0rc1", ">=0.18.0rc1,<0.19.0"),
    ("5", ">=5,<5.1.0"),
])
def test_next_minor_range(version: str, expected: str) -> None:
    assert next_minor_range(version) == expected


def test_strict_mode_refusing_the_import_reads_the_source(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    # `patchlane new` right after upstream changed the code: strict mode refuses the import
    # (another entry's drift), and the fingerprint is read from the installed source instead
    import importlib

    def refused_import(name: str, package: str | None = None) -> object:
        raise StrictModeError("other_entry", "refused: drift", "the target changed")

    monkeypatch.setattr(importlib, "import_module", refused_import)
    created = new_entry(request(fake_target))
    assert created.entry.fingerprint is not None
    assert created.entry.fingerprint.sha256 == (fake_target.fingerprint(),)
    assert created.applies_to == ">=1.2.0,<1.3.0"


def test_an_existing_id_is_refused(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    before = fake_target.registry.read_bytes()
    refused(request(fake_target, fake_target.entry_id), "the id is taken",
            str(fake_target.registry), "fix: ")
    assert fake_target.registry.read_bytes() == before


def test_an_id_taken_by_another_loaded_registry_is_refused(fake_target: FakeTarget) -> None:
    other = fake_target.root / "other.yaml"
    with pytest.raises(NewEntryError, match=r"the id is taken.*other\.yaml"):
        new_entry(request(fake_target), others={"greet_bug": other})


def test_an_unknown_module_is_refused(fake_target: FakeTarget) -> None:
    refused(request(fake_target, target=f"{fake_target.package}.targte:Greeter.greet"),
            "unknown module", f"did you mean '{fake_target.module}'", "fix: ")


def test_an_unknown_qualname_is_refused(fake_target: FakeTarget) -> None:
    refused(request(fake_target, target=f"{fake_target.module}:Greeter.greeet"),
            "has no Greeter.greeet", "no attribute 'greeet'", "greet", "fix: ")


def test_a_distribution_not_installed_is_refused(fake_target: FakeTarget) -> None:
    refused(request(fake_target, distribution="no-such-dist-here"),
            "distribution 'no-such-dist-here' is not installed", "expected ", "fix: ")


@pytest.mark.parametrize(("entry_id", "needle"), [
    ("../escape", "not a valid entry id"), ("X", "not a valid entry id")])
def test_a_bad_id_is_refused_before_any_file(fake_target: FakeTarget, entry_id: str,
                                             needle: str) -> None:
    refused(request(fake_target, entry_id), needle)
    assert not fake_target.registry.exists()


def test_an_existing_file_is_never_overwritten(fake_target: FakeTarget) -> None:
    mine = fake_target.root / "reproducers" / "greet_bug.py"
    mine.write_text("# someone's work\n")
    refused(request(fake_target), "reproducers/greet_bug.py already exists", "never overwrites")
    assert mine.read_text() == "# someone's work\n"
    assert not (fake_target.root / "patches" / "greet_bug.py").exists()


def test_an_option_of_another_kind_is_refused(fake_target: FakeTarget) -> None:
    refused(request(fake_target, pin="<2"), "--pin does not apply to a source_patch entry",
            "--kind packaging_pin")


def test_a_registry_that_does_not_end_with_its_entries_is_refused(
        fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    text = fake_target.registry.read_text()
    fake_target.registry.write_text(text.replace("schema: 1\n", "") + "schema: 1\n")
    refused(request(fake_target), "cannot append", "`entries:` as the last top-level key")


def test_a_failure_at_the_last_step_leaves_nothing(fake_target: FakeTarget,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    fake_target.write_registry()
    before = fake_target.registry.read_bytes()
    listing = sorted(p for p in fake_target.root.rglob("*") if "__pycache__" not in p.parts)

    def full_disk(path: Path, data: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(sys.modules["patchlane.authoring.new"], "atomic_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        new_entry(request(fake_target))
    assert fake_target.registry.read_bytes() == before
    after = sorted(p for p in fake_target.root.rglob("*") if "__pycache__" not in p.parts)
    assert after == listing  # the overlay, reproducer and draft stub are gone again


def test_folders_created_for_the_files_are_removed_on_failure(
        fake_target: FakeTarget, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bare = tmp_path_factory.mktemp("bare")
    monkeypatch.setattr(sys.modules["patchlane.authoring.new"], "parse_registry",
                        lambda *a, **k: ())
    with pytest.raises(IndexError):  # the read-back finds no entry: a bug, but nothing stays
        new_entry(request(fake_target, registry=bare / "registry.yaml"))
    assert list(bare.iterdir()) == []  # nothing left, no edit lock file either


def test_a_version_floor(fake_target: FakeTarget) -> None:
    created = new_entry(request(fake_target, "floor_greeter", kind=Kind.VERSION_FLOOR,
                                target=fake_target.package, requires=">=1.0",
                                issue="https://github.com/o/r/issues/1"))
    entry = created.entry
    assert entry.kind is Kind.VERSION_FLOOR and str(entry.spec.requires) == ">=1.0"
    assert entry.target.distribution == fake_target.distribution
    assert entry.retire_when.upstream_released and entry.upstream.forwarded == "not-needed"
    assert created.files == ()


def test_a_version_floor_the_installed_release_violates_says_so(
        fake_target: FakeTarget) -> None:
    created = new_entry(request(fake_target, "floor_greeter", kind=Kind.VERSION_FLOOR,
                                target=fake_target.package, requires=">=2.0",
                                retire_release=">=3.0"))
    assert any("violates" in note for note in created.notes)


def test_a_ledger_entry_needs_a_retirement_condition(fake_target: FakeTarget) -> None:
    refused(request(fake_target, "pin_greeter", kind=Kind.PACKAGING_PIN, target=None,
                    distribution=fake_target.distribution, pin="<2"),
            "retirement condition", "--issue URL")


def test_a_packaging_pin(fake_target: FakeTarget) -> None:
    entry = new_entry(request(fake_target, "pin_greeter", kind=Kind.PACKAGING_PIN, target=None,
                              distribution=fake_target.distribution, pin="<2",
                              pr="https://github.com/o/r/pull/9")).entry
    assert entry.kind is Kind.PACKAGING_PIN and str(entry.spec.pin) == "<2"


def test_a_config_entry(fake_target: FakeTarget) -> None:
    (fake_target.root / fake_target.package / "config.py").write_text(
        "limit = 8\nratio = 0.5\nname = 'x'\nfast = False\n")
    created = new_entry(request(
        fake_target, "config_greeter", kind=Kind.CONFIG, target=None,
        settings=(f"{fake_target.package}.config.limit=64",
                  f"{fake_target.package}.config.ratio=1e-05",
                  f"{fake_target.package}.config.name=\"64\"",
                  f"{fake_target.package}.config.fast=true")))
    assert created.entry.kind is Kind.CONFIG
    assert dict(created.entry.spec.settings) == {
        f"{fake_target.package}.config.limit": 64, f"{fake_target.package}.config.ratio": 1e-05,
        f"{fake_target.package}.config.name": "64", f"{fake_target.package}.config.fast": True}
    assert created.applies_to == ">=1.2.0,<1.3.0" and created.entry.retire_when.probe


def test_a_config_entry_with_a_misspelt_setting_is_refused(fake_target: FakeTarget) -> None:
    (fake_target.root / fake_target.package / "config.py").write_text("limit = 8\n")
    refused(request(fake_target, "config_greeter", kind=Kind.CONFIG, target=None,
                    settings=(f"{fake_target.package}.config.limitt=64",)),
            "has no attribute 'limitt'", "close: limit")


def test_a_compat_gate(fake_target: FakeTarget) -> None:
    created = new_entry(request(fake_target, "gate_greeter", kind=Kind.COMPAT_GATE,
                                target=None, distribution=fake_target.distribution,
                                check="refuse_it", issue="https://github.com/o/r/issues/5"))
    gate = created.entry.spec
    assert gate is not None and gate.check_function == "refuse_it"
    from patchlane.deciding.ledger import check_config

    # the stub refuses to judge (a stub answering "safe" would let the configuration through)
    with pytest.raises(NotImplementedError, match="write the check"):
        check_config(object(), [created.entry])

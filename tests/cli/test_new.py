"""``patchlane new`` from the command line, and docs/adding-an-entry.md walked end to end on a
fake installed distribution: new entry, reproducer watched failing, overlay, reproducer
passing, the sweep saying ``guarding``, the draft. Each step is the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from patchlane.common.exit_codes import ExitCode

from ..conftest import FakeTarget

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "shout_no_bang"

# The fake upstream bug: shout() forgets the exclamation mark. The reproducer asserts the
# correct behaviour; the overlay adds the mark.
REPRODUCER = '''
"""Reproducer for shout_no_bang: shout() must end with an exclamation mark."""

from __future__ import annotations

from typing import Any

LANES = ("cpu",)
WORLD_SIZES = (1,)


def run(ctx: Any) -> None:
    import {module} as target

    got = target.shout("hi")
    assert got == "HI!", f"the bug shows: shout('hi') returned {{got!r}}"
'''

OVERLAY = '''
"""Overlay for shout_no_bang: upstream's shout() forgets the exclamation mark; add it."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return wrapped(*args, **kwargs) + "!"


def probe(module: ModuleType) -> bool:
    return bool(getattr(module, "SHOUT_ENDS_WITH_BANG", False))  # upstream's fix says so
'''


def cli(fake: FakeTarget, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATCHLANE_DEFAULT_REGISTRY="0", PATCHLANE_ENTRY_POINTS="0",
               PATCHLANE_REGISTRY=str(fake.registry),
               PYTHONPATH=os.pathsep.join([str(fake.root), str(ROOT)]))
    env.pop("PATCHLANE_STRICT", None)
    env.pop("PATCHLANE_ONLY", None)
    env.pop("PATCHLANE_DISABLE", None)
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                          capture_output=True, text=True, env=env, cwd=fake.root, timeout=300)


def new(fake: FakeTarget, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(fake, "new", ENTRY, "--target", f"{fake.module}:shout",
               "--registry", str(fake.registry), "--owner", "tests", *extra)


def test_the_guide_end_to_end(fake_target: FakeTarget, tmp_path: Path) -> None:
    fake_target.write_registry()  # a team registry with one entry already
    before = fake_target.registry.read_bytes()

    # 1. patchlane new: the block, the overlay, the reproducer, the draft stub
    out = new(fake_target, "--summary", "shout() forgets the exclamation mark")
    assert out.returncode == 0, out.stderr
    assert fake_target.registry.read_bytes().startswith(before)
    assert f"patchlane reproduce {ENTRY} --without-overlay" in out.stdout
    # the files it writes pass the project's own lint as they stand (an unused import in the
    # overlay stub failed a team's pre-commit at once)
    stubs = [str(fake_target.root / folder / f"{ENTRY}.py") for folder in ("patches",
                                                                           "reproducers")]
    linted = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--select",
                             "F", *stubs], capture_output=True, text=True, timeout=120)
    assert linted.returncode == 0, linted.stdout + linted.stderr

    # 2. write the reproducer; watch it fail on the unpatched release
    reproducer = fake_target.root / "reproducers" / f"{ENTRY}.py"
    reproducer.write_text(REPRODUCER.format(module=fake_target.module))
    out = cli(fake_target, "reproduce", ENTRY, "--without-overlay")
    assert out.returncode == ExitCode.REPRODUCER_FAILED, out.stdout + out.stderr
    assert "FAIL" in out.stdout and "the bug shows" in out.stdout

    # 3. write the overlay; the reproducer passes with it
    (fake_target.root / "patches" / f"{ENTRY}.py").write_text(OVERLAY)
    out = cli(fake_target, "reproduce", ENTRY)
    assert out.returncode == ExitCode.OK, out.stdout + out.stderr
    assert "PASS" in out.stdout

    # 4. the sweep: guarding, exit 0
    run = tmp_path / "run"
    out = cli(fake_target, "sweep", "--only", ENTRY, "--run-dir", str(run), "--quiet")
    assert out.returncode == ExitCode.OK, out.stdout + out.stderr
    row = next(line for line in out.stdout.splitlines() if line.startswith(ENTRY))
    assert "guarding" in row.split(), out.stdout

    # 5. the draft for upstream, from the sweep's evidence, replaces the stub
    out = cli(fake_target, "draft", ENTRY, "--evidence", str(run))
    assert out.returncode == ExitCode.OK, out.stdout + out.stderr
    draft = (fake_target.root / "drafts" / f"{ENTRY}.md").read_text()
    assert "not written yet" not in draft
    assert "shout() forgets the exclamation mark" in draft


def test_a_fresh_entry_never_passes_in_the_sweep(fake_target: FakeTarget,
                                                 tmp_path: Path) -> None:
    fake_target.write_registry()
    assert new(fake_target).returncode == 0
    out = cli(fake_target, "sweep", "--only", ENTRY, "--run-dir", str(tmp_path / "run"),
              "--quiet")
    row = next(line for line in out.stdout.splitlines() if line.startswith(ENTRY))
    verdict = row.split()[4]
    assert verdict in ("error", "broken"), out.stdout
    assert out.returncode & 32 and out.returncode != ExitCode.OK, out.stdout + out.stderr
    # and run by hand it fails, with the placeholder's message
    out = cli(fake_target, "reproduce", ENTRY, "--without-overlay")
    assert out.returncode == ExitCode.REPRODUCER_FAILED
    assert "write the reproducer" in out.stdout


def test_refusals_are_usage_errors_and_write_nothing(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    # the package re-exports shout: patched there, the module that defines it keeps its own
    (fake_target.root / fake_target.package / "__init__.py").write_text(
        "from .target import shout\n")
    before = fake_target.registry.read_bytes()
    listing = sorted(fake_target.root.rglob("*"))
    cases = [
        (["new", fake_target.entry_id, "--target", f"{fake_target.module}:shout"],
         "the id is taken"),
        (["new", ENTRY, "--target", "no_such_module_xyz:f"], "unknown module"),
        (["new", ENTRY, "--target", f"{fake_target.module}:shout", "--distribution",
          "no-such-dist-xyz"], "is not installed"),
        (["new", ENTRY, "--target", f"{fake_target.module}:shout", "--pin", "<2"],
         "--pin does not apply"),
        # a property's accessor is no attribute of the class: never an entry that reads
        # "applied" while nothing calls it
        (["new", ENTRY, "--target", f"{fake_target.module}:Greeter.greet.__code__"],
         "Greeter.greet itself"),
        (["new", ENTRY, "--target", f"{fake_target.module}:shout", "--applies-to", ">=1.0"],
         "refused by the registry (`applies_to`: source patches need an upper bound); nothing "
         "was written; found >=1.0, expected a specifier with '<'"),
        (["new", ENTRY, "--target", f"{fake_target.package}:shout"],
         f"is a re-export; found shout is defined in {fake_target.module}, expected the module "
         f"that defines it, patched when it is imported, before other modules take their "
         f"copy; fix: --target {fake_target.module}:shout"),
    ]
    for args, needle in cases:
        out = cli(fake_target, *args, "--registry", str(fake_target.registry))
        assert out.returncode == ExitCode.USAGE, (args, out.stderr)
        assert needle in out.stderr and "expected" in out.stderr, out.stderr
        assert "Traceback" not in out.stderr
    assert fake_target.registry.read_bytes() == before
    assert sorted(p for p in fake_target.root.rglob("*")
                  if not p.name.endswith(".lock") and "__pycache__" not in p.parts) \
        == [p for p in listing if "__pycache__" not in p.parts]


def test_a_property_target_gets_its_shape_its_stub_and_really_applies(
        fake_target: FakeTarget) -> None:
    """The case that once read "applied" while the fix never ran: a property. `new` refuses its
    accessor, writes `shape: property` and a property stub for the property itself; with the
    fix written, status says applied because the read now goes through the overlay, and the
    reproducer passes with it and fails without it."""
    fake_target.target_file.write_text(fake_target.target_file.read_text() + textwrap.dedent("""

        class Tokenizer:
            @property
            def cls_id(self):
                if hasattr(self, "cls_id"):  # reads itself: RecursionError
                    return self.cls_id
                raise AttributeError("no cls")
    """))
    target = f"{fake_target.module}:Tokenizer.cls_id"
    accessor = cli(fake_target, "new", "tok_cls_id", "--target", f"{target}.fget",
                   "--registry", str(fake_target.registry), "--owner", "tests",
                   "--issue", "https://example.invalid/issues/7")
    assert accessor.returncode == ExitCode.USAGE, accessor.stderr
    assert "target the property itself" in accessor.stderr and not fake_target.registry.exists()
    made = cli(fake_target, "new", "tok_cls_id", "--target", target, "--registry",
               str(fake_target.registry), "--owner", "tests",
               "--issue", "https://example.invalid/issues/7")
    assert made.returncode == 0, made.stderr
    assert "shape: property" in fake_target.registry.read_text()
    stub = (fake_target.root / "patches" / "tok_cls_id.py").read_text()
    assert "is a property; this overlays its read" in stub and "overlay_setter" in stub
    (fake_target.root / "patches" / "tok_cls_id.py").write_text(stub.replace(
        "    return wrapped(*args, **kwargs)\n",
        "    if hasattr(instance, 'cls'):\n        return instance.cls\n"
        "    raise AttributeError('no cls')\n"))
    (fake_target.root / "reproducers" / "tok_cls_id.py").write_text(textwrap.dedent(f"""
        LANES = ("cpu",)
        WORLD_SIZES = (1,)

        def run(ctx):
            import {fake_target.module} as target
            try:
                assert hasattr(target.Tokenizer(), "cls_id") is False
            except RecursionError:
                raise AssertionError("hasattr(Tokenizer(), 'cls_id') recurses") from None
    """))
    status = cli(fake_target, "status", "--json")
    entry = next(e for e in json.loads(status.stdout)["entries"] if e["id"] == "tok_cls_id")
    assert entry["decision"]["outcome"] == "applied" and entry["applied"], entry
    assert "the target is a property" in entry["decision"]["reason"]
    without = cli(fake_target, "reproduce", "tok_cls_id", "--without-overlay")
    assert without.returncode == 1 and "recurses" in without.stdout, without.stdout
    fixed = cli(fake_target, "reproduce", "tok_cls_id")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr


def test_a_fifo_or_a_non_utf8_registry_is_one_line_and_no_hang(fake_target: FakeTarget,
                                                                tmp_path: Path) -> None:
    fake_target.write_registry()
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    binary = tmp_path / "latin1.yaml"
    binary.write_bytes("schema: 1\nentries:\n  - id: caf\xe9\n".encode("latin-1"))
    for path, says in ((fifo, "the registry is not a file"),
                       (binary, "the registry is not UTF-8 text")):
        out = cli(fake_target, "new", ENTRY, "--target", f"{fake_target.module}:shout",
                  "--registry", str(path))  # a FIFO used to block here for ever
        assert out.returncode == ExitCode.USAGE, out.stderr
        assert says in out.stderr and "Traceback" not in out.stderr, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_the_header_new_writes_takes_an_entry_later(fake_target: FakeTarget) -> None:
    """A registry `new` started, whose entries were all deleted since: `entries:` empty. It
    used to say "add `entries:` to the entry" (it is there); now the entry is appended."""
    from patchlane.authoring.new import NEW_REGISTRY_HEADER

    fake_target.registry.write_text(NEW_REGISTRY_HEADER)
    out = new(fake_target)
    assert out.returncode == 0, out.stderr
    text = fake_target.registry.read_text()
    assert text.startswith(NEW_REGISTRY_HEADER) and f"  - id: {ENTRY}" in text


def test_a_registry_with_an_empty_entries_key_says_how_to_fill_it(tmp_path: Path) -> None:
    from patchlane.common.errors import RegistryError
    from patchlane.registry import load_registries

    path = tmp_path / "registry.yaml"
    path.write_text("schema: 1\nentries:\n")
    with pytest.raises(RegistryError) as refused:
        load_registries([path])
    text = str(refused.value)
    assert "empty key in the registry" in text and "add `entries:` to the entry" not in text
    assert "list the entries under it, or write `entries: []`" in text


def test_a_ledger_entry_from_the_command_line(fake_target: FakeTarget) -> None:
    fake_target.write_registry()
    out = cli(fake_target, "new", "greeter_floor", "--kind", "version_floor",
              "--target", fake_target.package, "--requires", ">=1.0",
              "--issue", "https://github.com/o/r/issues/1",
              "--registry", str(fake_target.registry))
    assert out.returncode == 0, out.stderr
    shown = cli(fake_target, "show", "greeter_floor")
    assert shown.returncode == 0, shown.stderr
    assert ">=1.0" in shown.stdout


def test_an_installed_patchlane_has_no_default_registry_to_append_to(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # from a wheel, the default registry is inside site-packages: never edited in place
    from patchlane import startup
    from patchlane.cli.main import main

    bundled = tmp_path / "patchlane" / "_bundle" / "registry.yaml"
    monkeypatch.setattr(startup, "default_registry_path", lambda: bundled)
    assert main(["new", "some_entry", "--target", "json:dumps"]) == ExitCode.USAGE
    assert not bundled.parent.exists()


def test_the_help_names_the_guide() -> None:
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "new", "--help"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0
    assert "docs/adding-an-entry.md" in " ".join(out.stdout.split())
    assert (ROOT / "docs" / "adding-an-entry.md").is_file()


def test_the_guide_shows_the_commands_this_test_runs() -> None:
    guide = " ".join((ROOT / "docs" / "adding-an-entry.md").read_text().split())
    for command in ("patchlane new ", "patchlane reproduce ID --without-overlay",
                    "patchlane reproduce ID", "patchlane sweep --only ID",
                    "patchlane draft ID --evidence", "patchlane retire ID",
                    "patchlane bisect ID --write", "--python .venv312/bin/python"):
        assert command in guide, command


# -- the team's own code: on PYTHONPATH, or an editable install -------------------------------

TEAM_REPRODUCER = '''
LANES = ("cpu",)
WORLD_SIZES = (1,)


def run(ctx):
    from teamcode.ops import scale

    try:
        scale(2, 0)
    except ValueError:
        return
    raise AssertionError("the bug shows: scale(2, 0) did not raise")
'''

TEAM_OVERLAY = '''
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)


def overlay(wrapped, instance, args, kwargs):
    if args[1] == 0:
        raise ValueError("factor 0")
    return wrapped(*args, **kwargs)


def probe(module):
    return False
'''


def _team_code(root: Path) -> Path:
    """A team's package with no installed distribution: a folder of source on PYTHONPATH."""
    package = root / "src" / "teamcode"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('__version__ = "1.2.0"\n')
    (package / "ops.py").write_text("def scale(x, factor):\n    return x * factor\n")
    return root / "src"


def _team_cli(root: Path, paths: list[Path], *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATCHLANE_REGISTRY=str(root / "team.yaml"),
               PYTHONPATH=os.pathsep.join([*map(str, paths), str(ROOT)]))
    for name in ("PATCHLANE_STRICT", "PATCHLANE_ONLY", "PATCHLANE_DISABLE"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                          capture_output=True, text=True, env=env, cwd=root, timeout=300)


def _team_entry_guards(root: Path, paths: list[Path], *new_args: str) -> str:
    """`new` for teamcode.ops:scale, the files written, the sweep's row for it."""
    out = _team_cli(root, paths, "new", "team_scale", "--target", "teamcode.ops:scale",
                    "--registry", str(root / "team.yaml"), "--owner", "tests", *new_args)
    assert out.returncode == 0, out.stdout + out.stderr
    (root / "reproducers" / "team_scale.py").write_text(TEAM_REPRODUCER)
    (root / "patches" / "team_scale.py").write_text(TEAM_OVERLAY)
    out = _team_cli(root, paths, "sweep", "--only", "team_scale", "--run-dir",
                    str(root / "run"), "--quiet")
    assert out.returncode == ExitCode.OK, out.stdout + out.stderr
    return next(line for line in out.stdout.splitlines() if line.startswith("team_scale"))


def test_new_for_code_on_pythonpath_reads_its_version_from_the_tree(tmp_path: Path) -> None:
    src = _team_code(tmp_path)
    out = _team_cli(tmp_path, [src], "new", "team_scale", "--target", "teamcode.ops:scale",
                    "--registry", str(tmp_path / "team.yaml"))
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert "--version-from teamcode:__version__" in out.stderr, out.stderr  # the fix, named
    assert not (tmp_path / "team.yaml").exists()
    out = _team_cli(tmp_path, [src], "new", "team_scale", "--target", "teamcode.ops:scale",
                    "--registry", str(tmp_path / "team.yaml"), "--version-from", "teamcode")
    assert out.returncode == ExitCode.USAGE and "is not MODULE:ATTR" in out.stderr, out.stderr

    row = _team_entry_guards(tmp_path, [src], "--version-from", "teamcode:__version__")
    assert row.split()[3:5] == ["1.2.0", "guarding"], row
    block = yaml.safe_load((tmp_path / "team.yaml").read_text())["entries"][0]
    assert block["target"] == {"distribution": "teamcode", "object": "teamcode.ops:scale",
                               "version_from": "teamcode:__version__", "shape": "function"}
    assert block["applies_to"] == ">=1.2.0,<1.3.0"


def test_new_for_an_editable_install_gates_on_its_metadata(tmp_path: Path) -> None:
    """What ``pip install -e`` leaves: the metadata in site-packages, the code in the project
    folder, and PEP 610's ``direct_url.json`` saying it is editable. The gate reads the
    metadata's version (it was: "cannot evaluate the gate", the code being elsewhere)."""
    src = _team_code(tmp_path)
    site = tmp_path / "site"
    info = site / "teamcode-1.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: teamcode\nVersion: 1.2.0\n")
    (info / "top_level.txt").write_text("teamcode\n")
    (info / "direct_url.json").write_text(json.dumps(
        {"url": tmp_path.resolve().as_uri(), "dir_info": {"editable": True}}))
    row = _team_entry_guards(tmp_path, [site, src])
    assert row.split()[3:5] == ["1.2.0", "guarding"], row
    block = yaml.safe_load((tmp_path / "team.yaml").read_text())["entries"][0]
    assert "version_from" not in block["target"]  # the metadata is the version

    # not editable: the same files are another copy than the metadata describes, said so
    (info / "direct_url.json").write_text(json.dumps(
        {"url": tmp_path.resolve().as_uri(), "dir_info": {}}))
    out = _team_cli(tmp_path, [site, src], "status", "--json")
    entry = next(e for e in json.loads(out.stdout)["entries"] if e["id"] == "team_scale")
    decision = entry["decision"]  # nothing to gate on: not applied, and why
    assert decision["outcome"] == "failed: error" and not entry["applied"], decision
    assert "not from the installed teamcode 1.2.0" in decision["reason"], decision


def test_the_last_entry_deleted_leaves_a_registry_new_appends_to(fake_target: FakeTarget) -> None:
    # `delete` of a file's only entry left a bare `entries:` (null), which the registry
    # refuses: exit 3, and the entry could not be deleted by the tool
    from patchlane.registry import load_registries

    fake_target.write_registry(fake_target.entry(status="retired", retired="2026-11-23"))
    out = cli(fake_target, "delete", fake_target.entry_id, "--yes")
    assert out.returncode == 0, out.stderr
    assert "entries: []" in fake_target.registry.read_text()
    assert load_registries([fake_target.registry]).entries == ()
    assert new(fake_target).returncode == 0
    (entry,) = load_registries([fake_target.registry]).entries
    assert entry.id == ENTRY and "\nentries:\n" in fake_target.registry.read_text()


def test_a_docs_table_that_cannot_be_written_is_a_note_not_a_half_written_entry(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # It exited 74 naming a temporary file, with the entry and its files already written, and
    # a rerun refused the id as taken
    from patchlane.authoring import new as authoring
    from patchlane.authoring.entries_table import HEAD
    from patchlane.cli.new import run_new
    from patchlane.registry import load_registries

    fake_target.write_registry()
    docs = fake_target.root / "docs" / "entries.md"
    docs.parent.mkdir()
    docs.write_text(f"# Entries\n\n{HEAD}\n|---|---|---|---|---|\n")

    def refused(*args: object) -> bool:
        raise PermissionError(13, "Permission denied", str(docs))

    monkeypatch.setattr(authoring, "add_row", refused)
    # the process's own startup is not this test's: never started here (it would hook the
    # catalog's targets for every later test in this worker)
    from patchlane.cli import new as cli_new
    from patchlane.common.errors import PatchlaneError

    def not_started() -> None:
        raise PatchlaneError("not started in this test")

    monkeypatch.setattr(cli_new.startup, "current", not_started)
    from patchlane.cli.main import _parser

    args = _parser().parse_args(["new", ENTRY, "--target", f"{fake_target.module}:shout",
                                 "--registry", str(fake_target.registry), "--owner", "tests"])
    assert run_new(args) == 0
    out = capsys.readouterr().out
    assert f"could not add its row to the entries table in {docs} (Permission denied); add " \
        "it by hand" in out, out
    assert ENTRY in {e.id for e in load_registries([fake_target.registry]).entries}


def test_a_function_whose_module_names_its_public_home_is_no_re_export_where_defined(
        fake_target: FakeTarget) -> None:
    # torch sets __module__ = "torch.func" on vmap, which torch._functorch.apis defines: the
    # file decides where a function is defined, never that claim (the fix named the
    # re-exporter as the place to target)
    fake_target.write_registry()
    (fake_target.root / fake_target.package / "__init__.py").write_text(
        "from .target import shout\n")
    fake_target.target_file.write_text(
        fake_target.target_file.read_text() + f"\nshout.__module__ = {fake_target.package!r}\n")
    there = cli(fake_target, "new", ENTRY, "--target", f"{fake_target.package}:shout",
                "--registry", str(fake_target.registry), "--owner", "tests")
    assert there.returncode == 2, there.stderr
    assert f"fix: --target {fake_target.module}:shout" in there.stderr, there.stderr
    assert new(fake_target).returncode == 0  # where it is defined: taken

"""The command line: output, JSON, and errors mapped to exit codes (subprocesses, real CLI)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ..conftest import FakeTarget

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ)
    full.pop("PATCHLANE_STRICT", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", *args],
                          capture_output=True, text=True, env=full, cwd=cwd or ROOT,
                          timeout=300)


def fake_cli_env(fake: FakeTarget) -> dict[str, str]:
    fake.write_registry()
    return {"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(fake.registry),
            "PYTHONPATH": str(fake.root)}


def test_status_imports_targets_and_shows_decisions(fake_target: FakeTarget) -> None:
    out = cli("status", env=fake_cli_env(fake_target))
    assert out.returncode == 0, out.stderr
    assert fake_target.entry_id in out.stdout
    assert "applied" in out.stdout
    assert "1.2.0" in out.stdout


def test_status_json_is_the_report(fake_target: FakeTarget) -> None:
    out = cli("status", "--json", env=fake_cli_env(fake_target))
    data = json.loads(out.stdout)
    (entry,) = data["entries"]
    assert entry["id"] == fake_target.entry_id
    assert entry["decision"]["outcome"] == "applied"
    assert entry["applied"] is True
    assert data["registry_digest"].startswith("sha256:")


def test_status_no_import_leaves_hooks_pending(fake_target: FakeTarget) -> None:
    out = cli("status", "--json", "--no-import", env=fake_cli_env(fake_target))
    (entry,) = json.loads(out.stdout)["entries"]
    assert entry["decision"]["outcome"] == "pending"


def test_status_shows_disabled(fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target) | {"PATCHLANE_DISABLE": fake_target.entry_id}
    out = cli("status", env=env)
    assert "skipped: disabled" in out.stdout


def test_show_prints_the_entry(fake_target: FakeTarget) -> None:
    out = cli("show", fake_target.entry_id, env=fake_cli_env(fake_target))
    assert out.returncode == 0, out.stderr
    assert f"{fake_target.module}:Greeter.greet" in out.stdout
    assert "upstream.forwarded" in out.stdout


def test_show_and_status_say_the_same_decision(fake_target: FakeTarget) -> None:
    """A maintainer saw `show` say pending while `status` said applied for the same entry:
    `show` now decides as `status` does (the target imported), unless asked not to."""
    env = fake_cli_env(fake_target)
    fake_target.write_registry()
    status = json.loads(cli("status", "--json", env=env).stdout)
    (entry,) = [e for e in status["entries"] if e["id"] == fake_target.entry_id]
    shown = cli("show", fake_target.entry_id, env=env)
    (line,) = [ln for ln in shown.stdout.splitlines() if ln.startswith("decision ")]
    assert entry["decision"]["outcome"] == "applied"
    assert line.split(None, 1)[1].strip() == "applied", shown.stdout
    held = cli("show", fake_target.entry_id, "--no-import", env=env)
    (line,) = [ln for ln in held.stdout.splitlines() if ln.startswith("decision ")]
    assert line.split(None, 1)[1].strip() == "pending", held.stdout


def test_show_prints_the_upstream_discussion(fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target)
    url = "https://forum.example.invalid/t/greeter-bug/7"
    entry = fake_target.entry()
    fake_target.write_registry({**entry, "upstream": {**entry["upstream"], "discussion": url}})
    out = cli("show", fake_target.entry_id, env=env)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if ln.startswith("upstream.discussion ")]
    assert line.split() == ["upstream.discussion", url]


def test_show_unknown_id_is_a_usage_error(fake_target: FakeTarget) -> None:
    out = cli("show", "no_such_entry", env=fake_cli_env(fake_target))
    assert out.returncode == 2
    assert "no registry entry 'no_such_entry'" in out.stderr
    assert fake_target.entry_id in out.stderr  # the message lists the known ids


def test_fingerprint_matches_the_registry(fake_target: FakeTarget) -> None:
    out = cli("fingerprint", fake_target.entry_id, env=fake_cli_env(fake_target))
    assert out.returncode == 0, out.stderr
    value = out.stdout.splitlines()[0]
    assert value == fake_target.fingerprint()
    assert "matches the registry" in out.stdout


def test_a_fingerprint_is_the_first_line_whatever_the_target_prints(
        fake_target: FakeTarget) -> None:
    """A target that prints, and puts logging on stdout, at its import (Megatron-LM's training
    code does): the value a maintainer records, or takes with $(...), is stdout's first line."""
    env = fake_cli_env(fake_target)  # its registry holds the fingerprint of the file as it was
    fake_target.target_file.write_text(
        "import logging, sys\nlogging.basicConfig(stream=sys.stdout, level=logging.INFO)\n"
        "logging.getLogger('upstream').info('loaded')\nprint('banner')\n"
        + fake_target.target_file.read_text())
    for args in ([fake_target.entry_id], ["--object", f"{fake_target.module}:Greeter.greet"]):
        out = cli("fingerprint", *args, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == fake_target.fingerprint(), out.stdout
        assert "banner" in out.stderr and "banner" not in out.stdout


def test_fingerprint_from_source_file(fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target)
    changed = fake_target.root / "changed.py"
    changed.write_text(fake_target.target_file.read_text().replace("hello", "howdy"))
    out = cli("fingerprint", fake_target.entry_id, "--source", str(changed), env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] != fake_target.fingerprint()
    assert "NOT in the registry" in out.stdout


def test_fingerprint_record_writes_what_the_drift_error_asks_for(fake_target: FakeTarget) -> None:
    """The drift error says `patchlane fingerprint ID --record`: it writes the installed
    release's value into fingerprint.sha256 and under fingerprint.releases, byte for byte
    around it, and the next strict start applies instead of stopping."""
    env = fake_cli_env(fake_target)
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("hello", "howdy"))  # upstream moved
    strict = cli("status", env=env | {"PATCHLANE_STRICT": "1"})
    assert strict.returncode == 4 and f"patchlane fingerprint {fake_target.entry_id} --record" \
        in strict.stderr, strict.stderr
    before = fake_target.registry.read_text()
    out = cli("fingerprint", fake_target.entry_id, "--record", env=env)
    assert out.returncode == 0, out.stderr
    value = out.stdout.splitlines()[0]
    after = fake_target.registry.read_text()
    added = [line for line in after.splitlines() if line not in before.splitlines()]
    assert [line.strip() for line in added] == [
        f'- "{value}"  # 1.2.0 (metadata)', "releases:  # seen at run time",
        f'"1.2.0": "{value}"'], added
    assert [line for line in after.splitlines() if line not in added] == before.splitlines()
    data = yaml.safe_load(after)["entries"][0]["fingerprint"]
    assert value in data["sha256"] and data["releases"] == {"1.2.0": value}
    again = cli("status", "--json", env=env | {"PATCHLANE_STRICT": "1"})
    assert again.returncode == 0, again.stderr
    # read from a file, the value goes to sha256 alone: no release ran it
    changed = fake_target.root / "changed.py"
    changed.write_text(fake_target.target_file.read_text().replace("howdy", "hiya"))
    out = cli("fingerprint", fake_target.entry_id, "--source", str(changed), "--record", env=env)
    assert out.returncode == 0, out.stderr
    data = yaml.safe_load(fake_target.registry.read_text())["entries"][0]["fingerprint"]
    assert out.stdout.splitlines()[0] in data["sha256"] and data["releases"] == {"1.2.0": value}
    assert "read from changed.py, not run" in fake_target.registry.read_text()


def test_fingerprint_record_on_a_local_build_records_its_public_release(tmp_path: Path) -> None:
    """A CUDA build's version carries a local label (2.13.0+cu128): recorded under the public
    release, as `patchlane new` records it. It was refused by the registry (exit 3, blaming
    the user's spelling) for every torch target."""
    from ..conftest import make_fake

    fake = make_fake(tmp_path, version="1.2.0+cu128")
    env = fake_cli_env(fake)
    fake.target_file.write_text(fake.target_file.read_text().replace("hello", "howdy"))
    out = cli("fingerprint", fake.entry_id, "--record", env=env)
    assert out.returncode == 0, out.stderr
    value = out.stdout.splitlines()[0]
    data = yaml.safe_load(fake.registry.read_text())["entries"][0]["fingerprint"]
    assert data["releases"] == {"1.2.0": value}
    assert "# 1.2.0+cu128 (metadata)" in fake.registry.read_text()


def test_fingerprint_object_gives_a_new_entry_its_first_value(fake_target: FakeTarget) -> None:
    # A new entry with no value yet is refused by the registry, and the refusal's fix names
    # `fingerprint --object`, which reads no registry: following it must work.
    entry = fake_target.entry()
    entry["fingerprint"] = {"policy": "refuse", "sha256": []}
    env = fake_cli_env(fake_target)
    fake_target.write_registry(entry)
    refused = cli("fingerprint", fake_target.entry_id, env=env)
    assert refused.returncode != 0 and "fingerprint --object" in refused.stderr
    out = cli("fingerprint", "--object", f"{fake_target.module}:Greeter.greet", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == fake_target.fingerprint()
    both = cli("fingerprint", fake_target.entry_id, "--object", "m:q", env=env)
    assert both.returncode == 2 and "one" in both.stderr
    bad = cli("fingerprint", "--object", "no_colon", env=env)
    assert bad.returncode != 0 and "MODULE:QUALNAME" in bad.stderr


def test_bad_registry_exits_with_the_registry_code(tmp_path: Path) -> None:
    bad = tmp_path / "registry.yaml"
    bad.write_text("schema: 1\nentries:\n  - id: x\n    kind: [\n")
    out = cli("status", env={"PATCHLANE_DEFAULT_REGISTRY": "0",
                             "PATCHLANE_REGISTRY": str(bad)})
    assert out.returncode == 3
    assert str(bad) in out.stderr and "invalid YAML" in out.stderr
    assert "Traceback" not in out.stderr
    # and status's own output says it, below the table
    said = [ln for ln in out.stdout.splitlines() if ln.startswith("registry refused")]
    assert len(said) == 1 and str(bad) in said[0] and "(exit 3)" in said[0], out.stdout


@pytest.mark.slow
def test_reproduce_exit_codes(fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target)
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "LANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    assert t.Greeter().greet('q') == 'patched hello q', 'bug'\n")
    with_ = cli("reproduce", fake_target.entry_id, env=env)
    assert with_.returncode == 0, with_.stdout + with_.stderr
    assert "PASS" in with_.stdout
    without = cli("reproduce", fake_target.entry_id, "--without-overlay", env=env)
    assert without.returncode == 1, without.stdout + without.stderr
    assert "FAIL" in without.stdout and "bug" in without.stdout


@pytest.mark.slow
def test_reproduce_says_when_its_ranks_started_warm(fake_target: FakeTarget,
                                                   tmp_path: Path) -> None:
    """A warm rank's figures are not a fresh one's: `patchlane reproduce` says which it ran
    (a stand-in torch first on the path, the framework's own mechanics: it imports at once)."""
    from ..evidence.test_rank_start import torch_first

    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        "import torch\nLANES = ('cpu',)\nWORLD_SIZES = (1,)\n\ndef run(ctx):\n"
        f"    import {fake_target.module} as t\n"
        "    assert t.Greeter().greet('q') == 'patched hello q', 'bug'\n")
    env = torch_first(tmp_path, fake_cli_env(fake_target))
    for start, said in (("warm", True), ("fresh", False)):
        out = cli("reproduce", fake_target.entry_id, env={**env, "PATCHLANE_RANK_START": start})
        assert out.returncode == 0, out.stdout + out.stderr
        assert ("world size 1, ranks warm]: PASS" in out.stdout) is said, out.stdout


def fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, outside the repository (what `import patchlane` does by
    itself, nothing this test process imported)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd="/", timeout=120)


@pytest.mark.parametrize("loaded", [
    pytest.param("m.split('.')[0] in ('torch', 'megatron', 'liger_kernel', 'triton', 'numpy')",
                 id="heavy"),
    # what `patchlane` exports lazily (LedgerError, RankMismatchError, Report) stays unloaded
    pytest.param("m in ('patchlane.deciding.ledger', 'patchlane.training.ranks',"
                 " 'patchlane.deciding.reporting', 'json')", id="lazy-names"),
])
def test_import_patchlane_never_imports_torch_or_megatron(loaded: str) -> None:
    code = ("import sys, patchlane\n"
            f"heavy = sorted(m for m in sys.modules if {loaded})\n"
            "print(heavy)\n")
    out = fresh_python(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_import_logs_one_startup_summary_line() -> None:
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
            "import patchlane\n")
    out = fresh_python(code)
    lines = [line for line in out.stderr.splitlines() if line.startswith("patchlane ")]
    assert len(lines) == 1, out.stderr
    # counts, not every id: one line that fits a log (the ids: `patchlane status`, DEBUG)
    assert re.search(r"\d+ entries \(registry\.yaml\), each decided when its target is "
                     "imported", lines[0]), lines[0]
    assert "mcore_rerun_sentinel" not in lines[0] and len(lines[0]) < 160, lines[0]
    debug = fresh_python(code.replace("INFO", "DEBUG"))
    assert any("mcore_rerun_sentinel" in line and "pending" in line
               for line in debug.stderr.splitlines() if line.startswith("patchlane ")), \
        debug.stderr


def test_fingerprint_works_under_strict_mode_when_the_target_drifted(
        fake_target: FakeTarget) -> None:
    env = fake_cli_env(fake_target) | {"PATCHLANE_STRICT": "1"}
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("hello", "howdy"))
    status = cli("status", env=env)
    assert status.returncode == 4 and "refused: drift" in status.stderr  # DriftError
    out = cli("fingerprint", fake_target.entry_id, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == fake_target.fingerprint()
    assert "NOT in the registry" in out.stdout


@pytest.mark.parametrize("command", [["status"], ["sweep", "--lane", "cpu", "--quiet"]])
def test_an_installed_version_with_a_5000_digit_number_is_no_crash(
        fake_target: FakeTarget, tmp_path: Path, command: list[str]) -> None:
    """The gate cannot be evaluated (said, with why); never a bug report (exit 70)."""
    meta = next(fake_target.root.glob("*.dist-info")) / "METADATA"
    meta.write_text(meta.read_text().replace(f"Version: {fake_target.version}",
                                             "Version: 1." + "9" * 5000))
    env = fake_cli_env(fake_target) | {"PATCHLANE_RUNS": str(tmp_path / "runs")}
    out = cli(*command, env=env)
    assert out.returncode not in (1, 70), out.stderr
    assert "Traceback" not in out.stderr
    said = out.stdout + out.stderr + "".join(
        p.read_text() for p in (tmp_path / "runs").glob("*/summary.md"))
    assert "longer than 640 digits" in said


@pytest.mark.parametrize(("target", "says"), [
    (":Greeter.gret", ":Greeter has no attribute 'gret' (did you mean 'greet'?); fix:"),
    (":Greter.greet", " has no attribute 'Greter' (did you mean 'Greeter'?); fix:"),
    ("x:shout", "no module named '{pkg}.targetx' (did you mean '{pkg}.target'?); fix:"),
    (":Greeter.greet.__code__", "Greeter.greet is a function, not a class or module"),
])
def test_fingerprint_object_names_a_typo_with_the_closest_name(
        fake_target: FakeTarget, target: str, says: str) -> None:
    module, _, qualname = target.partition(":")
    out = cli("fingerprint", "--object", f"{fake_target.module}{module}:{qualname}",
              env=fake_cli_env(fake_target))
    assert out.returncode == 2, out.stderr  # usage: the request, not patchlane, is wrong
    assert says.format(pkg=fake_target.package) in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("target", "says"), [
    ("math:sqrt", "has no Python source to fingerprint"),
    ("json:JSONDecoder.decode.__call__", "is a function, not a class or module"),
    ("builtins:dict.get", "is a type built in C"),
])
def test_fingerprint_object_refuses_what_has_no_python_source(target: str, says: str) -> None:
    out = cli("fingerprint", "--object", target)
    assert out.returncode == 2, out.stderr
    assert says in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_fingerprint_object_reads_a_value_from_its_assignment(fake_target: FakeTarget,
                                                              tmp_path: Path) -> None:
    """A module constant is a target too (shape attribute): its fingerprint is its binding
    statement, the same imported and read from the source file."""
    imported = cli("fingerprint", "--object", f"{fake_target.module}:FIXED",
                   env=fake_cli_env(fake_target))
    assert imported.returncode == 0, imported.stderr
    read = cli("fingerprint", "--object", f"{fake_target.module}:FIXED", "--source",
               str(fake_target.target_file), env=fake_cli_env(fake_target))
    assert read.returncode == 0, read.stderr
    assert imported.stdout.split()[0] == read.stdout.split()[0]


def test_fingerprint_source_names_a_missing_definition(fake_target: FakeTarget,
                                                       tmp_path: Path) -> None:
    source = tmp_path / "copy.py"
    source.write_text(fake_target.target_file.read_text())
    out = cli("fingerprint", "--object", f"{fake_target.module}:Greeter.gret", "--source",
              str(source), env=fake_cli_env(fake_target))
    assert out.returncode == 2, out.stderr
    assert f"{source}: no definition of 'gret' in 'Greeter' (did you mean 'greet'?); fix:" \
        in out.stderr
    assert "Traceback" not in out.stderr


CHDIR_REPRO = """
LANES = ("cpu",)
WORLD_SIZES = (1,)

def run(ctx):
    import os
    os.chdir(os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~")) else "/")
    (ctx.workdir / "note").write_text("written after a chdir")
    import {module} as target
    assert target.Greeter().greet("a") == "patched hello a", "bug shows"
"""


def test_reproduce_leaves_no_temporary_folder_and_keeps_what_it_is_asked_to(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    (fake_target.root / "reproducers" / f"{fake_target.entry_id}.py").write_text(
        CHDIR_REPRO.format(module=fake_target.module))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**fake_cli_env(fake_target), "TMPDIR": str(scratch)}
    env["PYTHONPATH"] += os.pathsep + str(ROOT)  # this checkout, from any working directory
    out = cli("reproduce", fake_target.entry_id, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(scratch.iterdir()) == []  # the case's folder went with the case
    # --keep DIR, relative to where it runs (the reproducer changes directory: its rank must
    # still find the folder, so the path it is handed is absolute)
    work = tmp_path / "here"
    work.mkdir()
    kept = cli("reproduce", fake_target.entry_id, "--keep", "cases", env=env, cwd=work)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    (case,) = (work / "cases").iterdir()
    assert (case / "rank0.log").is_file() and (case / "rank0.json").is_file()
    assert (case / "note").read_text() == "written after a chdir"
    assert list(scratch.iterdir()) == []


@pytest.mark.parametrize(("args", "says"), [
    (["--world-size", "0"], "--world-size: '0' is not a positive integer"),
    (["--world-size", "two"], "--world-size: 'two' is not a positive integer"),
    (["--timeout", "nan"], "--timeout: 'nan' is not a finite number of seconds above 0"),
    (["--timeout", "inf"], "--timeout: 'inf' is not a finite number of seconds above 0"),
    (["--timeout", "0"], "--timeout: '0' is not a finite number of seconds above 0"),
    (["--timeout", "-5"], "--timeout: '-5' is not a finite number of seconds above 0"),
])
def test_reproduce_refuses_a_world_size_or_timeout_that_means_nothing(
        fake_target: FakeTarget, args: list[str], says: str) -> None:
    out = cli("reproduce", fake_target.entry_id, *args, env=fake_cli_env(fake_target))
    assert out.returncode == 2, out.stdout + out.stderr
    assert says in out.stderr and "Traceback" not in out.stderr


def test_status_json_parses_under_a_target_that_logs_to_stdout(fake_target: FakeTarget) -> None:
    """An imported target that puts an INFO handler on stdout and logs (Megatron-LM's training
    code does): `status --json` is still JSON on stdout, every log line on stderr."""
    fake_target.target_file.write_text(
        "import logging, sys\n"
        "logging.basicConfig(stream=sys.stdout, level=logging.INFO)\n"
        "logging.getLogger('upstream').info('upstream says hello at import')\n"
        "print('upstream prints at import')\n" + fake_target.target_file.read_text())
    fake_target.write_registry(fake_target.entry(
        fingerprint={"policy": "refuse", "sha256": [fake_target.fingerprint()]}))
    out = cli("status", "--json", env=fake_cli_env(fake_target))
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # nothing but the report
    entry = next(e for e in report["entries"] if e["id"] == fake_target.entry_id)
    assert entry["decision"]["outcome"] == "applied"
    assert "upstream says hello" in out.stderr and "upstream prints" in out.stderr


@pytest.mark.parametrize(("argv", "orig_argv", "command"), [
    (["/venv/bin/patchlane", "status"], ["/venv/bin/python", "/venv/bin/patchlane", "status"],
     True),
    (["-m", "status"], ["python", "-m", "patchlane", "status"], True),
    (["-m", "status"], ["python", "-Im", "patchlane", "status"], True),
    (["-m", "status"], ["python", "-X", "utf8", "-Bm", "patchlane", "status"], True),
    (["-m", "status"], ["python", "-mpatchlane", "status"], True),
    (["-m", "status"], ["python", "-Bmpatchlane", "status"], True),
    (["-m", "--json"], ["python", "-m", "patchlane.cli.main", "--json"], True),
    (["-m", "-m", "patchlane"], ["python", "-m", "othertool", "-m", "patchlane"], False),
    (["-m", "-q"], ["python", "-m", "pytest", "-q"], False),
    (["-m"], ["python", "-m", "patchlane.sweep.warm_server"], False),
    (["-c"], ["python", "-c", "import patchlane"], False),
    (["train.py"], ["python", "train.py"], False),
    ([], [], False),
])
def test_the_command_process_is_told_from_a_job(monkeypatch: pytest.MonkeyPatch,
                                                argv: list[str], orig_argv: list[str],
                                                command: bool) -> None:
    """What `import patchlane` reads to know it is the `patchlane` command (whose stdout is its
    output, and which refuses a bad setting in one line of its own): the script, or `-m`
    with the interpreter's flags joined to it or not."""
    import patchlane

    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert patchlane._is_the_command() is command


@pytest.mark.parametrize("command", ["script", "-m patchlane", "-m patchlane.cli.main",
                                     "main() in a process"])
def test_status_json_parses_when_the_process_logged_to_stdout_before_patchlane(
        fake_target: FakeTarget, tmp_path: Path, command: str) -> None:
    """Logging on stdout set up before the command runs: before `import patchlane` (a
    sitecustomize, as some cluster images ship), or, for a program that calls the command's
    `main()`, before that call. The startup's first line and an imported target's lines go to
    stderr, and stdout is the report alone, however the command is started."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import logging, sys\nlogging.basicConfig(stream=sys.stdout, level=logging.INFO)\n")
    fake_target.target_file.write_text(
        "import logging\nlogging.getLogger('upstream').info('upstream says hello at import')\n"
        + fake_target.target_file.read_text())
    env = dict(os.environ)
    env.pop("PATCHLANE_STRICT", None)
    env.update(fake_cli_env(fake_target))
    env["PYTHONPATH"] = os.pathsep.join([str(site), env["PYTHONPATH"]])
    start = {"script": [str(Path(sys.executable).parent / "patchlane")],
             "-m patchlane": [sys.executable, "-m", "patchlane"],
             "-m patchlane.cli.main": [sys.executable, "-m", "patchlane.cli.main"],
             "main() in a process": [sys.executable, "-c",
                                     "import sys; from patchlane.cli.main import main\n"
                                     "import logging; logging.basicConfig(stream=sys.stdout, "
                                     "level=logging.INFO)\nsys.exit(main(sys.argv[1:]))"],
             }[command]
    if command == "main() in a process":
        (site / "sitecustomize.py").unlink()  # logging set up after the import, before main()
    out = subprocess.run([*start, "status", "--json"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)  # nothing but the report
    assert any(e["id"] == fake_target.entry_id for e in report["entries"])
    if command != "main() in a process":  # there it is lazy: the command drops its INFO
        assert "INFO:patchlane:patchlane " in out.stderr  # the startup's first line, on stderr
    assert "upstream says hello" in out.stderr


def test_a_program_running_a_command_keeps_its_own_logging(capsys: pytest.CaptureFixture[str],
                                                           fake_target: FakeTarget) -> None:
    """`main()` in a program's own process (a notebook, a test) moves the program's stdout
    handlers to stderr for the command, then puts them, and the patchlane logger's
    propagation, back: after it, the program logs where it did before."""
    code = ("import logging, sys\n"
            "logging.basicConfig(stream=sys.stdout, level=logging.INFO, format='%(message)s')\n"
            "from patchlane.cli.main import main\n"
            "rc = main(['status', '--json'])\n"
            "logging.getLogger('program').info('the program logs on stdout again')\n"
            "print('PROPAGATE', logging.getLogger('patchlane').propagate)\n"
            "sys.exit(rc)\n")
    env = dict(os.environ)
    env.pop("PATCHLANE_STRICT", None)
    env.update(fake_cli_env(fake_target))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("the program logs on stdout again\nPROPAGATE True"), \
        out.stdout[-300:]


def test_upstream_fixed_is_not_retire_while_the_gate_serves_releases_still_run() -> None:
    """Fixed upstream on 0.19.0 is not "retire" for an entry whose gate admits 0.15-0.18 and
    that the matrix still sees guarding there: the advice names those sets and says keep it."""
    from patchlane.cli.common import upstream_fixed_advice
    from patchlane.cli.matrix import _fixed_advice
    from patchlane.releases.matrix import load_matrix

    advice = _fixed_advice("mcore_tokenizer_alias_recursion", "py312-megatron-core-0.19.0",
                           load_matrix(ROOT / "matrix.yaml"))
    assert "keep it" in advice and "megatron-core-0.16.1" in advice, advice
    assert "patchlane retire" not in advice
    gated = upstream_fixed_advice("x", "0.19.0", ">=0.15.0,<0.19.0")
    assert "keep it while any job runs one" in gated and "patchlane usage" in gated
    ungated = upstream_fixed_advice("x", "0.19.0", None)
    assert ungated.endswith("`patchlane retire x --evidence RUN`")
    # the catalog installed with patchlane: nothing for its user to retire or edit
    shipped = Path("/venv/lib/python3.12/site-packages/patchlane/_bundle/registry.yaml")
    installed = upstream_fixed_advice("x", "0.19.0", None, registry=shipped)
    assert "patchlane retire" not in installed and "a patchlane release retires it" in \
        installed and "PATCHLANE_DISABLE=x" in installed, installed
    team = upstream_fixed_advice("x", "0.19.0", None, registry=Path("/srv/team.yaml"))
    assert team == ungated


def test_constraints_hands_the_floors_and_pins_to_pip(tmp_path: Path) -> None:
    """The registry's version floor is a constraint pip reads; the conditional pin (only under
    Triton's CPU interpreter) is written commented out with its condition, never imposed on
    every environment."""
    from packaging.requirements import Requirement

    out = cli("constraints", "-o", str(tmp_path / "constraints.txt"))
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "constraints.txt").read_text()
    live = [line.split("#")[0].strip() for line in text.splitlines()
            if line.strip() and not line.startswith("#")]
    assert [str(Requirement(line)) for line in live] == ["torch>=2.6.0"]
    assert "# numpy<2.4" in text and "TRITON_INTERPRET=1" in text
    printed = cli("constraints")
    assert printed.returncode == 0 and printed.stdout == text


def test_sweep_progress_in_a_ci_log_has_times_and_an_expected_failure_reads_as_one() -> None:
    from patchlane.cli.sweep import Progress
    from patchlane.reproducer import RunOutcome
    from patchlane.runs.manifest import CaseState
    from patchlane.sweep.engine import SweepEvent

    ticks = iter([0.0, 5.0, 17.5, 20.0, 95.0])
    progress = Progress(quiet=False, clock=lambda: next(ticks))
    progress.live = False  # a CI log
    case = "e--cpu--ws1--without"
    assert progress.line(SweepEvent(case, CaseState.RUNNING, 0, 2)) is None
    assert progress.line(SweepEvent(case, CaseState.FAILED, 1, 2, RunOutcome.FAIL)) == (
        "[0:17] [1/2] e--cpu--ws1--without: fail, as expected without the overlay (the bug "
        "shows) (12.5s)")
    progress.live = True  # a terminal: elapsed and an estimate of what is left
    assert progress.line(SweepEvent("e--cpu--ws1--with", CaseState.RUNNING, 1, 2)) == \
        "[1/2 0:20, about 0:20 left] running: e--cpu--ws1--with"


def test_a_pin_scoped_to_old_releases_is_not_told_to_retire_where_one_is_fixed() -> None:
    """The numpy pin is upstream-fixed under triton 3.7 (Python 3.12) and guarding under
    triton 3.5 (Python 3.11): the sweep on 3.12 told users to retire it, which would drop it
    for every job on triton<3.7. Its scope is what it still serves."""
    from patchlane import startup
    from patchlane.cli.common import upstream_fixed_advice

    pin = startup.current().registry.get("numpy_pin_triton_interpreter")
    assert pin.applies_to_shown is None and pin.serves == "when triton<3.7"
    advice = upstream_fixed_advice(pin.id, "2.4.1", pin.serves)
    assert "None" not in advice and "its gate (when triton<3.7) still admits other releases: " \
        "keep it while any job runs one" in advice, advice
    # an entry with neither a gate nor a scope is told to retire, never about a gate "None"
    plain = upstream_fixed_advice("x", "1.0", startup.current().registry.get(
        "torch_floor_a2a_overlap").serves)
    assert "None" not in plain


def _on_a_terminal(*args: str, columns: int, env: dict[str, str] | None = None) -> str:
    """What ``patchlane ARGS`` prints with stdout on a real pseudo-terminal COLUMNS wide."""
    import pty

    leader, follower = pty.openpty()
    full = {**os.environ, "COLUMNS": str(columns), **(env or {})}
    full.pop("PATCHLANE_STRICT", None)
    proc = subprocess.Popen([sys.executable, "-m", "patchlane.cli.main", *args], cwd=ROOT,
                            stdout=follower, stderr=subprocess.DEVNULL, env=full)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_tables_fit_the_terminal_and_are_whole_when_piped_or_asked() -> None:
    narrow = _on_a_terminal("status", "--no-import", columns=100)
    rows = [ln for ln in narrow.splitlines() if ln.startswith("mcore_")]
    assert rows and all(len(ln) <= 100 for ln in rows), max(map(len, rows))
    assert any(ln.endswith("…") for ln in rows), rows  # a reason was cut, and shows it
    whole = _on_a_terminal("--full-width", "status", "--no-import", columns=100)
    piped = cli("status", "--no-import").stdout
    assert max(len(ln) for ln in whole.splitlines()) > 100
    assert [ln for ln in whole.splitlines() if ln.startswith("mcore_")] == \
        [ln for ln in piped.splitlines() if ln.startswith("mcore_")]
    # the line under the table: counts, not every id with its reason
    brief = next(ln for ln in piped.splitlines() if ln.startswith("patchlane 0"))
    assert len(brief) < 400 and "pending: " in brief, brief


def test_full_width_reads_as_every_switch_and_refuses_garbage() -> None:
    wide = _on_a_terminal("status", "--no-import", columns=100,
                          env={"PATCHLANE_FULL_WIDTH": "yes"})
    assert max(len(ln) for ln in wide.splitlines()) > 100
    out = cli("status", "--no-import", env={"PATCHLANE_FULL_WIDTH": "wide"})
    assert out.returncode == 2, out.stderr
    assert "PATCHLANE_FULL_WIDTH='wide': expected one of 1, true, yes, on" in out.stderr
    empty = cli("status", "--evidence", "")
    assert empty.returncode == 2 and "found '', expected a path" in empty.stderr


def test_a_fifo_or_text_that_is_not_source_is_refused_never_waited_on(tmp_path: Path) -> None:
    """A FIFO named as a file a command reads would block it for ever; Latin-1 text or a diff
    given as a release's source is no Python: each is one line and exit 2, in seconds."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    matrix = cli("matrix", "--file", str(fifo))
    assert matrix.returncode == 2 and "cannot read the release matrix" in matrix.stderr, \
        matrix.stderr
    kit = tmp_path / "kit"
    kit.mkdir()
    os.mkfifo(kit / "wheelhouse.json")
    from patchlane.sweep.wheelhouse_manifest import WheelhouseError, load

    with pytest.raises(WheelhouseError, match="cannot read it"):
        load(kit)
    entry = "mcore_rerun_sentinel"
    for source, says in ((fifo, "cannot read it as Python source"),
                         (tmp_path / "latin1.py", "cannot read it as Python source"),
                         (tmp_path / "change.diff", "not Python source")):
        if source.name == "latin1.py":
            source.write_bytes("# caf\xe9\ndef f():\n    pass\n".encode("latin-1"))
        elif source.name == "change.diff":
            source.write_text("--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n")
        out = cli("fingerprint", entry, "--record", "--source", str(source))
        assert out.returncode == 2 and says in out.stderr, (source, out.stderr)
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize("python", ["/bin/true", "shim"])
def test_bisect_python_that_is_no_python_is_refused_before_anything_runs(
        tmp_path: Path, python: str) -> None:
    if python == "shim":
        shim = tmp_path / "python"
        shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found'\n")
        shim.chmod(0o755)
        python = str(shim)
    out = cli("bisect", "mcore_rerun_sentinel", "--python", python, "--offline",
              "--run-dir", str(tmp_path / "bisect"))
    assert out.returncode == 2, out.stderr
    assert f"--python {python}: not a Python with patchlane" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "bisect").exists()


def test_fingerprint_record_edits_the_entry_not_its_id_quoted_in_another_s_notes(
        fake_target: FakeTarget) -> None:
    """The entry's block is where the YAML parser says it is: an earlier entry whose
    ``notes: |`` quotes ``- id: <the entry>`` keeps its notes (the value went there, exit 0,
    and the next start refused by drift)."""
    quoting = fake_target.entry(id="quoting_entry", overlay="patches/quoting_entry.py",
                                reproducer="reproducers/quoting_entry.py",
                                upstream={"issue": "https://example.invalid/issues/3",
                                          "forwarded": "no",
                                          "draft": f"drafts/{fake_target.entry_id}.md"},
                                notes=f"moved from:\n  - id: {fake_target.entry_id}\n"
                                      "    fingerprint:\n      sha256:\n")
    for folder in ("patches", "reproducers"):
        src = fake_target.root / folder / f"{fake_target.entry_id}.py"
        (fake_target.root / folder / "quoting_entry.py").write_text(src.read_text())
    fake_target.write_registry(quoting, fake_target.entry())
    text = fake_target.registry.read_text()  # the notes as a maintainer writes them: `|`
    dumped = text[text.index("  notes: "):text.index("\n", text.index("  notes: "))]
    literal = "  notes: |\n" + "".join(f"      {ln}\n" for ln in quoting["notes"].splitlines())
    fake_target.registry.write_text(text.replace(dumped + "\n", literal))
    assert f"\n        - id: {fake_target.entry_id}\n" in fake_target.registry.read_text()
    env = {"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(fake_target.registry),
           "PYTHONPATH": str(fake_target.root)}
    fake_target.target_file.write_text(
        fake_target.target_file.read_text().replace("hello", "howdy"))
    out = cli("fingerprint", fake_target.entry_id, "--record", env=env)
    assert out.returncode == 0, out.stderr
    value = out.stdout.splitlines()[0]
    first, second = yaml.safe_load(fake_target.registry.read_text())["entries"]
    assert first["notes"] == quoting["notes"]
    assert value in second["fingerprint"]["sha256"]
    assert value not in first["fingerprint"]["sha256"]

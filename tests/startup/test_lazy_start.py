"""The lazy start (patchlane/lazy): a target-free `import patchlane` loads only the lazy start;
the first import of a target loads the whole startup and decides as the eager start
(``PATCHLANE_LAZY=0``) does; anything the watch list cannot vouch for falls back to the eager start.

Each case runs fresh child interpreters. The fake target package tests the mechanics (never
evidence that a patch works); the real default registry and the installed megatron-core are
used where the claim is about them (which modules load, the real overlay's decision)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchlane.launch.environment import BOOTSTRAP
from tests.conftest import FakeTarget, make_fake

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

LAZY_START = {"patchlane", "patchlane.lazy", "patchlane.lazy.arm",
             "patchlane.lazy.watchlist", "patchlane.lazy.watch", "patchlane.common",
             "patchlane.common.private_files", "patchlane.switch_values"}
"""Everything a target-free `import patchlane` may load: the lazy start, nothing else."""

NEVER = ("wrapt", "yaml", "packaging", "importlib.metadata", "email", "asyncio", "typing",
         "logging", "pathlib", "re", "enum", "json", "socket", "torch", "megatron")

WHY = "from patchlane.lazy import arm; print('WHY', arm.why_not())\n"


def child(code: str, env: dict[str, str], *args: str,
          timeout: int = 300) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full.update(env)
    return subprocess.run([sys.executable, *args, "-c", code], capture_output=True, text=True,
                          env=full, cwd=env.get("CWD", str(ROOT)), timeout=timeout)


def why(out: subprocess.CompletedProcess[str]) -> str:
    lines = [line[4:] for line in out.stdout.splitlines() if line.startswith("WHY ")]
    assert lines, out.stdout + out.stderr
    return lines[-1]


def private_cache(tmp_path: Path) -> Path:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    return cache


def fake_env(fake: FakeTarget, cache: Path, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": str(fake.root), "PATCHLANE_REGISTRY": str(fake.registry),
            "PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_ENTRY_POINTS": "0",
            "PATCHLANE_REGISTRY_CACHE": str(cache), **extra}


@pytest.fixture
def fake(tmp_path: Path) -> FakeTarget:
    target = make_fake(tmp_path / "site")
    target.write_registry()
    return target


def warm(env: dict[str, str]) -> None:
    """One start that writes the watch list (the eager start loads when there is none), then one
    that must find it."""
    child("import patchlane", env)
    out = child("import patchlane\n" + WHY, env)
    assert why(out) == "None", out.stdout + out.stderr


REPORT = ("import json, patchlane\n"
          "r = patchlane.report()\n"
          "print('REPORT', json.dumps({e['id']: [e['decision']['outcome'], e['applied'], "
          "e['hits']] for e in r['entries']}))\n")


def report_of(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    line = next(x for x in out.stdout.splitlines() if x.startswith("REPORT "))
    return json.loads(line[7:])  # type: ignore[no-any-return]


# -- what a target-free process loads --------------------------------------------------------

def test_a_target_free_import_loads_only_the_lazy_start(tmp_path: Path) -> None:
    """The default registry and this environment, as a job's helper process sees them."""
    env = {"PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    warm(env)
    code = ("import sys\nbefore = set(sys.modules)\nimport patchlane\n"
            "print('NEW', sorted(set(sys.modules) - before))\n" + WHY)
    out = child(code, env)
    assert why(out) == "None"
    new = set(eval(next(x for x in out.stdout.splitlines() if x.startswith("NEW "))[4:]))
    assert new == LAZY_START, new ^ LAZY_START
    assert not [m for m in new if m.split(".")[0] in NEVER or m in NEVER]


def test_a_bootstrapped_interpreter_loads_only_the_lazy_start_and_its_exit_line(
        tmp_path: Path) -> None:
    """What each process `patchlane run` starts loads, against bare Python's own modules."""
    env = {"PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    warm(env)
    code = "import sys; print('MODS', sorted(sys.modules))"
    bare, booted = child(code, env), child(code, {**env, "PYTHONPATH": str(BOOTSTRAP)})
    parse = {k: set(eval(next(x for x in o.stdout.splitlines() if x.startswith("MODS "))[5:]))
             for k, o in (("bare", bare), ("booted", booted))}
    added = parse["booted"] - parse["bare"]
    assert added == (LAZY_START | {"patchlane.launch", "patchlane.launch.activate",
                                  "sitecustomize", "atexit"}) - parse["bare"], added
    assert "patchlane run: main" in booted.stderr  # the exit line, from the watch list


@pytest.mark.parametrize("controls", [
    {}, {"PATCHLANE_DISABLE": "torch_floor_a2a_overlap"},
    {"PATCHLANE_ONLY": "mcore_rerun_sentinel,dynamo_recompile_limit"},
    {"PATCHLANE_VERIFY_RANKS": "0", "PATCHLANE_STRICT": "1"}])
def test_the_exit_line_of_an_untouched_process_is_the_eager_starts(
        tmp_path: Path, controls: dict[str, str]) -> None:
    env = {"PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path)),
           "PYTHONPATH": str(BOOTSTRAP), **controls}
    warm(env)
    lazy = child("pass", env)
    eager = child("pass", {**env, "PATCHLANE_LAZY": "0"})
    assert lazy.returncode == eager.returncode == 0, lazy.stderr + eager.stderr

    def line(out: subprocess.CompletedProcess[str]) -> str:
        (said,) = [x for x in out.stderr.splitlines() if x.startswith("patchlane run: ")]
        return said.replace(f"pid {said.split('pid ')[1].split(',')[0]}", "pid N")

    assert line(lazy) == line(eager)
    assert "pending: " in line(lazy)


# -- the first target import -----------------------------------------------------------------

def test_the_first_target_import_runs_the_startup_and_decides_as_the_eager_start(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    code = ("import sys, patchlane\n" + WHY +
            "print('BEFORE', 'wrapt' in sys.modules, 'patchlane.startup' in sys.modules)\n"
            f"import {fake.module} as t\n"
            "print('AFTER', 'wrapt' in sys.modules, type(sys.meta_path[0]).__module__)\n"
            "print('GREET', t.Greeter().greet('x'))\n"
            "print('LOADER', type(t.__loader__).__name__, type(t.__spec__.loader).__name__)\n"
            + REPORT)
    lazy = child(code, env)
    eager = child(code, {**env, "PATCHLANE_LAZY": "0"})
    assert lazy.returncode == eager.returncode == 0, lazy.stderr + eager.stderr
    assert why(lazy) == "None" and why(eager) == "PATCHLANE_LAZY='0'"
    assert "BEFORE False False" in lazy.stdout and "BEFORE True True" in eager.stdout
    # the lazy start's finder is gone; the post-import hook's own finder is first
    assert "AFTER True patchlane.import_hook" in lazy.stdout
    assert report_of(lazy) == report_of(eager) == {fake.entry_id: ["applied", True, 1]}
    greet = [x for x in lazy.stdout.splitlines() if x.startswith("GREET ")]
    assert greet == [x for x in eager.stdout.splitlines() if x.startswith("GREET ")]
    # the module names its own loader, not the hook's
    assert "LOADER SourceFileLoader SourceFileLoader" in lazy.stdout


def test_looking_a_target_up_loads_nothing(fake: FakeTarget, tmp_path: Path) -> None:
    """Libraries probe for optional dependencies with find_spec: that is not an import."""
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    code = ("import sys, importlib.util, patchlane\n"
            f"assert importlib.util.find_spec({fake.package!r}) is not None\n"
            "print('PROBED', 'wrapt' in sys.modules)\n"
            f"import {fake.module}\n" + REPORT)
    out = child(code, env)
    assert "PROBED False" in out.stdout, out.stderr
    assert report_of(out) == {fake.entry_id: ["applied", True, 0]}


def test_report_in_a_process_that_imported_no_target_says_pending(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    lazy, eager = child(REPORT, env), child(REPORT, {**env, "PATCHLANE_LAZY": "0"})
    assert report_of(lazy) == report_of(eager) == {fake.entry_id: ["pending", False, 0]}


def test_two_threads_importing_two_targets_at_once_both_decide(tmp_path: Path) -> None:
    """The startup loads once, in one thread; the other waits for it before its module runs."""
    one, two = make_fake(tmp_path / "a"), make_fake(tmp_path / "b")
    registry = tmp_path / "registry.yaml"
    import yaml

    body = {"schema": 1, "entries": []}
    for fake in (one, two):  # files named from the registry's folder, as validation wants
        entry = fake.entry()
        for key in ("overlay", "reproducer"):
            entry[key] = f"{fake.root.name}/{entry[key]}"
        entry["upstream"]["draft"] = f"{fake.root.name}/{entry['upstream']['draft']}"
        body["entries"].append(entry)
    registry.write_text(yaml.safe_dump(body, sort_keys=False))
    env = {"PYTHONPATH": os.pathsep.join([str(one.root), str(two.root)]),
           "PATCHLANE_REGISTRY": str(registry), "PATCHLANE_DEFAULT_REGISTRY": "0",
           "PATCHLANE_ENTRY_POINTS": "0", "PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    warm(env)
    code = ("import importlib, threading, patchlane\n"
            "go = threading.Barrier(2)\n"
            "def load(name):\n    go.wait()\n    importlib.import_module(name)\n"
            f"ts = [threading.Thread(target=load, args=(n,)) for n in "
            f"({one.module!r}, {two.module!r})]\n"
            "[t.start() for t in ts]; [t.join() for t in ts]\n" + REPORT)
    for _ in range(3):
        out = child(code, env)
        assert report_of(out) == {one.entry_id: ["applied", True, 0],
                                  two.entry_id: ["applied", True, 0]}, out.stderr


def test_a_setting_changed_after_import_patchlane_changes_nothing_lazily_or_not(
        fake: FakeTarget, tmp_path: Path) -> None:
    """The decider reads its settings as they were at `import patchlane`: the lazy start, which
    loads at the target's first import, used to read the ones the script set in between."""
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    code = (f"import os, patchlane\n{WHY}os.environ['PATCHLANE_DISABLE'] = {fake.entry_id!r}\n"
            f"import {fake.module}\n" + REPORT)
    lazy, eager = child(code, env), child(code, {**env, "PATCHLANE_LAZY": "0"})
    assert why(lazy) == "None", lazy.stderr
    assert report_of(lazy)[fake.entry_id][:2] == ["applied", True], lazy.stderr
    assert report_of(lazy) == report_of(eager)


def test_strict_drift_at_the_first_target_import_stops_as_the_eager_start_does(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path), PATCHLANE_STRICT="1")
    warm(env)
    fake.target_file.write_text(fake.target_file.read_text().replace("hello", "howdy"))
    code = f"import patchlane\n{WHY}import {fake.module}\nprint('RAN ON')\n"
    lazy, eager = child(code, env), child(code, {**env, "PATCHLANE_LAZY": "0"})
    assert why(lazy) == "None"
    # the target's import fails with the DriftError, from its post-import hook, in both: one
    # line and drift's own exit code (4), not a traceback and exit 1
    assert lazy.returncode == eager.returncode == 4, lazy.stderr
    assert "RAN ON" not in lazy.stdout + eager.stdout
    assert "Traceback" not in lazy.stderr + eager.stderr
    assert lazy.stderr.splitlines()[-1] == eager.stderr.splitlines()[-1]
    line = lazy.stderr.splitlines()[-1]
    assert line.startswith("patchlane: DriftError: ")
    assert line.endswith(f"(stopped at the import of {fake.module}, exit 4)")


# -- what makes it fall back to the eager start -------------------------------------------------

def test_a_changed_registry_falls_back_once_then_is_lazy_again(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    fake.write_registry(fake.entry(summary="the same entry, said otherwise"))
    assert "no fresh watch list" in why(child("import patchlane\n" + WHY, env))
    assert why(child("import patchlane\n" + WHY, env)) == "None"


def test_an_overlay_removed_since_the_index_is_the_registry_error_at_import(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path), PATCHLANE_STRICT="1")
    warm(env)
    (fake.root / "patches" / f"{fake.entry_id}.py").unlink()
    lazy = child("import patchlane\nprint('RAN ON')", env)
    eager = child("import patchlane\nprint('RAN ON')", {**env, "PATCHLANE_LAZY": "0"})
    assert lazy.returncode == eager.returncode == 3, lazy.stderr  # RegistryError, at import
    assert lazy.stderr == eager.stderr and "RAN ON" not in lazy.stdout


def test_a_distribution_installed_since_the_index_falls_back(
        fake: FakeTarget, tmp_path: Path) -> None:
    """An entry-point registry may come with any installed distribution."""
    env = fake_env(fake, private_cache(tmp_path), PATCHLANE_ENTRY_POINTS="1")
    warm(env)
    plugin = fake.root / "plplugin-1.0.dist-info"
    plugin.mkdir()
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: plplugin\nVersion: 1.0\n")
    assert "no fresh watch list" in why(child("import patchlane\n" + WHY, env))


@pytest.mark.parametrize(("extra", "said"), [
    ({"PATCHLANE_DISABLE": "no_such_entry"}, "name ids no entry has: no_such_entry"),
    ({"PATCHLANE_VERIFY_RANKS": "maybe"}, "PATCHLANE_VERIFY_RANKS='maybe' cannot be read"),
    ({"PATCHLANE_LAZY": "0"}, "PATCHLANE_LAZY='0'"),
    ({"PATCHLANE_REGISTRY_CACHE": "0"}, "the registry cache is off"),
])
def test_what_the_index_cannot_vouch_for_runs_the_startup_at_import_as_before(
        fake: FakeTarget, tmp_path: Path, extra: dict[str, str], said: str) -> None:
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    code = "import patchlane\n" + WHY
    lazy = child(code, {**env, **extra})
    assert said in why(lazy)
    if "PATCHLANE_DISABLE" in extra:  # the eager start's warning, at import, as before
        assert "unknown entry id(s) 'no_such_entry'" in lazy.stderr


def test_a_watched_module_imported_first_and_info_logging_load_at_once(
        fake: FakeTarget, tmp_path: Path) -> None:
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    out = child(f"import {fake.package}\nimport patchlane\n{WHY}", env)
    assert why(out) == f"{fake.package} already imported"
    code = ("import logging; logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
            "import patchlane\n" + WHY)
    out = child(code, env)
    assert "enabled at INFO" in why(out)
    assert [x for x in out.stderr.splitlines() if x.startswith("patchlane 0")]


def test_status_does_not_hold_its_own_imports_logging_against_a_new_process(
        fake: FakeTarget, tmp_path: Path) -> None:
    """`patchlane status` says how a process started now would start. A target the command
    imported that set up INFO logging (megatron-core 0.19 does) is this process's, as the
    import itself is: a new process still takes the lazy path, and status says so."""
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    code = ("import patchlane\nfrom patchlane.lazy import arm\n"
            "import logging; logging.basicConfig(level=logging.INFO)\n"
            f"import {fake.package}\nprint('CHECK', arm.check()[0])\n")
    out = child(code, env)
    assert "CHECK None" in out.stdout, out.stdout + out.stderr
    # logging at INFO before `import patchlane` (a sitecustomize's): a new process has it too
    before = ("import logging; logging.basicConfig(level=logging.INFO)\nimport patchlane\n"
              f"from patchlane.lazy import arm\nimport {fake.package}\n"
              "print('CHECK', arm.check()[0])\n")
    out = child(before, env)
    assert "CHECK the patchlane logger is enabled at INFO" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize("distribution", ["packaging", "wrapt"])
def test_a_pin_on_a_module_the_startup_imports_itself_loads_at_once(
        tmp_path: Path, distribution: str) -> None:
    """A team's pin on one of patchlane's own dependencies: watched lazily, the startup's own
    `import packaging` would load the startup again, half-imported (every command and
    `patchlane.report()` failed from the second process on). It loads at `import patchlane`,
    says why, and the pin is checked; the command works in every process after the first."""
    registry = tmp_path / "team.yaml"
    registry.write_text(
        "schema: 1\nentries:\n"
        f"  - id: team_pin\n    kind: packaging_pin\n    summary: a pin on {distribution}\n"
        f"    target: {{distribution: {distribution}}}\n    pin: '>=1'\n"
        "    upstream: {issue: 'https://github.com/pypa/packaging/issues/1', "
        "forwarded: not-needed}\n"
        "    retire_when: {upstream_released: true}\n    owner: me\n    added: 2026-11-30\n"
        "    status: active\n")
    env = {"PATCHLANE_REGISTRY": str(registry), "PATCHLANE_DEFAULT_REGISTRY": "0",
           "PATCHLANE_ENTRY_POINTS": "0", "PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    code = ("import patchlane\n" + WHY + "from patchlane.cli.main import main\n"
            "r = patchlane.report()\n"
            "print('OUTCOME', [e['decision']['outcome'] for e in r['entries']])\n")
    for _ in range(3):  # the first writes the watch list; the next ones read it
        out = child(code, env)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "OUTCOME ['ledger: ok']" in out.stdout, out.stdout + out.stderr
    assert why(out) == f"an entry's module is one the startup imports itself ({distribution})"


def test_an_index_others_could_write_or_a_corrupt_one_is_not_read(
        fake: FakeTarget, tmp_path: Path) -> None:
    cache = private_cache(tmp_path)
    env = fake_env(fake, cache)
    warm(env)
    cache.chmod(0o777)
    assert "not private" in why(child("import patchlane\n" + WHY, env))
    cache.chmod(0o700)
    (index,) = cache.glob("*.lazy")
    index.write_bytes(index.read_bytes()[:-20])  # the rows, cut short: read only on demand
    out = child("import patchlane\n" + WHY, {**env, "PATCHLANE_DISABLE": fake.entry_id})
    assert why(out) == "the watch list's rows cannot be read"
    index.write_bytes(b"patchlane lazy index\n" + b"\xff" * 40)
    assert "no fresh watch list" in why(child("import patchlane\n" + WHY, env))


# -- the launcher and the .pth activation ----------------------------------------------------

def test_patchlane_run_execs_without_the_full_command_line(tmp_path: Path) -> None:
    env = {"PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    warm(env)
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")} | env
    out = subprocess.run([sys.executable, "-X", "importtime", str(ROOT / "bin" / "patchlane"),
                          "run", "--", sys.executable, "-c", "print('ran')"],
                         capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and out.stdout == "ran\n", out.stderr
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines()
              if line.startswith("import time:")}
    assert "patchlane.cli.entry" in loaded and "patchlane.launch.environment" in loaded
    assert not loaded & {"argparse", "patchlane.cli.main", "patchlane.startup", "wrapt", "re"}


@pytest.mark.parametrize("args", [["--registry", "no/such.yaml", "--", "true"],
                                  ["--", "no-such-command-here"], ["--bogus", "--", "true"],
                                  []])
def test_patchlane_run_answers_bad_input_as_the_full_parser_does(
        tmp_path: Path, args: list[str]) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    fast = subprocess.run([sys.executable, str(ROOT / "bin" / "patchlane"), "run", *args],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)
    slow = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "run", *args],
                          capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)
    assert fast.returncode == slow.returncode != 0
    assert fast.stderr.replace("patchlane.cli.main", "patchlane") == \
        slow.stderr.replace("patchlane.cli.main", "patchlane")


def test_pth_activation_reaches_isolated_interpreters_and_is_removed(tmp_path: Path) -> None:
    """A venv whose site-packages reaches patchlane through a .pth of paths (sorted first),
    then `patchlane activate --pth` there: `python -I` (no PYTHONPATH, no user site) has the
    decider, lazily."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site_dir = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                                    "get_paths()['purelib'])"], capture_output=True, text=True,
                                   check=True).stdout.strip())
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site_dir / "a-paths.pth").write_text("\n".join([*deps, str(ROOT)]) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PATCHLANE_REGISTRY_CACHE"] = str(private_cache(tmp_path))

    def patchlane(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(python), "-m", "patchlane", *args], capture_output=True,
                              text=True, env=env, cwd=tmp_path, timeout=300)

    probe = ("import sys; from patchlane.lazy import arm; "
             "print('ACTIVE', 'patchlane' in sys.modules, arm.why_not())")
    before = subprocess.run([str(python), "-I", "-c", "import sys; print('patchlane' in "
                             "sys.modules)"], capture_output=True, text=True, env=env)
    assert before.stdout.strip() == "False"
    first, again = patchlane("activate", "--pth"), patchlane("activate", "--pth")
    assert first.returncode == again.returncode == 0, first.stderr
    assert first.stdout.startswith("activated: ") and again.stdout.startswith("already activated")
    status = patchlane("activate")
    assert f"activated: {site_dir / 'zz-patchlane-activate.pth'} (current)" in status.stdout
    subprocess.run([str(python), "-c", "pass"], env=env, timeout=300)  # writes the watch list
    out = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.stdout.strip() == "ACTIVE True None", out.stderr
    strict = subprocess.run([str(python), "-c", "print('ran')"], capture_output=True, text=True,
                            env={**env, "PATCHLANE_STRICT": "1",
                                 "PATCHLANE_REGISTRY": str(tmp_path / "missing.yaml")})
    assert strict.returncode == 3 and "ran" not in strict.stdout
    assert "(stopped at " in strict.stderr and strict.stderr.count("\n") == 1
    gone, twice = patchlane("activate", "--remove"), patchlane("activate", "--remove")
    assert gone.stdout.startswith("removed: ") and twice.stdout.startswith("not activated")
    assert not (site_dir / "zz-patchlane-activate.pth").exists()


def test_a_leftover_pth_says_so_once_per_interpreter(tmp_path: Path) -> None:
    """A .pth that outlived patchlane says so on stderr, once, also where `site` reads its
    directory twice (a lib64 -> lib symlink, a symlinked prefix): it said it twice."""
    from patchlane.launch.pth import FILE_NAME, content

    site_dir = tmp_path / "lib" / "site-packages"
    site_dir.mkdir(parents=True)
    (site_dir / FILE_NAME).write_text(content(site_dir / FILE_NAME))
    (tmp_path / "lib64").symlink_to(tmp_path / "lib")
    code = ("import site, sys\nsys.path[:] = [p for p in sys.path if 'patchlane' not in p and "
            "'site-packages' not in p and p]\n"
            f"site.addsitedir({str(site_dir)!r})\n"
            f"site.addsitedir({str(tmp_path / 'lib64' / 'site-packages')!r})\n")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("activates patchlane, which this interpreter cannot import") == 1


# -- the real overlay --------------------------------------------------------------------------

@pytest.mark.upstream
def test_the_real_overlay_is_decided_the_same_lazily_on_the_installed_megatron(
        tmp_path: Path) -> None:
    pytest.importorskip("megatron.core")
    env = {"PATCHLANE_REGISTRY_CACHE": str(private_cache(tmp_path))}
    warm(env)
    code = ("import patchlane\n" + WHY + "import megatron.core.rerun_state_machine\n" + REPORT)
    lazy, eager = child(code, env), child(code, {**env, "PATCHLANE_LAZY": "0"})
    assert why(lazy) == "None", lazy.stderr
    assert report_of(lazy) == report_of(eager)
    assert report_of(lazy)["mcore_rerun_sentinel"][0] in ("applied", "skipped: gate")


def test_a_missing_dependency_at_the_first_target_import_is_one_line(
        fake: FakeTarget, tmp_path: Path) -> None:
    """A venv built without patchlane's dependencies (wrapt here): the startup cannot load. One
    line naming the package, the requirement and the install command, exit 69, lazily or not;
    not a traceback from inside the target's import."""
    env = fake_env(fake, private_cache(tmp_path))
    warm(env)
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "wrapt.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'wrapt'\", name='wrapt')\n")
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env["PYTHONPATH"]])
    code = f"import patchlane\nimport {fake.module}\nprint('RAN ON')\n"
    for out in (child(code, env), child(code, {**env, "PATCHLANE_LAZY": "0"})):
        assert out.returncode == 69, out.stderr
        assert "RAN ON" not in out.stdout and "Traceback" not in out.stderr, out.stderr
        (line,) = out.stderr.splitlines()
        assert line.startswith("patchlane: MissingDependencyError: patchlane needs wrapt"), line
        assert "-m pip install 'wrapt" in line, line

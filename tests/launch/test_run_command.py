"""`patchlane run`'s mechanics (patchlane/launch): the environment it builds, the bootstrap
sitecustomize in child and grandchild interpreters, an existing sitecustomize still running,
strict mode stopping a process before the command on a rejected registry. Fake registries
and plain `python -c` commands: the real torchrun + megatron launch is
tests/releases/test_launch.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane.launch.command import BOOTSTRAP, launch_env

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], env: dict[str, str] | None = None,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "patchlane.cli.main", "run", *args],
                          capture_output=True, text=True, env=full, cwd=cwd or ROOT, timeout=120)


PROBE = ("import json, os, sys; print(json.dumps({'patchlane': 'patchlane' in sys.modules, "
         "'site': getattr(sys.modules.get('sitecustomize'), '__file__', None), "
         "'user': os.environ.get('USER_SITECUSTOMIZE_RAN')}))")


def test_launch_env_puts_the_bootstrap_first_once_and_absolute_paths(tmp_path: Path) -> None:
    registry = tmp_path / "r.yaml"
    env = launch_env({"PYTHONPATH": f"a{os.pathsep}{BOOTSTRAP}"}, registry=[registry],
                     strict=True, reports=tmp_path / "rep")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(BOOTSTRAP), "a"]
    assert env["PATCHLANE_REGISTRY"] == str(registry.resolve())
    assert env["PATCHLANE_STRICT"] == "1"
    assert env["PATCHLANE_RUN_REPORTS"] == str((tmp_path / "rep").resolve())
    again = launch_env(env)
    assert again["PYTHONPATH"] == env["PYTHONPATH"]  # a nested `patchlane run` adds nothing
    assert sorted(p.name for p in BOOTSTRAP.iterdir() if p.suffix == ".py") == \
        ["sitecustomize.py"]  # nothing else on PYTHONPATH can shadow a user's module


def test_child_and_grandchild_interpreters_are_activated(tmp_path: Path) -> None:
    grandchild = (f"import subprocess, sys; subprocess.run([sys.executable, '-c', {PROBE!r}], "
                  "check=True)")
    out = run(["--", sys.executable, "-c", f"{PROBE}\n{grandchild}"])
    assert out.returncode == 0, out.stderr
    child, grand = (json.loads(line) for line in out.stdout.splitlines())
    for seen in (child, grand):
        assert seen["patchlane"] is True
        assert seen["site"] == str(BOOTSTRAP / "sitecustomize.py")


def test_an_existing_sitecustomize_still_runs(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(
        "import os\nos.environ['USER_SITECUSTOMIZE_RAN'] = 'yes'\n")
    out = run(["--", sys.executable, "-c", PROBE], env={"PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen == {"patchlane": True, "site": str(tmp_path / "sitecustomize.py"),
                    "user": "yes"}


def test_strict_stops_before_the_command_on_a_rejected_registry(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: 1\nentries: [\n")
    marker = tmp_path / "ran"
    command = ["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    out = run(["--strict", "--registry", str(bad), *command])
    assert out.returncode == 3, out.stderr  # ExitCode.REGISTRY_REJECTED
    assert "stops before the command runs" in out.stderr and str(bad) in out.stderr
    assert not marker.exists()
    # not strict: the startup logs the rejection, applies nothing, and the command runs
    out = run(["--registry", str(bad), *command])
    assert out.returncode == 0, out.stderr
    assert marker.exists(), out.stderr
    assert f"registry {bad.resolve()} refused, its entries not applied" in out.stderr


@pytest.mark.parametrize("module", ["patchlane", "patchlane.cli.main", "--full-width"])
def test_a_refused_file_in_the_environment_is_said_once_by_the_job(tmp_path: Path,
                                                                    module: str) -> None:
    # PATCHLANE_REGISTRY names it for `run` itself too: run's own start must not say it before
    # the job's process does (the fast path, `-m patchlane`, and the full parser alike)
    bad = tmp_path / "bad.yaml"
    bad.write_text("entries: []\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full["PATCHLANE_REGISTRY"] = str(bad)
    # a top-level option before `run` (the full parser's) changes nothing
    words = ["patchlane", "--full-width"] if module == "--full-width" else [module]
    out = subprocess.run([sys.executable, "-m", *words, "run", "--", sys.executable, "-c",
                          "print('job ran')"], capture_output=True, text=True, env=full,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0 and out.stdout == "job ran\n", out
    assert out.stderr.count(f"registry {bad.resolve()} refused, its entries not applied") == 1, \
        out.stderr


def test_reports_are_written_per_process(tmp_path: Path) -> None:
    out = run(["--reports", str(tmp_path / "rep"), "--", sys.executable, "-c", "pass"],
              env={"RANK": "3"})
    assert out.returncode == 0, out.stderr
    (path,) = (tmp_path / "rep").glob("rank3-*.json")
    report = json.loads(path.read_text())
    assert report["process"]["rank"] == "3" and report["entries"]


def test_each_report_names_its_job_and_stack(tmp_path: Path) -> None:
    # What `patchlane usage` counts jobs and stacks by: one job per invocation, shared by the
    # processes it starts; the user's PATCHLANE_RUN_JOB or the Slurm step where given.
    import platform

    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"

    def jobs(name: str, env: dict[str, str] | None = None) -> list[dict[str, object]]:
        out = run(["--reports", str(tmp_path / name), "--", sys.executable, "-c", child],
                  env=env)
        assert out.returncode == 0, out.stderr
        return [json.loads(p.read_text())["process"] for p in (tmp_path / name).glob("*.json")]

    first = jobs("a")
    assert len(first) == 2 and len({p["job"] for p in first}) == 1
    assert str(first[0]["job"]).startswith("run:")
    for process in first:  # neither process imported torch
        assert process["stack"] == {"python": platform.python_version(),
                                    "implementation": sys.implementation.name,
                                    "torch": None, "cuda": None}
    assert {p["job"] for p in jobs("b")} != {first[0]["job"]}  # another invocation
    assert {p["job"] for p in jobs("c", {"PATCHLANE_RUN_JOB": "pretrain-7",
                                         "SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"})} == \
        {"job:pretrain-7"}
    assert {p["job"] for p in jobs("d", {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0"})} == \
        {"slurm:12.0"}


def test_job_of_prefers_what_was_named() -> None:
    from patchlane.launch.job import job_of

    assert job_of({}) == "unknown"
    assert job_of({"PATCHLANE_RUN_ID": "r1"}) == "run:r1"
    # a batch script without srun has a job id but no step: each invocation is its own job
    assert job_of({"PATCHLANE_RUN_ID": "r1", "SLURM_JOB_ID": "12"}) == "run:r1"
    assert job_of({"PATCHLANE_RUN_ID": "r1", "SLURM_JOB_ID": "12",
                   "SLURM_STEP_ID": "3"}) == "slurm:12.3"
    assert job_of({"PATCHLANE_RUN_JOB": " x ", "SLURM_JOB_ID": "12",
                   "SLURM_STEP_ID": "3"}) == "job:x"


def test_one_summary_line_per_rank_root_not_per_child(tmp_path: Path) -> None:
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'pass'], check=True)"
    out = run(["--", sys.executable, "-c", child], env={"RANK": "5"})
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: ")]
    assert len(lines) == 1 and lines[0].startswith("patchlane run: rank 5 (pid "), out.stderr
    quiet = run(["--", sys.executable, "-c", "pass"], env={"PATCHLANE_RUN_SUMMARY": "0"})
    assert "patchlane run: " not in quiet.stderr


def test_the_exit_line_names_what_is_on_the_call_path_and_counts_the_rest() -> None:
    """A rank's line fits a log: applied overlays (with hits) and problems by name, the other
    outcomes counted (it was every id, 641 characters with the catalog)."""
    from patchlane.deciding.decider import _LEVELS
    from patchlane.launch.activate import _NAMED

    # named exactly where a training log's INFO and WARNING lines name an entry
    assert {o.value for o, level in _LEVELS.items() if level > 10} == _NAMED
    code = "import megatron.core.dist_checkpointing"
    out = run(["--", sys.executable, "-c", code], env={"RANK": "0"})
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: ")]
    assert "applied: " in line and "pending: " in line, line
    pending = line.split("pending: ")[1].split(" |")[0]
    assert pending.isdigit(), line  # counted, not listed
    assert len(line) < 300, (len(line), line)


def test_torchrun_s_agent_by_its_console_script_stays_quiet(tmp_path: Path) -> None:
    """`patchlane run -- torchrun ...`: the agent runs as the `torchrun` script (argv[0] ends
    in /torchrun, not torch/distributed/run.py); it trains nothing and prints no line."""
    script = tmp_path / "torchrun"
    script.write_text(f"#!{sys.executable}\nprint('agent ran')\n")
    script.chmod(0o755)
    out = run(["--", str(script)])
    assert out.returncode == 0 and out.stdout.strip() == "agent ran", out.stderr
    assert "patchlane run: " not in out.stderr, out.stderr


@pytest.mark.parametrize("module", ["patchlane", "patchlane.cli.main"],
                         ids=["first-step", "full-parser"])
def test_registry_is_repeatable_and_each_file_is_added(tmp_path: Path, module: str) -> None:
    # `--registry A --registry B` kept only B: a team's first file was never applied, silently
    files = [tmp_path / name for name in ("a.yaml", "b.yaml", "c.yaml")]
    for path in files:
        path.write_text("schema: 1\nentries: []\n")
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full["PATCHLANE_REGISTRY"] = str(files[2])
    code = "import os; print(os.environ['PATCHLANE_REGISTRY'])"
    out = subprocess.run([sys.executable, "-m", module, "run", "--registry", str(files[0]),
                          "--registry", str(files[1]), "--", sys.executable, "-c", code],
                         capture_output=True, text=True, env=full, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == os.pathsep.join(str(p) for p in files)


def test_usage_errors() -> None:
    assert run([]).returncode == 2
    assert run(["--"]).returncode == 2
    missing = run(["--registry", "/no/such.yaml", "--", sys.executable, "-c", "pass"])
    assert missing.returncode == 2 and "/no/such.yaml" in missing.stderr


def test_an_interpreter_without_patchlane_warns_and_runs(tmp_path: Path) -> None:
    other = shutil.which("python3", path="/usr/bin:/bin")
    if other is None or subprocess.run([other, "-c", "import patchlane"],
                                       capture_output=True).returncode == 0:
        pytest.skip("no system python3 without patchlane here")
    out = run(["--", other, "-c", "print('ran')"])
    assert out.returncode == 0 and out.stdout.strip() == "ran", out.stderr
    assert "cannot import patchlane" in out.stderr
    strict = run(["--strict", "--", other, "-c", "print('ran')"])
    assert strict.returncode == 3 and "ran" not in strict.stdout


@pytest.mark.parametrize(("before", "after"), [
    (None, ""),                       # unset: the bootstrap alone, no empty element
    ("", ""),                         # set but empty: Python reads it as unset
    (":/x", ":/x"),                   # an empty element is the current directory: kept
    ("/x:", "/x:"),
    ("/x::/y", "/x::/y"),
    ("/y:{boot}:/x", "/y:/x"),        # an earlier bootstrap is moved first, once
])
def test_launch_env_keeps_the_users_pythonpath_exactly(before: str | None, after: str) -> None:
    sep = os.pathsep
    env = {} if before is None else {"PYTHONPATH": before.replace(":", sep).format(
        boot=BOOTSTRAP)}
    out = launch_env(env)["PYTHONPATH"]
    assert out == sep.join([str(BOOTSTRAP), *([after.replace(":", sep)] if after else [])])
    assert launch_env({"PYTHONPATH": out})["PYTHONPATH"] == out  # nested: unchanged


def test_a_module_in_the_working_directory_imports_as_without_the_launcher(
        tmp_path: Path) -> None:
    # PYTHONPATH=":<patchlane>": the empty element is the working directory, so a script kept
    # in another folder still imports the modules beside where it is started from.
    (tmp_path / "neighbour.py").write_text("NAME = 'neighbour'\n")
    script = tmp_path / "bin" / "train.py"
    script.parent.mkdir()
    script.write_text("import neighbour\nprint(neighbour.NAME)\n")
    env = {"PYTHONPATH": f"{os.pathsep}{ROOT}"}
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env={**os.environ, **env}, cwd=tmp_path, timeout=60)
    assert plain.returncode == 0, plain.stderr
    out = run(["--", sys.executable, str(script)], env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "neighbour"


def test_no_pythonpath_puts_no_working_directory_on_sys_path(tmp_path: Path) -> None:
    # The launcher is started with PYTHONPATH unset (patchlane found here through sys.path,
    # as an installed patchlane would be): the command's sys.path gains the bootstrap folder
    # only, not the working directory.
    script = tmp_path / "bin" / "probe.py"
    script.parent.mkdir()
    script.write_text("import os, sys\nprint(any(os.path.abspath(p or os.curdir) == os.getcwd()"
                      " for p in sys.path))\n")
    launcher = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                "from patchlane.cli.main import main; "
                f"sys.exit(main(['run', '--', sys.executable, {str(script)!r}]))")
    full = {k: v for k, v in os.environ.items()
            if k != "PYTHONPATH" and not k.startswith("PATCHLANE_")}
    out = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True,
                         env=full, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_a_nested_run_prints_one_summary_line_from_the_innermost_command(
        tmp_path: Path) -> None:
    # `patchlane run -- patchlane run -- CMD`: the inner launcher is itself a Python process
    # started with the bootstrap, and then execs CMD: its at-exit line never prints, and CMD
    # (which does exit) must not stay quiet because of it.
    nested = ["--", sys.executable, "-m", "patchlane.cli.main", "run", "--",
              sys.executable, "-c", "print('ran')"]
    for env in ({}, {"RANK": "2"}):
        out = run(nested, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "ran"
        lines = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: ")]
        who = "rank 2" if env else "main"
        assert len(lines) == 1 and lines[0].startswith(f"patchlane run: {who} (pid "), \
            out.stderr


@pytest.mark.parametrize("how", ["full-parser", "bin/patchlane"])
def test_run_evidence_satisfies_require_evidence_for_the_command(tmp_path: Path,
                                                                 how: str) -> None:
    """`run --evidence DIR` gives its processes PATCHLANE_EVIDENCE=DIR, so a job that also
    sets PATCHLANE_REQUIRE_EVIDENCE starts (it was refused: the command never ran)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    marker = tmp_path / "ran"
    args = ["--evidence", str(runs), "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PATCHLANE_REQUIRE_EVIDENCE"] = "1"
    if how == "full-parser":
        out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "run", *args],
                             capture_output=True, text=True, env=env, timeout=120)
    else:
        out = subprocess.run([sys.executable, str(ROOT / "bin" / "patchlane"), "run", *args],
                             capture_output=True, text=True, env=env, timeout=120)
        assert "cannot be read" not in out.stderr, out.stderr
    assert out.returncode == 0, out.stderr
    assert marker.exists()


@pytest.mark.parametrize("off", ["0", "false", "off", "No"])
def test_the_exit_line_switch_reads_as_every_switch(off: str) -> None:
    quiet = run(["--", sys.executable, "-c", "pass"], env={"PATCHLANE_RUN_SUMMARY": off})
    assert quiet.returncode == 0 and "patchlane run: " not in quiet.stderr, quiet.stderr


def test_a_switch_that_is_neither_yes_nor_no_is_refused_before_the_command(
        tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    out = run(["--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"],
              env={"PATCHLANE_RUN_SUMMARY": "quiet"})
    assert out.returncode == 2 and not marker.exists(), out.stderr
    assert "PATCHLANE_RUN_SUMMARY='quiet': expected one of 1, true, yes, on or 0, false, " \
        "no, off" in out.stderr


def test_an_empty_evidence_path_is_refused_not_read_as_here() -> None:
    out = run(["--evidence", "", "--", sys.executable, "-c", "pass"])
    assert out.returncode == 2 and "--evidence: found '', expected a path" in out.stderr, \
        out.stderr


def test_another_installs_bootstrap_is_dropped_and_never_chained(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    # A launcher venv's `patchlane run` around a job venv's: each bootstrap ran the other's as
    # the sitecustomize it shadows, until RecursionError, and the site's own never ran
    from patchlane.launch import activate

    other = tmp_path / "other-venv" / "patchlane" / "launch" / "bootstrap"
    other.mkdir(parents=True)
    (other / "sitecustomize.py").write_text("raise RuntimeError('the other bootstrap ran')\n")
    site_own = tmp_path / "site"
    site_own.mkdir()
    (site_own / "sitecustomize.py").write_text("RAN = 'the site sitecustomize'\n")
    env = launch_env({"PYTHONPATH": os.pathsep.join([str(other), "a"])})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(BOOTSTRAP), "a"]
    monkeypatch.setattr(sys, "path", [str(BOOTSTRAP), str(other), str(site_own)])
    monkeypatch.delitem(sys.modules, "sitecustomize", raising=False)
    activate.chain(str(BOOTSTRAP))
    assert sys.modules["sitecustomize"].RAN == "the site sitecustomize"


def test_an_evidence_option_of_the_command_is_the_commands(tmp_path: Path) -> None:
    # `patchlane run python x.py --evidence D`: the command starts at its first word, and
    # the script's own --evidence set PATCHLANE_EVIDENCE for the whole job
    runs = tmp_path / "runs"
    runs.mkdir()
    code = "import os; print(os.environ.get('PATCHLANE_EVIDENCE'))"
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    for args, seen in ((["run", sys.executable, "-c", code, "--evidence", str(runs)], "None"),
                       (["run", "--evidence", str(runs), "--", sys.executable, "-c", code],
                        str(runs))):
        out = subprocess.run([sys.executable, str(ROOT / "bin" / "patchlane"), *args],
                             capture_output=True, text=True, env=full, cwd=tmp_path,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[0] == seen, (args, out.stdout)


def test_a_script_with_no_shebang_line_runs_with_sh_as_env_runs_it(tmp_path: Path) -> None:
    # env and the shells run it with /bin/sh; run said 126 ("not a program this machine runs")
    script = tmp_path / "train.sh"
    script.write_text("echo ran with \"$1\"\n")
    script.chmod(0o755)
    out = run(["--", str(script), "an-argument"], cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ran with an-argument"
    assert subprocess.run(["env", str(script), "an-argument"], capture_output=True,
                          text=True).stdout == out.stdout  # what env answers


def test_under_slurm_the_torchrun_agent_leaves_the_rank_line_to_the_rank(
        tmp_path: Path) -> None:
    # `srun patchlane run -- torchrun ...`: the agent read SLURM_PROCID as its rank, printed
    # "rank 0" itself, and the real rank 0 took the mark as its own and stayed quiet
    script = tmp_path / "torchrun"
    script.write_text(f"#!{sys.executable}\nimport os, subprocess, sys\n"
                      "subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], "
                      "env={**os.environ, 'RANK': '0'}, check=True)\n")
    script.chmod(0o755)
    out = run(["--", str(script)], env={"SLURM_PROCID": "0", "SLURM_JOB_ID": "5"})
    assert out.returncode == 0, out.stderr
    rank_pid = out.stdout.strip().splitlines()[-1]
    lines = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: ")]
    assert len(lines) == 1 and lines[0].startswith("patchlane run: rank 0 "), out.stderr
    assert f"(pid {rank_pid}," in lines[0], (rank_pid, lines)

"""How a case's ranks start (patchlane.sweep.rank_start): a warm rank, forked from a server that
imported torch, gives each real case the outcome a fresh rank gives; it is refused where it
would prove something else; it leaves nothing running; and a server that cannot preload torch
falls back to fresh ranks, saying why."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.common.errors import ControlsError
from patchlane.deciding.controls import ToolSettings
from patchlane.registry import load_registries
from patchlane.releases.matrix import sweep_releases
from patchlane.sweep.rank_start import RankStart, sets_environment, uses_torch, warm_allowed
from patchlane.sweep.reproduce import Mode, read_spec, run_case

from ..conftest import FakeTarget
from ..releases.conftest import CACHE, ROOT, megatron_version
from .test_sweep_faults import GUARDING, HEAD, env_for, multi_registry

pytestmark = pytest.mark.slow


def _catalog(entry_id: str):  # type: ignore[no-untyped-def]
    return startup.current().registry.get(entry_id)


def test_a_warm_start_is_refused_where_it_would_prove_something_else() -> None:
    """torch imported before patchlane changes nothing for an entry on megatron, but it does for
    one on torch, for a config entry (its settings may be read at torch's import), for a case
    on a ledger entry's bad side, and on the CUDA lane."""
    sentinel = _catalog("mcore_rerun_sentinel")
    assert warm_allowed(sentinel, "cpu", bad_side=False) is None
    # an entry that depends on another is held to the other's rules too: here megatron's
    assert _catalog("mcore_strict_load_idle_rerun_shard").depends_on
    assert warm_allowed(_catalog("mcore_strict_load_idle_rerun_shard"), "cpu", False) is None
    assert "cuda lane" in str(warm_allowed(sentinel, "cuda", bad_side=False))
    assert "bad-side" in str(warm_allowed(sentinel, "cpu", bad_side=True))
    assert "config entry" in str(warm_allowed(_catalog("dynamo_recompile_limit"), "cpu", False))
    assert "version_floor entry" in str(warm_allowed(_catalog("torch_floor_a2a_overlap"), "cpu",
                                                     False))


def test_a_reproducer_that_sets_the_environment_starts_fresh(tmp_path: Path) -> None:
    """liger-kernel's CPU reproducers set TRITON_INTERPRET before triton is imported; a warm
    rank's server imported triton (through torch._dynamo) long before."""
    flce = _catalog("liger_flce_weighted_none")
    assert "sets the environment" in str(warm_allowed(flce, "cpu", False))
    writes = {"item": "import os\nos.environ['A'] = '1'\n",
              "from": "from os import environ\nenviron['A'] = '1'\n",
              "del": "import os\ndel os.environ['A']\n",
              "setdefault": "import os\nos.environ.setdefault('A', '1')\n",
              "update": "import os\nos.environ.update(A='1')\n",
              "putenv": "import os\nos.putenv('A', '1')\n",
              "monkeypatch": "def t(monkeypatch):\n    monkeypatch.setenv('A', '1')\n",
              "unparsable": "def (:\n"}
    reads = {"get": "import os\nx = os.environ.get('A')\n",
             "item": "import os\nx = os.environ['A']\n",
             "copy": "import os\nenv = dict(os.environ)\nenv['A'] = '1'\n"}
    for name, text in writes.items():
        (tmp_path / f"w_{name}.py").write_text(text)
        assert sets_environment(tmp_path / f"w_{name}.py"), name
    for name, text in reads.items():
        (tmp_path / f"r_{name}.py").write_text(text)
        assert not sets_environment(tmp_path / f"r_{name}.py"), name


def test_a_rank_that_never_imports_torch_starts_fresh(fake_target: FakeTarget) -> None:
    """A team's pure-Python target: the server would only add torch's import."""
    plain = load_registries([multi_registry(fake_target, {"plain": GUARDING})]).get(
        f"{fake_target.entry_id}_plain")
    assert not uses_torch(plain)
    assert "imports torch" in str(warm_allowed(plain, "cpu", False))
    with_torch = load_registries([multi_registry(fake_target, {
        "torch": "from torch import nn\n" + GUARDING})]).get(f"{fake_target.entry_id}_torch")
    assert uses_torch(with_torch) and warm_allowed(with_torch, "cpu", False) is None
    # megatron-core's reproducers that never import torch themselves: its metadata requires it
    tokenizer = _catalog("mcore_tokenizer_alias_recursion")
    assert "import torch" not in tokenizer.reproducer.read_text()
    assert uses_torch(tokenizer)


def test_the_setting_is_fresh_or_warm_and_nothing_else() -> None:
    assert ToolSettings.from_env({}).rank_start == "fresh"
    assert ToolSettings.from_env({"PATCHLANE_RANK_START": " Warm "}).rank_start == "warm"
    with pytest.raises(ControlsError, match=r"PATCHLANE_RANK_START='hot': expected one of "
                                            r"\('fresh', 'warm'\)"):
        ToolSettings.from_env({"PATCHLANE_RANK_START": "hot"})


def test_an_entry_is_held_to_the_rules_of_the_entries_it_depends_on() -> None:
    sentinel = _catalog("mcore_rerun_sentinel")
    on_config = dataclasses.replace(sentinel, depends_on=("dynamo_recompile_limit",))
    assert warm_allowed(on_config, "cpu", False) == (
        "dynamo_recompile_limit, which it depends on, is a config entry, decided by config: "
        "it may set or check what torch reads when it is imported")
    on_unknown = dataclasses.replace(sentinel, depends_on=("no_such_entry",))
    assert "(no_such_entry) are not loaded here" in str(warm_allowed(on_unknown, "cpu", False))
    on_torch = dataclasses.replace(sentinel, target=sentinel.target._replace(module="torch.nn"))
    assert warm_allowed(on_torch, "cpu", False) == (
        "the entry targets torch, which a warm rank imported before patchlane")


def test_a_warm_rank_leaves_nothing_running_and_says_how_it_started(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """What a warm rank forks (no exec: its environment in /proc is the server's, so the
    sweep's token does not find it) ends with the rank's session."""
    pidfile = tmp_path / "grandchild.pid"
    source = "import torch\n" + HEAD + ("def run(ctx):\n    import os, time\n    pid = os.fork()\n"
                     "    if pid == 0:\n        time.sleep(600)\n        os._exit(0)\n"
                     f"    open({str(pidfile)!r}, 'w').write(str(pid))\n"
                     "    import {module} as t\n"
                     "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    entry = load_registries([multi_registry(fake_target, {"forks": source})]).get(
        f"{fake_target.entry_id}_forks")
    result = run_case(entry, Mode.WITH, env=env_for(fake_target), start=RankStart.WARM,
                      workdir=tmp_path / "case")
    assert result.outcome.value == "pass", result.message
    assert result.rank_start["rank_start"] == "warm", result.rank_start
    assert result.rank_start["preloaded"][0] == "torch"
    grandchild = int(pidfile.read_text())
    for _ in range(100):  # the server kills the rank's session as soon as it reaped the rank
        if not Path(f"/proc/{grandchild}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{grandchild}").exists(), f"pid {grandchild} outlived its case"


# A reproducer whose rank spawns processes as megatron-core's checkpoint writer does (a
# spawn-context Manager) and as a job may (a Process): each child reports, from a script
# written beside the case, what was imported before it ran and what it was given.
SPAWNS = "import torch\n" + HEAD + """def run(ctx):
    import json, multiprocessing, os, runpy, signal, sys, time
    spawn = multiprocessing.get_context("spawn")
    probe = ctx.workdir / "probe.py"
    probe.write_text(
        "import json, os, sys\\n"
        "json.dump({'torch_before': 'torch' in sys.modules, 'pid': os.getpid(),\\n"
        "           'token': os.environ.get('PATCHLANE_CASE_TOKEN'), 'argv': sys.argv},\\n"
        "          open(sys.argv[-1] + '.json', 'w'))\\n"
        "if sys.argv[-1].endswith('sleeper'):\\n"
        "    import time; time.sleep(600)\\n")
    child = spawn.Process(target=runpy.run_path, args=(str(probe),))
    sys.argv.append(str(ctx.workdir / "child"))
    child.start(); child.join(60)
    assert child.exitcode == 0, ("child", child.exitcode)
    with spawn.Manager() as manager:
        queue = manager.Queue()
        queue.put({"weights": [1.0, 2.0]})
        assert queue.get() == {"weights": [1.0, 2.0]}
    three = spawn.Process(target=sys.exit, args=(3,))
    three.start(); three.join(60)
    assert three.exitcode == 3, ("exit", three.exitcode)
    slow = spawn.Process(target=time.sleep, args=(60,))
    slow.start(); time.sleep(0.5); slow.terminate(); slow.join(60)
    assert slow.exitcode == -signal.SIGTERM, ("terminate", slow.exitcode)
    sys.argv[-1] = str(ctx.workdir / "sleeper")
    sleeper = spawn.Process(target=runpy.run_path, args=(str(probe),), daemon=True)
    sleeper.start()
    for _ in range(600):
        if (ctx.workdir / "sleeper.json").exists():
            break
        time.sleep(0.05)
    import {module} as t
    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'
"""


@pytest.mark.parametrize("start", list(RankStart), ids=[s.value for s in RankStart])
def test_what_a_warm_rank_spawns_starts_warm_and_ends_as_a_fresh_ranks_would(
        fake_target: FakeTarget, tmp_path: Path, start: RankStart) -> None:
    """A process a warm rank spawns (megatron-core's checkpoint writer starts a Manager, whose
    server imports torch to read each write result) is forked from the rank's server too: torch
    is there before it runs. It gets the rank's environment and its command, its exit code and
    a terminate read as a spawned interpreter's, a Manager works, and what it leaves running
    ends with the case. A fresh rank's children start fresh: the same case, the same outcome."""
    entry = load_registries([multi_registry(fake_target, {"spawns": SPAWNS})]).get(
        f"{fake_target.entry_id}_spawns")
    assert warm_allowed(entry, "cpu", False) is None
    result = run_case(entry, Mode.WITH, env=env_for(fake_target), start=start,
                      workdir=tmp_path)
    case = tmp_path / "with-cpu-ws1"
    assert result.outcome.value == "pass", (result.message, result.stderr_tail)
    assert result.rank_start["rank_start"] == start.value, result.rank_start
    child = json.loads((case / "child.json").read_text())
    assert child["torch_before"] is (start is RankStart.WARM), child
    assert child["argv"][-1] == str(case / "child")  # the rank's argv, as spawn hands it on
    assert child["token"] and child["token"] == json.loads(
        (case / "sleeper.json").read_text())["token"]  # the rank's environment
    sleeper = json.loads((case / "sleeper.json").read_text())["pid"]
    for _ in range(100):
        if not Path(f"/proc/{sleeper}").exists():
            break
        time.sleep(0.05)
    assert not Path(f"/proc/{sleeper}").exists(), f"pid {sleeper} outlived its case"


def test_a_spawned_process_gets_its_descriptors_at_their_numbers_and_foreign_flags_start_fresh(
        ) -> None:
    """The server's side of a spawn, in this process: descriptors received at numbers that
    collide with their targets still land where the shim had them; a spawn command with flags
    other than the server's is refused (its shim then starts the interpreter itself)."""
    import subprocess

    from patchlane.sweep import warm_server

    pipes = [os.pipe() for _ in range(3)]
    reads = [r for r, _ in pipes]
    # a rotation: each read end goes where the next one is now (placed one by one with
    # dup2, the first would close the second before it moved)
    targets = [*reads[1:], reads[0]]
    warm_server._place(reads, targets)
    for (_, write), target in zip(pipes, targets, strict=True):
        os.write(write, f"{target}".encode())
    for (_, write), target in zip(pipes, targets, strict=True):
        assert os.read(target, 16) == f"{target}".encode()
        os.close(target)
        os.close(write)
    with pytest.raises(ValueError, match="2 descriptors received for 1 numbers"):
        warm_server._place([0, 1], [5])
    mine = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    assert warm_server._refusal({"argv": []}) is None
    assert warm_server._refusal({"spawn": {"flags": mine, "code": "", "args": []}}) is None
    assert "are not this server's" in str(warm_server._refusal(
        {"spawn": {"flags": [*mine, "-X", "dev"], "code": "", "args": []}}))


def test_a_server_that_died_is_replaced(fake_target: FakeTarget) -> None:
    """A server killed between cases (the OOM killer, a stray signal) is started again for the
    next warm case, which passes warm: a dead server never turns later cases into errors."""
    from patchlane.sweep import rank_start

    entry = load_registries([multi_registry(fake_target, {"good": "import torch\n" + GUARDING})]
                            ).get(f"{fake_target.entry_id}_good")
    env = env_for(fake_target)
    first = run_case(entry, Mode.WITH, env=env, start=RankStart.WARM)
    assert first.outcome.value == "pass" and first.rank_start["rank_start"] == "warm"
    servers = list(rank_start._SERVERS.values())
    assert servers
    for server in servers:
        server.proc.kill()
        server.proc.wait()
    second = run_case(entry, Mode.WITH, env=env, start=RankStart.WARM)
    assert second.outcome.value == "pass", second.message
    assert second.rank_start["rank_start"] == "warm"


# What a rank's provenance reads of torch, and nothing else: it imports at once.
STAND_IN_TORCH = """__version__ = "0+stand-in"
class version:
    cuda = None
class cuda:
    @staticmethod
    def is_available():
        return False
"""


def torch_first(folder: Path, env: dict[str, str], source: str = STAND_IN_TORCH
                ) -> dict[str, str]:
    """``env`` with a stand-in torch package (``source``) in ``folder``, first on the path: the
    framework's own mechanics, never evidence."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text(source)
    return {**env, "PYTHONPATH": os.pathsep.join([str(folder), env["PYTHONPATH"]])}


def test_a_case_that_names_no_start_follows_the_setting(
        fake_target: FakeTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``PATCHLANE_RANK_START`` is how every run of a reproducer's ranks starts when its caller
    names no start (``draft --verify``, ``reproduce``, a bisect step), as for ``patchlane
    sweep``: warm where allowed when set so, fresh when unset."""
    entry = load_registries([multi_registry(fake_target, {"good": "import torch\n" + GUARDING})]
                            ).get(f"{fake_target.entry_id}_good")
    env = torch_first(tmp_path, env_for(fake_target))
    for setting, started in (("warm", "warm"), ("fresh", "fresh"), (None, "fresh")):
        if setting is None:
            monkeypatch.delenv("PATCHLANE_RANK_START", raising=False)
        else:
            monkeypatch.setenv("PATCHLANE_RANK_START", setting)
        result = run_case(entry, Mode.WITH, env=env)
        assert result.outcome.value == "pass", result.message
        assert result.rank_start["rank_start"] == started, (setting, result.rank_start)


def test_a_process_keeps_two_servers_and_never_stops_one_with_a_case_running(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """Three environments (each its own stand-in torch first on the path: a server per
    environment, as ``draft --verify`` makes one per patched copy of a release). The first is
    held by a case that still runs while the other two sweep: the third environment's server
    stops the second's (idle, least recently used), never the first's, which still serves."""
    from patchlane.sweep import rank_start

    rank_start.shutdown()
    entry = load_registries([multi_registry(fake_target, {"good": "import torch\n" + GUARDING})]
                            ).get(f"{fake_target.entry_id}_good")
    envs = {name: torch_first(tmp_path / name, env_for(fake_target)) for name in ("a", "b", "c")}

    def server(name: str) -> rank_start._Server | None:
        return rank_start._SERVERS.get(rank_start._server_key(envs[name]))

    assert rank_start.KEPT_SERVERS == 2
    with rank_start.rank_starts(envs["a"], RankStart.WARM) as command:
        held = server("a")
        assert held is not None and command(["--x"])[1]["rank_start"] == "warm"
        for name in ("b", "c"):
            result = run_case(entry, Mode.WITH, env=envs[name], start=RankStart.WARM)
            assert result.outcome.value == "pass", result.message
            assert result.rank_start["rank_start"] == "warm"
        second = [s for s in rank_start._SERVERS.values() if s is not held]
        assert len(rank_start._SERVERS) == 2 and server("b") is None and server("c") in second
        assert held.proc.poll() is None  # the held one runs on, and still serves a case
        again = run_case(entry, Mode.WITH, env=envs["a"], start=RankStart.WARM)
        assert again.outcome.value == "pass" and server("a") is held, again.message
    assert held.cases == 0
    rank_start.shutdown()


def test_the_test_pytest_runs_parts_no_servers() -> None:
    """pytest names the test it runs in ``PYTEST_CURRENT_TEST``, anew for each test: a server
    serves the next test's cases (a suite's sweeps share one), but not a process where it is
    unset."""
    from patchlane.sweep import rank_start

    base = {"PATH": "/usr/bin", "PYTHONPATH": "/x"}
    key = rank_start._server_key({**base, "PYTEST_CURRENT_TEST": "t.py::a (call)"})
    assert key == rank_start._server_key({**base, "PYTEST_CURRENT_TEST": "t.py::b (setup)"})
    assert key != rank_start._server_key(base)


def test_a_child_sweep_forks_from_the_server_its_parent_lent(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """A process that starts child sweeps (a matrix set's, the radar's) lends them its server:
    a child's warm case forks from it (the rank's parent is that server), and the server is
    kept for the next child. A child in another environment starts a server of its own, and a
    child whose folders first on the path hold torch (a set's own torch build) is lent none."""
    import subprocess
    import sys

    from patchlane.sweep import rank_start

    rank_start.shutdown()
    source = HEAD + ("import os, pathlib\n\ndef run(ctx):\n    import torch, {module} as t\n"
                     "    pathlib.Path(os.environ['RECORD_TO']).write_text(str(os.getppid()))\n"
                     "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    entry_id = f"{fake_target.entry_id}_good"
    multi_registry(fake_target, {"good": source})
    record = tmp_path / "parent.txt"
    env = {**torch_first(tmp_path / "torch", env_for(fake_target)), "RECORD_TO": str(record)}

    def child_rank_parent(child_env: dict[str, str]) -> int:
        record.unlink(missing_ok=True)
        out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "reproduce", entry_id],
                             env={**child_env, "PATCHLANE_RANK_START": "warm"},
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        return int(record.read_text())

    pids = []
    for _ in range(2):
        with rank_start.lend(env) as lent:
            pid = json.loads(lent[rank_start.LENT])["pid"]
            assert child_rank_parent({**env, **lent}) == pid
            # another environment: a server of the child's own, never the lent one
            assert child_rank_parent({**env, **lent, "ANOTHER": "1"}) != pid
        pids.append(pid)
    assert pids[0] == pids[1]  # kept between children
    with rank_start.lend(env, [str(tmp_path / "torch")]) as lent:
        assert lent == {}
    rank_start.shutdown()


def test_a_server_that_cannot_preload_torch_starts_ranks_fresh_and_says_why(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """A stack without torch (here a torch that fails to import, a stand-in for the harness's
    own mechanics): the case runs, fresh, and its record says why it was not warm."""
    # it names torch (so a warm start is asked of the server) but never imports it
    uses = "def unused():\n    import torch\n\n\n"
    entry = load_registries([multi_registry(fake_target, {"good": uses + GUARDING})]).get(
        f"{fake_target.entry_id}_good")
    env = torch_first(tmp_path, env_for(fake_target),
                      "raise ImportError('no torch on this stack')\n")
    result = run_case(entry, Mode.WITH, env=env, start=RankStart.WARM)
    assert result.outcome.value == "pass", result.message
    assert result.rank_start["rank_start"] == "fresh"
    assert "could not preload torch: ImportError: no torch on this stack" in \
        result.rank_start["warm_refused"]


def _outcomes(run_dir: Path) -> dict[tuple[str, str, int], tuple[str, str]]:
    """Per case (entry, mode, world size): its outcome and the first line of its message."""
    found = {}
    for receipt in (run_dir / "receipts").glob("*.json"):
        data = json.loads(receipt.read_text())
        key = (data["entry_id"], data["mode"], data["world_size"])
        found[key] = (data["outcome"], (data["message"] or "").splitlines()[0][:120]
                      if data["message"] else "")
    return found


@pytest.mark.upstream
@pytest.mark.skipif(megatron_version() is None, reason="megatron-core is not installed")
def test_a_warm_start_gives_real_cases_the_outcome_a_fresh_start_gives(
        tmp_path: Path) -> None:
    """On the installed megatron-core (0.16.1 on the 3.11 lane, 0.19.2 on the 3.12 lane), three
    entries its gates admit (the first with two ranks: a rendezvous, a checkpoint, a spawned
    process), swept once fresh and once warm: each case ends the same, with the same words,
    and the receipts say which start they had. What lets the suite's sweeps run warm."""
    version = megatron_version()
    registry = startup.current().registry
    admitted = [e for e in registry.entries if e.target.distribution == "megatron-core"
                and e.applies_to is not None and e.applies_to.contains(version, prereleases=True)
                and e.reproducer is not None and warm_allowed(e, "cpu", False) is None]
    two = [e for e in admitted if 2 in read_spec(e).world_sizes]
    one = [e for e in admitted if 2 not in read_spec(e).world_sizes]
    assert two and len(one) >= 2, [e.id for e in admitted]
    only = [e.id for e in (two[0], *one[:2])]
    runs, codes = {}, {}
    for start in ("fresh", "warm"):
        _, codes[start] = sweep_releases(f"{start} start", [], only, cache=CACHE,
                                         run_dir=tmp_path / start, jobs=2, rank_start=start)
        runs[start] = _outcomes(tmp_path / start)
    assert runs["fresh"] and runs["fresh"] == runs["warm"]
    assert codes["fresh"] == codes["warm"]
    for start in ("fresh", "warm"):
        assert {json.loads(p.read_text())["provenance"]["rank_start"]
                for p in (tmp_path / start / "receipts").glob("*.json")} == {start}


def test_a_folder_that_holds_nothing_the_server_imported_shares_its_server(
        fake_target: FakeTarget, tmp_path: Path) -> None:
    """A case whose ``PYTHONPATH`` adds or drops folders of modules the server never imported
    (a changed copy of a release or a bisect step's release; here also this checkout, which the
    editable install's ``.pth`` file puts on the path too) forks from the same server, with the
    ``sys.path`` a fresh rank has, whole; a folder that holds a module the server imported, or
    a distribution with entry points, gets a server of its own."""
    import shutil
    import subprocess
    import sys

    import typing_extensions

    from patchlane.sweep import rank_start

    rank_start.shutdown()
    seen = HEAD + ("def run(ctx):\n    import sys, torch, {module} as t\n"
                   "    assert sys.path[1:] == PATH, (sys.path[1:], PATH)\n"
                   "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    base = env_for(fake_target)
    folders = {name: tmp_path / name for name in ("extra", "shadow", "points")}
    for folder in folders.values():
        folder.mkdir()
    (folders["extra"] / "extra_here.py").write_text("WHERE = __file__\n")
    shutil.copy(typing_extensions.__file__, folders["shadow"])  # the server imported it
    (folders["points"] / "x-1.0.dist-info").mkdir()
    (folders["points"] / "x-1.0.dist-info" / "entry_points.txt").write_text("[x]\ny = z\n")
    envs = {"rooted": {**base, "PYTHONPATH": os.pathsep.join([str(ROOT), base["PYTHONPATH"]])},
            "base": base, **{name: {**base, "PYTHONPATH": os.pathsep.join(
                [str(folder), base["PYTHONPATH"]])} for name, folder in folders.items()}}
    sources = {}
    for name, env in envs.items():
        # what a fresh interpreter in that environment has after its first entry
        fresh = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps("
                                "sys.path[1:]))"], env=env, capture_output=True, text=True,
                               timeout=120, check=True)
        sources[name] = f"PATH = {json.loads(fresh.stdout)!r}\n" + seen
        if name == "extra":
            sources[name] = sources[name].replace("    assert t.", "    import extra_here\n"
                                                  "    assert t.")
    registry = load_registries([multi_registry(fake_target, sources)])
    entries = {name: registry.get(f"{fake_target.entry_id}_{name}") for name in envs}

    def run(name: str) -> None:
        result = run_case(entries[name], Mode.WITH, env=envs[name], start=RankStart.WARM)
        assert result.outcome.value == "pass", result.message
        assert result.rank_start["rank_start"] == "warm", result.rank_start

    run("rooted")
    (first,) = rank_start._SERVERS.values()
    for name in ("base", "extra"):  # this checkout dropped, then a folder added as well
        run(name)
        assert list(rank_start._SERVERS.values()) == [first], name  # served by the first
    run("shadow")
    assert rank_start._server_key(envs["shadow"]) in rank_start._SERVERS  # a server of its own
    # entry points, or a folder relative to the working directory: it could hold anything
    assert first.serves(envs["extra"]) and not first.serves(envs["points"])
    assert not first.serves({**base, "PYTHONPATH": "relative" + os.pathsep + base["PYTHONPATH"]})
    rank_start.shutdown()


@pytest.mark.parametrize("start", list(RankStart), ids=[s.value for s in RankStart])
def test_a_rank_ends_as_an_interpreter_does(fake_target: FakeTarget, tmp_path: Path,
                                            start: RankStart) -> None:
    """A warm rank's end is a fresh one's: the threads it started that are not daemons are
    joined and its exit functions run (a reproducer's, torch's, multiprocessing's), before the
    case reads how it ended."""
    out = tmp_path / start.value
    source = HEAD + (
        "import atexit, threading, time\nimport torch\n\n"
        "def run(ctx):\n"
        f"    atexit.register(lambda: open({str(out)!r} + '.atexit', 'w').write('ran'))\n"
        f"    threading.Thread(target=lambda: (time.sleep(0.3), open({str(out)!r} + '.thread', "
        "'w').write('ended'))).start()\n"
        "    import {module} as t\n"
        "    assert t.Greeter().greet('a') == 'patched hello a', 'bug shows'\n")
    entry = load_registries([multi_registry(fake_target, {"ends": source})]).get(
        f"{fake_target.entry_id}_ends")
    result = run_case(entry, Mode.WITH, env=env_for(fake_target), start=start)
    assert result.outcome.value == "pass", result.message
    assert result.rank_start["rank_start"] == start.value, result.rank_start
    assert Path(f"{out}.atexit").read_text() == "ran"
    assert Path(f"{out}.thread").read_text() == "ended"


def test_what_keeps_a_python_path_from_sharing_a_server(tmp_path: Path) -> None:
    """``shadowing``, the rule both the warm-rank server and the suite's warm python apply: a
    folder only one side has that holds a module the server imported, a relative entry, or the
    folders both have in another order; a folder of other modules, or one not there, is fine."""
    from patchlane.sweep.rank_start import shadowing

    a, b, held = (str(tmp_path / name) for name in ("a", "b", "held"))
    for folder in (a, b, held):
        Path(folder).mkdir()
    (Path(a) / "other.py").write_text("")
    (Path(held) / "json.py").write_text("")
    modules = frozenset({"json"})
    assert shadowing(b, os.pathsep.join([a, b, str(tmp_path / "absent")]), modules) == []
    assert shadowing(b, os.pathsep.join([held, b]), modules) == [held]
    assert shadowing(b, os.pathsep.join(["relative", b]), modules) == ["relative"]
    assert shadowing(os.pathsep.join([a, b]), os.pathsep.join([b, a]), modules) == [
        "the folders both have, in another order"]

"""Every fingerprint the registry records per release (`fingerprint.releases`) was seen at run
time: the release is installed on this interpreter, its target module really imported, and the
fingerprint computed from the live objects. Each recorded release must be in a matrix set, so
between the Python 3.11 and 3.12 suites every value is checked by a run, never only read."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from patchlane import startup
from patchlane.releases.matrix import load_matrix

from .conftest import ROOT, release_dir

pytestmark = [pytest.mark.upstream, pytest.mark.slow, pytest.mark.independent]

SETS = load_matrix(ROOT / "matrix.yaml")
ENTRIES = [e for e in startup.current().registry.entries
           if e.fingerprint is not None and e.fingerprint.releases]
# (distribution, release) -> entries recording a fingerprint for it
RECORDED: dict[tuple[str, str], list[str]] = defaultdict(list)
for _entry in ENTRIES:
    assert _entry.fingerprint is not None
    for _release in _entry.fingerprint.releases:
        RECORDED[(_entry.target.distribution, _release)].append(_entry.id)


def _sets_for(distribution: str, release: str) -> list[str]:
    return [s.name for s in SETS if f"{distribution}=={release}" in s.install]


def test_every_recorded_release_runs_in_some_matrix_set() -> None:
    orphans = [f"{d}=={r} ({', '.join(ids)})" for (d, r), ids in RECORDED.items()
               if not _sets_for(d, r)]
    assert not orphans, ("fingerprints recorded for releases no matrix set runs (read, not "
                         f"run): {orphans}; add a set to matrix.yaml or drop the value")


# One interpreter per worker imports torch once (its import is most of a release's run, and the
# same for every release: each release is installed without dependencies, so torch comes from
# this environment either way); each release then runs in a child forked from it, which puts
# the release where PYTHONPATH would have (after the script's own entry), imports the target
# module afresh and computes the fingerprint from the live objects. Nothing of patchlane's is
# applied there (PATCHLANE_DEFAULT_REGISTRY=0): the upstream code as shipped.
_SERVER = r"""
import importlib, json, os, sys, traceback, warnings
warnings.simplefilter("ignore")
import torch  # noqa: F401  (what each release's import would begin with)
from patchlane.installed.fingerprint import compute
for line in sys.stdin:
    path, jobs = json.loads(line)
    # the child's answer comes back on a pipe of its own, so one line always goes out per
    # release: the answer, or how the child ended when it died before answering
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            sys.path.insert(1, path)
            out = {}
            for entry_id, module_name, qualnames in jobs:
                module = importlib.import_module(module_name)
                out[entry_id] = [compute(module, qualnames), module.__file__]
            answer = {"seen": out}
        except BaseException:
            answer = {"error": traceback.format_exc()}
        with os.fdopen(write, "w") as fh:
            fh.write(json.dumps(answer))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        text = fh.read()
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0 or not text:
        text = json.dumps({"error": f"the child for {path} ended with {status} unanswered"})
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
"""


class _ForkedImports:
    """The per-worker interpreter above, started by the first release asked of it (a worker
    whose releases all run on the other interpreter starts none)."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def fingerprints(self, path: Path, jobs: list[list[object]]) -> dict[str, list[str]]:
        if self.proc is None:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
            env["PATCHLANE_DEFAULT_REGISTRY"] = "0"  # nothing applied: upstream as shipped
            self.proc = subprocess.Popen([sys.executable, "-c", _SERVER], env=env, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps([str(path), jobs]) + "\n")
        self.proc.stdin.flush()
        # as the interpreter per release had: a release that hangs fails after 600 s
        ready, _, _ = select.select([self.proc.stdout], [], [], 600)
        assert ready, f"no answer for {path} in 600 s"
        line = self.proc.stdout.readline()
        assert line, f"the forking interpreter ended (exit code {self.proc.wait()})"
        answer = json.loads(line)
        assert "error" not in answer, answer.get("error")
        seen: dict[str, list[str]] = answer["seen"]
        return seen

    def close(self) -> None:
        if self.proc is None:
            return
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def forked() -> Iterator[_ForkedImports]:
    server = _ForkedImports()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("key", sorted(RECORDED), ids=[f"{d}-{r}" for d, r in sorted(RECORDED)])
def test_recorded_fingerprint_is_what_the_release_has_at_run_time(
        key: tuple[str, str], forked: _ForkedImports) -> None:
    distribution, release = key
    here = [s for s in SETS if f"{distribution}=={release}" in s.install and s.runs_here()]
    if not here:
        pythons = sorted({p for s in SETS if f"{distribution}=={release}" in s.install
                          for p in s.python})
        pytest.skip(f"{distribution} {release} runs on Python {pythons} (the other "
                    "interpreter's suite)")
    path = release_dir(distribution, release)
    jobs = []
    for entry in ENTRIES:
        if entry.id in RECORDED[key]:
            assert entry.fingerprint is not None and entry.target.qualname is not None
            jobs.append([entry.id, entry.target.module,
                         list(entry.fingerprint.qualnames(entry.target.qualname))])
    seen = forked.fingerprints(path, jobs)
    for entry in ENTRIES:
        if entry.id not in seen:
            continue
        assert entry.fingerprint is not None
        value, file = seen[entry.id]
        assert str(file).startswith(str(path)), f"imported {file}, not the release under test"
        assert value == entry.fingerprint.releases[release], (
            f"{entry.id} on {distribution} {release}: runs as {value}, registry records "
            f"{entry.fingerprint.releases[release]}")

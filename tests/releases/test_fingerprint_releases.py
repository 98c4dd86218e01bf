"""Every fingerprint the registry records per release (`fingerprint.releases`) was seen at run
time: the release is installed on this interpreter, its target module really imported, and the
fingerprint computed from the live objects. Each recorded release must be in a matrix set, so
between the Python 3.11 and 3.12 suites every value is checked by a run, never only read."""

from __future__ import annotations

import json
import os
from collections import defaultdict

import pytest

from patchlane import startup
from patchlane.releases.matrix import load_matrix

from .conftest import ROOT, release_dir
from .warm_python import WarmPython

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


# Each release in an interpreter of its own, forked from the suite's warm python
# (warm_python.py: torch is the same for every release, each installed without dependencies),
# with the release on PYTHONPATH: the target module imported afresh from it, the fingerprint
# computed from the live objects. Nothing of patchlane's is applied there
# (PATCHLANE_DEFAULT_REGISTRY=0): the upstream code as shipped.
_SEEN = r"""
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
from patchlane.installed.fingerprint import compute
out = {}
for entry_id, module_name, qualnames in json.loads(sys.argv[1]):
    module = importlib.import_module(module_name)
    out[entry_id] = [compute(module, qualnames), module.__file__]
print(json.dumps(out))
"""


@pytest.mark.parametrize("key", sorted(RECORDED), ids=[f"{d}-{r}" for d, r in sorted(RECORDED)])
def test_recorded_fingerprint_is_what_the_release_has_at_run_time(
        key: tuple[str, str], warm_python: WarmPython) -> None:
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
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env["PATCHLANE_DEFAULT_REGISTRY"] = "0"  # nothing applied: upstream as shipped
    env["PYTHONPATH"] = os.pathsep.join([str(path), *filter(None, [env.get("PYTHONPATH")])])
    out = warm_python.run(["-c", _SEEN, json.dumps(jobs)], env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    for entry in ENTRIES:
        if entry.id not in seen:
            continue
        assert entry.fingerprint is not None
        value, file = seen[entry.id]
        assert str(file).startswith(str(path)), f"imported {file}, not the release under test"
        assert value == entry.fingerprint.releases[release], (
            f"{entry.id} on {distribution} {release}: runs as {value}, registry records "
            f"{entry.fingerprint.releases[release]}")

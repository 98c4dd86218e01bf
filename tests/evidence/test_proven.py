"""Proven here? (patchlane.deciding.proof): whether each applied entry was proven by a passing
run on the job's own stack, through `patchlane status --evidence`, `patchlane.report()` with
PATCHLANE_EVIDENCE, each rank's `patchlane run --evidence` line, and PATCHLANE_REQUIRE_EVIDENCE.

The evidence is real: liger_flce_weighted_none swept on this interpreter's venv (CPU, the
Triton interpreter) is this stack's proof; the same sweep on the other interpreter's venv
(another Python minor, and there another torch build) is a proof elsewhere; the entries applied
here and never swept are never run. The tests named ``mechanics`` edit copies of those real
receipts to exercise the reading itself (nearest class, bounds, unreadable records): they are
evidence of the tool's mechanics, never of a patch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from patchlane.common.errors import ControlsError
from patchlane.deciding.controls import Controls
from patchlane.deciding.proof import (
    NEVER_RUN,
    PROVEN_ELSEWHERE,
    PROVEN_HERE,
    REVOKED,
    STALE,
    Evidence,
    receipt_stack,
)
from patchlane.runs.manifest import receipt_digest

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "liger_flce_weighted_none"
TARGET = "liger_kernel.ops.fused_linear_cross_entropy"
WITH = f"receipts/{ENTRY}--cpu--ws1--with.json"
MINOR = f"{sys.version_info.major}.{sys.version_info.minor}"

try:
    LIGER: str | None = metadata.version("liger-kernel")
except metadata.PackageNotFoundError:
    LIGER = None

pytestmark = [pytest.mark.slow]
real = [pytest.mark.upstream,
        pytest.mark.skipif(LIGER is None, reason="liger-kernel is not installed")]


def other_python() -> tuple[Path, str] | None:
    """The other interpreter's venv beside this one (scripts/_venv.sh: .venv for 3.11,
    .venv312 for 3.12), with its minor; None when there is none."""
    for base in dict.fromkeys([ROOT, Path(sys.prefix).parent]):
        for name in (".venv", ".venv312"):
            python = base / name / "bin" / "python"
            if not python.is_file():
                continue
            minor = subprocess.run(
                [str(python), "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
                capture_output=True, text=True, timeout=60).stdout.strip()
            if minor and minor != MINOR:
                return python, minor
    return None


def env(**extra: str) -> dict[str, str]:
    """This environment without any PATCHLANE_* switch, this checkout first on the path."""
    out = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), out.get("PYTHONPATH")) if p)
    out.update(extra)
    return out


def cli(*args: str, python: str = sys.executable, **extra: str
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([python, "-m", "patchlane.cli.main", *args], capture_output=True,
                          text=True, env=env(**extra), cwd=ROOT, timeout=600)


def sweep(python: str, run_dir: Path) -> Path:
    out = cli("sweep", "--only", ENTRY, "--lane", "cpu", "--run-dir", str(run_dir), "--quiet",
              python=python)
    assert out.returncode == 0, out.stdout + out.stderr  # guarding: exit 0
    index = json.loads((run_dir / "index.json").read_text())
    assert [r["verdict"] for r in index["rows"]] == ["guarding"], index["rows"]
    return run_dir


@dataclass(frozen=True)
class Swept:
    here: Path
    """A runs root holding this interpreter's sweep."""
    here_run: Path
    other: Path | None
    """A runs root holding only the other interpreter's sweep (None: no other venv here)."""
    other_run: Path | None
    other_minor: str | None
    both: Path
    """Both sweeps under one runs root."""


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Swept:
    if LIGER is None:
        pytest.skip("liger-kernel is not installed")
    base = tmp_path_factory.mktemp("proven")
    here_run = sweep(sys.executable, base / "here" / "run-here")
    both = base / "both"
    both.mkdir()
    shutil.copytree(here_run, both / here_run.name)
    other, other_run, other_minor = None, None, None
    found = other_python()
    if found is not None:
        other_run = sweep(str(found[0]), base / "other" / "run-other")
        other, other_minor = other_run.parent, found[1]
        shutil.copytree(other_run, both / other_run.name)
    return Swept(here_run.parent, here_run, other, other_run, other_minor, both)


def need_other(swept: Swept) -> tuple[Path, Path, str]:
    if swept.other is None or swept.other_run is None or swept.other_minor is None:
        pytest.skip("no venv of another Python interpreter beside this one (.venv / .venv312)")
    return swept.other, swept.other_run, swept.other_minor


def entries(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in report["entries"]}


# -- status --evidence: the three answers, from real sweeps ------------------------------------

@pytest.mark.upstream
def test_status_evidence_answers_proven_here_elsewhere_and_never_run(swept: Swept) -> None:
    out = cli("status", "--json", "--evidence", str(swept.both))
    assert out.returncode == 0, out.stderr
    # megatron.training (0.19) puts a stdout handler on the root logger when status imports it,
    # so patchlane's INFO lines can come first: the JSON follows them
    report = json.loads(out.stdout[out.stdout.index("{\n"):])
    assert report["evidence"]["roots"] == [str(swept.both)]
    assert report["evidence"]["runs_read"] == (2 if swept.other else 1)
    assert report["evidence"]["unreadable"] == []
    liger = entries(report)[ENTRY]
    assert liger["applied"] is True
    proof = liger["evidence"]
    assert proof["answer"] == PROVEN_HERE, proof
    assert proof["proof"]["run_id"] == swept.here_run.name  # not the other class's run
    assert proof["here"]["python"] == MINOR and proof["here"]["arch"] == "cpu"
    assert proof["here"]["distribution"] == "liger-kernel" and proof["here"]["release"] == LIGER
    assert proof["proof"]["receipt"] == str(swept.both / swept.here_run.name / WITH)
    # every other applied entry was never swept: never run; an entry not applied: no answer
    others = [e for e in report["entries"] if e["applied"] and e["id"] != ENTRY]
    assert others, "no other applied entry on this venv to be never run"
    for entry in others:
        assert entry["evidence"]["answer"] == NEVER_RUN, entry
        assert entry["evidence"]["proof"] is None
    assert all(e["evidence"] is None for e in report["entries"] if not e["applied"])

    other, other_run, other_minor = need_other(swept)
    text = cli("status", "--evidence", str(other))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    header = next(line for line in lines if line.startswith("ID "))
    assert "EVIDENCE" in header.split()
    row = next(line for line in lines if line.startswith(ENTRY + " "))
    assert PROVEN_ELSEWHERE in row
    detail = next(line for line in lines if line.strip().startswith(f"{ENTRY}: "))
    assert f"{PROVEN_ELSEWHERE}: nearest python {other_minor} (here {MINOR})" in detail
    assert f"(run {other_run.name})" in detail
    assert f"evidence: 1 run(s) read under {other}" in text.stdout
    assert f"{NEVER_RUN}: no verified passing run under {other}" in text.stdout


def test_status_evidence_of_no_directory_is_a_usage_error(tmp_path: Path) -> None:
    out = cli("status", "--no-import", "--evidence", str(tmp_path / "nope"))
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0  # one line
    assert f"--evidence {tmp_path / 'nope'}: no such directory; fix:" in out.stderr


# -- report() with PATCHLANE_EVIDENCE ----------------------------------------------------------

REPORT = (f"import json, patchlane, {TARGET}; r = patchlane.report(); "
          f"print(json.dumps({{'entry': [e for e in r['entries'] if e['id'] == {ENTRY!r}][0], "
          "'evidence': r['evidence']}))")


@pytest.mark.upstream
def test_report_says_whether_each_applied_entry_was_proven_here(swept: Swept) -> None:
    out = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                         env=env(PATCHLANE_EVIDENCE=str(swept.here), PATCHLANE_ONLY=ENTRY),
                         timeout=300)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["entry"]["evidence"]["answer"] == PROVEN_HERE
    assert seen["entry"]["evidence"]["text"].startswith(
        f"{PROVEN_HERE} (run {swept.here_run.name}, cpu ws1)")
    assert seen["evidence"] == {"roots": [str(swept.here)], "runs_read": 1, "not_read": 0,
                                "unreadable": []}
    # not asked for: no answer, nothing read
    plain = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True,
                           env=env(PATCHLANE_ONLY=ENTRY), timeout=300)
    assert plain.returncode == 0, plain.stderr
    seen = json.loads(plain.stdout.splitlines()[-1])
    assert seen["entry"]["evidence"] is None and seen["evidence"] is None


# -- the rank's exit line ----------------------------------------------------------------------

@pytest.mark.upstream
def test_run_evidence_gives_the_answer_in_each_ranks_exit_line(swept: Swept) -> None:
    command = ["--", sys.executable, "-c", f"import {TARGET}"]
    out = cli("run", "--evidence", str(swept.both), *command, RANK="0", PATCHLANE_ONLY=ENTRY)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: rank 0")]
    assert f"applied: {ENTRY} ({PROVEN_HERE})" in line, line

    other, _, other_minor = need_other(swept)
    out = cli("run", "--evidence", str(other), *command, RANK="1", PATCHLANE_ONLY=ENTRY)
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("patchlane run: rank 1")]
    assert f"applied: {ENTRY} ({PROVEN_ELSEWHERE}: nearest python {other_minor} " \
           f"(here {MINOR})" in line, line


def test_run_evidence_of_no_directory_is_refused_before_the_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    out = cli("run", "--evidence", str(tmp_path / "nope"), "--", sys.executable, "-c",
              f"open({str(marker)!r}, 'w')")
    assert out.returncode == 2, out.stderr
    assert f"--evidence {tmp_path / 'nope'}: no such directory" in out.stderr
    assert not marker.exists()


# -- PATCHLANE_REQUIRE_EVIDENCE ----------------------------------------------------------------

REQUIRE = (f"import json, patchlane, {TARGET} as t; "
           "from patchlane.targets.protocol import layers_at; "
           f"e = [e for e in patchlane.report()['entries'] if e['id'] == {ENTRY!r}][0]; "
           "print(json.dumps({'outcome': e['decision']['outcome'], 'applied': e['applied'], "
           "'reason': e['decision']['reason'], "
           "'wrapped': len(list(layers_at(t.LigerFusedLinearCrossEntropyFunction, 'apply', "
           "vars(t.LigerFusedLinearCrossEntropyFunction).get('apply')))) == 1}))")
STRICT = (f"import patchlane\ntry:\n    import {TARGET}\n"
          "except patchlane.StrictModeError as exc:\n    print(int(exc.exit_code), exc)\n")


@pytest.mark.upstream
def test_require_evidence_refuses_an_entry_not_proven_on_this_stack(swept: Swept,
                                                                     tmp_path: Path) -> None:
    def decide(root: Path, code: str = REQUIRE, **extra: str
               ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
            env=env(PATCHLANE_EVIDENCE=str(root), PATCHLANE_REQUIRE_EVIDENCE="1",
                    PATCHLANE_ONLY=ENTRY, **extra))

    proven = decide(swept.both)
    assert proven.returncode == 0, proven.stderr
    assert json.loads(proven.stdout.splitlines()[-1]) | {"reason": ""} == {
        "outcome": "applied", "applied": True, "wrapped": True, "reason": ""}

    # Proven only on another class (the other interpreter), else nowhere: refused, unpatched.
    elsewhere = swept.other or (tmp_path / "empty")
    elsewhere.mkdir(exist_ok=True)
    refused = decide(elsewhere)
    assert refused.returncode == 0, refused.stderr
    seen = json.loads(refused.stdout.splitlines()[-1])
    assert seen["outcome"] == "refused: evidence" and not seen["applied"], seen
    assert seen["wrapped"] is False  # the target stays as upstream ships it
    answer = PROVEN_ELSEWHERE if swept.other else NEVER_RUN
    assert seen["reason"].startswith(f"PATCHLANE_REQUIRE_EVIDENCE=1: {answer}"), seen
    assert f"this stack is python {MINOR}, torch " in seen["reason"]
    assert f"Fix: sweep it on this stack (`patchlane sweep --only {ENTRY} --runs-root " \
           f"{elsewhere}`)" in seen["reason"]
    assert f"{ENTRY} refused: evidence" in refused.stderr  # the WARNING line

    strict = decide(elsewhere, STRICT, PATCHLANE_STRICT="1")
    assert strict.returncode == 0, strict.stderr
    assert strict.stdout.startswith(f"6 patch {ENTRY!r}: refused: evidence: "), strict.stdout


def test_require_evidence_without_a_runs_root_is_a_setting_that_cannot_be_read() -> None:
    with pytest.raises(ControlsError) as refused:
        Controls.from_env({"PATCHLANE_REQUIRE_EVIDENCE": "1"})
    assert str(refused.value).startswith(
        "PATCHLANE_REQUIRE_EVIDENCE='1' needs PATCHLANE_EVIDENCE, which is unset or empty")
    assert "fix: set PATCHLANE_EVIDENCE=RUNS_ROOT" in str(refused.value)
    controls = Controls.from_env({"PATCHLANE_EVIDENCE": f"runs{os.pathsep}/abs/runs",
                                  "PATCHLANE_REQUIRE_EVIDENCE": "yes"})
    assert controls.evidence == (Path.cwd() / "runs", Path("/abs/runs"))
    assert controls.require_evidence
    assert Controls.from_env({}).evidence == () and not Controls.from_env({}).require_evidence


def test_a_sweeps_cases_never_require_or_read_evidence(fake_target: Any) -> None:
    from patchlane.registry import load_registries
    from patchlane.sweep.reproduce import Mode, case_env

    fake_target.write_registry()
    entry = load_registries([fake_target.registry]).get(fake_target.entry_id)
    for mode in Mode:
        env_ = case_env(entry, mode, {"PATCHLANE_EVIDENCE": "/runs",
                                      "PATCHLANE_REQUIRE_EVIDENCE": "1"})
        assert "PATCHLANE_EVIDENCE" not in env_ and "PATCHLANE_REQUIRE_EVIDENCE" not in env_


# -- nothing at `import patchlane` when not asked ----------------------------------------------

LOADED = ("import json, sys, patchlane{extra}; "
          "print(json.dumps(sorted(m for m in sys.modules if m.startswith('patchlane.sweep'))))")


@pytest.mark.parametrize(("extra", "settings"), [
    ("", {}),
    ("; patchlane.report()", {}),  # a report not asked to read the evidence
    ("", {"PATCHLANE_EVIDENCE": "/nonexistent/runs"}),  # configured, asked for by nobody yet
])
def test_import_patchlane_does_not_import_the_evidence(extra: str,
                                                       settings: dict[str, str]) -> None:
    out = subprocess.run([sys.executable, "-c", LOADED.format(extra=extra)], capture_output=True,
                         text=True, env=env(**settings), timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


# -- mechanics: edited copies of the real receipts ---------------------------------------------

def edit_json(path: Path, **changes: Any) -> None:
    data = json.loads(path.read_text())
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for key in parents:
            node = node[key]
        node[last] = value
    path.write_text(json.dumps(data))


def reseal(run: Path) -> None:
    """After edits, make the copy what a sweep of that stack would have written: its receipts
    name the run they are in and the manifest records their SHA-256 (mechanics of classes, not
    a forgery test: those leave the seal broken)."""
    run_id = json.loads((run / "index.json").read_text())["run_id"]
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["run_id"] = run_id
    for case in manifest["cases"].values():
        receipt = run / case["receipt"]
        edit_json(receipt, run_id=run_id)
        case["receipt_sha256"] = receipt_digest(receipt.read_bytes())
    (run / "manifest.json").write_text(json.dumps(manifest))


def copy_run(source: Path, root: Path, name: str, created: str, mtime: float | None = None,
             **receipt_edits: Any) -> Path:
    run = root / name
    shutil.copytree(source, run)
    edit_json(run / "index.json", run_id=name, created=created)
    if receipt_edits:
        edit_json(run / WITH, **receipt_edits)
    reseal(run)
    if mtime is not None:
        os.utime(run / "index.json", (mtime, mtime))
    return run


@pytest.mark.upstream
def test_mechanics_the_nearest_class_is_named_with_how_it_differs(swept: Swept,
                                                                  tmp_path: Path) -> None:
    """Mechanics (edited copies of a real run): which proof elsewhere is nearest."""
    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    root = tmp_path / "runs"
    copy_run(swept.here_run, root, "far", "2026-01-03T00:00:00Z",
             provenance__runtime__python="3.99.0",
             audit__decision__installed="0.0.1")  # two fields differ
    copy_run(swept.here_run, root, "near-old", "2026-01-01T00:00:00Z",
             provenance__runtime__python="3.98.1")
    copy_run(swept.here_run, root, "near-new", "2026-01-02T00:00:00Z",
             provenance__runtime__python="3.98.2")
    copy_run(swept.here_run, root, "torch", "2026-01-04T00:00:00Z",
             provenance__runtime__torch__version="9.9.9+cpu")

    answer = Evidence([root]).answer_for(ENTRY, here)
    # one field each: python weighs least, so python-only beats torch-only; of the two
    # python-only proofs, the newer
    assert answer.answer == PROVEN_ELSEWHERE and answer.proof is not None
    assert answer.proof.run_id == "near-new"
    assert answer.differs == (f"python 3.98 (here {MINOR})",)
    assert answer.text() == f"{PROVEN_ELSEWHERE}: nearest python 3.98 (here {MINOR}) " \
                            "(run near-new)"
    # the class also covers the GPU: the same receipt on another architecture is elsewhere
    on_gpu = replace(here, arch="sm_90", cuda="12.9" if here.cuda != "12.9" else "12.8")
    answer = Evidence([root]).answer_for(ENTRY, on_gpu)
    assert answer.answer == PROVEN_ELSEWHERE and "arch cpu (here sm_90)" in answer.differs
    assert f"cuda {here.cuda or 'none'} (here {on_gpu.cuda})" in answer.differs
    # the same stack as the real receipt: proven here wins over any nearer-looking neighbour
    copy_run(swept.here_run, root, "same", "2025-12-31T00:00:00Z")
    answer = Evidence([root]).answer_for(ENTRY, here)
    assert answer.answer == PROVEN_HERE and answer.proof and answer.proof.run_id == "same"


@pytest.mark.upstream
def test_mechanics_a_run_that_never_imported_torch_proves_it_for_any_torch(
        swept: Swept, tmp_path: Path) -> None:
    """Mechanics (an edited copy of a real run): a reproducer of pure-Python code (a team's
    entry, as `patchlane new` writes one) never imports torch, so its outcome cannot depend on
    torch, its CUDA or the device. Such a run is compared on Python and the target's release
    only: it proves the entry for a job with any torch or none. (It was "proven elsewhere:
    nearest torch not imported (here 2.13.0)", with "sweep it on this stack" as the fix: it
    could never be proven.)"""
    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    root = tmp_path / "runs"
    copy_run(swept.here_run, root, "pure", "2026-01-01T00:00:00Z",
             provenance__runtime__torch=None)
    content = json.loads((swept.here_run / WITH).read_text())["content"]
    no_torch = replace(here, torch=None, cuda=None, arch=None)
    on_gpu = replace(here, torch="9.9.9", cuda="13.0", arch="sm_90")
    for job in (here, no_torch, on_gpu):
        answer = Evidence([root]).answer_for(ENTRY, job, content)
        assert answer.answer == PROVEN_HERE, (job, answer.text())
    # still compared on Python and the target's release
    answer = Evidence([root]).answer_for(ENTRY, replace(on_gpu, python="3.98"), content)
    assert answer.answer == PROVEN_ELSEWHERE
    assert answer.differs == (f"python {MINOR} (here 3.98)",), answer.differs
    # and a newer broken run of that kind revokes it for any torch too
    broken = _broken_copy(swept.here_run, root, "pure-broken", "2026-01-02T00:00:00Z")
    edit_json(broken / WITH, provenance__runtime__torch=None)
    reseal(broken)
    assert Evidence([root]).answer_for(ENTRY, on_gpu, content).answer == REVOKED
    # so does a newer broken run of the same content that did import a torch, another one
    # than the job's: a pass that claims to hold for any torch cannot stand beside it
    other = tmp_path / "other"
    copy_run(swept.here_run, other, "pure", "2026-01-01T00:00:00Z",
             provenance__runtime__torch=None)
    _broken_copy(swept.here_run, other, "torch-broken", "2026-01-02T00:00:00Z")
    assert Evidence([other]).answer_for(ENTRY, here, content).answer == REVOKED
    assert Evidence([other]).answer_for(ENTRY, on_gpu, content).answer == REVOKED


@pytest.mark.upstream
def test_mechanics_only_a_passing_guarding_run_with_the_overlay_applied_counts(
        swept: Swept, tmp_path: Path) -> None:
    """Mechanics (edited copies of a real run): what is not a receipt of a passing run."""
    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    root = tmp_path / "runs"
    fixed = copy_run(swept.here_run, root, "fixed", "2026-01-01T00:00:00Z")
    index = json.loads((fixed / "index.json").read_text())
    index["rows"][0]["verdict"] = "upstream-fixed"
    (fixed / "index.json").write_text(json.dumps(index))
    copy_run(swept.here_run, root, "failed", "2026-01-02T00:00:00Z", outcome="fail")
    copy_run(swept.here_run, root, "stayed-out", "2026-01-03T00:00:00Z",
             audit__applied=False)

    evidence = Evidence([root])
    answer = evidence.answer_for(ENTRY, here)
    assert answer.answer == NEVER_RUN and answer.proof is None
    assert dict(answer.seen) == {"guarding": 2, "upstream-fixed": 1}
    assert answer.text().startswith(f"{NEVER_RUN}: no verified passing run under {root} (its "
                                    "rows there: guarding 2, upstream-fixed 1); 2 claimed "
                                    "pass(es) not verified: ")
    left_out = "\n".join(evidence.unreadable)
    # its receipt with the overlay failed, where the manifest recorded a pass
    assert f"failed {ENTRY}[cpu-ws1]: " in left_out
    assert "says outcome 'fail'; expected outcome 'pass'" in left_out
    assert f"stayed-out {ENTRY}[cpu-ws1]: not a passing run with the overlay applied" \
        in left_out and "applied False" in left_out


@pytest.mark.upstream
def test_mechanics_reading_is_bounded_newest_first_and_skips_unreadable_runs(
        swept: Swept, tmp_path: Path) -> None:
    """Mechanics (copies of a real run, some broken): the cap, the order, the reasons."""
    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    root = tmp_path / "runs"
    for day in range(1, 6):
        copy_run(swept.here_run, root, f"run-{day}", f"2026-01-0{day}T00:00:00Z",
                 mtime=1_700_000_000 + day)
    # newer than all of them, and each broken in its own way
    garbage = root / "garbage"
    garbage.mkdir()
    (garbage / "index.json").write_text("{not json")
    os.utime(garbage / "index.json", (1_700_000_100, 1_700_000_100))
    escape = copy_run(swept.here_run, root, "escape", "2026-02-01T00:00:00Z", 1_700_000_101)
    index = json.loads((escape / "index.json").read_text())
    index["rows"][0]["receipts"]["with"] = "../../../etc/passwd"
    (escape / "index.json").write_text(json.dumps(index))
    os.utime(escape / "index.json", (1_700_000_101, 1_700_000_101))
    fifo_run = copy_run(swept.here_run, root, "fifo", "2026-02-02T00:00:00Z")
    (fifo_run / WITH).unlink()
    os.mkfifo(fifo_run / WITH)
    os.utime(fifo_run / "index.json", (1_700_000_102, 1_700_000_102))

    evidence = Evidence([root, tmp_path / "missing"], limit=5)
    # the five newest index files: fifo, escape, garbage, run-5, run-4; the rest not read
    assert [r.path.name for r in evidence.runs] == ["fifo", "escape", "run-5", "run-4"]
    assert evidence.not_read == 3
    answer = evidence.answer_for(ENTRY, here)  # a FIFO is never opened: no hang
    assert answer.answer == PROVEN_HERE and answer.proof and answer.proof.run_id == "run-5"
    summary = evidence.summary()
    assert summary["runs_read"] == 4 and summary["not_read"] == 3
    reasons = "\n".join(summary["unreadable"])
    assert f"{root}/garbage: JSONDecodeError" in reasons
    assert "escape " in reasons and "names '../../../etc/passwd'" in reasons
    assert "fifo " in reasons and "not a regular file" in reasons.lower()
    assert f"{tmp_path / 'missing'}: no such directory" in reasons


def test_mechanics_a_run_directory_given_as_the_root_is_read_as_one_run(
        tmp_path: Path) -> None:
    """Mechanics: a runs root that is itself a run directory, unreadable: a reason."""
    (tmp_path / "index.json").write_text("[]")
    evidence = Evidence([tmp_path])
    assert evidence.runs == [] and evidence.unreadable[0].startswith(f"{tmp_path}: TypeError")


class _FakeCuda:
    """torch.cuda as a job on a GPU host sees it (no GPU here): the mechanics of reading the
    architecture, never evidence of a patch."""

    def __init__(self, initialized: bool) -> None:
        self.initialized = initialized
        self.asked_torch = False

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def get_device_capability(self) -> tuple[int, int]:
        self.asked_torch = True  # creates a CUDA context when not initialized
        return (9, 0)


def test_mechanics_the_gpu_architecture_never_creates_a_cuda_context(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Mechanics (a stand-in torch.cuda; no GPU on this machine): where the architecture of
    the job's class comes from."""
    import types

    from patchlane.deciding import proof as proven

    calls: list[list[str]] = []

    def smi(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, stdout="9.0\n", stderr="")

    monkeypatch.setattr(proven.subprocess, "run", smi)
    proven._smi_arch.cache_clear()
    for initialized in (True, False):
        cuda = _FakeCuda(initialized)
        torch = types.SimpleNamespace(__version__="2.11.0+cu130", cuda=cuda,
                                      version=types.SimpleNamespace(cuda="13.0"))
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,4")
        stack = proven.stack_here("megatron-core", "0.19.2")
        assert (stack.torch, stack.cuda, stack.arch) == ("2.11.0", "13.0", "sm_90")
        assert cuda.asked_torch is initialized  # torch only once CUDA is up anyway
    assert calls == [["nvidia-smi", "-i", "3", "--query-gpu=compute_cap",
                      "--format=csv,noheader"]]
    assert stack.describe() == f"python {MINOR}, torch 2.11.0, cuda 13.0, sm_90, " \
                               "megatron-core 0.19.2"
    monkeypatch.delitem(sys.modules, "torch")
    assert proven.stack_here("megatron-core", "0.19.2").describe() == \
        f"python {MINOR}, torch not imported, cuda none, unknown device, megatron-core 0.19.2"
    proven._smi_arch.cache_clear()


# -- proof you can trust: forged, stale, merged ------------------------------------------------

@pytest.mark.upstream
def test_a_forged_run_proves_nothing(swept: Swept, tmp_path: Path) -> None:
    """An index saying guarding and a hand-written passing receipt, with no manifest: what the
    third reliability pass planted. Not verified: never run, and it says why."""
    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    forged = tmp_path / "runs" / "forged"
    (forged / "receipts").mkdir(parents=True)
    shutil.copy(swept.here_run / "index.json", forged / "index.json")
    shutil.copy(swept.here_run / WITH, forged / WITH)
    answer = Evidence([forged.parent]).answer_for(ENTRY, here)
    assert answer.answer == NEVER_RUN and answer.proof is None
    assert len(answer.refused) == 1 and "manifest.json: missing" in answer.refused[0]
    assert "1 claimed pass(es) not verified: forged " in answer.text()
    # a real run's receipt edited by hand (its manifest's digest no longer matches)
    edited = copy_run(swept.here_run, tmp_path / "edited", "edited", "2026-01-01T00:00:00Z")
    edit_json(edited / WITH, message="hand-written")
    answer = Evidence([edited.parent]).answer_for(ENTRY, here)
    assert answer.answer == NEVER_RUN and "changed since the sweep wrote it" in answer.text()
    # a run without the receipt digests (before they existed, or not a sweep's) proves nothing
    old = copy_run(swept.here_run, tmp_path / "old", "old", "2026-01-01T00:00:00Z")
    manifest = json.loads((old / "manifest.json").read_text())
    for case in manifest["cases"].values():
        del case["receipt_sha256"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    answer = Evidence([old.parent]).answer_for(ENTRY, here)
    assert answer.answer == NEVER_RUN and "records no SHA-256 of its receipt" in answer.text()


@pytest.mark.upstream
def test_a_changed_overlay_makes_the_proof_stale(swept: Swept, tmp_path: Path) -> None:
    from patchlane import startup
    from patchlane.registry.content import entry_content

    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    entry = startup.current().registry.get(ENTRY)
    now = entry_content(entry)
    assert json.loads((swept.here_run / WITH).read_text())["content"] == now
    assert Evidence([swept.here]).answer_for(ENTRY, here, now).answer == PROVEN_HERE
    for part in ("overlay", "reproducer", "entry"):
        answer = Evidence([swept.here]).answer_for(ENTRY, here, {**now, part: "sha256:0"})
        assert answer.answer == STALE and answer.changed == (part,), answer
        assert answer.text() == (f"{STALE}: run {swept.here_run.name} passed on this stack, "
                                 f"but {part} changed since: it proves other content; sweep "
                                 "again")
    # end to end: the same registry with the overlay edited after the sweep, in a job that
    # insists on evidence: refused as stale, naming the overlay, the target left unpatched
    reg = tmp_path / "reg"
    shutil.copytree(ROOT / "patches", reg / "patches")
    shutil.copytree(ROOT / "reproducers", reg / "reproducers")
    shutil.copytree(ROOT / "drafts", reg / "drafts")
    shutil.copytree(ROOT / "checks", reg / "checks")
    shutil.copy(ROOT / "registry.yaml", reg / "registry.yaml")
    overlay = reg / "patches" / f"{ENTRY}.py"
    overlay.write_text(overlay.read_text() + "\n# edited after the sweep\n")
    out = subprocess.run([sys.executable, "-c", REQUIRE], capture_output=True, text=True,
                         timeout=300, env=env(PATCHLANE_EVIDENCE=str(swept.here),
                                              PATCHLANE_REQUIRE_EVIDENCE="1",
                                              PATCHLANE_ONLY=ENTRY,
                                              PATCHLANE_DEFAULT_REGISTRY="0",
                                              PATCHLANE_REGISTRY=str(reg / "registry.yaml")))
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["outcome"] == "refused: evidence" and seen["wrapped"] is False, seen
    assert seen["reason"].startswith(f"PATCHLANE_REQUIRE_EVIDENCE=1: {STALE}: run "
                                     f"{swept.here_run.name} passed on this stack, but overlay "
                                     "changed since"), seen


@pytest.mark.upstream
def test_a_merged_night_proves_what_its_shards_proved(tmp_path: Path) -> None:
    """The documented nightly, then a job that insists on evidence: sweep in shards, `patchlane
    merge` the night, start the job. The merged rows are verified in their shards."""
    if LIGER is None:
        pytest.skip("liger-kernel is not installed")
    root = tmp_path / "runs"
    for i in (1, 2):
        out = cli("sweep", "--only", ENTRY, "--only", "dynamo_recompile_limit", "--lane",
                  "cpu", "--shard", f"{i}/2", "--group", "night", "--runs-root", str(root),
                  "--quiet")
        assert out.returncode == 0, out.stdout + out.stderr
    merged = cli("merge", "--group", "night", "--runs-root", str(root), "--json")
    assert merged.returncode == 0, merged.stderr
    out = subprocess.run([sys.executable, "-c", REQUIRE], capture_output=True, text=True,
                         timeout=300, env=env(PATCHLANE_EVIDENCE=str(root),
                                              PATCHLANE_REQUIRE_EVIDENCE="1",
                                              PATCHLANE_ONLY=ENTRY))
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["outcome"] == "applied" and seen["wrapped"] is True, seen
    status = cli("status", "--json", "--evidence", str(root))
    report = json.loads(status.stdout[status.stdout.index("{\n"):])
    proof = entries(report)[ENTRY]["evidence"]
    assert proof["answer"] == PROVEN_HERE and proof["refused"] == [], proof
    shard = Path(proof["proof"]["receipt"]).parents[1]
    assert shard.parent == root and shard.name != proof["proof"]["run_id"]  # read in the shard


def _broken_copy(source: Path, root: Path, name: str, created: str) -> Path:
    """A copy of a real guarding run as the same sweep would have written it had the overlay
    failed with it: the receipt with the overlay says fail, the manifest records that, the
    row says broken."""
    run = copy_run(source, root, name, created, outcome="fail")
    manifest = json.loads((run / "manifest.json").read_text())
    for case in manifest["cases"].values():
        if case.get("mode") == "with" and "outcome" in case:
            case["outcome"] = "fail"
    (run / "manifest.json").write_text(json.dumps(manifest))
    index = json.loads((run / "index.json").read_text())
    index["rows"][0]["verdict"] = "broken"
    (run / "index.json").write_text(json.dumps(index))
    reseal(run)
    return run


@pytest.mark.upstream
def test_mechanics_a_newer_broken_run_revokes_an_older_pass(swept: Swept,
                                                          tmp_path: Path) -> None:
    """The newest verified run of the same class and content decides: tonight's broken revokes
    last week's pass (it was: still proven here)."""
    from patchlane.deciding.proof import REVOKED

    here = receipt_stack(json.loads((swept.here_run / WITH).read_text()))
    content = json.loads((swept.here_run / WITH).read_text())["content"]
    root = tmp_path / "runs"
    copy_run(swept.here_run, root, "last-week", "2026-01-01T00:00:00Z")
    assert Evidence([root]).answer_for(ENTRY, here, content).answer == PROVEN_HERE
    _broken_copy(swept.here_run, root, "tonight", "2026-01-08T00:00:00Z")
    answer = Evidence([root]).answer_for(ENTRY, here, content)
    assert answer.answer == REVOKED and not answer.proven_here, answer.text()
    assert answer.text().startswith(f"{REVOKED}: run tonight (2026-01-08T00:00:00Z, cpu ws1) "
                                    "says broken on this stack and content, newer than the "
                                    "pass of run last-week"), answer.text()
    # an older broken run does not revoke a newer pass; one of other content does not either
    copy_run(swept.here_run, root, "tomorrow", "2026-01-09T00:00:00Z")
    assert Evidence([root]).answer_for(ENTRY, here, content).answer == PROVEN_HERE
    # a broken run in the same second as the newest pass (two nodes of one night): no pass
    tie = _broken_copy(swept.here_run, tmp_path / "other-node", "node-2",
                       "2026-01-09T00:00:00Z")
    answer = Evidence([root, tie.parent]).answer_for(ENTRY, here, content)
    assert answer.answer == REVOKED, answer.text()
    assert "says broken on this stack and content, in the same second as the pass of run " \
        "tomorrow" in answer.text(), answer.text()
    other = _broken_copy(swept.here_run, root, "edited", "2026-01-10T00:00:00Z")
    edit_json(other / WITH, content__overlay="sha256:" + "0" * 64)
    reseal(other)
    assert Evidence([root]).answer_for(ENTRY, here, content).answer == PROVEN_HERE


def test_an_entrys_content_is_the_same_from_any_checkout(tmp_path: Path) -> None:
    """Content is what ran, not where the checkout lies: a compat gate's check file is hashed as
    its own part, and its place on disk must not make the entry part differ between the
    nightly box and a laptop (it did: the absolute path was hashed into ``entry``)."""
    from patchlane.registry import load_registries
    from patchlane.registry.content import entry_content

    seen = []
    for where in ("a", "b/deeper"):
        copy = tmp_path / where
        for folder in ("patches", "reproducers", "drafts", "checks"):
            shutil.copytree(ROOT / folder, copy / folder)
        shutil.copy(ROOT / "registry.yaml", copy / "registry.yaml")
        registry = load_registries([copy / "registry.yaml"])
        seen.append({entry.id: entry_content(entry) for entry in registry.entries})
    gates = [e.id for e in load_registries([ROOT / "registry.yaml"]).entries
             if hasattr(e.spec, "check_file")]
    assert gates, "the catalog has a compat gate with a check file"
    assert seen[0] == seen[1]

"""One release of an entry's target distribution, installed side by side, its reproducer run
without the overlay, and what that run says of the release (``patchlane bisect`` asks it of
each release it visits; the search itself is :mod:`patchlane.releases.bisect`).

A run is one :class:`~patchlane.runs.verdicts.Finding` (:func:`classify`):

* ``affected``: the reproducer's own ``AssertionError`` (the bug shows);
* ``not-affected``: it passed;
* ``absent``: the target does not exist in that release, so the bug cannot be there yet: the
  reproducer could not be loaded or set up, or it stopped on an ``AttributeError``,
  ``ImportError`` or ``TypeError`` that names the target, or where the release's own files
  lack it (read from its source, :func:`target_missing`);
* ``error``: anything else, reported with the stage and message, never guessed.

The release is installed with :func:`~patchlane.sweep.installs.install_dir` (``pip install
--target``, cached per interpreter) and put first on ``PYTHONPATH``, as ``patchlane matrix``
does; the case runs through :func:`~patchlane.sweep.reproduce.run_case`, so the overlay is
kept out by the real startup walk and the run is checked to have imported that release.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.errors import PatchlaneError, ReproducerError
from ..common.exit_codes import ExitCode
from ..common.files import atomic_write_json
from ..common.versions import parse_version
from ..installed.fingerprint import compute_from_source
from ..registry import Entry
from ..runs.verdicts import Finding
from ..sweep.installs import install_dir
from ..sweep.reproduce import (
    CaseInterrupted,
    CaseResult,
    Mode,
    RunOutcome,
    case_env,
    read_spec,
    run_case,
)

if TYPE_CHECKING:
    from ..registry import Target

__all__ = ["ReleaseRun", "ReleaseRunner", "classify", "target_missing"]


@dataclass(frozen=True)
class ReleaseRun:
    """One release run: what it found, and where its record and logs are."""

    release: str
    finding: Finding
    message: str
    seconds: float = 0.0
    receipt: Path | None = None
    how: str = ""
    fingerprint: str | None = None
    """The target's fingerprint as the process that imported this release computed it (only
    when asked: ``--write`` records it under ``fingerprint.releases``)."""
    overlay: str | None = None
    """For an affected release, when asked (``--write``): ``guarding`` if the reproducer
    passes there with the overlay, else why not. A gate widens only to where it guards."""
    python: str | None = None
    """The interpreter of another ``bisect --json`` this run was reported by (``--python``);
    None: run by this process."""

    def as_dict(self) -> dict[str, Any]:
        return {"release": self.release, "finding": self.finding.value,
                "receipt": None if self.receipt is None else str(self.receipt),
                "how": self.how, "seconds": round(self.seconds, 1), "message": self.message,
                "fingerprint": self.fingerprint, "overlay": self.overlay,
                **({"python": self.python} if self.python is not None else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], python: str) -> ReleaseRun:
        """A run another interpreter's ``bisect --json`` reported (:meth:`as_dict`)."""
        receipt = data.get("receipt")
        return cls(str(data["release"]), Finding(data["finding"]),
                   str(data.get("message", "")), float(data.get("seconds", 0.0)),
                   Path(receipt) if receipt else None, str(data.get("how", "")),
                   data.get("fingerprint"), data.get("overlay"), python)


_ABSENT_EXCEPTIONS = ("AttributeError", "ImportError", "ModuleNotFoundError", "TypeError")


def _target_names(target: Target) -> list[str]:
    """What an exception message says when it is about the target: its module (or that
    module's last name, as ``cannot import name`` says it), its qualname, or the qualname's
    first part (the class a missing method belongs to)."""
    names: list[str] = []
    if target.module:
        names += [target.module, target.module.rsplit(".", 1)[-1]]
    if target.qualname:
        names += [target.qualname, target.qualname.split(".", 1)[0]]
    return list(dict.fromkeys(names))


def _names(message: str, name: str) -> bool:
    # Whole names only: `load_state_dict` does not name `state_dict`.
    return re.search(rf"(?<![\w]){re.escape(name)}(?!\w)", message) is not None


def _module_file(module: str, roots: Sequence[Path]) -> Path | None:
    parts = module.split(".")
    for root in roots:
        for path in (root.joinpath(*parts).with_suffix(".py"),
                     root.joinpath(*parts, "__init__.py")):
            if path.is_file():
                return path
    return None


def target_missing(target: Target, roots: Sequence[Path]) -> str | None:
    """Why the target is not in the release whose files are under ``roots`` (read from its
    source, nothing imported); None when it is there (or when there is no module to look
    for)."""
    if not target.module or not roots:  # nowhere to look: absence is not shown
        return None
    path = _module_file(target.module, roots)
    if path is None:
        return f"the release has no module {target.module}"
    if not target.qualname:
        return None
    try:
        source = path.read_text(encoding="utf-8")
        compute_from_source(source, [target.qualname])
    except LookupError:
        owner = target.qualname.rpartition(".")[0]
        if owner and _defines(source, owner):
            # The class is there and the attribute is not written in it: it may be inherited
            # (`Function.apply` comes from torch.autograd.Function), so the source cannot say
            # it is absent, and an error stays an error.
            return None
        return f"{path.name} defines no {target.qualname}"
    except (SyntaxError, ValueError, OSError):
        return None  # unreadable here: that says nothing about absence
    return None


def _defines(source: str, qualname: str) -> bool:
    try:
        compute_from_source(source, [qualname])
    except (LookupError, SyntaxError, ValueError):
        return False
    return True


MAX_INSTALL_FAILURES = 3
"""Installs failing in a row that stop a bisection: past this the index itself is the problem
(unreachable, refusing), and every further release would cost one more failed pip run."""


class ReleaseInstallError(PatchlaneError):
    """The package index refused or could not serve releases, several in a row."""

    exit_code = ExitCode.UPSTREAM_UNREACHABLE


def classify(target: Target, result: CaseResult, roots: Sequence[Path] = ()) -> tuple[Finding, str]:
    """What the run ``result`` (without the overlay) says of its release, and why.

    ``roots``: where the release's files are, to tell a target that does not exist from one
    that failed to import for another reason."""
    if result.outcome is RunOutcome.FAIL:
        return Finding.AFFECTED, result.message
    if result.outcome is RunOutcome.PASS:
        return Finding.NOT_AFFECTED, result.message
    message = result.message
    if result.stage in ("import", "setup"):
        # The reproducer itself could not be loaded or set up against this release: what it
        # needs is not there yet (the same reproducer ran on the release known affected).
        return Finding.ABSENT, f"{result.stage}: {message}"
    kind = message.split(":", 1)[0].strip().rsplit(".", 1)[-1]
    if result.stage == "run" and kind in _ABSENT_EXCEPTIONS:
        named = next((n for n in _target_names(target) if _names(message, n)), None)
        if named is not None:
            return Finding.ABSENT, f"{message} (names the target: {named})"
        missing = target_missing(target, roots)
        if missing is not None:
            return Finding.ABSENT, f"{message} ({missing})"
    where = _where(result, roots)
    return Finding.ERROR, f"{result.stage or 'error'}: {message}" + (f" ({where})" if where
                                                                     else "")


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)', re.MULTILINE)


def _where(result: CaseResult, roots: Sequence[Path]) -> str:
    """Where the failing rank's exception was raised, and the last frame in the release's own
    files when that is another one: an error's message alone ("IndexError: list index out of
    range") rarely says whose code failed."""
    tb = next((str(r["traceback"]) for r in result.ranks
               if r.get("outcome") == RunOutcome.ERROR.value and r.get("traceback")), "")
    frames = _FRAME.findall(tb)
    if not frames:
        return ""

    def shown(path: str) -> str:
        for root in roots:
            if Path(path).is_relative_to(root):
                return str(Path(path).relative_to(root))
        return "/".join(Path(path).parts[-3:])

    file, line, function = frames[-1]
    text = f"raised at {shown(file)}:{line} in {function}"
    inside = [f for f in frames if any(Path(f[0]).is_relative_to(root) for root in roots)]
    if inside and inside[-1] != frames[-1]:
        text += f", called from {shown(inside[-1][0])}:{inside[-1][1]}"
    return text


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


class ReleaseRunner:
    """Runs a registry entry's reproducer, without the overlay, on the cpu lane at its smallest
    world size, against one release of its ``target.distribution`` at a time, installed into
    ``cache`` (``how="installed"``: the copy this interpreter has, run as it is). Each run
    writes its record to ``run_dir/runs/<release>.json`` and its logs under
    ``run_dir/cases/<release>/`` (pip's in ``install.log``, the ranks' beside it).

    ``install`` (version -> directory) and ``run`` (the case) are injectable, so a test need
    not pip install anything."""

    def __init__(self, entry: Entry, run_dir: Path, cache: Path, *, timeout: float = 600.0,
                 fingerprints: bool = False, overlay_leg: bool = False,
                 install: Callable[[str, Path], Path] | None = None,
                 run: Callable[..., CaseResult] = run_case,
                 env: Mapping[str, str] | None = None) -> None:
        if entry.reproducer is None:
            raise ReproducerError(entry.id, "the entry declares no reproducer: nothing to run "
                                  "against each release; fix: write one (reproducers/<id>.py) "
                                  "and name it under `reproducer:`")
        self.entry = entry
        self.distribution = entry.target.distribution
        self.run_dir = run_dir
        self.cache = cache
        self.timeout = timeout
        self.fingerprints = fingerprints
        self.overlay_leg = overlay_leg
        self.world_size = min(read_spec(entry).world_sizes)
        self.base_env = dict(os.environ if env is None else env)
        self._install = install or self._pip
        self._run = run
        self.stop = threading.Event()
        """Set by the command on Ctrl-C or SIGTERM: the running case's ranks are killed and
        :class:`~patchlane.sweep.reproduce.CaseInterrupted` raised, nothing more starts."""
        self.install_failures = 0
        """Installs that failed in a row: past :data:`MAX_INSTALL_FAILURES` the search stops."""

    def _pip(self, version: str, log: Path) -> Path:
        return install_dir(f"{self.distribution}=={version}", self.cache, log=log)

    def _installed_roots(self) -> list[Path]:
        from importlib.metadata import PackageNotFoundError, distribution

        try:
            return [Path(str(distribution(self.distribution).locate_file("")))]
        except PackageNotFoundError:
            return []

    def __call__(self, version: str, how: str) -> ReleaseRun:
        """Run against ``version``, got ``how`` (``wheel``, ``sdist``: installed from the
        index; ``installed``: as it is). What the run shows is never raised: a failed install
        is an error run."""
        case_dir = self.run_dir / "cases" / version
        record: dict[str, Any] = {
            "schema": 1, "entry": self.entry.id, "distribution": self.distribution,
            "release": version, "how": how, "python": platform.python_version(),
            "lane": "cpu", "world_size": self.world_size, "mode": Mode.WITHOUT.value}
        started = time.monotonic()
        env = dict(self.base_env)
        roots: list[Path]
        if how == "installed":
            roots = self._installed_roots()
        else:
            log = case_dir / "install.log"
            record["install_log"] = str(log)
            if self.stop.is_set():
                raise CaseInterrupted(f"{self.distribution} {version}: not started (stopped)")
            try:
                where = self._install(version, log)
            except subprocess.CalledProcessError as exc:
                if self.stop.is_set():  # pip stopped by the signal: no finding of this release
                    raise CaseInterrupted(f"{self.distribution} {version}: its install was "
                                          "stopped") from None
                why = _tail(log) or str(exc)
                self.install_failures += 1
                message = (f"install: pip could not install {self.distribution}=={version} "
                           f"from its {how} (exit {exc.returncode}):\n{why}")
                if self.install_failures >= MAX_INSTALL_FAILURES:
                    self._finish(record, started, Finding.ERROR, message)
                    raise ReleaseInstallError(
                        f"{self.entry.id}: stopped after {self.install_failures} installs in "
                        f"a row failed (the last: {self.distribution}=={version}, pip exit "
                        f"{exc.returncode}; its log: {log}); the package index is unreachable "
                        "or refuses them, and no run would say anything about the bug; fix: "
                        "check the index (PIP_INDEX_URL, the network), then run bisect again "
                        "(the releases that ran are kept in "
                        f"{self.run_dir / 'runs'})") from None
                return self._finish(record, started, Finding.ERROR, message)
            self.install_failures = 0
            record["installed_at"] = str(where)
            record["install_seconds"] = round(time.monotonic() - started, 1)
            roots = [where]
            env["PYTHONPATH"] = os.pathsep.join([str(where),
                                                 *filter(None, [env.get("PYTHONPATH")])])
            env.setdefault("PYTHONWARNINGS", "ignore")
        # The release under test is the side: a ledger reproducer's BAD_SIDE stays out.
        result = self._run(self.entry, Mode.WITHOUT, lane="cpu", world_size=self.world_size,
                           timeout=self.timeout, workdir=case_dir, env=env, flat=True,
                           bad_side=False, stop=self.stop)
        record["case"] = result.as_dict()
        record["logs"] = [rank.get("log") for rank in result.ranks if rank.get("log")]
        finding, message = classify(self.entry.target, result, roots)
        ran = self._ran_version(result)
        if finding in (Finding.AFFECTED, Finding.NOT_AFFECTED) and ran is not None \
                and _same(ran, version) is False:
            finding, message = Finding.ERROR, (
                f"the run imported {self.distribution} {ran}, not {version}: another copy "
                f"comes first on sys.path; fix: remove it from PYTHONPATH and run again")
        fingerprint = None
        if self.fingerprints and finding in (Finding.AFFECTED, Finding.NOT_AFFECTED):
            fingerprint = self._fingerprint(env, record)
        overlay = None
        if self.overlay_leg and finding is Finding.AFFECTED:
            overlay = self._with_overlay(case_dir, env, record, fingerprint)
        return self._finish(record, started, finding, message, fingerprint, overlay)

    def _with_overlay(self, case_dir: Path, env: Mapping[str, str], record: dict[str, Any],
                      fingerprint: str | None) -> str:
        """The same release, the reproducer run with the overlay: ``guarding`` when it
        passes (the sweep's verdict there), else what it did."""
        version = str(record["release"])
        try:
            entry, env = self._gate_widened_to(version, fingerprint,
                                               case_dir / "with" / "registry", env)
        except PatchlaneError as exc:
            return f"not run with the overlay: {exc}"
        result = self._run(entry, Mode.WITH, lane="cpu", world_size=self.world_size,
                           timeout=self.timeout, workdir=case_dir / "with", env=env,
                           flat=True, bad_side=False, stop=self.stop)
        record["case_with"] = result.as_dict()
        if result.outcome is RunOutcome.PASS:
            return "guarding"
        first = (result.message.strip().splitlines() or [""])[0][:300]
        return f"{result.outcome.value} with the overlay: {first}"

    def _gate_widened_to(self, version: str, fingerprint: str | None, folder: Path,
                         env: Mapping[str, str]) -> tuple[Entry, dict[str, str]]:
        """The entry and ``env`` with the entry's registry replaced by a copy in ``folder``
        whose only change is this entry's gate, ``==VERSION`` (and ``fingerprint``
        accepted): the question is whether the overlay would guard here if the gate admitted
        this release. The copy sits beside links to everything in the registry's own folder,
        so every relative path (overlays, reproducers, checks) names the same files."""
        from ..registry import parse_registry
        from ..registry.editor import (
            entry_block,
            key_line,
            read_as_stored,
            record_fingerprints,
            set_value,
            stored_lines,
        )
        from ..startup import is_default_registry

        source = self.entry.source
        stored = stored_lines(read_as_stored(source))
        lines = stored.lines
        start, end, indent = entry_block(lines, self.entry.id, source)
        at = key_line(lines, start, end, indent + 2, "applies_to")
        if at is None:
            raise ReproducerError(self.entry.id, f"{source}: no `applies_to:` line to widen")
        lines[at] = set_value(lines[at], json.dumps(f"=={version}"))
        if fingerprint and key_line(lines, start, end, indent + 2, "fingerprint") is not None:
            record_fingerprints(lines, start, end, indent + 2, stored.newline,
                                [(None, fingerprint, f"{version} (bisect run)")])
        folder.mkdir(parents=True, exist_ok=True)
        for item in source.parent.iterdir():
            if item.name != source.name and not (folder / item.name).exists():
                (folder / item.name).symlink_to(item)
        copy = folder / source.name
        copy.write_text(stored.text(), encoding="utf-8", newline="")
        out = dict(env)
        extra = [p for p in out.get("PATCHLANE_REGISTRY", "").split(os.pathsep) if p]
        if is_default_registry(source):
            out["PATCHLANE_DEFAULT_REGISTRY"] = "0"
            extra = [str(copy), *extra]
        else:
            extra = [str(copy) if Path(p).resolve() == source.resolve() else p for p in extra]
        out["PATCHLANE_REGISTRY"] = os.pathsep.join(extra)
        widened = next(e for e in parse_registry(copy, stored.text()) if e.id == self.entry.id)
        return widened, out

    def _ran_version(self, result: CaseResult) -> str | None:
        for rank in result.ranks:
            versions = ((rank.get("runtime") or {}).get("distributions") or {})
            if versions.get(self.distribution):
                return str(versions[self.distribution])
        return None

    def _fingerprint(self, env: Mapping[str, str], record: dict[str, Any]) -> str | None:
        """The target's fingerprint, computed by a child that imports this release (the
        overlay disabled, as in the run): ``patchlane fingerprint ID``."""
        child = case_env(self.entry, Mode.WITHOUT, env)
        try:
            out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "fingerprint",
                                  self.entry.id], env=child, capture_output=True, text=True,
                                 timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            record["fingerprint_error"] = f"no answer within {self.timeout:.0f} s"
            return None
        value = (out.stdout.splitlines() or [""])[0].strip()
        if out.returncode != 0 or not value.startswith("sha256"):
            record["fingerprint_error"] = (out.stderr or out.stdout)[-2000:]
            return None
        record["fingerprint_seen"] = [*out.stdout.splitlines(), ""][1].lstrip("# ")
        return value

    def _finish(self, record: dict[str, Any], started: float, finding: Finding, message: str,
                fingerprint: str | None = None, overlay: str | None = None) -> ReleaseRun:
        seconds = time.monotonic() - started
        record.update(finding=finding.value, message=message, seconds=round(seconds, 3),
                      fingerprint=fingerprint, overlay=overlay)
        receipt = self.run_dir / "runs" / f"{record['release']}.json"
        receipt.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(receipt, record)
        return ReleaseRun(record["release"], finding, message, seconds, receipt, record["how"],
                          fingerprint, overlay)


def _same(a: str, b: str) -> bool | None:
    first, second = parse_version(a), parse_version(b)
    return None if first is None or second is None else first == second

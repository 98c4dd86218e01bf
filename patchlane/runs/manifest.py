"""A sweep's run directory and its manifest, written atomically after every transition.

Layout of ``RUN_DIR``::

    manifest.json            plan + every case's state (queued -> running -> ok|failed|error)
    receipts/<case>.json     one receipt per finished case (never rewritten once written)
    cases/<case>/            the case's work dir: rank logs and rank results
    index.json summary.md junit.xml report.html   reports, rebuilt at the end of each sweep

``manifest.json`` also records ``schedule`` (:mod:`patchlane.sweep.schedule`): the policy
(``longest-first`` or ``registry``), ``history_root`` and ``source_runs`` (the earlier runs whose
receipts were read), and ``order``, the cases in the order they start, each with ``estimate_s``
(null when unknown), ``from`` (the run it came from) and ``match`` (``same-release`` or
``other-release``). The field is additive (schema_version stays 1): readers that do not know it
ignore it, and a manifest without it (an older run) resumes in manifest order.

A killed sweep leaves a manifest whose finished cases have receipts; ``--resume RUN_DIR``
re-queues only the cases that were queued or running. A sweep stopped by Ctrl-C or SIGTERM
puts its running cases back in the queue and records ``interrupted`` (``{"by": "SIGINT",
"at": ..., "unfinished": N}``) until a resume takes it up. A case killed between writing its
receipt and recording that in the manifest did finish: resume takes its state from the receipt
instead of running it again (a receipt is never rewritten).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import hashlib
import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import RunDirError
from ..common.files import atomic_write_json
from ..reproducer import Lane, Mode, RunOutcome

__all__ = ["MANIFEST_SCHEMA", "CaseResult", "CaseState", "RunDir", "case_id", "now",
           "receipt_digest", "worst_rank"]

MANIFEST_SCHEMA = 1


class CaseState(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    OK = "ok"
    """The reproducer passed."""
    FAILED = "failed"
    """The reproducer failed by its own assertion (expected without the overlay)."""
    ERROR = "error"

    @property
    def finished(self) -> bool:
        return self in (CaseState.OK, CaseState.FAILED, CaseState.ERROR)

    @classmethod
    def after(cls, outcome: RunOutcome) -> CaseState:
        """The state a case finishes in with ``outcome``."""
        return {RunOutcome.PASS: cls.OK, RunOutcome.FAIL: cls.FAILED,
                RunOutcome.ERROR: cls.ERROR}[outcome]


def receipt_digest(data: bytes) -> str:
    """What the manifest records of a receipt's bytes (``receipt_sha256``)."""
    return hashlib.sha256(data).hexdigest()


def _check_states(file: Path, manifest: dict[str, Any]) -> None:
    """Refuse a manifest whose cases are not an object or whose case states are not
    :class:`CaseState` values: a hand edit, named here once, never a crash mid-resume."""
    cases = manifest.get("cases", {})
    if not isinstance(cases, dict):
        raise RunDirError(f"{file}: cases is a {type(cases).__name__}, expected an object (case "
                          "id -> case); fix: start a new run, or restore the file")
    states = [s.value for s in CaseState]
    for cid, case in cases.items():
        found = case.get("state") if isinstance(case, dict) else case
        if found not in states:
            import difflib  # only on this error

            close = difflib.get_close_matches(str(found), states, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise RunDirError(f"{file}: cases.{cid}.state is {found!r}, expected one of "
                              f"{', '.join(states)}{hint}; fix: correct it by hand (queued "
                              "runs the case again on --resume), or start a new run")


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def case_id(entry_id: str, lane: Lane, world_size: int, mode: Mode) -> str:
    return f"{entry_id}--{lane}--ws{world_size}--{mode.value}"


@dataclass
class RunDir:
    path: Path
    manifest: dict[str, Any]

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    # -- creation --------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> RunDir:
        if path.exists() and any(path.iterdir()):
            raise cls._taken(path)
        path.mkdir(parents=True, exist_ok=True)
        # The manifest is created exclusively before anything else: of two sweeps started into
        # the same directory at once, one gets it and the other is refused.
        try:
            os.close(os.open(path / "manifest.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o666))
        except FileExistsError:
            raise cls._taken(path) from None
        (path / "receipts").mkdir(exist_ok=True)
        (path / "cases").mkdir(exist_ok=True)
        manifest = {"schema_version": MANIFEST_SCHEMA, "created": now(), "updated": now(),
                    **header, "rows": [], "cases": {}}
        run = cls(path, manifest)
        run.save()
        return run

    @staticmethod
    def _taken(path: Path) -> RunDirError:
        return RunDirError(f"run directory {path} already exists and is not empty; "
                           f"use --resume {path} to finish it, or pick a new directory")

    @staticmethod
    @contextlib.contextmanager
    def lock(path: Path) -> Iterator[None]:
        """Hold ``path/.lock`` (an OS file lock, via filelock) for a whole sweep: a second
        sweep or ``--resume`` of the same directory is refused at once, before it rewrites the
        manifest, instead of running every case into the same attempt directories."""
        from filelock import FileLock, Timeout

        lock = FileLock(str(path / ".lock"), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise RunDirError(f"run directory {path} is in use by another sweep (lock "
                              f"{path / '.lock'}); wait for it, or resume it once it has "
                              "stopped") from None
        try:
            yield
        finally:
            lock.release()

    @classmethod
    def open(cls, path: Path) -> RunDir:
        file = path / "manifest.json"
        try:
            manifest = json.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(f"{file}: no manifest; is {path} a patchlane run directory?") \
                from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunDirError(f"{file}: not valid JSON ({exc}); the manifest is written "
                              "atomically, so this file was edited by hand") from None
        if not isinstance(manifest, dict):
            raise RunDirError(f"{file}: a JSON {type(manifest).__name__}, expected the object "
                              "a sweep writes; fix: start a new run, or restore the file")
        if manifest.get("schema_version") != MANIFEST_SCHEMA:
            raise RunDirError(f"{file}: schema_version {manifest.get('schema_version')!r}, "
                              f"expected {MANIFEST_SCHEMA}")
        _check_states(file, manifest)
        return cls(path, manifest)

    # -- state -----------------------------------------------------------------------------

    def save(self) -> None:
        self.manifest["updated"] = now()
        atomic_write_json(self.path / "manifest.json", self.manifest)

    def add_case(self, cid: str, fields: dict[str, Any]) -> None:
        with self._lock:
            self.manifest["cases"][cid] = {**fields, "state": CaseState.QUEUED.value,
                                           "attempts": 0}
            self.save()

    def transition(self, cid: str, state: CaseState, **fields: Any) -> None:
        with self._lock:
            case = self.manifest["cases"][cid]
            case.update(fields)
            case["state"] = state.value
            if state is CaseState.RUNNING:
                case["attempts"] = case.get("attempts", 0) + 1
                case["started"] = now()
            elif state.finished:
                case["finished"] = fields.get("finished") or now()
            self.save()

    def cases(self) -> Iterator[tuple[str, dict[str, Any]]]:
        with self._lock:
            items = list(self.manifest["cases"].items())
        yield from items

    def state(self, cid: str) -> CaseState:
        """The state a case is in now (the manifest stores its value)."""
        with self._lock:
            return CaseState(self.manifest["cases"][cid]["state"])

    def mark_interrupted(self, by: str) -> None:
        """Record that a sweep stopped before every case finished (``by``: the signal's
        name); cases still running go back to the queue."""
        with self._lock:
            cases = self.manifest["cases"].values()
            for case in cases:
                if case["state"] == CaseState.RUNNING.value:
                    case["state"] = CaseState.QUEUED.value
            unfinished = sum(not CaseState(c["state"]).finished for c in cases)
            self.manifest["interrupted"] = {"by": by, "at": now(), "unfinished": unfinished}
            self.save()

    def requeue_unfinished(self) -> list[str]:
        """After a killed or interrupted sweep: running/queued cases (or finished ones whose
        receipt is gone) go back to the queue with a clean work dir; finished cases are left
        untouched, and so is a case whose receipt was written before the manifest recorded it
        finished (its state is taken from the receipt). An ``interrupted`` mark is taken up."""
        with self._lock:
            if self.manifest.pop("interrupted", None) is not None:
                self.save()
        requeued = []
        for cid, _ in self.cases():
            if self.receipt_path(cid).exists() and (self.state(cid).finished
                                                   or self._adopt_receipt(cid)):
                continue
            # The old attempt's work dir stays (its ranks may still be running, orphaned);
            # the next attempt gets a fresh one.
            self.transition(cid, CaseState.QUEUED)
            requeued.append(cid)
        return requeued

    def begin(self, cid: str) -> Path:
        """Mark a case running (one attempt more) and return that attempt's own work
        directory: ranks orphaned by a killed sweep can never write into the directory of the
        attempt that replaces them."""
        self.transition(cid, CaseState.RUNNING)
        with self._lock:  # a case runs on one thread at a time: its count is this attempt's
            attempts = self.manifest["cases"][cid]["attempts"]
        return self.case_dir(cid) / f"attempt{attempts}"

    def settle(self, cid: str, receipt: Mapping[str, Any] | None) -> CaseState:
        """Record how an attempt ended: ``receipt`` written first, then the manifest says the
        case finished as its receipt says (so a crash in between leaves a receipt that a
        resume adopts, never a finished case without one); None, the attempt stopped with no
        result: the case is queued again, for ``--resume``."""
        if receipt is None:
            self.transition(cid, CaseState.QUEUED)
            return CaseState.QUEUED
        self.write_receipt(cid, receipt)
        return self._record_finished(cid, receipt)

    def _record_finished(self, cid: str, receipt: Mapping[str, Any]) -> CaseState:
        """The case finished as ``receipt`` (already written) says, with the receipt's SHA-256
        (``receipt_sha256``: what ``patchlane retire`` checks the receipt against)."""
        state = CaseState.after(RunOutcome(receipt["outcome"]))
        path = self.receipt_path(cid)
        self.transition(cid, state, outcome=receipt["outcome"],
                        stage=receipt.get("stage") or None,
                        message=str(receipt.get("message", "")),
                        seconds=round(float(receipt.get("seconds") or 0.0), 3),
                        finished=receipt.get("finished"),
                        receipt=str(path.relative_to(self.path)),
                        receipt_sha256=receipt_digest(path.read_bytes()))
        return state

    def _adopt_receipt(self, cid: str) -> bool:
        try:
            receipt = self.read_receipt(cid)
            RunOutcome(receipt["outcome"])
        except (OSError, ValueError, KeyError, TypeError):  # not a receipt this sweep wrote
            return False
        self._record_finished(cid, receipt)
        return True

    # -- paths -----------------------------------------------------------------------------

    def case_dir(self, cid: str) -> Path:
        return self.path / "cases" / cid

    def receipt_path(self, cid: str) -> Path:
        return self.path / "receipts" / f"{cid}.json"

    def write_receipt(self, cid: str, receipt: Mapping[str, Any]) -> Path:
        path = self.receipt_path(cid)
        atomic_write_json(path, receipt)
        return path

    def read_receipt(self, cid: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.receipt_path(cid).read_text(encoding="utf-8"))
        return data


@dataclass
class CaseResult:
    entry_id: str
    mode: Mode
    lane: Lane
    world_size: int
    outcome: RunOutcome
    message: str
    stage: str = ""
    """For errors: import, setup, run, timeout, crash."""
    seconds: float = 0.0
    ranks: list[dict[str, Any]] = field(default_factory=list)
    stderr_tail: str | None = None
    """For errors: the last lines of the failing rank's log, secrets redacted."""
    rank_start: dict[str, Any] = field(default_factory=dict)
    """How its ranks started (``patchlane.sweep.rank_start.rank_starts``): ``rank_start``,
    and ``preloaded`` or ``warm_refused``. Empty: fresh, as every case before warm ranks."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "mode": self.mode.value,
            "lane": self.lane,
            "world_size": self.world_size,
            "outcome": self.outcome.value,
            "message": self.message,
            "stage": self.stage,
            "seconds": round(self.seconds, 3),
            "ranks": self.ranks,
            "stderr_tail": self.stderr_tail,
            **({"rank_start": self.rank_start} if self.rank_start else {}),
        }


def worst_rank(ranks: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The rank a case is as bad as, and whose words it says: the first in error, else the
    first that failed; None when every rank passed. The case's outcome is that rank's (the
    sweep), and a report shows that rank's log (the page)."""
    for wanted in (RunOutcome.ERROR.value, RunOutcome.FAIL.value):
        found = next((r for r in ranks if r.get("outcome") == wanted), None)
        if found is not None:
            return found
    return None

"""Proven here? Whether an overlay a training job applied was ever proven on the job's own stack.

A job on torch 2.11+cu130 and megatron-core 0.19.2 on an H200 applies overlays whose
reproducers may only ever have run on a CPU with another torch. For each applied entry the
answer is one of:

``proven here``       a verified passing run of this entry, of the content the job runs now,
                      exists for the job's own comparison class;
``revoked``           a verified passing run of this class and content exists, but a newer
                      verified run of the same class and content says ``broken`` (the
                      reproducer failed with the overlay): the newest run decides, and the
                      answer names it;
``stale``             verified passing runs of this class exist, but of other content: the
                      overlay, the reproducer, the check or the registry block changed since
                      (the answer names which); sweep again;
``proven elsewhere``  verified passing runs exist, none of this class: the nearest is named,
                      with how its class differs (``python 3.12 (here 3.11)``);
``never run``         no verified passing run of the entry under the runs roots (it may have
                      been swept and failed: the answer says which verdicts its rows had, and
                      why any run that claimed a pass was not believed).

**Verified, not trusted.** A row's claim is read back from what it was written from, as
``patchlane retire`` reads it (:func:`patchlane.runs.verify.checked_rows`): the
sweep's manifest planned the row, each receipt its kind needs (without *and* with the overlay
for ``guarding``) is the one the manifest recorded, still has the SHA-256 the manifest recorded
when the case finished, is about that entry, lane, world size, mode and run, and the verdict
the row's rule gives on them is ``guarding``. An index alone, a hand-written receipt, a run
whose cases did not finish: each is named as not verified and proves nothing. A merged night
(``patchlane merge``) proves what its shards proved: each merged row is verified in the shard
run directory it came from, beside it in the same runs root.

**Content.** Every receipt records the content hashes of the entry it ran
(:mod:`patchlane.registry.content`); a proof counts for the content it recorded only.

**A receipt of a passing run** (what every answer rests on) is the ``with`` receipt of a row
whose verdict is ``guarding``, that says the case passed (``outcome: pass``) and that the
entry was applied in the process that ran it (its audit: ``applied``). Only ``guarding``
counts because it is the one verdict that shows both halves on that stack: the reproducer
showed the bug without the overlay and passed with it. ``upstream-fixed`` shows the bug absent
there (the overlay, if it ran, fixed nothing), ``broken`` and ``error`` are failures, and the
past-gate verdicts never run the overlay at all. The audit check keeps out a case in which the
overlay stayed out (a probe that said upstream-fixed) however its row was judged.

**The comparison class** of a receipt is what the rank that ran it recorded
(``provenance.runtime``): the Python minor, torch's release (the local label aside: CUDA is its
own field), the CUDA torch was built with (none for a CPU build), where it ran (``cpu`` on the
cpu lane; on the cuda lane the GPU's architecture, ``sm_90`` for compute capability 9.0) and
the target's release as its gate saw it. The job's own class is read in the job's process the
same way, from the torch it imported (never importing torch itself).

Reading is bounded and never trusted: the newest :data:`PROOF_RUNS` run directories per runs
root (by their ``index.json``, :func:`patchlane.runs.found.discover`), and of those only the
index and the ``with`` receipts of ``guarding`` rows of the entries asked about. A run or a
receipt that cannot be used (not JSON, not a sweep's, a path outside its run, a FIFO) is left
out with the reason, never a crash.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..registry.content import changed_parts, entry_content
from ..runs.found import FoundRun, discover, load
from ..runs.verdicts import Verdict
from ..runs.verify import checked_rows
from .reporting import EvidenceSummary, ProofRecord

if TYPE_CHECKING:
    from ..registry import Entry


__all__ = ["ANSWERS", "NEVER_RUN", "PROOF_RUNS", "PROVEN_ELSEWHERE", "PROVEN_HERE", "REVOKED",
           "STALE",
           "Answer", "Evidence", "Proof", "Stack", "receipt_stack", "stack_here"]


class _NotVerified(Exception):
    """A run that claimed a pass whose sources do not bear it out (why, in its message)."""


PROVEN_HERE = "proven here"
REVOKED = "revoked"
STALE = "stale"
PROVEN_ELSEWHERE = "proven elsewhere"
NEVER_RUN = "never run"
ANSWERS = (PROVEN_HERE, REVOKED, STALE, PROVEN_ELSEWHERE, NEVER_RUN)

_UNUSABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
             RecursionError, _NotVerified)
"""What a run's record that cannot be used raises while it is read: left out, never a crash."""

PROOF_RUNS = 50
"""Run directories read at most per runs root, the newest first. Every rank of a job reads them
(once per process): fifty nights of a nightly are plenty to find this stack's last proof, and
keep a thousand ranks from reading a year of indexes from a shared filesystem."""

_FIELDS = (("python", "python"), ("torch", "torch"), ("cuda", "cuda"), ("arch", "arch"),
           ("release", "release"))
"""The class's fields, in the order they matter least to an overlay's behaviour first: among
proofs elsewhere that differ in as many fields, the one differing in earlier ones is nearer."""
_TORCH_FIELDS = frozenset({"torch", "cuda", "arch"})
"""What a run whose rank never imported torch is not compared on (:meth:`Stack._fields`)."""


@dataclass(frozen=True)
class Stack:
    """A comparison class: what a passing run must share with the job to be proof for it."""

    python: str | None
    """The minor, ``3.11``."""
    torch: str | None
    """torch's release without its local label (``2.13.0``); None: torch not imported."""
    cuda: str | None
    """The CUDA torch was built with (``13.0``); None: a CPU build."""
    arch: str | None
    """``cpu``, or the GPU's architecture (``sm_90``); None: not known."""
    distribution: str | None
    release: str | None
    """The target distribution's release, as the entry's gate saw it."""

    def value(self, field: str) -> str:
        if field == "release":
            return f"{self.distribution or '-'} {self.release or 'not installed'}"
        raw = getattr(self, field)
        if raw is not None:
            return str(raw)
        return {"torch": "not imported", "cuda": "none", "arch": "unknown device"}.get(
            field, "unknown")

    def describe(self) -> str:
        """``python 3.11, torch 2.13.0, cuda none, cpu, liger-kernel 0.8.1``."""
        return ", ".join(f"{label} {self.value(f)}" if f not in ("arch", "release")
                         else self.value(f) for f, label in _FIELDS)

    def _fields(self) -> tuple[tuple[str, str], ...]:
        """The fields this class is compared on. A run whose rank never imported torch (a
        team's reproducer of pure-Python code) could not have depended on torch, its CUDA or
        the device: it is compared on Python and the target's release only, so it proves the
        entry for a job with any torch or none (it could never be proven anywhere else)."""
        if self.torch is None:
            return tuple(f for f in _FIELDS if f[0] not in _TORCH_FIELDS)
        return _FIELDS

    def differences(self, here: Stack) -> list[str]:
        """How this class (a run's) differs from ``here``'s (the job's), one phrase per field:
        ``python 3.12 (here 3.11)``; empty when they are the same class."""
        out = []
        for field, label in self._fields():
            if getattr(self, field) != getattr(here, field) or (
                    field == "release" and self.distribution != here.distribution):
                theirs, ours = self.value(field), here.value(field)
                if field == "release":
                    out.append(f"{theirs} (here {here.release or 'not installed'})")
                else:
                    out.append(f"{label} {theirs} (here {ours})")
        return out

    def distance(self, here: Stack) -> tuple[int, tuple[bool, ...]]:
        """Sort key of nearness to ``here``: fewest differing fields, then differing in the
        fields that matter least (:data:`_FIELDS`, reversed so a later field weighs more)."""
        fields = self._fields()
        diff = tuple(getattr(self, f) != getattr(here, f) if (f, label) in fields else False
                     for f, label in reversed(_FIELDS))
        return sum(diff), diff

    def as_dict(self) -> dict[str, str | None]:
        return {"python": self.python, "torch": self.torch, "cuda": self.cuda,
                "arch": self.arch, "distribution": self.distribution, "release": self.release}


@dataclass(frozen=True)
class Proof:
    """One receipt of a passing run (the module's definition) and the class it proves."""

    entry_id: str
    run_id: str
    run_dir: Path
    receipt: Path
    lane: str
    world_size: int
    created: str
    stack: Stack
    content: Mapping[str, Any] | None = None
    """The content hashes its receipt recorded (None: a run from before them)."""

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_dir": str(self.run_dir),
                "receipt": str(self.receipt), "lane": self.lane,
                "world_size": self.world_size, "created": self.created,
                "class": self.stack.as_dict(),
                "content": dict(self.content) if self.content is not None else None}


@dataclass(frozen=True)
class Answer:
    """Proven here, proven elsewhere (with the nearest proof) or never run, for one entry."""

    entry_id: str
    answer: str
    here: Stack
    proof: Proof | None
    """The proof of this class, else the nearest of another; None: never run."""
    differs: tuple[str, ...]
    """How the nearest proof's class differs from this one (empty when proven here)."""
    seen: Mapping[str, int]
    """Verdicts of the entry's rows read, per verdict: why it is ``never run`` when swept."""
    roots: tuple[Path, ...]
    changed: tuple[str, ...] = ()
    """The content parts that differ from the proof's (``stale``; ``overlay``, ``entry``...)."""
    refused: tuple[str, ...] = ()
    """``run row: why`` for each run that claimed a pass and was not verified."""
    revoked_by: Proof | None = None
    """``revoked``: the newer verified run of this class and content that says broken."""

    @property
    def proven_here(self) -> bool:
        return self.answer == PROVEN_HERE

    def text(self) -> str:
        """One phrase, e.g. ``proven elsewhere: nearest python 3.12 (here 3.11) (run …)``."""
        refused = f"; {len(self.refused)} claimed pass(es) not verified: {self.refused[0]}" \
            if self.refused else ""
        if self.proof is not None and self.answer == PROVEN_HERE:
            return f"{PROVEN_HERE} (run {self.proof.run_id}, {self.proof.lane} " \
                   f"ws{self.proof.world_size})"
        if self.proof is not None and self.revoked_by is not None:
            newer = self.revoked_by
            than = "newer than" if newer.created > self.proof.created else \
                "in the same second as"
            return (f"{REVOKED}: run {newer.run_id} ({newer.created}, {newer.lane} "
                    f"ws{newer.world_size}) says broken on this stack and content, {than} "
                    f"the pass of run {self.proof.run_id} ({self.proof.created}): the newest "
                    "run decides; fix the overlay and sweep again")
        if self.proof is not None and self.answer == STALE:
            what = ", ".join(self.changed)
            recorded = "recorded no content hashes (a run from before them)" \
                if self.proof.content is None else f"{what} changed since"
            return (f"{STALE}: run {self.proof.run_id} passed on this stack, but {recorded}: "
                    f"it proves other content; sweep again{refused}")
        if self.proof is not None:
            content = f"; its {', '.join(self.changed)} changed since" if self.changed else ""
            return f"{PROVEN_ELSEWHERE}: nearest {', '.join(self.differs)} " \
                   f"(run {self.proof.run_id}){content}{refused}"
        where = os.pathsep.join(str(r) for r in self.roots) or "(no runs root)"
        rows = ", ".join(f"{v} {n}" for v, n in sorted(self.seen.items()))
        return f"{NEVER_RUN}: no verified passing run under {where}" + \
            (f" (its rows there: {rows})" if rows else "") + refused

    def as_dict(self) -> ProofRecord:
        return {"answer": self.answer, "text": self.text(), "here": self.here.as_dict(),
                "proof": self.proof.as_dict() if self.proof is not None else None,
                "differs": list(self.differs), "seen": dict(self.seen),
                "changed": list(self.changed), "refused": list(self.refused)}


def _minor(version: object) -> str | None:
    if not isinstance(version, str) or not version:
        return None
    return ".".join(version.split(".")[:2])


def _public(version: object) -> str | None:
    if version is None:
        return None
    return str(version).partition("+")[0] or None


def _sm(capability: object) -> str | None:
    """``9.0`` (or ``(9, 0)``) -> ``sm_90``."""
    if isinstance(capability, (tuple, list)) and len(capability) == 2:
        return f"sm_{capability[0]}{capability[1]}"
    if isinstance(capability, str) and "." in capability:
        major, _, minor = capability.strip().partition(".")
        return f"sm_{major}{minor}"
    return None


def receipt_stack(receipt: Mapping[str, Any]) -> Stack:
    """The class a receipt proves: what the rank that ran it recorded (KeyError, TypeError or
    ValueError when it is not a receipt of this shape)."""
    runtime = receipt["provenance"]["runtime"]
    torch_info = runtime.get("torch") or {}
    decision = (receipt.get("audit") or {}).get("decision") or {}
    distribution = decision.get("distribution")
    release = decision.get("installed") or (runtime.get("distributions") or {}).get(distribution)
    lane = receipt["lane"]
    if lane == "cpu":
        arch: str | None = "cpu"
    else:
        gpus = torch_info.get("gpus") or []
        arch = _sm(gpus[0].get("capability")) if gpus else None
    cuda = torch_info.get("cuda")
    return Stack(python=_minor(runtime["python"]), torch=_public(torch_info.get("version")),
                 cuda=str(cuda) if cuda is not None else None, arch=arch,
                 distribution=str(distribution) if distribution is not None else None,
                 release=str(release) if release is not None else None)


def stack_here(distribution: str | None, release: str | None) -> Stack:
    """This process's class, for an entry on ``distribution`` whose gate saw ``release``."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    torch = sys.modules.get("torch")  # what the job imported; never imported here
    if torch is None:
        return Stack(python, None, None, None, distribution, release)
    cuda = getattr(getattr(torch, "version", None), "cuda", None)
    return Stack(python, _public(getattr(torch, "__version__", None)),
                 str(cuda) if cuda is not None else None, _arch(torch), distribution, release)


def _arch(torch: Any) -> str | None:
    try:
        if not torch.cuda.is_available():
            return "cpu"
        if torch.cuda.is_initialized():
            return _sm(tuple(torch.cuda.get_device_capability()))
    except Exception:  # a broken CUDA install: the class is unknown, never a crash
        return None
    # CUDA is there but not initialized in this process: asking torch would create a CUDA
    # context (on the first device, in every rank, before it chose its own), so the driver's
    # tool answers instead.
    return _smi_arch(os.environ.get("CUDA_VISIBLE_DEVICES", ""))


@cache
def _smi_arch(visible: str) -> str | None:
    first = visible.split(",")[0].strip()
    cmd = ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"]
    if first:
        cmd[1:1] = ["-i", first]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return _sm(lines[0]) if lines else None


class Evidence:
    """The runs under some runs roots, read once (per process), and the proofs in them."""

    def __init__(self, roots: Sequence[Path], limit: int = PROOF_RUNS) -> None:
        self.roots = tuple(roots)
        self.limit = limit
        self.unreadable: list[str] = []
        """``where: why`` for each run or receipt left out."""
        self.not_read = 0
        """Run directories past :attr:`limit` (older ones)."""
        self.runs: list[FoundRun] = []
        """Newest first."""
        for root in self.roots:
            self.runs.extend(self._read_root(root))
        self.runs.sort(key=lambda r: (r.created, r.path.name), reverse=True)
        self._lock = threading.Lock()
        self._proofs: dict[str, tuple[list[Proof], Counter[str], list[str]]] = {}
        self._broken: dict[str, list[Proof]] = {}
        """Entry id -> its verified ``broken`` runs (newest first), which revoke older
        passes of the same class and content."""
        self._verified: dict[tuple[str, str], dict[str, Any]] = {}

    def _read_root(self, root: Path) -> list[FoundRun]:
        if not root.is_dir():
            self.unreadable.append(f"{root}: no such directory (a runs root is what "
                                   "`patchlane sweep --runs-root` wrote)")
            return []
        if (root / "index.json").exists():  # one run directory given as the root
            try:
                return [FoundRun(root, load(root))]
            except (OSError, ValueError, KeyError, TypeError, AttributeError,
                    RecursionError) as exc:
                self.unreadable.append(f"{root}: {type(exc).__name__}: {exc}"[:300])
                return []
        found = discover(root, limit=self.limit)
        self.unreadable.extend(f"{root}/{why}" for why in found.unreadable)
        self.not_read += found.not_read
        return found.runs

    def proofs(self, entry_id: str) -> tuple[list[Proof], Counter[str], list[str]]:
        """The entry's verified proofs (newest first), the verdicts of its rows read, and why
        each row that claimed a pass was not verified."""
        with self._lock:
            cached = self._proofs.get(entry_id)
            if cached is None:
                cached = self._proofs[entry_id] = self._collect(entry_id)
            return cached

    def broken(self, entry_id: str) -> list[Proof]:
        """The entry's verified ``broken`` runs, newest first (read with its proofs)."""
        self.proofs(entry_id)
        return self._broken.get(entry_id, [])

    def _collect(self, entry_id: str) -> tuple[list[Proof], Counter[str], list[str]]:
        proofs: list[Proof] = []
        broken: list[Proof] = []
        seen: Counter[str] = Counter()
        refused: list[str] = []
        for run in self.runs:
            for row in run.index.rows:
                if row.entry_id != entry_id:
                    continue
                seen[row.verdict.value] += 1
                if row.verdict is Verdict.BROKEN:
                    # verified as a pass is; one that cannot be verified revokes nothing
                    with contextlib.suppress(*_UNUSABLE):
                        broken.append(self._failure(run, entry_id, row))
                    continue
                if row.verdict is not Verdict.GUARDING:
                    continue
                try:
                    proofs.append(self._proof(run, entry_id, row))
                except _UNUSABLE as exc:
                    # Another run's bad record is that run's problem: left out with why.
                    why = str(exc) if isinstance(exc, _NotVerified) else \
                        f"{type(exc).__name__}: {exc}"
                    refused.append(f"{run.path.name} {row.key}: {why}"[:400])
        self.unreadable.extend(refused)
        self._broken[entry_id] = broken
        return proofs, seen, refused

    def _failure(self, run: FoundRun, entry_id: str, row: Any) -> Proof:
        """A verified ``broken`` row: its ``with`` receipt (the overlay applied, the case
        failed), as a record of the class and content it ran."""
        run_dir, checked, receipt = self._with_receipt(run, entry_id, row, Verdict.BROKEN)
        if (receipt.get("entry_id"), receipt.get("mode")) != (entry_id, "with") \
                or receipt.get("outcome") == "pass":
            raise _NotVerified("no failing receipt with the overlay")
        return self._record(run, entry_id, row, run_dir, checked, receipt)

    def _with_receipt(self, run: FoundRun, entry_id: str, row: Any,
                      verdict: Verdict) -> tuple[Path, Any, dict[str, Any]]:
        """``row`` verified from its run's manifest and receipts, with the ``verdict`` it
        claims: (where it was verified, the checked row, its ``with`` receipt)."""
        run_dir = run.index.evidence_dir(row, at=run.path)
        if run_dir is None:
            raise _NotVerified("a merged row whose shard run directory is not named, or not "
                               "beside the merged run in its runs root")
        checked = self._checked(run_dir, entry_id).get(row.key)
        if checked is None:
            raise _NotVerified(f"{run_dir.name} has no such row to verify it by")
        if checked.row.verdict is not verdict:
            raise _NotVerified(f"its receipts in {run_dir.name} say "
                               f"{checked.row.verdict.value}, not {verdict.value}")
        receipt = checked.receipts.get("with")
        if receipt is None:
            raise _NotVerified("no receipt with the overlay")
        return run_dir, checked, receipt

    @staticmethod
    def _record(run: FoundRun, entry_id: str, row: Any, run_dir: Path, checked: Any,
                receipt: Mapping[str, Any]) -> Proof:
        """The class and content a verified ``with`` receipt ran, as a :class:`Proof`."""
        content = receipt.get("content")
        return Proof(entry_id, run.index.run_id, run.path,
                     run_dir / str(checked.row.receipts.get("with")), row.lane, row.world_size,
                     run.created, receipt_stack(receipt),
                     content if isinstance(content, dict) else None)

    def _checked(self, run_dir: Path, entry_id: str) -> dict[str, Any]:
        key = (str(run_dir), entry_id)
        found = self._verified.get(key)
        if found is None:
            try:
                _, rows = checked_rows(run_dir, entry_id, _NotVerified, require_digests=True)
            except FileNotFoundError as exc:
                raise _NotVerified(f"{exc.filename}: missing") from None
            found = self._verified[key] = {c.row.key: c for c in rows}
        return found

    def _proof(self, run: FoundRun, entry_id: str, row: Any) -> Proof:
        run_dir, checked, receipt = self._with_receipt(run, entry_id, row, Verdict.GUARDING)
        audit = receipt.get("audit") or {}
        # applied: an overlay on the call path, or a config entry's settings assigned
        applied = audit.get("applied") is True or \
            (audit.get("decision") or {}).get("outcome") == "config: applied"
        if (receipt.get("entry_id"), receipt.get("mode"), receipt.get("outcome")) != \
                (entry_id, "with", "pass") or not applied:
            raise _NotVerified(
                f"not a passing run with the overlay applied (entry "
                f"{receipt.get('entry_id')!r}, mode {receipt.get('mode')!r}, outcome "
                f"{receipt.get('outcome')!r}, applied {audit.get('applied')!r})")
        return self._record(run, entry_id, row, run_dir, checked, receipt)

    def answer(self, entry: Entry, release: str | None,
               overlay_source: bytes | None = None) -> Answer:
        """The answer for ``entry`` applied in this process on ``release`` (``overlay_source``:
        the overlay's bytes as the process will run them; default: as the file is now)."""
        here = stack_here(entry.target.distribution, release)
        return self.answer_for(entry.id, here, entry_content(entry, overlay_source))

    def answer_for(self, entry_id: str, here: Stack,
                   content: Mapping[str, str] | None = None) -> Answer:
        """``content``: the entry's content now (:func:`entry_content`); None: not compared."""
        proofs, seen, refused = self.proofs(entry_id)

        def changed(proof: Proof) -> tuple[str, ...]:
            return () if content is None else tuple(changed_parts(proof.content, content))

        same = [p for p in proofs if not p.stack.differences(here)]
        common = (dict(seen), self.roots)
        current = [p for p in same if not changed(p)]
        if current:  # newest first: the latest proof of this class and content
            newest_pass = current[0]

            def against(broken: Proof) -> bool:
                if not broken.stack.differences(here):
                    return True
                # A pass that holds for any torch (its rank never imported one) is
                # contradicted by a break on any torch, on its Python and release.
                return newest_pass.stack.torch is None and \
                    not replace(broken.stack, torch=None).differences(here)

            newer = [b for b in self.broken(entry_id)
                     if against(b) and b.content is not None
                     and not changed(b) and b.created >= newest_pass.created]
            # The newest run of this class and content decides; a tie (`created` is to the
            # second: two lanes or nodes of one night) is not a pass, it fails closed.
            if newer:
                return Answer(entry_id, REVOKED, here, current[0], (), *common,
                              revoked_by=newer[0])
            return Answer(entry_id, PROVEN_HERE, here, current[0], (), *common)
        if same:
            return Answer(entry_id, STALE, here, same[0], (), *common, changed(same[0]),
                          tuple(refused))
        if proofs:
            # min() keeps the first of equals: proofs are newest first
            nearest = min(proofs, key=lambda p: p.stack.distance(here))
            return Answer(entry_id, PROVEN_ELSEWHERE, here, nearest,
                          tuple(nearest.stack.differences(here)), *common, changed(nearest),
                          tuple(refused))
        return Answer(entry_id, NEVER_RUN, here, None, (), *common, (), tuple(refused))

    def summary(self) -> EvidenceSummary:
        return {"roots": [str(r) for r in self.roots], "runs_read": len(self.runs),
                "not_read": self.not_read, "unreadable": sorted(self.unreadable)}


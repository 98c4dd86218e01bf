"""Proven here? Whether an overlay a training job applied was ever proven on the job's own stack.

A job on torch 2.11+cu130 and megatron-core 0.19.2 on an H200 applies overlays whose
reproducers may only ever have run on a CPU with another torch. For each applied entry the
answer is one of:

``proven here``       a passing run of this entry exists for the job's own comparison class;
``proven elsewhere``  passing runs exist, none of this class: the nearest is named, with how its
                      class differs (``python 3.12 (here 3.11)``);
``never run``         no passing run of the entry under the runs roots (it may have been swept
                      and failed: the answer says which verdicts its rows had).

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
root (by their ``index.json``, :func:`patchlane.evidence.runs.discover`), and of those only the
index and the ``with`` receipts of ``guarding`` rows of the entries asked about. A run or a
receipt that cannot be used (not JSON, not a sweep's, a path outside its run, a FIFO) is left
out with the reason, never a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..files import read_regular
from .runs import FoundRun, discover, load
from .verdicts import Verdict

if TYPE_CHECKING:
    from ..reporting import EvidenceSummary, ProofRecord

__all__ = ["ANSWERS", "NEVER_RUN", "PROOF_RUNS", "PROVEN_ELSEWHERE", "PROVEN_HERE", "Answer",
           "Evidence", "Proof", "Stack", "receipt_stack", "stack_here"]

PROVEN_HERE = "proven here"
PROVEN_ELSEWHERE = "proven elsewhere"
NEVER_RUN = "never run"
ANSWERS = (PROVEN_HERE, PROVEN_ELSEWHERE, NEVER_RUN)

PROOF_RUNS = 50
"""Run directories read at most per runs root, the newest first. Every rank of a job reads them
(once per process): fifty nights of a nightly are plenty to find this stack's last proof, and
keep a thousand ranks from reading a year of indexes from a shared filesystem."""
MAX_RECEIPT_BYTES = 4 * 2**20
"""A receipt larger than this is not read (a sweep's are a few KiB: their texts are capped)."""

_FIELDS = (("python", "python"), ("torch", "torch"), ("cuda", "cuda"), ("arch", "arch"),
           ("release", "release"))
"""The class's fields, in the order they matter least to an overlay's behaviour first: among
proofs elsewhere that differ in as many fields, the one differing in earlier ones is nearer."""


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

    def differences(self, here: Stack) -> list[str]:
        """How this class differs from ``here``'s, one phrase per field:
        ``python 3.12 (here 3.11)``; empty when they are the same class."""
        out = []
        for field, label in _FIELDS:
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
        diff = tuple(getattr(self, f) != getattr(here, f) for f, _ in reversed(_FIELDS))
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

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_dir": str(self.run_dir),
                "receipt": str(self.receipt), "lane": self.lane,
                "world_size": self.world_size, "created": self.created,
                "class": self.stack.as_dict()}


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

    @property
    def proven_here(self) -> bool:
        return self.answer == PROVEN_HERE

    def text(self) -> str:
        """One phrase, e.g. ``proven elsewhere: nearest python 3.12 (here 3.11) (run …)``."""
        if self.proof is not None and self.answer == PROVEN_HERE:
            return f"{PROVEN_HERE} (run {self.proof.run_id}, {self.proof.lane} " \
                   f"ws{self.proof.world_size})"
        if self.proof is not None:
            return f"{PROVEN_ELSEWHERE}: nearest {', '.join(self.differs)} " \
                   f"(run {self.proof.run_id})"
        where = os.pathsep.join(str(r) for r in self.roots) or "(no runs root)"
        rows = ", ".join(f"{v} {n}" for v, n in sorted(self.seen.items()))
        return f"{NEVER_RUN}: no passing run under {where}" + \
            (f" (its rows there: {rows})" if rows else "")

    def as_dict(self) -> ProofRecord:
        return {"answer": self.answer, "text": self.text(), "here": self.here.as_dict(),
                "proof": self.proof.as_dict() if self.proof is not None else None,
                "differs": list(self.differs), "seen": dict(self.seen)}


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
        self._proofs: dict[str, tuple[list[Proof], Counter[str]]] = {}

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

    def proofs(self, entry_id: str) -> tuple[list[Proof], Counter[str]]:
        """The entry's proofs (newest first) and the verdicts of its rows read."""
        with self._lock:
            cached = self._proofs.get(entry_id)
            if cached is None:
                cached = self._proofs[entry_id] = self._collect(entry_id)
            return cached

    def _collect(self, entry_id: str) -> tuple[list[Proof], Counter[str]]:
        proofs: list[Proof] = []
        seen: Counter[str] = Counter()
        for run in self.runs:
            for row in run.index.rows:
                if row.entry_id != entry_id:
                    continue
                seen[row.verdict.value] += 1
                if row.verdict is not Verdict.GUARDING:
                    continue
                try:
                    proofs.append(self._proof(run, entry_id, row.receipts.get("with"),
                                              row.lane, row.world_size))
                except (OSError, ValueError, KeyError, TypeError, AttributeError,
                        IndexError, RecursionError) as exc:
                    # Another run's bad record is that run's problem: left out with why.
                    self.unreadable.append(f"{run.path.name} {row.key}: "
                                           f"{type(exc).__name__}: {exc}"[:300])
        return proofs, seen

    def _proof(self, run: FoundRun, entry_id: str, relative: object, lane: str,
               world_size: int) -> Proof:
        if not isinstance(relative, str) or not relative:
            raise KeyError("the row names no receipt with the overlay")
        parts = PurePosixPath(relative)
        if parts.is_absolute() or ".." in parts.parts:
            raise ValueError(f"receipt path {relative!r} leaves the run directory")
        path = run.path / parts
        raw = read_regular(path, MAX_RECEIPT_BYTES)  # never blocks on a FIFO in its place
        if len(raw) > MAX_RECEIPT_BYTES:
            raise ValueError(f"{relative}: larger than {MAX_RECEIPT_BYTES} bytes")
        receipt = json.loads(raw)
        if not isinstance(receipt, dict):
            raise TypeError(f"{relative}: a JSON {type(receipt).__name__}, not a receipt")
        audit = receipt.get("audit") or {}
        if (receipt.get("entry_id"), receipt.get("mode"), receipt.get("outcome")) != \
                (entry_id, "with", "pass") or audit.get("applied") is not True:
            raise ValueError(f"{relative}: not a passing run with the overlay applied (entry "
                             f"{receipt.get('entry_id')!r}, mode {receipt.get('mode')!r}, "
                             f"outcome {receipt.get('outcome')!r}, applied "
                             f"{audit.get('applied')!r})")
        return Proof(entry_id, run.index.run_id, run.path, path, lane, world_size,
                     run.created, receipt_stack(receipt))

    def answer(self, entry_id: str, distribution: str | None, release: str | None) -> Answer:
        """The answer for ``entry_id`` applied in this process on ``release``."""
        here = stack_here(distribution, release)
        return self.answer_for(entry_id, here)

    def answer_for(self, entry_id: str, here: Stack) -> Answer:
        proofs, seen = self.proofs(entry_id)
        same = [p for p in proofs if not p.stack.differences(here)]
        if same:  # newest first: the latest proof of this class
            return Answer(entry_id, PROVEN_HERE, here, same[0], (), dict(seen), self.roots)
        if proofs:
            # min() keeps the first of equals: proofs are newest first
            nearest = min(proofs, key=lambda p: p.stack.distance(here))
            return Answer(entry_id, PROVEN_ELSEWHERE, here, nearest,
                          tuple(nearest.stack.differences(here)), dict(seen), self.roots)
        return Answer(entry_id, NEVER_RUN, here, None, (), dict(seen), self.roots)

    def summary(self) -> EvidenceSummary:
        return {"roots": [str(r) for r in self.roots], "runs_read": len(self.runs),
                "not_read": self.not_read, "unreadable": sorted(self.unreadable)}


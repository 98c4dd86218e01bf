"""A run's index rows checked against what they were written from: the plan and the receipts.

``index.json`` is a report: ``patchlane sweep`` rebuilds it from ``manifest.json`` (the plan,
each row's rule, each case's state and receipt) and ``receipts/*.json`` (each case's outcome,
in its own record). A command that acts on a run's verdicts (``patchlane retire``) must not
rest on the report alone, where one edited field turns ``guarding`` into ``upstream-fixed``.

:func:`checked_rows` reads each row of an entry back from its sources and refuses, naming the
file, when they disagree:

* the row is one the manifest planned (its rule says which modes ran and how they are judged,
  :mod:`patchlane.runs.rows`);
* every receipt the row's rule needs is the one the manifest recorded for that case, lies in
  the run directory, exists, still has the SHA-256 the manifest recorded when the case finished
  (manifests written before that field skip this check), and is about that entry, lane, world
  size, mode and run, with the outcome the manifest recorded;
* the verdict the row's rule gives on those receipts is the index's verdict, and the
  release the receipt without the overlay ran against is the index's ``installed``.

Design choice: the receipts are the evidence, so the verdict is derived again from them, not
read; the manifest's digests tie the receipts to the moment each case finished. None of this is
a signature: someone who rewrites a receipt, its digest and the index together is not stopped
(a run directory is plain files). It stops what happens by hand or by accident: one file
edited, a receipt missing or swapped, an index from another run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.files import NotARegularFile, read_regular
from ..reproducer import Mode, parse_lane
from .index import MAX_INDEX_BYTES, IndexRow, RunIndex, read_index, row_key
from .manifest import case_id, receipt_digest
from .rows import PlannedRow, RowRule
from .verdicts import Verdict

__all__ = ["CheckedRow", "checked_rows"]

_FIX = "Fix: pass the run directory as `patchlane sweep` left it, or sweep again"
_MAX_RECEIPT_BYTES = 16 * 2**20
"""A receipt larger than this is not read (a sweep writes a few kilobytes)."""


@dataclass(frozen=True)
class CheckedRow:
    """An index row whose verdict and release its receipts confirm."""

    row: IndexRow
    receipts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Mode (``without`` / ``with``) -> the receipt, as read and checked."""


def checked_rows(run_dir: Path, entry_id: str, error: Callable[[str], Exception], *,
                 require_digests: bool = False) -> tuple[RunIndex, list[CheckedRow]]:
    """``run_dir``'s index and ``entry_id``'s rows in it, each checked against the manifest and
    its receipts (see the module docstring); ``error(message)`` builds the calling command's
    error for a row its sources do not bear out. ``require_digests``: a case whose receipt the
    manifest recorded no SHA-256 for is refused too (what "proven here" asks; ``retire`` also
    reads runs made before the field). An unreadable file raises its OSError."""
    index = read_index(run_dir, error)
    index_path = run_dir / "index.json"
    if index.merged:
        # A merge writes no manifest: the evidence is in the shards' own run directories.
        shards = sorted({str(d) for r in index.rows if r.entry_id == entry_id
                         for d in [index.evidence_dir(r, at=run_dir)] if d is not None})
        raise error(f"{run_dir}: a merged run (`patchlane merge`), whose rows rest on its shards' "
                    f"manifests and receipts; expected a sweep's run directory; fix: pass "
                    f"{' '.join(f'--evidence {p}' for p in shards) or 'a shard run directory'}")
    manifest_path = run_dir / "manifest.json"
    manifest = _load(manifest_path, error, what="the sweep's manifest")
    cases = manifest.get("cases") if isinstance(manifest, dict) else None
    rows = manifest.get("rows") if isinstance(manifest, dict) else None
    if not isinstance(cases, dict) or not isinstance(rows, list):
        raise error(f"{manifest_path}: not a sweep manifest (no `rows` list and `cases` "
                    f"mapping); expected the manifest `patchlane sweep` writes. {_FIX}")
    planned: dict[str, PlannedRow] = {}
    for raw in rows:
        where = f"{manifest_path}: rows"
        try:
            has_with = case_id(raw["entry_id"], parse_lane(raw["lane"], where),
                               raw["world_size"], Mode.WITH) in cases
            plan = PlannedRow.from_manifest(raw, where, has_with)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise error(f"{manifest_path}: not a sweep manifest ({type(exc).__name__}: {exc}). "
                        f"{_FIX}") from None
        planned[row_key(plan.entry_id, plan.lane, plan.world_size)] = plan
    out = []
    for row in index.rows:
        if row.entry_id != entry_id:
            continue
        found = planned.get(row.key)
        if found is None:
            raise error(f"{index_path}: row {row.key} is not one the sweep planned (no such row "
                        f"in {manifest_path}); expected the rows of that sweep only. {_FIX}")
        check = _Check(run_dir, index, row, found, cases, error, require_digests)
        verdict, installed, receipts = check.derive()
        if verdict is not row.verdict:
            raise error(f"{index_path}: row {row.key} says {row.verdict.value}, but its "
                        f"receipts ({check.named(receipts)}) say {verdict.value} by the "
                        f"{found.rule.value} rule; expected the index to agree with the receipts "
                        f"it was written from. {_FIX}")
        if installed != row.installed:
            raise error(f"{index_path}: row {row.key} says it ran on {row.installed!r}, but its "
                        f"receipt without the overlay ({check.named(receipts)}) says "
                        f"{installed!r}; expected the index to agree with the receipts it was "
                        f"written from. {_FIX}")
        out.append(CheckedRow(row, receipts))
    return index, out


@dataclass
class _Check:
    run_dir: Path
    index: RunIndex
    row: IndexRow
    plan: PlannedRow
    cases: Mapping[str, Any]
    error: Callable[[str], Exception]
    require_digests: bool = False

    def named(self, receipts: Mapping[str, Any]) -> str:
        return ", ".join(str(self.run_dir / self.row.receipts.get(m, "?")) for m in receipts) \
            or "none: the cases did not finish"

    def derive(self) -> tuple[Verdict, str | None, dict[str, Mapping[str, Any]]]:
        """The row's verdict and release, from the manifest's cases and the receipts."""
        plan = self.plan
        if plan.rule is RowRule.SKIPPED:
            return Verdict.SKIPPED, plan.installed, {}
        ids = {m: case_id(plan.entry_id, plan.lane, plan.world_size, m) for m in plan.modes}
        present = {m: self.cases[c] for m, c in ids.items() if c in self.cases}
        if len(present) < len(ids) or not all(isinstance(c, dict) and c.get("state") in
                                              ("ok", "failed", "error")
                                              for c in present.values()):
            # As the sweep reports it: a row whose cases did not all finish is in error.
            return Verdict.ERROR, plan.installed, {}
        receipts = {m.value: self._receipt(m, cid, present[m]) for m, cid in ids.items()}
        verdict, _ = plan.verdict({m: receipts[m.value] for m in ids})
        return verdict, self._installed(receipts[Mode.WITHOUT.value]), receipts

    def _receipt(self, mode: Mode, cid: str, case: Mapping[str, Any]) -> Mapping[str, Any]:
        key, manifest = self.row.key, self.run_dir / "manifest.json"
        recorded = case.get("receipt")
        named = self.row.receipts.get(mode.value)
        if named != recorded:
            raise self.error(f"{self.run_dir / 'index.json'}: row {key} names {named!r} as its "
                             f"receipt {mode.value} the overlay; {manifest} recorded "
                             f"{recorded!r} for case {cid}; expected the same file. {_FIX}")
        path = self.run_dir / str(recorded)
        root = self.run_dir.resolve()
        if not path.resolve().is_relative_to(root):
            raise self.error(f"{manifest}: case {cid}'s receipt {recorded!r} is outside the run "
                             f"directory {self.run_dir}; expected receipts/{cid}.json. {_FIX}")
        try:
            data = read_regular(path, _MAX_RECEIPT_BYTES)  # a FIFO in its place never blocks
        except FileNotFoundError:
            raise self.error(f"{path}: missing; row {key} of {self.run_dir / 'index.json'} "
                             f"rests on it (its receipt {mode.value} the overlay). "
                             f"{_FIX}") from None
        except NotARegularFile as exc:
            raise self.error(f"{path}: {exc}; expected the receipt file a sweep writes. "
                             f"{_FIX}") from None
        digest = case.get("receipt_sha256")
        if digest is None and self.require_digests:
            raise self.error(f"{manifest}: case {cid} records no SHA-256 of its receipt; "
                             "expected the digest a sweep records when a case finishes (a run "
                             "made before it, or not by a sweep, proves nothing here). "
                             f"{_FIX}")
        if digest is not None and digest != receipt_digest(data):
            raise self.error(f"{path}: changed since the sweep wrote it (SHA-256 "
                             f"{receipt_digest(data)[:16]}..., the manifest recorded "
                             f"{str(digest)[:16]}...); expected the receipt as written. {_FIX}")
        try:
            if len(data) > _MAX_RECEIPT_BYTES:
                raise ValueError(f"larger than {_MAX_RECEIPT_BYTES} bytes")
            receipt = json.loads(data)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
            raise self.error(f"{path}: not a receipt ({exc}). {_FIX}") from None
        if not isinstance(receipt, dict):
            raise self.error(f"{path}: not a receipt (a JSON {type(receipt).__name__}). "
                             f"{_FIX}")
        expected = {"entry_id": self.plan.entry_id, "lane": self.plan.lane,
                    "world_size": self.plan.world_size, "mode": mode.value,
                    "run_id": self.index.run_id}
        if case.get("outcome") is not None:
            expected["outcome"] = case["outcome"]
        wrong = {k: receipt.get(k) for k, v in expected.items() if receipt.get(k) != v}
        if wrong:
            found = ", ".join(f"{k} {v!r}" for k, v in wrong.items())
            want = ", ".join(f"{k} {expected[k]!r}" for k in wrong)
            raise self.error(f"{path}: the receipt of case {cid} says {found}; expected {want} "
                             f"(row {key}, run {self.index.run_id}, {manifest}). {_FIX}")
        return receipt

    def _installed(self, without: Mapping[str, Any]) -> str | None:
        """The release the case without the overlay ran against, as the sweep reads it from
        the receipt (else the one the plan expected)."""
        try:
            provenance = without["provenance"]
            dists = provenance["runtime"].get("distributions") or {}
            record = provenance.get("record") or {}
            found = dists.get(record.get("distribution"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise self.error(f"{self.run_dir / self.row.receipts.get('without', '?')}: not a "
                             f"receipt ({type(exc).__name__}: {exc}). {_FIX}") from None
        return str(found) if found else self.plan.installed


def _load(path: Path, error: Callable[[str], Exception], *, what: str) -> Any:
    try:
        data = read_regular(path, MAX_INDEX_BYTES)
    except FileNotFoundError:
        raise error(f"{path}: missing; a run directory's verdicts are checked against "
                    f"{what}. {_FIX}") from None
    except NotARegularFile as exc:
        raise error(f"{path}: {exc}; expected {what}. {_FIX}") from None
    try:
        if len(data) > MAX_INDEX_BYTES:
            raise ValueError(f"larger than {MAX_INDEX_BYTES} bytes")
        return json.loads(data)
    except ValueError as exc:
        raise error(f"{path}: not JSON ({exc}). {_FIX}") from None

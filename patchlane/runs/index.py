"""The run index (``index.json``): one typed model for every reader of a run directory.

A sweep writes one index per run directory (:mod:`patchlane.sweep.reports`); the page, the
markdown summary, JUnit, the comparison with earlier runs (:mod:`patchlane.runs.found`),
``patchlane retire``, ``patchlane draft`` and the release matrix read it back. They all read it
through :class:`RunIndex` / :class:`IndexRow`, so the shape is known in one place and a verdict
is parsed once, here, into :class:`~patchlane.runs.verdicts.Verdict`.

The JSON stays as it was (``schema_version`` 1, the same keys in the same order): an index
written before this model loads, and a run directory written now reads with older tools.
Nested evidence that only the page renders (links, provenance, entry info, the comparison,
the lineage) is kept as JSON data inside the typed record.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.files import atomic_write_json, read_regular
from .verdicts import ASKS, SEVERITY, Verdict, action

__all__ = ["INDEX_SCHEMA", "MAX_INDEX_BYTES", "IndexRow", "RunIndex", "by_severity", "printable",
           "read_index", "row_key"]

INDEX_SCHEMA = 1
MAX_INDEX_BYTES = 16 * 2**20
"""An index larger than this is not read: a year of nightlies is read one index each."""

SHARD_GAP_ASKS = "deliver the shard"
SHARD_GAP_ACTION = ("deliver the shard: finish it with `patchlane sweep --resume RUN_DIR` (or "
                    "sweep it again), then run `patchlane merge` again")
"""What a merged run's row asks when its shard was missing or did not finish it: no case
said anything about the entry, so there is nothing to fix in the overlay or reproducer."""

_MODES = ("without", "with")
"""The two ways a case runs, in the order reports list them."""


def row_key(entry_id: str, lane: str, world_size: int) -> str:
    """The one name of a row, across runs: ``entry[lane-wsN]``."""
    return f"{entry_id}[{lane}-ws{world_size}]"


@dataclass(frozen=True)
class IndexRow:
    """One row of a run: an entry on a lane and world size, its verdict and its evidence."""

    entry_id: str
    lane: str
    world_size: int
    verdict: Verdict
    reason: str
    installed: str | None = None
    receipts: Mapping[str, str] = field(default_factory=dict)
    """Mode (``without`` / ``with``) -> receipt path relative to the run directory."""
    comparison_key: Mapping[str, Any] | None = None
    stderr_tail: str | None = None
    links: Mapping[str, Any] = field(default_factory=dict)
    """Receipts, rank logs and the failing rank (with its log tail), relative to the run."""
    applies_to: str | None = None
    origin: Mapping[str, Any] | None = None
    """In a merged run (``patchlane merge``): the shard the row came from (``shard``,
    ``state``, ``run_id``, ``run_dir`` relative to the merged directory, ``host``); None in a
    sweep's own index."""

    @property
    def key(self) -> str:
        return row_key(self.entry_id, self.lane, self.world_size)

    @property
    def shard_gap(self) -> bool:
        """A merged run's row in error only because its shard was missing or did not finish
        it (no receipt: no case said anything)."""
        return (self.verdict is Verdict.ERROR and not self.receipts
                and (self.origin or {}).get("state") in ("missing", "errored"))

    def asks(self) -> str:
        """What the row asks, in two words (:data:`~patchlane.runs.verdicts.ASKS`)."""
        return SHARD_GAP_ASKS if self.shard_gap else ASKS[self.verdict]

    def action(self, run_dir: Path | None) -> str:
        """What the row asks, whole, with its id and run directory filled in."""
        return SHARD_GAP_ACTION if self.shard_gap else action(
            self.verdict, self.entry_id, None if run_dir is None else str(run_dir))

    @property
    def failing(self) -> Mapping[str, Any]:
        """The rank the verdict is about (mode, rank, log, tail); empty when none."""
        return self.links.get("failing") or {}

    @property
    def tail(self) -> str | None:
        """The failing rank's last log lines, else the case's."""
        tail = self.failing.get("tail") or self.stderr_tail
        return str(tail) if tail else None

    def receipt_links(self) -> list[tuple[str, str]]:
        """``(mode, path)`` of each receipt that exists, without first."""
        receipts = self.links.get("receipts") or {}
        return [(m, receipts[m]) for m in _MODES if m in receipts]

    def log_links(self) -> list[tuple[str, Mapping[str, Any]]]:
        """``(mode, rank record)`` of each rank log, without first."""
        logs = self.links.get("logs") or {}
        return [(m, rank) for m in _MODES for rank in logs.get(m, [])]

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id, "lane": self.lane, "world_size": self.world_size,
            "verdict": self.verdict.value, "reason": self.reason, "installed": self.installed,
            "receipts": dict(self.receipts), "comparison_key": self.comparison_key,
            "stderr_tail": self.stderr_tail, "links": dict(self.links),
            "applies_to": self.applies_to,
            # Only a merged run's rows carry it: a sweep's index keeps its keys as they were.
            **({"origin": dict(self.origin)} if self.origin is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "index row") -> IndexRow:
        """A row read back (KeyError, TypeError or ValueError naming ``where``)."""
        if not isinstance(data, dict):
            raise TypeError(f"{where}: a JSON {type(data).__name__}, not an object")
        key = row_key(str(data["entry_id"]), str(data["lane"]), data["world_size"])
        if not isinstance(data["world_size"], int):
            raise TypeError(f"{where} {key}: world_size {data['world_size']!r} is not a number")
        comparison = data.get("comparison_key")
        if isinstance(comparison, dict):
            _mapping(comparison, "distributions", f"{where} {key}: comparison_key")
        return cls(
            entry_id=str(data["entry_id"]), lane=str(data["lane"]),
            world_size=data["world_size"],
            verdict=Verdict.parse(data["verdict"], f"{where} {key}"),
            reason=str(data.get("reason", "")),
            installed=_str_or_none(data.get("installed")),
            receipts=_mapping(data, "receipts", f"{where} {key}"),
            comparison_key=comparison if isinstance(comparison, dict) else None,
            stderr_tail=_str_or_none(data.get("stderr_tail")),
            links=_mapping(data, "links", f"{where} {key}"),
            applies_to=_str_or_none(data.get("applies_to")),
            origin=(_mapping(data, "origin", f"{where} {key}")
                    if data.get("origin") is not None else None),
        )


def by_severity(rows: Iterable[IndexRow]) -> list[IndexRow]:
    """Rows worst first (:data:`~patchlane.runs.verdicts.SEVERITY`), then by key: the order
    every report lists them in."""
    return sorted(rows, key=lambda r: (SEVERITY.index(r.verdict), r.entry_id, r.lane,
                                       r.world_size))


# What XML 1.0 forbids (C0 controls but tab and newline; carriage returns too, which a parser
# would turn into newlines; lone surrogates, which cannot even be encoded as UTF-8; U+FFFE and
# U+FFFF), plus DEL and the C1 controls, which HTML calls errors and terminals act on.
_NOT_PRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def printable(text: str) -> str:
    """``text`` with every character XML or HTML cannot carry (control characters such as an
    ANSI colour's escape, lone surrogates) shown as U+FFFD. The one scrub every report
    applies to all the text it writes (JUnit, the page, the markdown): reasons quote arbitrary
    exception messages."""
    return _NOT_PRINTABLE.sub("\ufffd", text)


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def _mapping(data: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    """``data[key]`` as a dict (absent or null: empty); TypeError naming ``where`` and the key
    when it is another JSON type. Checked on reading, so an index edited or written by
    something else fails here, as that run's problem, and never later in a report."""
    value = data.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{where}: {key} is a JSON {_json_type(value)}, not an object")
    return value


def _json_type(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), type(value).__name__)


@dataclass(frozen=True)
class RunIndex:
    """A run directory's index: its header, provenance, entries and rows."""

    run_id: str
    created: str
    rows: tuple[IndexRow, ...]
    run_dir: str | None = None
    updated: str | None = None
    shard: str | None = None
    lanes: tuple[str, ...] | None = None
    registry_digest: str | None = None
    patch_set: str | None = None
    git: Mapping[str, Any] | None = None
    counts: Mapping[Verdict, int] = field(default_factory=dict)
    """Rows per verdict, in the order verdicts first appear among the rows."""
    provenance: Mapping[str, Any] = field(default_factory=dict)
    entries: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Entry id -> its gate, summary and upstream links as the registry gave them."""
    comparison_class: Mapping[str, Any] | None = None
    lineage: Mapping[str, Any] | None = None
    """Where earlier runs were looked for and what was found (written with the reports)."""
    compare: Mapping[str, Any] | None = None
    """The comparison with the previous run, when there was one."""
    group: str | None = None
    """The night a shard belongs to (``patchlane sweep --group``); None when not given."""
    shards: tuple[Mapping[str, Any], ...] | None = None
    """A merged run's shards (``patchlane merge``): per shard of the plan its ``shard``,
    ``state`` (delivered, errored, missing, superseded), ``why``, ``run_id``, ``run_dir``,
    ``host``, ``created``, ``updated``, ``rows`` and ``report``. None for a sweep's own run."""
    plan_digest: str | None = None
    """A merged run's plan (``manifest.json``'s ``plan.digest`` of every shard)."""
    schema_version: int = INDEX_SCHEMA

    @property
    def merged(self) -> bool:
        """Whether this is the index ``patchlane merge`` wrote over a sweep's shards."""
        return self.shards is not None

    def merged_run_ids(self) -> set[str]:
        """The run ids of the shard runs this merged run read (empty for a sweep's own run):
        their rows are this run's rows, so a runs root counts them once, as this run."""
        return {str(s["run_id"]) for s in self.shards or () if s.get("run_id")}

    @staticmethod
    def count_rows(rows: Iterable[IndexRow]) -> dict[Verdict, int]:
        counts: dict[Verdict, int] = {}
        for row in rows:
            counts[row.verdict] = counts.get(row.verdict, 0) + 1
        return counts

    def count(self, verdict: Verdict) -> int:
        return self.counts.get(verdict, 0)

    def entry_info(self, entry_id: str) -> Mapping[str, Any]:
        return self.entries.get(entry_id) or {}

    def gate(self, row: IndexRow) -> str | None:
        """The row's gate: the registry's, else what its receipts recorded."""
        return self.entry_info(row.entry_id).get("applies_to") or row.applies_to

    def evidence_dir(self, row: IndexRow, at: Path | None = None) -> Path | None:
        """The run directory holding ``row``'s manifest and receipts, the one ``patchlane
        retire --evidence`` and the proof read: this run's, or for a merged run the row's
        shard, which must be a folder beside the merged run in its runs root (a row naming
        a folder anywhere else, or none, gets None: nothing there is its evidence). ``at``:
        where this index was read from (default: the run directory it records)."""
        base = at if at is not None else Path(self.run_dir) if self.run_dir else None
        if base is None or not self.merged:
            return base
        relative = (row.origin or {}).get("run_dir")
        if not isinstance(relative, str) or not relative:
            return None
        shard = (base / relative).resolve()
        return shard if shard.parent == base.resolve().parent else None

    def row_keys(self) -> set[str]:
        return {r.key for r in self.rows}

    def replace(self, **changes: Any) -> RunIndex:
        return dataclasses.replace(self, **changes)

    # -- JSON --------------------------------------------------------------------------------

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema_version": self.schema_version,
            "run_id": self.run_id,
            "run_dir": self.run_dir,
            "created": self.created,
            "updated": self.updated,
            "shard": self.shard,
            "lanes": list(self.lanes) if self.lanes is not None else None,
            "registry_digest": self.registry_digest,
            "patch_set": self.patch_set,
            "git": self.git,
            "counts": {v.value: n for v, n in self.counts.items()},
            "provenance": self.provenance,
            "entries": self.entries,
            "rows": [r.as_dict() for r in self.rows],
        }
        if self.comparison_class is not None:
            out["comparison_class"] = self.comparison_class
        if self.lineage is not None:
            out["lineage"] = self.lineage
        if self.compare is not None:
            out["compare"] = self.compare
        # Additive keys (schema_version stays 1): written only where they say something.
        if self.group is not None:
            out["group"] = self.group
        if self.plan_digest is not None:
            out["plan_digest"] = self.plan_digest
        if self.shards is not None:
            out["shards"] = [dict(s) for s in self.shards]
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "index") -> RunIndex:
        """An index read back: KeyError, TypeError or ValueError naming what is wrong."""
        if not isinstance(data, dict):
            raise TypeError(f"{where}: a JSON {type(data).__name__}, not an object")
        version = data.get("schema_version", INDEX_SCHEMA)
        if version != INDEX_SCHEMA:
            raise ValueError(f"{where}: schema_version {version!r}; this patchlane reads "
                             f"{INDEX_SCHEMA}")
        if not isinstance(data["rows"], list):
            raise TypeError(f"{where}: rows is a JSON {type(data['rows']).__name__}, not a list")
        rows = tuple(IndexRow.from_dict(r, f"{where}: index row") for r in data["rows"])
        run_id = str(data["run_id"])
        # A sweep always writes `created`; a hand-made index for one row's evidence (retire,
        # draft) may leave it out. Comparisons across runs refuse such an index (runs.load).
        created = data.get("created", "")
        if not isinstance(created, str):
            raise TypeError(f"{where}: created is a JSON {type(created).__name__}, not a string")
        counts: dict[Verdict, int] = {}
        for name, n in _mapping(data, "counts", where).items():
            counts[Verdict.parse(name, f"{where}: counts")] = int(n)
        lanes = data.get("lanes")
        for key in ("provenance", "comparison_class", "lineage", "compare"):
            _mapping(data, key, where)
        for entry_id in _mapping(data, "entries", where):
            _mapping(data["entries"], entry_id, f"{where}: entries")
        shards = data.get("shards")
        if shards is not None and (not isinstance(shards, list)
                                   or not all(isinstance(s, dict) for s in shards)):
            raise TypeError(f"{where}: shards is a JSON {_json_type(shards)}, not a list of "
                            "objects")
        return cls(
            run_id=run_id, created=created, rows=rows,
            run_dir=_str_or_none(data.get("run_dir")),
            updated=_str_or_none(data.get("updated")), shard=_str_or_none(data.get("shard")),
            lanes=tuple(str(x) for x in lanes) if isinstance(lanes, list) else None,
            registry_digest=_str_or_none(data.get("registry_digest")),
            patch_set=_str_or_none(data.get("patch_set")),
            git=data.get("git") if isinstance(data.get("git"), dict) else None,
            counts=counts or cls.count_rows(rows),
            provenance=data.get("provenance") or {},
            entries=data.get("entries") or {},
            comparison_class=data.get("comparison_class"),
            lineage=data.get("lineage"), compare=data.get("compare"),
            group=_str_or_none(data.get("group")),
            shards=tuple(shards) if shards is not None else None,
            plan_digest=_str_or_none(data.get("plan_digest")),
            schema_version=version,
        )

    @classmethod
    def load(cls, run_dir: Path) -> RunIndex:
        """``run_dir/index.json`` (OSError, ValueError, KeyError or TypeError when it is not
        a readable sweep index)."""
        file = run_dir / "index.json"
        raw = read_regular(file, MAX_INDEX_BYTES)  # never blocks on a FIFO put in its place
        if len(raw) > MAX_INDEX_BYTES:
            raise ValueError(f"{file}: larger than {MAX_INDEX_BYTES} bytes")
        return cls.from_dict(json.loads(raw), str(file))

    def dump(self, run_dir: Path) -> None:
        atomic_write_json(run_dir / "index.json", self.as_dict())


def read_index(run_dir: Path, error: Callable[[str], Exception]) -> RunIndex:
    """``run_dir``'s index for a command that reads one run's evidence (``retire``, ``draft``):
    a file that is not what ``patchlane sweep`` writes raises ``error(message)`` naming it and
    what was wrong; an unreadable file raises its OSError."""
    path = run_dir / "index.json"
    fix = "Fix: pass a run directory written by `patchlane sweep`"
    try:
        return RunIndex.load(run_dir)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{path}: not JSON ({exc}). {fix}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise error(f"{path}: not a sweep index ({type(exc).__name__}: {exc}). {fix}") from None
    except ValueError as exc:  # a verdict, a schema version or the size
        raise error(f"{path}: {exc}") from None

"""The registry's records: what a validated entry *is*, frozen.

:class:`Entry` and the value records nested in it (a kind's own record is its module's, in
:mod:`patchlane.registry.per_kind`; :class:`KindSpec` says what the startup reads of one),
:class:`LedgerResult` (what a ledger check decided), :class:`StartupRow` (what `import
patchlane` reads of an entry) and :class:`Registry`. Only :mod:`patchlane.registry.schema` builds
them from YAML; everything else reads them. Pickled by
the validated-registry cache (:mod:`patchlane.registry.cache`), so a change here invalidates it
like a change of the validation does.
"""

from __future__ import annotations

import datetime as _dt
import enum
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple, Protocol

from packaging.specifiers import SpecifierSet

from ..common.errors import RegistryError, UnknownEntryError
from ..installed.gates import GateResult, check_gate, import_name
from .kinds import KINDS, DecidedBy, Kind


class Status(str, enum.Enum):
    ACTIVE = "active"
    RETIRED = "retired"


class FingerprintPolicy(str, enum.Enum):
    REFUSE = "refuse"
    WARN = "warn"


# The four value records nested in an Entry are NamedTuples, not frozen dataclasses: equally
# immutable and typed, and ~5x cheaper to define, which `import patchlane` pays every time.
class Target(NamedTuple):
    distribution: str
    """Distribution name whose installed metadata version the gate reads (``megatron-core``)."""
    module: str | None = None
    qualname: str | None = None
    version_from: str | None = None
    """``module:attribute`` where a source tree of the distribution declares its version, for
    a target imported without distribution metadata (defaults: ``gates.KNOWN_TREE_VERSIONS``)."""
    shape: str | None = None
    """What the target is (``function``, ``method``, ``property``, ``class`` ...: the names of
    ``patchlane.targets.SHAPES``), as the overlay was written for it; None: whatever is found.
    A release where the target has another shape refuses the overlay (``patchlane new`` writes
    it)."""

    @property
    def object_path(self) -> str | None:
        if self.module is None:
            return None
        return f"{self.module}:{self.qualname}" if self.qualname else self.module


class Upstream(NamedTuple):
    issue: str | None
    pr: str | None
    forwarded: str
    """DEP-3 ``Forwarded``: a URL, ``no`` or ``not-needed``."""
    applied_upstream: str | None
    """DEP-3 ``Applied-Upstream``: the release, commit or URL where upstream carries the fix."""
    distribution: str | None = None
    """The distribution whose releases carry the upstream fix, when it is not the target's
    (a numpy pin fixed in triton)."""
    draft: Path | None = None
    """A public-ready write-up (``drafts/<id>.md``) of a fix not yet forwarded: an active
    source patch whose ``forwarded`` is ``no`` must carry one (``patchlane draft ID`` writes
    it from sweep evidence)."""
    discussion: str | None = None
    """A URL where the bug is discussed beyond the issue and PR (another project's issue, a
    forum thread, the upstream code in question): for the reader, nothing tracks it."""


class When(NamedTuple):
    """When a ledger check (``version_floor``, ``packaging_pin``) runs: once module
    ``imported`` is imported, and only if every ``env`` variable has its value at that moment.
    Until then the entry is ``pending``; with the module imported but the environment not
    matching it is ``skipped: not applicable``."""

    imported: str
    env: Mapping[str, str] = {}
    installed: Mapping[str, SpecifierSet] = {}
    """Distributions whose installed release must be inside a range (``{triton: "<3.7"}``):
    a workaround for another package's bug holds only where that bug is."""

    def describe(self) -> str:
        """``import triton`` with TRITON_INTERPRET=1 and triton<3.7: what the check waits for."""
        conds = [f"{name}={value}" for name, value in self.env.items()]
        conds += [f"{name}{spec}" for name, spec in self.installed.items()]
        cond = " and ".join(conds)
        module = self.imported or "<the target's module>"  # as written, before the default
        return f"`import {module}`" + (f" with {cond}" if cond else "")

    def __str__(self) -> str:  # `patchlane show` prints the entry's settings with str()
        return self.describe()

    def unmet(self, environ: Mapping[str, str]) -> str | None:
        """Why the environment condition does not hold in ``environ`` (None when it does)."""
        for name, value in self.env.items():
            actual = environ.get(name)
            if actual != value:
                now = "unset" if actual is None else f"{actual!r}"
                return f"{name} is {now}, not {value!r}"
        return None


class RetireWhen(NamedTuple):
    release: SpecifierSet | None
    """Releases of the target distribution that carry the fix."""
    probe: bool
    """Whether the overlay's probe reporting upstream-fixed is part of the retirement evidence."""
    upstream_released: bool = False
    """Retire when the linked upstream fix is merged and in a release (``patchlane upstream``)."""
    reproducer: bool = False
    """Retire on sweep evidence alone: a run where the reproducer passes without the overlay
    (``upstream-fixed``). For a fix nobody forwarded, or one upstream may make differently,
    this is the one condition that can be checked."""


class FingerprintSpec(NamedTuple):
    sha256: tuple[str, ...]
    policy: FingerprintPolicy
    covers: tuple[str, ...] = ()
    """Extra qualnames in the target module whose source the overlay also relies on."""
    objects: tuple[str, ...] = ()
    """When set, exactly these qualnames are fingerprinted instead of the target (+ covers):
    for a target whose own source is not the upstream code at issue (an inherited
    ``autograd.Function.apply`` wrapped to route calls)."""
    releases: Mapping[str, str] = {}
    """Upstream release -> the fingerprint its target had when it ran (evidence, not the gate):
    how ``patchlane doctor`` names the release a source tree is nearest to."""

    def qualnames(self, target: str) -> tuple[str, ...]:
        return self.objects or (target, *self.covers)


class Policy(str, enum.Enum):
    """What a violated ledger entry does: ``error`` fails (at the protected import, in
    ``check_config``), ``warn`` logs and records it."""

    ERROR = "error"
    WARN = "warn"


class KindSpec(Protocol):
    """A kind's own settings: the value record its module (:mod:`patchlane.registry.per_kind`)
    reads from the registry, frozen. What the startup reads of one, it reads by these names:
    ``policy`` (a ledger kind's), ``when`` and ``requirement`` (a kind decided at an import:
    ``DecidedBy.LEDGER``), ``settings`` (``DecidedBy.CONFIG``). A NamedTuple, as every record
    here: ``patchlane show`` lists its fields."""

    def _asdict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class LedgerResult:
    """What one ledger check decided (a floor, a pin, a compat gate, ...)."""

    entry_id: str
    kind: str
    ok: bool
    policy: Policy
    message: str
    found: str | None = None
    expected: str | None = None
    skipped: Literal["disabled", "not applicable"] | None = None
    """Why the check did not run; None when it ran."""
    skip_reason: str | None = None
    """For a skip, the reason alone (``listed in PATCHLANE_DISABLE``, the unmet condition):
    the audit records it beside its outcome, where ``message`` says it in a sentence."""

    @property
    def blocking(self) -> bool:
        return not self.ok and self.policy is Policy.ERROR

    def as_dict(self) -> dict[str, Any]:
        return {"entry_id": self.entry_id, "kind": self.kind, "ok": self.ok,
                "policy": self.policy.value, "message": self.message, "found": self.found,
                "expected": self.expected, "skipped": self.skipped}


@dataclass(frozen=True)
class Entry:
    id: str
    kind: Kind
    summary: str
    target: Target
    applies_to: SpecifierSet | None
    upstream: Upstream
    retire_when: RetireWhen
    owner: str
    added: _dt.date
    status: Status
    source: Path
    """The registry file this entry came from; relative paths are resolved against it."""
    overlay: Path | None = None
    reproducer: Path | None = None
    fingerprint: FingerprintSpec | None = None
    spec: KindSpec | None = None
    """The ledger kinds' own settings, one frozen record per kind."""
    notes: Any = None
    evidence: Any = None
    """Free-form text, list or mapping: what ran, what was read (never evaluated)."""
    retired: _dt.date | None = None
    """When ``status: retired`` was recorded."""
    depends_on: tuple[str, ...] = ()
    """Source patches this one builds on (``depends_on: [id, ...]``). Where a dependency's
    gate admits the installed release, this entry applies only once that dependency is applied
    (or its probe says upstream already behaves as it would make it); where the dependency's
    gate excludes the release (upstream ships the behaviour itself, or it predates it), the
    dependency does not bind and this entry's own gate decides. Example: a follow-up fix to a
    backported behaviour is needed wherever the backport is applied, and on every release that
    ships the behaviour upstream."""
    continued_by: str | None = None
    """The source patch that carries this entry's bug onward on releases past this entry's
    gate (``continued_by: id``): upstream moved the code, the bug came along, and another
    entry guards it there. Past the gate the sweep reports such a row ``covered`` (naming that
    entry) instead of ``still-affected``, wherever that entry's gate admits the release."""
    applies_to_written: str | None = None
    """``applies_to`` as the registry wrote it (``>=0.16.0,<0.20.0``): packaging's ``str()``
    sorts the clauses (``<0.20.0,>=0.16.0``), which is not what the author wrote; pages and
    receipts show this (:attr:`applies_to_shown`)."""

    @property
    def policy(self) -> Policy | None:
        """What a violation of a ledger kind does; None for a kind without one."""
        policy = getattr(self.spec, "policy", None)
        return policy if isinstance(policy, Policy) else None

    @property
    def upstream_link(self) -> str:
        """The upstream issue, else the PR, for a message that points at the bug."""
        return self.upstream.issue or self.upstream.pr or "no upstream link"

    @property
    def active(self) -> bool:
        return self.status is Status.ACTIVE

    # Cached: read for every entry by Registry.startup_rows and the ledger hooks, and
    # packaging canonicalizes every version on a SpecifierSet's first str().

    @functools.cached_property
    def applies_to_text(self) -> str:
        """``str(applies_to)`` (``'None'`` when unset), as decisions record it."""
        return str(self.applies_to)

    @property
    def applies_to_recorded(self) -> str | None:
        """A setting's ``applies_to`` as its decisions record it: :attr:`applies_to_text`, or
        None when it has none (a config entry's gate is optional)."""
        return self.applies_to_text if self.applies_to is not None else None

    @property
    def applies_to_shown(self) -> str | None:
        """``applies_to`` for a reader: as written in the registry; None when unset."""
        if self.applies_to is None:
            return None
        return self.applies_to_written or self.applies_to_text

    @property
    def serves(self) -> str | None:
        """Which releases the entry still serves, for a reader: its gate as written, else
        the scope of a ledger entry (``when triton<3.7``); None when it has neither."""
        if self.applies_to is not None:
            return self.applies_to_shown
        if self.when is not None and self.when.installed:
            return "when " + ", ".join(f"{name}{spec}"
                                       for name, spec in self.when.installed.items())
        return None

    @functools.cached_property
    def requirement_text(self) -> str | None:
        """A floor's or pin's requirement as decisions record it (``torch>=2.6.0``)."""
        required = getattr(self.spec, "requirement", None)
        return f"{self.target.distribution}{required}" if required is not None else None

    @property
    def _declared_when(self) -> When | None:
        """The ``when:`` the registry spelled out (kinds decided at an import), before defaults."""
        when = getattr(self.spec, "when", None)
        return when if isinstance(when, When) else None

    @functools.cached_property
    def when(self) -> When | None:
        """For a kind decided at an import (a floor, a pin): the import (and environment) its
        check waits for. ``when.imported`` defaults to the module of ``target.object``, else the
        distribution's import name. None for the other kinds."""
        if KINDS[self.kind].decided_by is not DecidedBy.LEDGER:
            return None
        given = self._declared_when
        module = (given.imported if given is not None and given.imported else None) \
            or self.target.module or import_name(self.target.distribution)
        return When(module, given.env if given is not None else {},
                    given.installed if given is not None else {})

    def read_gate(self, module: ModuleType | None = None) -> GateResult:
        """This entry's gate (``applies_to``) read against the release of its distribution:
        the copy ``module`` was imported from when given, else the one ``sys.path`` would
        import (:func:`~patchlane.installed.gates.check_gate`)."""
        return check_gate(self.target.distribution, self.applies_to, module,
                          self.target.version_from)

    @property
    def names_its_import(self) -> bool:
        """Whether the entry names the module its check waits for (``target.object`` or
        ``when.imported``): only then does ``policy: error`` make that import fail."""
        given = self._declared_when
        return self.target.module is not None or bool(given is not None and given.imported)


class StartupRow(NamedTuple):
    """What the startup walk needs of one entry, and nothing else: plain strings, so a cached
    registry can start a process without rebuilding its entries (patchlane.registry.cache)."""

    id: str
    kind: str
    """``Kind`` value."""
    active: bool
    distribution: str
    module: str | None
    """The module whose import decides it: a source patch's target module, a floor's or pin's
    ``when.imported``; None for the other kinds."""
    modules: tuple[str, ...]
    """A config entry's settings modules (one hook each)."""
    waiting: str
    """The pending record's reason: ``waiting for `import x```."""
    applies_to: str | None
    """As decisions record it: ``applies_to`` of a source patch, the requirement of a floor or
    pin (``torch>=2.6.0``)."""
    decided_by: str
    """How the startup decides it (a :class:`~patchlane.registry.kinds.DecidedBy` value): what
    the startup and the lazy start read instead of the kind's name."""

    @classmethod
    def of(cls, entry: Entry) -> StartupRow:
        module: str | None = None
        modules: tuple[str, ...] = ()
        waiting, applies_to = "", None
        decided_by = KINDS[entry.kind].decided_by
        if decided_by is DecidedBy.WRAP:
            module, applies_to = entry.target.module, entry.applies_to_text
            waiting = f"waiting for `import {module}`"
        elif decided_by is DecidedBy.LEDGER and entry.when is not None:
            module, applies_to = entry.when.imported, entry.requirement_text
            waiting = f"waiting for {entry.when.describe()}"
        elif decided_by is DecidedBy.CONFIG:
            modules = tuple(sorted({str(name).rpartition(".")[0]
                                    for name in getattr(entry.spec, "settings", {})}))
            waiting = f"waiting for `import {', '.join(modules)}`"
            applies_to = entry.applies_to_recorded
        return cls(entry.id, entry.kind.value, entry.active, entry.target.distribution, module,
                   modules, waiting, applies_to, decided_by.value)


@dataclass(frozen=True)
class Registry:
    entries: tuple[Entry, ...]
    sources: tuple[Path, ...]
    contents: tuple[bytes, ...] = ()
    """The bytes of every source file as validated, in load order."""
    checked: tuple[tuple[Path, Path], ...] = ()
    """Every file whose existence validation checked (an overlay, a reproducer, a check, a
    draft): (the registry's folder joined with the entry's text, what that resolved to). With
    the bytes, all that validation read from the filesystem."""
    rejected: tuple[RegistryError, ...] = ()
    """Registry files refused, each on its own (its entries are not here; the other files'
    are): one error per file, naming the file, the key and the fix. Never cached."""

    @functools.cached_property
    def startup_rows(self) -> tuple[StartupRow, ...]:
        """One :class:`StartupRow` per entry, in order: all that `import patchlane` reads."""
        return tuple(StartupRow.of(entry) for entry in self.entries)

    @functools.cached_property
    def _by_id(self) -> dict[str, Entry]:
        return {entry.id: entry for entry in self.entries}

    @functools.cached_property
    def digest(self) -> str:
        """sha256 over ``contents``: the registry hash in receipts. Computed on first use so
        ``import patchlane`` does not pay for loading OpenSSL's hashlib."""
        if not self.contents:
            return ""
        import hashlib

        digest = hashlib.sha256()
        for raw in self.contents:
            digest.update(raw)
        return "sha256:" + digest.hexdigest()

    def get(self, entry_id: str) -> Entry:
        entry = self._by_id.get(entry_id)
        if entry is not None:
            return entry
        raise UnknownEntryError(entry_id, (e.id for e in self.entries))

    @functools.cached_property
    def _by_module(self) -> dict[str, tuple[Entry, ...]]:
        index: dict[str, list[Entry]] = {}
        for entry in self.entries:
            if entry.target.module is not None:
                index.setdefault(entry.target.module, []).append(entry)
        return {module: tuple(entries) for module, entries in index.items()}

    def by_module(self, module: str) -> tuple[Entry, ...]:
        # indexed once: every hooked module's import asks, and a registry has hundreds
        return self._by_module.get(module, ())

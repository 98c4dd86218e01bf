"""The startup walk: registry -> gate -> probe -> fingerprint -> apply -> audit.

A :class:`Decider` owns one validated registry. It registers a post-import hook per target
module; when the module is imported (or at once, if it already is) each entry on it is decided
once, recorded in the audit, and applied in the shape its target has (:mod:`patchlane.targets`:
a function wrapper, a property, a class's members ...), whose originals stay reachable for
:meth:`Decider.revert`.
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, NamedTuple

import wrapt

from .. import import_hook
from ..common.errors import (
    DriftError,
    OverlayError,
    PatchlaneError,
    StrictModeError,
    StrictOverlayError,
    clipped,
    drift_reason,
    exit_if_uncaught,
)
from ..installed.gates import GateResult
from ..lazy.untouched import at_start
from ..loading import load_file
from ..registry import Entry, FingerprintPolicy, Registry
from ..registry.kinds import KINDS, DecidedBy
from ..targets import Found, Refused, Resolved, find
from ..targets import resolve as resolve_target
from ..targets.place import (
    copies_left,
    current,
    defined_elsewhere,
    ours_at,
    place,
    reaches,
    still_placed,
    unplace,
)
from ..targets.protocol import Placement, disown, forget_value, layers_at
from . import logs  # noqa: F401 - the logger's handler and rank filter (patchlane.deciding.logs)
from .audit import AuditLog, Decision, Outcome
from .controls import Controls

if TYPE_CHECKING:
    from .proof import Evidence

__all__ = ["Decider", "load_overlay", "strict_error"]

log = logging.getLogger("patchlane")


class _Placing(NamedTuple):
    """One placing of an entry's overlay: its switch (:data:`patchlane.targets.protocol.Hit`),
    whether its shape's wrappers obey it (``off_when_reverted``), and what it placed."""

    live: list[bool]
    off_when_reverted: bool
    placements: list[Placement]


_RESTORED, _UNLINKED, _REPLACED = "restored", "unlinked", "replaced"
"""What revert did at one attribute (Decider._revert_plan)."""


def _reverted_note(applied: list[Placement], plans: list[tuple[Callable[[], None], str]],
                   passes_through: bool) -> str:
    """The reason of a revert's decision: what it did, said as it is."""
    done = [how for _, how in plans]
    if _REPLACED not in done:
        return ("patchlane.revert() removed its layer; the layers above it stay"
                if _UNLINKED in done else "patchlane.revert() restored the original")
    replaced = ", ".join(f"{getattr(p.owner, '__name__', type(p.owner).__name__)}.{p.attribute}"
                         for p, how in zip(applied, done, strict=True) if how == _REPLACED)
    off = ("the overlay is off: a call that still reaches it (through that object, or a "
           "reference taken before) goes straight to upstream's code" if passes_through else
           "what the overlay placed runs wherever that object still calls it")
    return (f"patchlane.revert(): {replaced} was replaced since by another library, and is "
            f"left as it is; {off}")


def strict_error(decision: Decision, overlay_failed: bool = False) -> StrictModeError:
    """The error strict mode raises for a problem ``decision``: its class carries the exit
    code. Drift is :class:`DriftError` (4); a failure of the overlay itself (``overlay_failed``:
    its file, probe, target read or wrap) :class:`StrictOverlayError` (5); every other problem
    (an unevaluable gate, a missing config setting, a ledger violation) :class:`StrictModeError`
    (6). The outcome alone cannot tell an overlay failure from an unevaluable gate (both are
    ``failed: error``), hence the flag from the step that failed."""
    if decision.outcome is Outcome.REFUSED_DRIFT:
        return DriftError(decision.entry_id, decision.fingerprint_expected,
                          decision.fingerprint_found or "")
    if overlay_failed:
        return StrictOverlayError(decision.entry_id, decision.reason)
    return StrictModeError(decision.entry_id, decision.outcome.value, decision.reason)


def load_overlay(entry: Entry, source: bytes | None = None) -> ModuleType:
    """Import the overlay file of ``entry`` under a private module name, once per content:
    ``source`` (its bytes, as a proof hashed them) is what runs, never a cached module of
    other bytes nor bytecode from ``__pycache__``."""
    assert entry.overlay is not None
    try:
        return load_file(entry.id, "overlay", entry.overlay, source)
    except ImportError as exc:
        raise OverlayError(entry.id, str(exc)) from exc


# What a training log shows of each decision at INFO: what changed the process's code or
# settings. Skips and satisfied ledger checks are DEBUG (``patchlane status`` lists them);
# anything someone must look at is a WARNING.
_LEVELS = {Outcome.APPLIED: logging.INFO, Outcome.CONFIG_APPLIED: logging.INFO,
           Outcome.REVERTED: logging.INFO,
           **{o: logging.WARNING for o in Outcome if o.is_problem}}


_FIXES = {
    "finding the target": "check target.object against the installed release",
    "reading the overlay file": "make the overlay file readable",
    "checking its proof": "check PATCHLANE_EVIDENCE and its runs",
    "fingerprinting the target": "check target.object and fingerprint against the installed "
                                 "release (`patchlane fingerprint ID`)",
}
"""The fix an exception in each step of a walk asks for; the overlay's own steps (its top
level, its probe, the placing) ask to correct the overlay file."""


def _raised(step: str, exc: BaseException, entry: Entry) -> str:
    """What an exception while deciding ``entry`` says: the step that raised it, the
    exception, the line of the entry's overlay file it came from (when it came from there),
    and the fix for that step."""
    import traceback

    overlay = str(entry.overlay) if entry.overlay is not None else None
    at = ""
    syntax = exc if isinstance(exc, SyntaxError) else exc.__cause__
    if isinstance(syntax, SyntaxError) and syntax.filename:
        at = f" at {syntax.filename}:{syntax.lineno}"
    else:
        ours = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == overlay]
        if ours:
            at = f" at {ours[-1].filename}:{ours[-1].lineno}"
    fix = _FIXES.get(step, "correct the overlay file")
    return (f"{step} raised {type(exc).__name__}: {exc}{at}; fix: {fix}, or leave the entry "
            f"out with PATCHLANE_DISABLE={entry.id}")


def _still_loading(name: str) -> str | None:
    """``name``, or the package of it, whose body is still running (importlib's mark, CPython
    3.10-3.13), the outermost first; None when none is."""
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        module = sys.modules.get(prefix)
        if module is not None and getattr(getattr(module, "__spec__", None), "_initializing",
                                          False):
            return prefix
    return None


class _Locks(dict[str, threading.RLock]):
    """entry id -> its RLock, created on first use (thread-safely, one per id)."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()

    def __missing__(self, entry_id: str) -> threading.RLock:
        with self._guard:
            return self.setdefault(entry_id, threading.RLock())


class Decider:
    """The per-process decision engine: one registry's worth of entries in this process, each
    decided when its target is imported (gate, probe, fingerprint, apply, audit).

    One word, one meaning: a *decider* decides entries in a process; a *lane* is where a
    reproducer runs (``cpu`` or ``cuda``: :data:`patchlane.sweep.reproduce.Lane`); an
    *interpreter* is a Python version the scripts set up a venv for."""

    def __init__(self, registry: Registry, controls: Controls, audit: AuditLog | None = None):
        self.registry = registry
        self.controls = controls
        # What PATCHLANE_DISABLE / PATCHLANE_ONLY say of this registry's entries, read once:
        # which they leave out and why (every later step, each kind's walk and the rank check,
        # asks left_out(): one answer), the ids they list that name no entry here, and the
        # warnings start() logs about those.
        said = controls.for_entries(row.id for row in registry.startup_rows)
        self._left_out = said.left_out
        self.unknown_control_ids = said.unknown_ids
        """PATCHLANE_DISABLE / PATCHLANE_ONLY ids naming no entry here -> the variables."""
        self._control_warnings = said.warnings
        self._control_refusal = said.refusal
        self.audit = audit if audit is not None else AuditLog()
        self._applied: dict[str, list[Placement]] = {}
        """entry id -> every attribute its overlay set (one, or a class's members)."""
        self._placings: dict[str, list[_Placing]] = {}
        """entry id -> every placing of its overlay since it was last reverted: the one in
        _applied, and those a reload replaced (a reference taken before the reload still runs
        them, as it should while the entry is applied). Revert turns each one's switch off and
        disowns what it placed (patchlane.targets.protocol.Hit, disown)."""
        # One lock per entry, not one global lock: a probe may import another target module
        # while a second thread holds that module's import lock and waits to decide its own
        # entry. A single lock would deadlock those two threads; per-entry locks cannot.
        # Made on first use: building one per entry here would read every entry at startup.
        self._locks = _Locks()
        self._hooked: set[str] = set()
        self._elsewhere: dict[str, tuple[Any, str]] = {}
        """entry id -> where another decider of this process placed its overlay (owner,
        attribute): applied, and checked afresh there."""
        self._seen: set[str] = set()
        self._waiting: dict[str, set[str]] = {}
        """dependency id -> entries (depends_on) waiting for its decision."""
        # Guards _waiting. An entry registers to wait only while its dependency is still
        # pending, checked under this lock; the dependency's decision is recorded before its
        # waiters are taken, under the same lock. So a waiter is either taken (and decided
        # again) or sees the settled dependency and judges it at once: never left pending.
        self._wait_lock = threading.Lock()
        self._parked: dict[str, str] = {}
        """entry id -> the package whose import was still running when the entry's
        dependency had to be imported: decided again once it has finished (guarded by
        _wait_lock)."""
        self._gates: dict[str, GateResult] = {}
        """entry id -> the gate its latest walk read: what an entry that depends on it asks."""
        self._hook_lock = threading.Lock()
        self._started = False
        self._settled = False
        self._evidence: dict[tuple[Path, ...], Evidence] = {}
        self._evidence_lock = threading.Lock()

    # -- walk ------------------------------------------------------------------------------

    def start(self) -> None:
        """Record every entry and register hooks; decide at once for imported targets.

        It reads only the registry's startup rows (plain strings per entry), never the
        entries themselves nor any distribution's metadata: floors and pins are checked in a
        hook on their module, and a cached registry (patchlane.registry.cache) rebuilds its
        entries only when a hook first needs one. Per entry that leaves one record, recorded
        in one batch under one timestamp, then one hook per module: `import patchlane` stays
        flat from a handful of entries to hundreds."""
        if self._control_refusal is not None:  # strict mode: before any record or hook
            raise self._control_refusal
        rows = self.registry.startup_rows
        for warning in self._control_warnings:
            log.warning("%s", warning)
        at = self.audit.stamp()
        records: list[Decision] = []
        hooks: list[tuple[str, Callable[[ModuleType], None]]] = []
        for row in rows:
            # What an entry is before its module is imported: one rule with a process whose
            # startup never loaded (patchlane.lazy.untouched).
            outcome, reason = at_start(row.decided_by, row.active, self._left_out.get(row.id),
                                       row.waiting)
            if outcome == Outcome.RETIRED.value:
                records.append(Decision(row.id, Outcome.RETIRED, reason, at=at))
            elif outcome == Outcome.SKIPPED_DISABLED.value:
                # A disabled floor, pin, gate or setting is never checked or assigned: decided
                # now, nothing to wait for. (A source patch's walk decides it on import, after
                # reading the gate, so its audit still names the installed release.) Never a
                # problem, so never raised in strict mode: logged like every decision.
                records.append(Decision(row.id, Outcome.SKIPPED_DISABLED, reason,
                                        distribution=row.distribution or None, at=at))
                log.info("%s %s: %s", row.id, Outcome.SKIPPED_DISABLED.value, reason)
            elif outcome == Outcome.LEDGER.value:
                records.append(Decision(row.id, Outcome.LEDGER, reason, at=at))
            elif row.decided_by == DecidedBy.LEDGER.value:
                # Fired right after the module's import (at once if it is already imported):
                # the distribution's metadata is read only then, never at `import patchlane`.
                assert row.module is not None
                records.append(Decision(row.id, Outcome.PENDING, row.waiting,
                                        distribution=row.distribution,
                                        applies_to=row.applies_to, at=at))
                hooks.append((row.module, self._ledger_hook(row.id)))
            elif row.decided_by == DecidedBy.CONFIG.value:
                records.append(Decision(row.id, Outcome.PENDING, row.waiting,
                                        distribution=row.distribution or None,
                                        applies_to=row.applies_to, at=at))
                hooks.extend((name, self._config_hook(row.id, name)) for name in row.modules)
        # Every pending record is in before any hook is registered: a hook fires at once for
        # a module that is already imported, and its decision must come after the record.
        self.audit.record_many(records)
        for module_name, hook in hooks:
            import_hook.when_imported(module_name, hook)
        self.apply()
        self._started = True

    def left_out(self, entry_id: str) -> str | None:
        """Why ``PATCHLANE_DISABLE`` / ``PATCHLANE_ONLY`` leave ``entry_id`` out, if they do."""
        return self._left_out.get(entry_id)

    # -- ledger kinds ----------------------------------------------------------------------

    def _ledger_hook(self, entry_id: str) -> Callable[[ModuleType], None]:
        def check(module: ModuleType) -> None:
            self.decide_ledger(self.registry.get(entry_id))

        return check

    def decide_ledger(self, entry: Entry, eager: bool = False) -> Decision:
        """Check a version floor or packaging pin now and record the decision.

        From the hook (``eager=False``), a violated ``policy: error`` entry that names its
        module makes that import fail with :class:`~patchlane.deciding.ledger.LedgerError`.
        ``eager`` is for ``patchlane status``: the check runs before its module is imported, is
        recorded as such, and raises only what strict mode raises."""
        from .ledger import LedgerError, evaluate

        when = entry.when
        assert when is not None
        note = (f" (checked eagerly; a run checks on {when.describe()})" if eager else "")
        with self._locks[entry.id]:
            # One sequence (left out?, then the `when` condition, then the check) for this hook
            # and for `patchlane doctor`: ledger.evaluate. A `when` that does not hold is part
            # of the entry (a pin for Triton's CPU interpreter says nothing about a GPU run
            # that imports triton): recorded with why, not checked.
            result = evaluate(entry, self.left_out(entry.id))
            assert result is not None
            if result.skipped == "disabled":
                decision = Decision(entry.id, Outcome.SKIPPED_DISABLED, result.skip_reason or "",
                                    distribution=entry.target.distribution)
            elif result.skipped == "not applicable":
                decision = Decision(entry.id, Outcome.SKIPPED_NOT_APPLICABLE,
                                    result.message + note,
                                    distribution=entry.target.distribution)
            else:
                decision = Decision(entry.id,
                                    Outcome.LEDGER_OK if result.ok else Outcome.LEDGER_VIOLATION,
                                    result.message + note,
                                    distribution=entry.target.distribution,
                                    installed=result.found, applies_to=result.expected)
            decision = self._finish(entry, decision)
        if result.blocking and not eager and entry.names_its_import:
            # policy: error -> the import the floor protects fails, loudly, with the fix.
            raise LedgerError(result)
        return decision

    def _config_hook(self, entry_id: str, module_name: str) -> Callable[[ModuleType], None]:
        def assign(module: ModuleType) -> None:
            entry = self.registry.get(entry_id)
            settings = {}
            # a kind the startup decides by assigning settings (DecidedBy.CONFIG) keeps them in
            # its record's `settings` (KindSpec)
            for name, value in getattr(entry.spec, "settings", {}).items():
                owner, _, attr = name.rpartition(".")
                if owner == module_name:
                    settings[attr] = value
            with self._locks[entry.id]:
                self._finish(entry, self._assigned(entry, module, settings))

        return assign

    def _assigned(self, entry: Entry, module: ModuleType, settings: dict[str, Any]) -> Decision:
        """The decision for a config entry's ``settings`` on its imported ``module``, made (the
        settings assigned) but not yet recorded: its hook records it, under the entry's lock."""
        applies_to = entry.applies_to_recorded

        def made(outcome: Outcome, reason: str, installed: str | None = None) -> Decision:
            # what the entry is for, on every one of its decisions, as a source patch's say
            return Decision(entry.id, outcome, reason, distribution=entry.target.distribution,
                            installed=installed, applies_to=applies_to)

        reason = self.left_out(entry.id)
        if reason is not None:
            return made(Outcome.SKIPPED_DISABLED, reason)
        # The release the settings are for, recorded with the decision as an overlay's is:
        # the proof of a config entry is of that release (its receipt's class).
        installed = None
        if entry.target.distribution:
            gate = entry.read_gate()
            installed = gate.found
            if entry.applies_to is not None and not gate.open:
                return made(Outcome.SKIPPED_GATE, gate.reason, gate.found)
        try:
            current = {attr: getattr(module, attr) for attr in settings}
        except AttributeError as exc:
            return made(Outcome.FAILED_ERROR, f"{module.__name__} has no setting: {exc}",
                        installed)
        if current == settings:  # the probe of a config entry: upstream's default caught up
            return made(Outcome.UPSTREAM_FIXED,
                        f"{module.__name__} already defaults to {settings}", installed)
        if self.controls.require_evidence:
            # A setting changes what the job computes as an overlay does: proven first.
            unproven = self._unproven(entry, installed)
            if unproven is not None:
                return made(Outcome.REFUSED_EVIDENCE, unproven, installed)
        changes = []
        try:
            for attr, value in settings.items():
                old = getattr(module, attr)
                # Config modules (torch._dynamo.config) are assigned by attribute: that is
                # their public interface, so this is not monkeypatching code.
                setattr(module, attr, value)
                changes.append(f"{module.__name__}.{attr}: {old!r} -> {value!r}")
        except AttributeError as exc:
            return made(Outcome.FAILED_ERROR, f"{module.__name__} has no setting: {exc}",
                        installed)
        return made(Outcome.CONFIG_APPLIED, "; ".join(changes), installed)

    def apply(self) -> None:
        """Idempotent re-walk: hook what is not hooked, decide what is imported and unapplied."""
        at = self.audit.stamp()
        pending: list[Decision] = []
        first_hooks: list[str] = []
        redecide: list[tuple[str, str]] = []
        for row in self.registry.startup_rows:
            if not row.active or row.decided_by != DecidedBy.WRAP.value:
                continue
            module_name = row.module
            assert module_name is not None
            with self._hook_lock:
                first = module_name not in self._hooked
                self._hooked.add(module_name)
                new_entry = row.id not in self._seen
                self._seen.add(row.id)
            if new_entry and module_name not in sys.modules:
                # one record per entry: several entries may wait on the same module
                pending.append(Decision(row.id, Outcome.PENDING, row.waiting,
                                        distribution=row.distribution,
                                        applies_to=row.applies_to, at=at))
            if first:
                first_hooks.append(module_name)
            elif module_name in sys.modules:
                redecide.append((row.id, module_name))
        # Records first, in one batch, then the hooks (see start()).
        self.audit.record_many(pending)
        for module_name in first_hooks:
            # Fires at once when the module is already imported, else right after import, and
            # again whenever its code runs anew (a reload, a re-import after a purge).
            import_hook.when_imported(module_name, self._on_import)
        for entry_id, module_name in redecide:
            module = sys.modules.get(module_name)
            if module is not None:
                self.decide(self.registry.get(entry_id), module)

    def _on_import(self, module: ModuleType) -> None:
        for entry in self.registry.by_module(module.__name__):
            if entry.active and KINDS[entry.kind].decided_by is DecidedBy.WRAP:
                self.decide(entry, module)
        if self._parked:
            self._unpark()

    def _unpark_safely(self) -> None:
        """:meth:`_unpark` as the package's import ends: a strict-mode refusal is raised from
        that import, as at any target's; anything else is logged, never raised into it."""
        try:
            self._unpark()
        except PatchlaneError:
            raise
        except Exception as exc:
            log.error("deciding the entries that waited for a package's import failed: %s: %s",
                      type(exc).__name__, exc)

    def _unpark(self) -> None:
        """Decide again each entry parked while its dependency's package was still being
        imported (:meth:`_unmet_dependency`), now that the package has finished: its
        dependency's module can be imported safely."""
        with self._wait_lock:
            ready = [entry_id for entry_id, package in self._parked.items()
                     if _still_loading(package) is None]
            for entry_id in ready:
                del self._parked[entry_id]
        for entry_id in ready:
            # Its walk imports the dependency's module now (_unmet_dependency: no package of
            # it is loading any more), judged there, without waking this entry a second time
            entry = self.registry.get(entry_id)
            latest = self.audit.get(entry_id)
            target = sys.modules.get(entry.target.module or "")
            if latest is not None and latest.outcome is Outcome.PENDING and target is not None:
                self.decide(entry, target)

    # -- one entry -------------------------------------------------------------------------

    def decide(self, entry: Entry, module: ModuleType) -> Decision:
        with self._locks[entry.id]:
            applied = self._applied.get(entry.id)
            try:
                found: Found | None = find(module, entry.target.qualname or "")
            except (AttributeError, LookupError):
                found = None  # absent or refused: the walk says which, with the fix
            if applied is not None and found is not None and still_placed(found, applied):
                # idempotent: nothing new happened (another entry's layer may sit on top)
                return self.audit.latest()[entry.id]
            if found is not None and ours_at(found.owner, found.attribute, entry.id):
                # Wrapped by another Decider in this process (e.g. a second registry load): never
                # stack a second wrapper on top of the first.
                self._elsewhere[entry.id] = (found.owner, found.attribute)
                return self._finish(entry, Decision(
                    entry.id, Outcome.APPLIED, "already wrapped by another patchlane decider",
                    distribution=entry.target.distribution))
            decision, overlay_failed = self._walk(entry, module)
            # Recorded under the entry's lock: a thread that decides it again (a dependency
            # settled meanwhile and woke it) records after this one, never before, so a late
            # "pending" never overwrites the decision that followed it.
            decided = self._finish(entry, decision, overlay_failed)
        if decided.outcome is Outcome.PENDING:
            return decided  # those waiting for this entry go on waiting, with it
        with self._wait_lock:
            woken = sorted(self._waiting.pop(entry.id, ()))
        for waiting_id in woken:
            # Entries that waited for this one (depends_on): decided now that it is. Outside
            # every lock: the lock order stays "an entry before its dependencies".
            waiting = self.registry.get(waiting_id)
            target = sys.modules.get(waiting.target.module or "")
            if target is not None:
                self.decide(waiting, target)
        return decided

    def _wait_for(self, entry_id: str, dep_id: str) -> bool:
        """Make ``entry_id`` wait for ``dep_id``'s decision; False when that decision is in
        already (then the caller judges it now)."""
        with self._wait_lock:
            latest = self.audit.get(dep_id)
            if latest is not None and latest.outcome is not Outcome.PENDING:
                return False
            self._waiting.setdefault(dep_id, set()).add(entry_id)
            return True

    def _unmet_dependency(self, entry: Entry) -> tuple[str | None, str | None]:
        """``(why entry cannot apply for want of a depends_on entry, None)``; ``(None, None)``
        when every dependency is applied, or does not bind here (retired, or its gate excludes
        the installed release: upstream ships the behaviour itself, or predates it). A
        dependency not decided yet is decided first (importing its target module runs its
        hook), unless its module is still executing (it imports this entry's module on its
        way), or it waits in turn for its own dependency: then ``(why, dependency id)``, and
        this entry waits for it (registered with :meth:`_wait_for`). A pending dependency is
        never judged: this entry is decided when the dependency is, whatever the threads'
        timing, so every rank decides the same.

        A decided dependency is judged by what its own walk recorded (its decision and the
        gate it read), never by evaluating its gate again: the two could disagree (the walk
        read the gate with the imported module, which can be another copy than sys.path
        finds) and the answer would then contradict the audit."""
        import importlib

        for dep_id in entry.depends_on:
            dep = self.registry.get(dep_id)
            if not dep.active or dep.target.module is None:
                continue
            latest = self.audit.get(dep_id)
            if latest is None or latest.outcome is Outcome.PENDING:
                module = sys.modules.get(dep.target.module)
                # importlib marks a module whose body is still running (CPython 3.10-3.13):
                # deciding the dependency now would look up names not defined yet.
                if module is not None and getattr(module.__spec__, "_initializing", False):
                    if self._wait_for(entry.id, dep_id):
                        return (f"waiting for {dep_id}, which it depends on: "
                                f"{dep.target.module} is still being imported", dep_id)
                    # else decided meanwhile, by another thread: judged below
                elif module is None:
                    # Nothing recorded yet, and importing the module is what decides it: only
                    # worth it (and only safe: the release may not ship that module) when the
                    # gate admits what sys.path would import. The walk reads it again, with
                    # the module, and that is the gate judged below.
                    if not dep.read_gate().open:
                        continue
                    loading = _still_loading(dep.target.module)
                    if loading is not None:
                        # A package of it is still running (torch/__init__ importing torch.nn,
                        # whose hook decides this entry): imported from here, the module would
                        # read the half-run package's names, and a failed import leaves the
                        # package half-built for the job (a circular-import error in its own
                        # `import torch`, or later). Decided when its module is imported, or
                        # once the package has finished and another target is imported.
                        if self._wait_for(entry.id, dep_id):
                            with self._wait_lock:
                                first = loading not in self._parked.values()
                                self._parked[entry.id] = loading
                            if first:
                                import_hook.after_loading(loading, self._unpark_safely)
                            return (f"waiting for {dep_id}, which it depends on: "
                                    f"{dep.target.module} is not imported yet, and {loading} "
                                    "is still being imported", dep_id)
                        latest = self.audit.get(dep_id)  # decided meanwhile: judged below
                    else:
                        with self._wait_lock:  # judged here, right after: never woken too,
                            self._waiting.get(dep_id, set()).discard(entry.id)  # nested in it
                        try:
                            importlib.import_module(dep.target.module)  # its hook decides it
                        except PatchlaneError:
                            raise  # the dependency's own strict-mode refusal, as it is
                        except Exception as exc:  # never raised into the import that got here
                            return (f"depends on {dep_id}, whose module {dep.target.module} "
                                    f"failed to import: {type(exc).__name__}: {exc}", None)
                else:
                    self.decide(dep, module)
                latest = self.audit.get(dep_id)
                if latest is None or latest.outcome is Outcome.PENDING:
                    # The dependency waits in turn (for its own dependency, whose module is
                    # still loading): this entry waits with it and is decided right after it.
                    # Judged now it would settle as skipped for good, and whether it does
                    # would depend on thread timing: ranks would disagree.
                    if self._wait_for(entry.id, dep_id):
                        said = latest.reason if latest is not None else "not decided yet"
                        return (f"waiting for {dep_id}, which it depends on: it is pending "
                                f"({said})", dep_id)
                    latest = self.audit.get(dep_id)
            if latest is not None and latest.outcome in (Outcome.APPLIED,
                                                         Outcome.UPSTREAM_FIXED):
                continue
            gate = self._gates.get(dep_id)
            if gate is not None and not gate.open:
                continue  # gated out (or its gate cannot be read): it does not bind here
            said = "undecided" if latest is None else f"{latest.outcome.value}: " \
                f"{latest.reason}"
            admits = f"whose gate admits {gate.found}" if gate is not None else \
                "which is not decided"
            return (f"depends on {dep_id}, {admits} but which is not applied here ({said}): "
                    "what this entry fixes is not there", None)
        return None, None

    def _walk(self, entry: Entry, module: ModuleType) -> tuple[Decision, bool]:
        """The decision for ``entry`` on its imported ``module``, and whether it is a failure of
        the overlay itself (what strict mode raises depends on it: :func:`strict_error`)."""
        # The gate is read first even for disabled entries: the audit always says which
        # release was installed, whatever was decided. Kept for the entries that depend on
        # this one: they read it rather than evaluate this gate again.
        gate = entry.read_gate(module)
        self._gates[entry.id] = gate

        def decision(outcome: Outcome, reason: str, found: str | None = None) -> Decision:
            expected = entry.fingerprint.sha256 if found and entry.fingerprint else ()
            return Decision(entry.id, outcome, reason, distribution=entry.target.distribution,
                            installed=gate.found, applies_to=str(entry.applies_to),
                            fingerprint_expected=expected, fingerprint_found=found,
                            version_source=str(gate.source))

        reason = self.left_out(entry.id)
        if reason is not None:
            return decision(Outcome.SKIPPED_DISABLED, reason), False
        if not gate.open:
            if gate.found is None or not gate.comparable:
                # the target imported, yet no version to gate on: never guess
                return decision(Outcome.FAILED_ERROR,
                                f"cannot evaluate the gate: {gate.reason}"), False
            return decision(Outcome.SKIPPED_GATE, gate.reason), False
        unmet, wait_for = self._unmet_dependency(entry)
        if wait_for is not None:
            # Decided again right after the dependency is (_wait_for, decide()).
            return decision(Outcome.PENDING, unmet or ""), False
        if unmet is not None:
            return decision(Outcome.SKIPPED_DEPENDENCY, unmet), False
        step = "finding the target"
        try:
            assert entry.target.qualname is not None
            # Where the overlay would go, and in what shape, before any overlay code runs: a
            # target no shape carries is refused here with the fix, never reported applied.
            target = resolve_target(module, entry.target.qualname, entry.target.shape)
            # Under REQUIRE_EVIDENCE the proof is checked before any overlay code runs (its
            # file's top level, its probe): a refused overlay must not run at all, it could
            # patch anything at import. The bytes the proof hashed are the bytes executed
            # (load_overlay(..., source)).
            step = "reading the overlay file"
            source = entry.overlay.read_bytes() if entry.overlay is not None else None
            if self.controls.require_evidence:
                step = "checking its proof"
                unproven = self._unproven(entry, gate.found, source)
                if unproven is not None:
                    return decision(Outcome.REFUSED_EVIDENCE, unproven), False
            step = "running the overlay file's top level"
            overlay = load_overlay(entry, source)
            probe = getattr(overlay, "probe", None)
            step = "the overlay's probe(module)"
            if probe is not None and probe(module):
                return decision(Outcome.UPSTREAM_FIXED,
                                f"probe: upstream already behaves correctly on {gate.found}"), False
            spec = entry.fingerprint
            assert spec is not None
            # Imported here, not at module level: ast/hashlib stay out of `import patchlane`.
            from ..installed.fingerprint import matches

            step = "fingerprinting the target"
            found, matched = matches(module, spec.qualnames(entry.target.qualname), spec.sha256)
            drift = not matched
            if drift and spec.policy is FingerprintPolicy.REFUSE:
                return decision(Outcome.REFUSED_DRIFT,
                                drift_reason(entry.id, spec.sha256, found), found), False
            step = "placing the overlay"
            self._place(entry, target, overlay)
        except Refused as exc:
            return decision(Outcome.FAILED_ERROR, str(exc)), True
        except Exception as exc:  # recorded, logged, raised in strict mode: never swallowed
            return decision(Outcome.FAILED_ERROR, _raised(step, exc, entry)), True
        except SystemExit as exc:
            # An overlay file or probe calling sys.exit() would end the training process at
            # the target's import, silently. It is a failed entry like any other.
            return decision(Outcome.FAILED_ERROR, f"the overlay or its probe called "
                            f"sys.exit({exc.code!r}) while being decided; patchlane stopped "
                            "it"), True
        note = " (fingerprint drift tolerated: policy warn)" if drift else ""
        counted = "" if target.shape.counts_hits else "; its reads are not counted"
        left = copies_left(self._applied[entry.id])
        if left:
            # Applied where a lookup goes, but not on every call path: said, on every rank.
            skipped = (f"{', '.join(left)} still holds upstream's function (taken when its "
                       "module ran): calls through it skip the overlay")
            home = defined_elsewhere(self._applied[entry.id])
            if home is not None:
                skipped += (f"; fix: name the target where it is defined, `{home}`, so it is "
                            "patched before other modules import it")
            log.warning("%s: %s", entry.id, skipped)
            note += f"; but {skipped}"
        return decision(Outcome.APPLIED, f"{gate.reason}; the target is "
                        f"{target.shape.described}{counted}; fingerprint {found}{note}",
                        found), False

    # -- evidence --------------------------------------------------------------------------

    def evidence(self, roots: tuple[Path, ...] = ()) -> Evidence | None:
        """The runs under ``roots`` (default: ``PATCHLANE_EVIDENCE``), read once per process
        per roots; None when none is asked for. The evidence side is imported here, on demand
        only: a plain `import patchlane` never loads it, nor reads a runs root."""
        roots = roots or self.controls.evidence
        if not roots:
            return None
        from .proof import Evidence

        with self._evidence_lock:
            found = self._evidence.get(roots)
            if found is None:
                found = self._evidence[roots] = Evidence(roots)
        return found

    def _unproven(self, entry: Entry, installed: str | None,
                  overlay_source: bytes | None = None) -> str | None:
        """Why ``PATCHLANE_REQUIRE_EVIDENCE`` refuses ``entry`` on ``installed``; None when a
        passing run proved it on this process's stack. ``overlay_source``: the overlay's bytes
        as they will be executed (the proof is of exactly those)."""
        try:
            evidence = self.evidence()
            assert evidence is not None  # Controls: no requirement without a runs root
            answer = evidence.answer(entry, installed, overlay_source)
        except Exception as exc:  # fail closed: records that cannot be read prove nothing
            return (f"PATCHLANE_REQUIRE_EVIDENCE=1: the evidence could not be read "
                    f"({type(exc).__name__}: {exc}); fix: check PATCHLANE_EVIDENCE, or unset "
                    "PATCHLANE_REQUIRE_EVIDENCE")
        if answer.proven_here:
            return None
        return (f"PATCHLANE_REQUIRE_EVIDENCE=1: {answer.text()}; this stack is "
                f"{answer.here.describe()}. Fix: sweep it on this stack (`patchlane sweep "
                f"--only {entry.id} --runs-root {self.controls.evidence[0]}`), or unset "
                "PATCHLANE_REQUIRE_EVIDENCE")

    def _place(self, entry: Entry, target: Resolved, overlay: ModuleType) -> None:
        hits = self.audit.hits
        entry_id = entry.id
        live = [True]  # until revert(): this placing's wrappers run the overlay
        # A shape whose placed code runs the override itself (a class's grafted members) runs
        # it after a revert too, wherever it is still reached: counted, as it ran.
        off_when_reverted = target.shape.off_when_reverted

        def hit() -> bool:
            if live[0] or not off_when_reverted:
                hits[entry_id] += 1
                return True
            return False

        parts = target.shape.build(target.found, overlay, entry_id, hit)
        placements = place(parts, target.target)
        self._applied[entry.id] = placements
        self._placings.setdefault(entry.id, []).append(
            _Placing(live, off_when_reverted, placements))

    def _finish(self, entry: Entry, decision: Decision, overlay_failed: bool = False) -> Decision:
        decision = self.audit.record(decision)
        log.log(_LEVELS.get(decision.outcome, logging.DEBUG), "%s %s: %s", entry.id,
                decision.outcome.value, decision.reason)
        if self._started and not self._settled and self.audit.pending() == 0:
            self._settled = True
            # The line to grep for in a training log: every entry decided, and why.
            log.info("%s", self.brief("patchlane settled"))
        if self.controls.strict and decision.outcome.is_problem:
            error = strict_error(decision, overlay_failed)
            # At a target's import in a script: one line and the error's own code if nothing
            # catches it (drift: 4), as at `import patchlane`, not a traceback and exit 1.
            exit_if_uncaught(error, f"the import of {entry.target.module or entry.id}")
            raise error
        return decision

    # -- revert ----------------------------------------------------------------------------

    def revert(self, entry_id: str) -> Decision:
        entry = self.registry.get(entry_id)
        with self._locks[entry.id]:
            applied = self._applied.get(entry_id)
            if applied is None:
                raise OverlayError(entry_id, "is not applied in this process; nothing to revert")
            # Checked for every attribute before any is touched: nothing is left half-reverted.
            plans = [self._revert_plan(entry_id, p) for p in applied]
            for plan, _ in plans:
                plan()
            del self._applied[entry_id]
            placings = self._placings.pop(entry_id, [])
            for placing in placings:  # wherever still reached, they pass through from now on
                placing.live[0] = False
                for placement in placing.placements:
                    disown(placement.placed)
            passes_through = all(placing.off_when_reverted for placing in placings)
            return self.audit.record(Decision(
                entry_id, Outcome.REVERTED, _reverted_note(applied, plans, passes_through),
                distribution=entry.target.distribution))

    def _revert_plan(self, entry_id: str,
                     placement: Placement) -> tuple[Callable[[], None], str]:
        """How to take ``placement`` back, and what that does (:data:`_RESTORED`,
        :data:`_UNLINKED`, :data:`_REPLACED`): put the original back when it is what the owner
        holds; unlink it when another entry's layer sits on top (which then rests on what was
        below it); leave what another library put there since."""
        now = current(placement.owner, placement.attribute)
        if now is placement.placed:
            return (lambda: unplace(placement)), _RESTORED
        layers = list(layers_at(placement.owner, placement.attribute, now))
        position = next((i for i, v in enumerate(layers) if v.obj is placement.placed), None)
        if position is None:
            # replaced by someone else since: nothing of ours there to take back
            return (lambda: forget_value(placement.owner, placement.attribute,
                                         placement.placed)), _REPLACED
        above = layers[position - 1].obj if position else None
        if not isinstance(above, wrapt.FunctionWrapper):
            raise OverlayError(entry_id, f"another entry's {type(above).__name__} sits on top of "
                               f"this one at {placement.attribute!r} and was built from it; "
                               "revert that entry first, then this one")

        def unlink() -> None:
            above.__wrapped__ = placement.below
            for entry_placements in self._applied.values():
                for i, other in enumerate(entry_placements):
                    if other.placed is above:  # its revert must not bring this layer back
                        entry_placements[i] = other._replace(
                            had_own=placement.had_own, original=placement.original,
                            below=placement.below)

        return unlink, _UNLINKED

    def headline(self) -> str:
        """The one INFO line at startup, before any decision: how many entries from which
        files (each decision follows on its own line; all of them: ``patchlane status``)."""
        from .._version import __version__

        rows = self.registry.startup_rows
        mode = "strict" if self.controls.strict else "default"
        sources = ", ".join(p.name for p in self.registry.sources) or "no registry"
        return (f"patchlane {__version__} [{mode}]: {len(rows)} "
                f"entr{'y' if len(rows) == 1 else 'ies'} ({sources}), each decided when its "
                "target is imported")

    def brief(self, head: str) -> str:
        """The decisions in one line that fits a log: what is on the call path and what went
        wrong by name, the rest counted (each reason: ``patchlane status``, :meth:`summary`)."""
        named: dict[Outcome, list[str]] = {}
        counted: dict[Outcome, int] = {}
        for entry_id, decision in sorted(self.audit.latest().copy().items()):
            if _LEVELS.get(decision.outcome, logging.DEBUG) > logging.DEBUG:
                named.setdefault(decision.outcome, []).append(entry_id)
            else:
                counted[decision.outcome] = counted.get(decision.outcome, 0) + 1
        parts = [f"{o.value}: {', '.join(named[o])}" for o in Outcome if o in named]
        parts += [f"{o.value}: {counted[o]}" for o in Outcome if o in counted]
        mode = "strict" if self.controls.strict else "default"
        return f"{head} [{mode}]: " + (" | ".join(parts) or "no entries")

    def summary(self, settled: bool = False) -> str:
        """One line: what was applied, what was skipped and why, what is still pending."""
        from .._version import __version__

        groups: dict[Outcome, list[str]] = {}
        for entry_id, decision in sorted(self.audit.latest().copy().items()):
            label = entry_id
            if decision.outcome.is_problem or decision.outcome in (
                    Outcome.SKIPPED_DISABLED, Outcome.SKIPPED_GATE,
                    Outcome.SKIPPED_DEPENDENCY, Outcome.SKIPPED_NOT_APPLICABLE):
                label += f" ({clipped(decision.reason, 160)})"
            groups.setdefault(decision.outcome, []).append(label)
        parts = [f"{o.value}: {', '.join(groups[o])}" for o in Outcome if o in groups]
        if self.unknown_control_ids:
            parts.append(f"unknown control ids: {', '.join(self.unknown_control_ids)}")
        mode = "strict" if self.controls.strict else "default"
        sources = ",".join(p.name for p in self.registry.sources) or "no registry"
        head = "patchlane settled" if settled else f"patchlane {__version__}"
        return (f"{head} [{mode}] {len(self.registry.startup_rows)} entries ({sources}) | "
                + (" | ".join(parts) or "none"))

    def is_applied(self, entry_id: str) -> bool:
        """Whether the overlay sits where the calls go now: a lookup through each owner reaches
        what it set (checked afresh, so code that replaced the attribute since shows)."""
        applied = self._applied.get(entry_id)
        if applied is None and entry_id in self._elsewhere:
            owner, attribute = self._elsewhere[entry_id]  # another decider's layer: still there?
            return ours_at(owner, attribute, entry_id)
        return applied is not None and all(reaches(p) for p in applied)

"""Where the process-wide decider is built: registries found, loaded all-or-nothing, hooks set."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

from . import import_hook
from .common.errors import ControlsError, PatchlaneError, RegistryError
from .deciding.audit import AuditLog
from .deciding.controls import Controls
from .deciding.decider import Decider
from .lazy import watch, watchlist
from .registry import Registry
from .registry import cache as registry_cache

__all__ = ["current", "default_registry_path", "is_default_registry", "registry_paths", "start"]

log = logging.getLogger("patchlane")

_lock = threading.RLock()
_decider: Decider | None = None
_startup_error: PatchlaneError | None = None
_strict_failure: PatchlaneError | None = None
"""Strict mode's first failure at startup: sticky. A second `import patchlane` after the first
raised (Python forgets a module whose import failed, so it runs again) raises it again instead
of returning a decider that stopped halfway (later entries undecided, no hooks, floors
unenforced)."""


def default_registry_path() -> Path:
    """``_bundle/registry.yaml`` installed from a wheel, ``registry.yaml`` in a checkout."""
    return Path(watchlist.default_registry())


def is_default_registry(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is this installation's catalog (:func:`default_registry_path`)."""
    return Path(path).resolve() == default_registry_path().resolve()


def _entry_point_registries() -> list[Path]:
    # metadata.entry_points() parses every distribution's entry points (2-4 ms at every
    # `import patchlane`); reading the files and parsing only those that name our group costs
    # a fraction of that. First distribution of a name on sys.path wins, as in importlib.
    seen: set[str] = set()
    eps: list[metadata.EntryPoint] = []
    for dist in metadata.distributions():
        text = dist.read_text("entry_points.txt")
        if not text or "patchlane.registries" not in text:
            continue
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in seen:
            continue
        seen.add(name)
        eps.extend(dist.entry_points.select(group="patchlane.registries"))
    paths: list[Path] = []
    for ep in eps:
        paths.extend(_entry_point_paths(ep))
    return paths


def _entry_point_paths(ep: metadata.EntryPoint) -> list[Path]:
    """The registry files one entry point names; any failure of its code (an import error,
    an exception, even ``sys.exit``) or a wrong value is a :class:`RegistryError` naming it, so
    `import patchlane` records it like any other registry problem instead of crashing."""
    where = f"entry point {ep.name} = {ep.value} (group patchlane.registries)"
    try:
        value = ep.load()
        value = value() if callable(value) else value
    except (Exception, SystemExit) as exc:
        raise RegistryError(where, f"loading it raised {type(exc).__name__}: {exc}",
                            fix="fix or uninstall the distribution that declares it, or set "
                            "PATCHLANE_ENTRY_POINTS=0") from None
    # An empty list is a plugin that contributes nothing here; None is a forgotten return.
    items = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(item, (str, os.PathLike)) for item in items):
        raise RegistryError(where, "it gave no registry path", found=value,
                            expected="a path (str or os.PathLike) or a list of them",
                            fix="make it return the registry file's path")
    return [Path(item) for item in items]


def registry_paths(controls: Controls) -> list[Path]:
    paths: list[Path] = []
    if controls.default_registry:
        paths.append(default_registry_path())
    paths.extend(controls.registries)
    if controls.entry_points:
        paths.extend(_entry_point_registries())
    return paths


def start(controls: Controls | None = None, env: Mapping[str, str] | None = None,
          command: str | None = None) -> Decider:
    """Build the process-wide decider (once). A registry error, or a setting that cannot be
    read, applies nothing: in strict mode it raises, otherwise it is logged at ERROR and kept
    for :func:`patchlane.report`. ``env``: the settings to read (default ``os.environ``); the
    lazy start passes those of ``import patchlane``, so a script that changes a setting after
    that line changes nothing, as with the eager start. ``command``: this is the ``patchlane``
    command's process, and its first word (``""`` for none): it refuses a setting it cannot read
    in one line of its own (exit 2), not logged here too; and ``run``'s job says a refused
    registry file in each of its processes, so ``run`` itself does not say it first."""
    global _decider, _startup_error, _strict_failure
    with _lock:
        if _strict_failure is not None:
            raise _strict_failure
        if _decider is not None:
            return _decider
        unreadable = False
        if controls is None:
            try:
                controls = Controls.from_env(env)
            except ControlsError as exc:
                # A bad setting is a startup error like a rejected registry: `import patchlane`
                # does not raise by default (a training job runs with nothing applied, and
                # says why), and every command refuses it in one line.
                _startup_error, unreadable = exc, True
                controls = Controls.unreadable(env)
                if controls.strict:  # raised, not logged too: uncaught, it is one line
                    _strict_failure = exc
                    raise
                if command is None:
                    log.error("a setting cannot be read, nothing applied: %s", exc)
        try:
            if unreadable:
                registry = Registry(entries=(), sources=())
            else:
                # The lazy start's watch list is brought up to date by a start that could not use
                # it; one loading the startup at a target's first import read it fresh just now.
                # Its key is taken before entry points are read: an install meanwhile leaves
                # a stale watch list, never a wrong fresh one.
                key = None if watch.armed() else registry_cache.LazyKey(
                    watchlist.registry_set(controls.default_registry, controls.registries,
                                            controls.entry_points),
                    watchlist.path_key(controls.entry_points))
                registry = registry_cache.load(registry_paths(controls),
                                               controls.registry_cache, key)
        except RegistryError as exc:
            _startup_error = exc
            if controls.strict:  # raised, not logged too: uncaught, it is one line (below)
                _strict_failure = exc
                raise
            log.error("registry rejected, nothing applied: %s", exc)
            registry = Registry(entries=(), sources=())
        for refused in registry.rejected:
            # One file refused, on its own: the other registries' entries apply. Loud on every
            # rank (ERROR, whatever the logging level); fatal in strict mode, in one line.
            if controls.strict:
                _strict_failure = refused
                raise refused
            if command == "run":
                continue
            log.error("registry %s refused, its entries not applied (the other "
                      "registries' apply): %s", refused.path, refused)
        decider = Decider(registry, controls, AuditLog())
        _decider = decider
    if controls.verify_ranks:
        # Deferred by name: patchlane.training.ranks (and torch) load only once
        # torch.distributed does.
        # by name: the startup layer never imports patchlane.training (nor torch) itself
        import_hook.when_imported("torch.distributed",
                                  "patchlane.training.ranks:_wrap_init_process_group")
    log.info("%s", decider.headline())  # first: the decisions that follow are its entries'
    try:
        decider.start()
    except PatchlaneError as exc:  # strict mode: a decision raised
        with _lock:
            _strict_failure = exc
        raise
    finally:
        watch.disarm()  # every hook is registered (or it raised): the lazy start's hook is done
    if log.isEnabledFor(logging.DEBUG):  # walks every entry: only when it is shown
        log.debug("%s", decider.summary())
    return decider


def current() -> Decider:
    return _decider if _decider is not None else start()


def startup_error() -> PatchlaneError | None:
    return _startup_error


def reset() -> None:
    """Forget the process-wide decider (tests only; applied wrappers stay until reverted)."""
    global _decider, _startup_error, _strict_failure
    with _lock:
        _decider = None
        _startup_error = None
        _strict_failure = None

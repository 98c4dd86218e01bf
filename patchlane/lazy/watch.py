"""The lazy start's one import hook: a ``sys.meta_path`` finder for the watched top-level names.

It answers nothing itself. For a watched name it asks the finders after it for the module's
spec, as the import system would next, and wraps the loader it finds with the post-import
hook's own wrapper (:func:`patchlane.import_hook.wrap`), so that:

- ``create_module`` (the module does not exist yet; the import system holds this module's lock
  and no longer the global import lock, so loading other modules here cannot deadlock against
  a thread holding that one) loads the whole startup first: registry, gates, post-import
  hooks for every target, exactly what ``import patchlane`` did before it was lazy;
- ``exec_module`` puts the real loader back on the module and its spec, runs the module, then
  fires the post-import hooks registered for it: its entries are decided right after it ran,
  as they were when their hook was registered at ``import patchlane``.

A spec that is only looked up (``importlib.util.find_spec("torch")``, as libraries probe for
optional dependencies) loads nothing. Once the startup has run, :func:`disarm` takes the hook
off ``sys.meta_path``; the post-import hook's finder (:mod:`patchlane.import_hook`) does the
rest.

The startup loads once, in one thread: another thread importing a watched module meanwhile waits
for it, so its hooks are in place before its module runs. The thread loading the startup may
itself import a watched module (an entry-point registry's code importing torch): that import
goes ahead unwrapped, and its entries are decided when the startup registers their hooks, at
once, as for a module imported before ``import patchlane``.
"""

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from importlib.machinery import ModuleSpec
    from typing import Any

__all__ = ["armed", "disarm", "install", "watched_names"]


class _Watch:
    """The finder: one per process, first on ``sys.meta_path`` until the startup has run."""

    keep_first = True
    """The post-import hook's finder goes after it (:func:`patchlane.import_hook.install`):
    while the startup loads, another thread importing a watched module waits here first."""

    def __init__(self, names: "Iterable[str]", load: "Callable[[], object]") -> None:
        self.names = frozenset(names)
        self.load = load
        self.done = False
        self._lock = _thread.allocate_lock()
        self._owner: int | None = None

    def find_spec(self, name: str, path: "Any" = None, target: "Any" = None) -> "ModuleSpec | None":
        if self.done or name not in self.names or self._owner == _thread.get_ident():
            return None
        meta_path = sys.meta_path
        try:
            after = meta_path[meta_path.index(self) + 1:]
        except ValueError:  # taken off meanwhile
            return None
        from .. import import_hook  # here, not at the top: a target-free process never needs it

        spec = import_hook.first_spec(after, name, path, target)  # what the import system asks next
        if spec is None:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            # Nothing to wrap (a legacy loader): load the startup now, and answer as the finders
            # would with it loaded (the hook's finder first), so the module's hooks fire.
            self.trigger()
            others = [f for f in sys.meta_path if f is not self]
            return import_hook.first_spec(others, name, path, target)
        # the startup loads before the module exists, its hooks fire once the module ran
        spec.loader = import_hook.wrap(loader, before=self.trigger)
        return spec

    def trigger(self) -> None:
        """Load the startup (once; another thread waits for it). Raises what loading raises:
        in strict mode, the import that triggered it fails with that error."""
        if self.done or self._owner == _thread.get_ident():
            return
        with self._lock:
            if self.done:
                return
            self._owner = _thread.get_ident()
            try:
                self.load()  # patchlane's full start: it calls disarm() once hooks are in
            finally:
                self._owner = None

    def invalidate_caches(self) -> None:
        pass


_watch: _Watch | None = None


def install(names: "Iterable[str]", load: "Callable[[], object]") -> None:
    """Put the hook first on ``sys.meta_path`` for ``names``; ``load`` runs the startup."""
    global _watch
    watch = _Watch(names, load)
    sys.meta_path.insert(0, watch)
    _watch = watch


def disarm() -> None:
    """The startup has run (its hooks are registered): the hook has nothing left to do."""
    watch = _watch
    if watch is None or watch.done:
        return
    watch.done = True
    try:  # noqa: SIM105 - contextlib costs ~3 ms to import; this module loads everywhere
        sys.meta_path.remove(watch)
    except ValueError:
        pass


def armed() -> bool:
    """Whether this process took the lazy path and its startup has not run yet."""
    return _watch is not None and not _watch.done


def watched_names() -> frozenset[str]:
    """The names the hook watches (empty when this process did not take the lazy path)."""
    return _watch.names if _watch is not None else frozenset()

"""patchlane's own post-import hooks: callbacks per module name, each called right after that
module's code has run: at once when it is already imported, and again every time its code runs
anew (``importlib.reload``, or an import after the module was purged from ``sys.modules``), so
an overlay follows the fresh classes and functions a re-run binds.

One finder on ``sys.meta_path`` (:func:`install`, :func:`uninstall`, :func:`is_installed`). For
a hooked name it asks the finders after it for the spec, as the import system would next, and
wraps the loader it finds: ``exec_module`` puts the real loader back on the module and its spec,
runs the module, then calls the module's callbacks. ``importlib.reload`` finds the spec through
``sys.meta_path`` again, so a reload passes through the same wrapper. Any other name costs one
dictionary lookup.

Why not wrapt's ``register_post_import_hook`` (as patchlane did before): wrapt drops a module's
hooks once they fire, so a reload or a purge ran the module's code unpatched unless patchlane
put its hook back into wrapt's private ``_post_import_hooks`` under wrapt's private lock; the
ddtrace ``ModuleWatchdog`` takes the same approach as this module (its own loader, installed
and uninstalled by name, never wrapping twice).

Light on purpose (it loads with every ``import patchlane``): the standard library's ``_thread``
and ``sys`` only.
"""

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

__all__ = [
    "after_loading",
    "fire",
    "first_spec",
    "install",
    "is_installed",
    "remove",
    "uninstall",
    "when_imported",
]

_hooks: "dict[str, list[Callable[[ModuleType], object] | str]]" = {}
_lock = _thread.RLock()


def first_spec(finders: "list[Any]", name: str, path: "Any",
               target: "Any") -> "ModuleSpec | None":
    """The first spec ``finders`` answer for ``name``, as the import system asks them."""
    for finder in finders:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec  # type: ignore[no-any-return]
    return None


class _Finder:
    """Answers nothing itself: it wraps the loader the finders after it find for a hooked
    name."""

    def find_spec(self, name: str, path: "Any" = None,
                  target: "Any" = None) -> "ModuleSpec | None":
        if name not in _hooks:
            return None
        meta_path = sys.meta_path
        try:
            after = meta_path[meta_path.index(self) + 1:]
        except ValueError:  # uninstalled meanwhile
            return None
        spec = first_spec(after, name, path, target)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec  # nothing to wrap (a namespace package, a legacy loader)
        spec.loader = wrap(loader)
        return spec

    def invalidate_caches(self) -> None:
        pass


class _Loader:
    """The real loader, then the module's callbacks; ``before`` (the lazy start's startup) runs
    first, before the module exists."""

    def __init__(self, loader: "Any", before: "Callable[[], object] | None" = None) -> None:
        self.loader = loader
        self.before = before

    def create_module(self, spec: "ModuleSpec") -> "ModuleType | None":
        if self.before is not None:
            self.before()
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: "ModuleType") -> None:
        # The module names its own loader from now on (inspect, pkgutil and
        # importlib.resources read __loader__ and __spec__.loader).
        module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        self.loader.exec_module(module)
        fire(module)

    def __getattr__(self, name: str) -> "Any":
        # Everything else a loader answers (get_source, is_package, get_resource_reader) is
        # the real loader's.
        return getattr(self.loader, name)


def wrap(loader: "Any", before: "Callable[[], object] | None" = None) -> "Any":
    """``loader`` wrapped to call the module's callbacks after its code runs (once: a loader
    this module wrapped already is given ``before`` and returned), ``before()`` first."""
    if isinstance(loader, _Loader):
        if before is not None:
            loader.before = before
        return loader
    return _Loader(loader, before)


_finder = _Finder()


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once): after the finders that must stay first (the
    lazy start's, while its startup loads: ``keep_first``), before every other."""
    with _lock:
        if _finder in sys.meta_path:
            return
        at = 0
        while at < len(sys.meta_path) and getattr(sys.meta_path[at], "keep_first", False):
            at += 1
        sys.meta_path.insert(at, _finder)


def uninstall() -> None:
    """Take the finder off ``sys.meta_path`` and forget every callback."""
    with _lock:
        _hooks.clear()
        while _finder in sys.meta_path:
            sys.meta_path.remove(_finder)


def is_installed() -> bool:
    return _finder in sys.meta_path


def after_loading(name: str, callback: "Callable[[], object]") -> bool:
    """Call ``callback()`` once the module ``name``, whose code is running now (a package's
    ``__init__`` importing the module whose hook asks), has finished: True when armed, False
    when it is not loading (nothing to wait for). It is the moment importlib clears the
    spec's ``_initializing`` mark (CPython 3.10-3.13, as the depends_on wait reads it): the
    spec's class becomes a subclass that sees that write, calls ``callback`` and turns back.
    An exception in ``callback`` is its own to handle: it must not fail the import."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is None or not getattr(spec, "_initializing", False):
        return False
    base = type(spec)
    if getattr(base, "_patchlane_after", None) is not None:  # armed already: one more
        base._patchlane_after.append(callback)
        return True
    callbacks = [callback]

    class _Loading(base):  # type: ignore[misc, valid-type]
        _patchlane_after = callbacks

        @property
        def _initializing(self) -> bool:
            return bool(self.__dict__.get("_initializing", False))

        @_initializing.setter
        def _initializing(self, value: bool) -> None:
            self.__dict__["_initializing"] = value
            if not value and type(self) is _Loading:
                self.__class__ = base
                for call in callbacks:
                    call()

    spec.__class__ = _Loading
    return True


def when_imported(name: str, callback: "Callable[[ModuleType], object] | str") -> None:
    """Call ``callback(module)`` each time module ``name``'s code has run, and at once when it
    is imported already. Registering the same callback again for a name adds nothing.
    ``callback`` may be ``"package.module:function"``, imported only when it first fires (as
    wrapt's hooks allow): the startup names the rank check this way and never imports the
    training layer itself."""
    with _lock:
        callbacks = _hooks.setdefault(name, [])
        if callback in callbacks:
            return
        callbacks.append(callback)
        install()
    module = sys.modules.get(name)
    if module is not None:
        _resolved(callback)(module)


def remove(name: str, callback: "Callable[[ModuleType], object] | str") -> None:
    """Forget ``callback`` for ``name`` (nothing when it was not registered)."""
    with _lock:
        callbacks = _hooks.get(name, [])
        if callback in callbacks:
            callbacks.remove(callback)
        if not callbacks:
            _hooks.pop(name, None)


def fire(module: "ModuleType") -> None:
    """Call the callbacks of ``module`` (its code has just run); outside the lock, in the order
    they were registered. A callback's exception propagates (a strict-mode refusal fails the
    import that ran the module)."""
    with _lock:
        callbacks = list(_hooks.get(module.__name__, ()))
    for callback in callbacks:
        _resolved(callback)(module)


def _resolved(callback: "Callable[[ModuleType], object] | str") -> "Callable[[ModuleType], object]":
    if not isinstance(callback, str):
        return callback
    from importlib import import_module

    module_name, _, function = callback.partition(":")
    return getattr(import_module(module_name), function)  # type: ignore[no-any-return]

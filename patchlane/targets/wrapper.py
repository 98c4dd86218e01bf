"""The wrapper an applied overlay puts on its target: a wrapt ``FunctionWrapper`` that also
pickles, copies and stacks.

* **Pickle / copy.** wrapt's proxies refuse ``__reduce__`` ("object proxy must define
  __reduce__()"), so a patched function could not go through ``pickle``, ``copy.deepcopy`` or
  ``multiprocessing.Pool.map`` while the unpatched one could. Functions pickle *by reference*
  (module and qualified name), and so do these: unpickling looks the name up again, so the
  receiving process gets whatever its own startup decided (patched or not). A bound method pickles
  as ``getattr(instance, name)``, as Python's own do. Copies are the object itself, as for
  functions.
* **Stacking.** Two entries may patch one function (a team registry on top of the default
  one). The later-decided wrapper wraps the earlier one: registry order is application order,
  the first entry innermost. :func:`patchlane.targets.protocol.layers_at` lists the layers
  (of every shape), so "is entry X applied" and "revert X" look through the layers instead of
  at the outermost only.
"""

from __future__ import annotations

import importlib
from typing import Any

import wrapt

__all__ = ["PatchWrapper", "resolve_reference"]


def resolve_reference(module: str, qualname: str) -> Any:
    """``module.qualname``, imported and looked up now (what unpickling a patched function
    does), as calling code sees it (:func:`patchlane.targets.find.lookup`)."""
    from .find import lookup

    return lookup(importlib.import_module(module), qualname)


class _BoundPatchWrapper(wrapt.BoundFunctionWrapper):  # type: ignore[type-arg]
    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        # wrapt keeps the instance a method was bound to in _self_instance (None: looked up on
        # the class, a plain reference then).
        instance = self._self_instance
        if instance is None or isinstance(instance, type):
            return resolve_reference, (self.__module__, self.__qualname__)
        return getattr, (instance, self.__name__)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self


class PatchWrapper(wrapt.FunctionWrapper):  # type: ignore[type-arg]
    __bound_function_wrapper__ = _BoundPatchWrapper

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return resolve_reference, (self.__module__, self.__qualname__)

    def __copy__(self) -> Any:
        return self

    def __deepcopy__(self, memo: Any) -> Any:
        return self

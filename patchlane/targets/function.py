"""Functions and methods: a module's function, a class's method (instance, ``classmethod``,
``staticmethod``), or any other callable stored without a descriptor of its own.

The overlay is wrapt's: ``overlay(wrapped, instance, args, kwargs)``, placed as a
:class:`~patchlane.targets.wrapper.PatchWrapper` around what is stored (wrapt binds it as the
original binds: ``instance`` is the object for a method, the class for a classmethod, None for
a function or staticmethod; ``wrapped`` is the original, already bound).
"""

from __future__ import annotations

import types
from typing import Any

import wrapt

from .find import Found
from .protocol import Hit, comment
from .wrapper import PatchWrapper

__all__ = ["CLASSMETHOD", "FUNCTION", "METHOD", "PASS_THROUGH", "STATICMETHOD", "wrap_callable"]

PASS_THROUGH = ("Calls straight through until the fix is written here: applied, the entry "
                "changes nothing yet (and the placeholder reproducer keeps the sweep from "
                "calling it a pass).")


def wrap_callable(stored: Any, fn: Any, entry_id: str, hit: Hit) -> PatchWrapper:
    """``stored`` (a function, a classmethod or staticmethod object) wrapped so that calls run
    ``fn`` in wrapt's protocol, counted."""

    def counted(wrapped: Any, instance: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        if not hit():  # reverted: upstream's code, as if the wrapper were not there
            return wrapped(*args, **kwargs)
        return fn(wrapped, instance, args, kwargs)

    counted.__patchlane_id__ = entry_id  # type: ignore[attr-defined]
    return PatchWrapper(stored, counted)


def _callable(inner: Any) -> bool:
    if isinstance(inner, (types.FunctionType, types.BuiltinFunctionType, wrapt.FunctionWrapper,
                          types.MethodDescriptorType, types.WrapperDescriptorType)):
        # (a C type's method, looked up through a Python subclass: torch.Tensor's from
        # TensorBase, set on the subclass)
        return True
    # A callable instance without a __get__ of its own (a functools.partial, a jitted function
    # object) is looked up as it is stored: wrapt's wrapper keeps that.
    return callable(inner) and not isinstance(inner, type) and \
        not hasattr(type(inner), "__get__")


class _Callable:
    counts_hits = True
    off_when_reverted = True
    overlay_names: tuple[str, ...] = ("overlay",)

    def __init__(self, name: str, described: str, test: Any):
        self.name = name
        self.described = described
        self._test = test

    def matches(self, found: Found, inner: Any) -> bool:
        return bool(self._test(found, inner))

    def build(self, found: Found, overlay: types.ModuleType, entry_id: str,
              hit: Hit) -> list[tuple[Any, str, Any]]:
        from .find import Refused

        fn = getattr(overlay, "overlay", None)
        if not callable(fn):
            raise Refused(f"{overlay.__file__} defines no callable `overlay`: {self.described} "
                          "is overlaid by overlay(wrapped, instance, args, kwargs)")
        return [(found.owner, found.attribute, wrap_callable(found.raw, fn, entry_id, hit))]

    def stub(self, target: str) -> str:
        instance = {"function": "None (a module's function)",
                    "method": "the object the method is called on",
                    "classmethod": "the class it is called on",
                    "staticmethod": "None"}[self.name]
        return (
            "def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...],\n"
            "            kwargs: dict[str, Any]) -> Any:\n"
            + comment(f"{target} is {self.described}: wrapped is upstream's, bound as it is "
                      f"called (wrapped(*args, **kwargs) runs it); instance is {instance}.")
            + comment(PASS_THROUGH)
            + "    return wrapped(*args, **kwargs)\n")


FUNCTION = _Callable("function", "a function",
                     lambda f, inner: isinstance(f.owner, types.ModuleType) and _callable(inner))
METHOD = _Callable("method", "a method",
                   lambda f, inner: isinstance(f.owner, type) and _callable(inner))
CLASSMETHOD = _Callable("classmethod", "a classmethod",
                        # (a C class's classmethod too: torch 2.15's autograd Function.apply)
                        lambda f, inner: isinstance(inner, (classmethod,
                                                            types.ClassMethodDescriptorType)))
STATICMETHOD = _Callable("staticmethod", "a staticmethod",
                         lambda f, inner: isinstance(inner, staticmethod))

"""Overlay for mcore_tokenizer_alias_recursion:
megatron.core.tokenizers.text.libraries.abstract_tokenizer:MegatronTokenizerTextAbstract.

The special-id aliases of ``MegatronTokenizerTextAbstract`` (``cls_id``, ``sep_id``,
``pad_id``, ``bos_id``, ``eos_id``, ``mask_id``) are properties that test
``hasattr(self, '<alias>')`` and return ``self.<alias>``: the property reads itself. On a
tokenizer that does not override an alias (``ByteLevelTokenizer`` overrides ``pad_id``,
``bos_id`` and ``eos_id`` only), reading it, ``hasattr()`` of it, or ``eod`` (which falls back
on ``eos_id``) recurses until ``RecursionError`` (NVIDIA/Megatron-LM#5444). Upstream's fix
(#5445) reads the short name instead (``self.cls``, ``self.sep``, ...) and raises the
``AttributeError`` the message always described when there is none; this overlay does the same.

One entry for the six aliases: the target is the class, and each alias is overridden in place
on upstream's class object (``patchlane.targets``, shape ``class``), so every subclass,
``from ... import`` and existing tokenizer sees the fix; a subclass that overrides an alias
itself keeps its own.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id

_ALIASES = ("cls", "sep", "pad", "bos", "eos", "mask")


def _alias(short: str) -> property:
    def read(self: Any) -> Any:
        if hasattr(self, short):
            return getattr(self, short)
        raise AttributeError(f"{type(self).__name__} has no attribute '{short}' or '{short}_id'")

    read.__name__ = read.__qualname__ = f"{short}_id"
    return property(read, doc=f"Property alias to match MegatronTokenizer; returns {short} if "
                    "available.")


class Overlay:
    """The six aliases of MegatronTokenizerTextAbstract, each reading its short name (as
    upstream's fix does). A plain class, not a subclass: importing upstream's module at the top
    of this file would run that module's import hook while this file is half-loaded."""

    cls_id = _alias("cls")
    sep_id = _alias("sep")
    pad_id = _alias("pad")
    bos_id = _alias("bos")
    eos_id = _alias("eos")
    mask_id = _alias("mask")


def probe(module: ModuleType) -> bool:
    """True once upstream's aliases no longer name themselves: the fixed getters test the short
    name (``co_consts`` holds ``'cls'``, never ``'cls_id'``). Read from the code, never run."""
    cls = getattr(module, "MegatronTokenizerTextAbstract", None)
    prop = vars(cls).get("cls_id") if isinstance(cls, type) else None
    getter = getattr(prop, "fget", None)
    code = getattr(getattr(getter, "__wrapped__", getter), "__code__", None)
    return code is not None and "cls_id" not in code.co_consts and "cls" in code.co_consts

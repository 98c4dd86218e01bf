"""Reproducer for mcore_tokenizer_alias_recursion: megatron-core's tokenizer alias properties
(``MegatronTokenizerTextAbstract.cls_id`` and five more) read themselves, so a tokenizer that
does not override one recurses until ``RecursionError`` (NVIDIA/Megatron-LM#5444; fixed by
#5445). Real upstream classes: ``ByteLevelTokenizer(vocab_size=512)`` as the issue shows it, and
a minimal concrete subclass of upstream's abstract class that has every short name, so each of
the six aliases is read through upstream's own property.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # no tensor is made: the properties' lookups alone
WORLD_SIZES = (1,)

SHORT = {"cls": 101, "sep": 102, "pad": 0, "bos": 1, "eos": 2, "mask": 103}


def _read(obj: Any, name: str) -> tuple[str, Any]:
    try:
        return "value", getattr(obj, name)
    except AttributeError as exc:
        return "AttributeError", str(exc)
    except RecursionError:
        raise AssertionError(f"{type(obj).__name__}.{name} raises RecursionError: the alias "
                             "property reads itself") from None


def run(ctx: ReproContext) -> None:
    from megatron.core.tokenizers.text.libraries import abstract_tokenizer
    from megatron.core.tokenizers.text.libraries.bytelevel_tokenizer import ByteLevelTokenizer

    byte_level = ByteLevelTokenizer(vocab_size=512)
    # The issue's own case: cls_id, sep_id and mask_id are not overridden there.
    for alias in ("cls_id", "sep_id", "mask_id"):
        kind, said = _read(byte_level, alias)
        assert kind == "AttributeError" and alias.removesuffix("_id") in said, (alias, said)
        try:
            assert hasattr(byte_level, alias) is False
        except RecursionError:
            raise AssertionError(f"hasattr(ByteLevelTokenizer, {alias!r}) raises "
                                 "RecursionError") from None
    assert _read(byte_level, "eod") == ("value", byte_level.eos_id)

    class Minimal(abstract_tokenizer.MegatronTokenizerTextAbstract):  # type: ignore[misc]
        """Every short name, nothing else: each alias is upstream's property."""

        def __init__(self) -> None:
            for short, value in SHORT.items():
                setattr(self, short, value)

        def text_to_tokens(self, text: str) -> list[str]:
            return list(text)

        def tokens_to_text(self, tokens: list[str]) -> str:
            return "".join(tokens)

        def tokens_to_ids(self, tokens: list[str]) -> list[int]:
            return [ord(t) for t in tokens]

        def ids_to_tokens(self, ids: list[int]) -> list[str]:
            return [chr(i) for i in ids]

        def text_to_ids(self, text: str) -> list[int]:
            return [ord(t) for t in text]

        def ids_to_text(self, ids: list[int]) -> str:
            return "".join(chr(i) for i in ids)

        def add_special_tokens(self) -> None:
            return None

    minimal = Minimal()
    for short, value in SHORT.items():
        assert _read(minimal, f"{short}_id") == ("value", value), short

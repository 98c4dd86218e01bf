"""Overlay: DSA's non-packed context-parallel length validation stays eager-only (0.19.x).

``_validate_nonpacked_cp_uniform_length`` (megatron-core 0.19) builds ``torch.tensor([sq])``,
all-gathers it, branches on ``torch.all(...)`` and reads ``.item()``: host data and host syncs,
illegal inside a CUDA graph capture, on every DSA forward with CP. It is a check, not a
computation, so under capture (``patchlane.testing.capture.is_capturing()``: a real capture,
or the CPU
lane's emulation) the overlay keeps only its host-side part (the local ``sq``/``skv``/``cp_size``
arithmetic) and skips the collective; eagerly (the warm-up every capture needs, and every
non-captured step) upstream's full validation runs unchanged.

Written against the 0.19.2 wheel's source (fingerprinted); 0.19 needs Python 3.12, so neither
this overlay nor its reproducer has run here.
"""

from __future__ import annotations

from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id


def _arguments(sq: int, skv: int, cp_size: int, cp_group: Any = None,
               device: Any = None) -> tuple[int, int, int]:
    return sq, skv, cp_size


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from patchlane.testing.capture import is_capturing

    if not is_capturing():
        patchlane.hit_path(ENTRY_ID, "eager")
        return wrapped(*args, **kwargs)
    patchlane.hit_path(ENTRY_ID, "capturing")
    sq, skv, cp_size = _arguments(*args, **kwargs)
    if skv != sq and skv != sq * cp_size:
        raise RuntimeError(
            "Non-packed DSA allgather CP expects uniform per-rank sequence lengths; "
            f"got local query length {sq} and key length {skv} for cp_size={cp_size}.")
    return None

"""Overlay: DSA's CP query positions need no host sync while a CUDA graph is capturing (0.19.x).

``dsa_layout.get_cp_positions_from_layout`` (megatron-core 0.19) has a fallback for a layout
whose keys are not gathered (``skv != sq * cp_size``, e.g. ``skv == sq``): it all-gathers every
rank's query length from a fresh ``torch.tensor`` and reads the offset with ``.item()``. That is
host data and a host sync, illegal inside a capture, on every DSA forward with CP in that
layout. (The uniform gathered layout, ``skv == sq * cp_size``, never syncs: left to upstream.)

Under capture the offset is ``cp_rank * sq`` without asking: DSA's own
``_validate_nonpacked_cp_uniform_length`` has checked, eagerly and with the same shapes (the
warm-up every capture needs; a captured graph replays fixed shapes), that every rank holds the
same ``sq``, and then the gathered sum of the earlier ranks' lengths *is* ``cp_rank * sq``.
Eagerly, upstream runs unchanged. Found by an audit of the 0.19 CP path, which first named
this helper as not gateable: it is, because the precondition is validated eagerly.
"""

from __future__ import annotations

from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id


def _arguments(sq: int, skv: int, cp_size: int, cp_rank: int, cp_comm_type: Any,
               device: Any, cp_group: Any = None) -> tuple[int, int, int, int, Any]:
    # Mirrors get_cp_positions_from_layout(sq, skv, cp_size, cp_rank, cp_comm_type, device,
    # cp_group=None).
    return sq, skv, cp_size, cp_rank, device


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from patchlane.testing.capture import is_capturing

    sq, skv, cp_size, cp_rank, device = _arguments(*args, **kwargs)
    if not is_capturing() or cp_size <= 1 or skv == sq * cp_size:
        patchlane.hit_path(ENTRY_ID, "upstream")
        return wrapped(*args, **kwargs)
    import torch

    patchlane.hit_path(ENTRY_ID, "capturing")
    # Upstream's cp_comm_type check already ran in the eager warm-up, with the same arguments.
    query = torch.arange(sq, device=device, dtype=torch.int64) + cp_rank * sq
    return query, torch.arange(skv, device=device, dtype=torch.int64)

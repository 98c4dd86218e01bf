"""Run stamps in Megatron checkpoints: which patches a checkpoint was trained with.

``add_run_stamp(state_dict)`` puts :func:`patchlane.run_stamp` into the state dict a Megatron
``dist_checkpointing.save`` writes; being plain data (not a ShardedTensor/Object) it lands in
the checkpoint's *common* state (``common.pt``), once, not per rank. ``read_run_stamp(path)``
reads it back from a saved checkpoint directory (or from a Megatron ``--save`` root with
``latest_checkpointed_iteration.txt``), without building a model.

A stamp, not a receipt: a receipt is what a sweep case leaves in its run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..common.errors import UsageError

__all__ = ["STAMP_KEY", "CheckpointStampError", "add_run_stamp", "read_run_stamp"]

STAMP_KEY = "patchlane_run_stamp"
"""The key in the checkpoint's common state."""


class CheckpointStampError(UsageError):
    """:func:`read_run_stamp` was pointed at no checkpoint directory, or at a checkpoint saved
    without :func:`add_run_stamp`: the fix is another path (or saving with one)."""


def add_run_stamp(state_dict: dict[str, Any], key: str = STAMP_KEY) -> dict[str, Any]:
    from .ranks import run_stamp

    state_dict[key] = run_stamp()
    return state_dict


def _resolve(path: Path) -> Path:
    tracker = path / "latest_checkpointed_iteration.txt"
    if tracker.is_file():  # a Megatron --save root: follow it to the latest iteration
        latest = tracker.read_text().strip()
        return path / (latest if latest == "release" else f"iter_{int(latest):07d}")
    return path


def read_run_stamp(path: str | Path, key: str = STAMP_KEY) -> dict[str, Any]:
    from megatron.core.dist_checkpointing import load_common_state_dict

    directory = _resolve(Path(path))
    if not directory.is_dir():
        raise CheckpointStampError(f"{directory}: no checkpoint directory (expected a saved "
                                   "checkpoint or a --save root with "
                                   "latest_checkpointed_iteration.txt)")
    common = load_common_state_dict(str(directory))
    stamp = common.get(key) if isinstance(common, dict) else None
    if not isinstance(stamp, dict):
        raise CheckpointStampError(f"{directory}: the checkpoint carries no patchlane run "
                                   f"stamp (key {key!r}); it was saved without "
                                   "add_run_stamp()")
    return stamp


"""Run receipts in Megatron checkpoints: which patches a checkpoint was trained with.

``add_run_receipt(state_dict)`` puts :func:`patchlane.run_receipt` into the state dict a
Megatron ``dist_checkpointing.save`` writes; being plain data (not a ShardedTensor/Object) it
lands in the checkpoint's *common* state (``common.pt``), once, not per rank.
``read_run_receipt(path)`` reads it back from a saved checkpoint directory (or from a Megatron
``--save`` root with ``latest_checkpointed_iteration.txt``), without building a model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import UsageError

__all__ = ["RECEIPT_KEY", "CheckpointReceiptError", "add_run_receipt", "read_run_receipt"]

RECEIPT_KEY = "patchlane_run_receipt"


class CheckpointReceiptError(UsageError):
    """:func:`read_run_receipt` was pointed at no checkpoint directory, or at a checkpoint
    saved without :func:`add_run_receipt`: the fix is another path (or saving with one)."""


def add_run_receipt(state_dict: dict[str, Any], key: str = RECEIPT_KEY) -> dict[str, Any]:
    from .ranks import run_receipt

    state_dict[key] = run_receipt()
    return state_dict


def _resolve(path: Path) -> Path:
    tracker = path / "latest_checkpointed_iteration.txt"
    if tracker.is_file():  # a Megatron --save root: follow it to the latest iteration
        latest = tracker.read_text().strip()
        return path / (latest if latest == "release" else f"iter_{int(latest):07d}")
    return path


def read_run_receipt(path: str | Path, key: str = RECEIPT_KEY) -> dict[str, Any]:
    from megatron.core.dist_checkpointing import load_common_state_dict

    directory = _resolve(Path(path))
    if not directory.is_dir():
        raise CheckpointReceiptError(f"{directory}: no checkpoint directory (expected a "
                                     "saved checkpoint or a --save root with "
                                     "latest_checkpointed_iteration.txt)")
    common = load_common_state_dict(str(directory))
    receipt = common.get(key) if isinstance(common, dict) else None
    if not isinstance(receipt, dict):
        raise CheckpointReceiptError(f"{directory}: the checkpoint carries no patchlane run "
                                     f"receipt (key {key!r}); it was saved without "
                                     "add_run_receipt()")
    return receipt

"""Compat gate: pipeline parallelism >= 4 with variable sequence lengths and batched P2P
deadlocks in the first step (Megatron-LM issue #5100).

``_communicate_shapes()`` / ``_batched_p2p_ops()`` post send/recv in one fixed order on every
stage, unlike the rank-parity ordering of ``_p2p_ops()``; with ``variable_seq_lengths=True`` the
shape exchange runs every step and, from PP=4 on, all ranks block. No source patch: the safe
move is to refuse the configuration at startup and say which knob avoids it.
"""

from __future__ import annotations

from typing import Any


def check(config: Any) -> str | None:
    """None when safe; otherwise the problem. Reads a TransformerConfig/ModelParallelConfig or a
    Megatron args namespace (same attribute names)."""
    pp = int(getattr(config, "pipeline_model_parallel_size", 1) or 1)
    variable = bool(getattr(config, "variable_seq_lengths", False))
    batched = bool(getattr(config, "batch_p2p_comm", True))
    if pp >= 4 and variable and batched:
        return (f"pipeline_model_parallel_size={pp} with variable_seq_lengths=True and "
                "batch_p2p_comm=True deadlocks in the first step's P2P shape exchange; set "
                "batch_p2p_comm=False (or overlap_p2p_comm with it) or use fixed lengths")
    return None

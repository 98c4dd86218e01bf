"""Compat gate: pipeline parallelism >= 4 with variable sequence lengths hangs in the first
step's shape exchange (reported in Megatron-LM issue #5100, still open).

``_communicate_shapes()`` posts its sends and receives in one fixed order in a single
``batch_isend_irecv`` on every stage, unlike the rank-parity ordering of ``_p2p_ops()``; with
``variable_seq_lengths=True`` the shapes are exchanged before every transfer. The exchange never
reads ``batch_p2p_comm`` (run on 0.16.1 and 0.19.2 by tests/releases/test_pp_shape_exchange.py;
read from the tags for 0.4.0-0.19.2; closed PR #5271 says the same), so
``batch_p2p_comm=False`` does not avoid it: fixed sequence lengths do. No source patch: refuse
the configuration at startup and say which knob avoids it.
"""

from __future__ import annotations

from typing import Any


def check(config: Any) -> str | None:
    """None when safe; otherwise the problem. Reads a TransformerConfig/ModelParallelConfig or a
    Megatron args namespace (same attribute names)."""
    pp = int(getattr(config, "pipeline_model_parallel_size", 1) or 1)
    variable = bool(getattr(config, "variable_seq_lengths", False))
    if pp >= 4 and variable:
        return (f"pipeline_model_parallel_size={pp} with variable_seq_lengths=True: the first "
                "step's P2P shape exchange is reported to hang from PP=4 on; batch_p2p_comm does "
                "not reach that exchange, so set variable_seq_lengths=False (fixed lengths, no "
                "shape exchange) or use fewer than 4 pipeline stages")
    return None

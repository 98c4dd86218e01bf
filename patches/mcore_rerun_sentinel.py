"""Overlay: rerun-state-machine sentinel ShardedObject (Megatron-LM issue #4378, PR #4448).

With a cached save plan (``--ckpt-assume-constant-structure``) the first save fixes the set of
sharded keys. Before 0.18.0, ``RerunStateMachine.state_dict()`` returns ``None`` in the steady
state, so that plan has no ``rerun_state_machine_state`` entry and a later fault save's
ShardedObject is silently dropped; loading it fails with ``Missing key ...``.

This overlay keeps the sharded structure constant: while the machine is enabled and the format
is ``torch_dist``, the steady state emits the same ShardedObject (same key, shape, offset) with a
sentinel payload. Everything else is left to upstream, unchanged: ``force=True`` (the load
template), a pending fault (real payload), ``DISABLED`` mode and non-``torch_dist`` formats (still
``None``). Old checkpoints still load: ``validate_state_dict`` ignores a ``NOT_RUNNING_YET``
state, so the sentinel is a no-op on load. No data iterator is inspected in the steady state.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

SHARDED_KEY = "rerun_state_machine_state"


def _arguments(data_iterator: Any, ckpt_format: str, force: bool = False) -> tuple[str, bool]:
    # Mirrors the upstream signature state_dict(self, data_iterator, ckpt_format, force=False).
    return ckpt_format, force


def _sentinel_payload(machine: Any) -> dict[str, Any]:
    # The release's own payload keys, each at its steady-state (constructor) value. Only the
    # error-injector settings are real: they are configuration, identical in every save.
    return {
        "rerun_requested": False,
        "checkpoint_requested": False,
        "restart_again_requested": False,
        "continue_requested": False,
        "error_injector_checkpoint": machine.error_injector.state_dict(),
        "failed_validation_call": None,
        "initial_result": None,
        "suspicious_node": None,
        "suspicious_device": None,
        "data_iterator_checkpoints": None,
        "large_value_counts": {},
        "max_values": {},
    }


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import torch
    from megatron.core import rerun_state_machine as rsm
    from megatron.core.dist_checkpointing.mapping import ShardedObject

    ckpt_format, force = _arguments(*args, **kwargs)
    steady = (
        not force
        and instance.mode != rsm.RerunMode.DISABLED
        and ckpt_format == "torch_dist"
        and instance.state == rsm.RerunState.NOT_RUNNING_YET
    )
    if not steady:
        return wrapped(*args, **kwargs)
    sharded = ShardedObject(
        SHARDED_KEY,
        _sentinel_payload(instance),
        (torch.distributed.get_world_size(),),
        (torch.distributed.get_rank(),),
    )
    return {
        "mode": instance.mode,
        "state": instance.state,
        "current_iteration": instance.current_iteration,
        "sharded": sharded,
    }


def probe(module: ModuleType) -> bool:
    """True when this release already emits the sharded entry in the steady state."""
    import torch

    # The constructor logs "RerunStateMachine initialized in mode ..." at WARNING; from a probe
    # that line would tell a reader of the training log that the job's machine was set up.
    upstream_log = logging.getLogger(module.__name__)
    was_disabled, upstream_log.disabled = upstream_log.disabled, True
    try:
        machine = module.RerunStateMachine(mode=module.RerunMode.VALIDATE_RESULTS)
    finally:
        upstream_log.disabled = was_disabled
    try:
        result = machine.state_dict(None, "torch_dist")
    except (RuntimeError, ValueError):
        if torch.distributed.is_initialized():
            raise
        # Without a process group, only a fixed release gets as far as asking torch.distributed
        # for the world size in the steady state; the affected releases return None first.
        return True
    return result is not None

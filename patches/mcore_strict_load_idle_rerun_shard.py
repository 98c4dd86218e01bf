"""Overlay: strict loading of a checkpoint that holds the idle rerun-state sentinel
(Megatron-LM issue #7428; fix proposed upstream in PR #7222, open).

Since PR #4448 (megatron-core 0.18.0, and our backport ``mcore_rerun_sentinel`` on 0.14-0.17),
a ``torch_dist`` checkpoint saved while the rerun state machine is idle contains a
``rerun_state_machine_state`` shard. ``load_checkpoint`` leaves it out of its load request,
because ``validate_state_dict()`` rejects the idle state as "nothing to rerun", so
``dist_ckpt_strictness='raise_all'`` fails with ``Missing keys (for all ranks):
{'rerun_state_machine_state'}`` on a same-topology resume.

This overlay, on ``_load_base_checkpoint``'s sharded (non-rank0) load, requests that one shard
when the checkpoint really holds it for this topology, and then drops it from the result:
requested and ignored, as PR #7222 does. ``load_checkpoint`` still never restores an idle
state (its ``validate_state_dict`` check is untouched, so the loading job's rerun mode is
kept). It adds the request only when every one of these holds, and otherwise calls upstream
unchanged, so ``raise_all`` stays strict for every other key:

* a ``torch_dist`` load with a sharded request that lacks ``rerun_state_machine``, not a
  finetune, not a release checkpoint;
* the checkpoint's common state records the machine, idle (``NOT_RUNNING_YET``);
* the checkpoint's metadata holds the exact shard key this rank's request would use (same
  world size and rank: the topology checks of ``load_checkpoint`` are not re-derived).
"""

from __future__ import annotations

from typing import Any

import patchlane
from patchlane.loading import entry_id

ENTRY_ID = entry_id(__name__)  # the decider loads this file under its entry id
KEY = "rerun_state_machine"


def _bind(wrapped: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    # _load_base_checkpoint(load_dir, args, rank0=False, sharded_state_dict=None,
    # checkpointing_context=None, ...): 0.19 adds dp_cp_group, expt_dp_group and
    # gpt_compat_layer_maps. Bound by the release's own signature, so every argument it was
    # given is passed on as it was.
    import inspect

    bound = inspect.signature(wrapped).bind(*args, **kwargs)
    return dict(bound.arguments)


def _idle_shard_request(wrapped: Any, call: dict[str, Any]) -> Any:
    """The machine's own load template when the checkpoint holds its idle shard for this
    topology; None otherwise."""
    from megatron.core import rerun_state_machine as rsm
    from torch.distributed.checkpoint.filesystem import FileSystemReader

    common, checkpoint_name, release, _ = wrapped(**{**call, "rank0": True,
                                                     "sharded_state_dict": None})
    saved = (common or {}).get(KEY) if isinstance(common, dict) else None
    if release or not isinstance(saved, dict) or \
            saved.get("state") != rsm.RerunState.NOT_RUNNING_YET:
        return None
    template = rsm.get_rerun_state_machine().state_dict(
        data_iterator=None, ckpt_format="torch_dist", force=True)
    sharded = (template or {}).get("sharded")
    key = getattr(sharded, "unique_key", None)
    if key is None:
        return None
    keys = FileSystemReader(str(checkpoint_name)).read_metadata().state_dict_metadata
    return template if key in keys else None


def overlay(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    call = _bind(wrapped, args, kwargs)
    margs, sharded = call.get("args"), call.get("sharded_state_dict")
    if (call.get("rank0") or sharded is None or KEY in sharded
            or getattr(margs, "ckpt_format", None) != "torch_dist"
            or getattr(margs, "finetune", False)):
        return wrapped(*args, **kwargs)
    template = _idle_shard_request(wrapped, call)
    if template is None:
        patchlane.hit_path(ENTRY_ID, "unchanged")
        return wrapped(*args, **kwargs)
    patchlane.hit_path(ENTRY_ID, "idle shard requested")
    result = wrapped(**{**call, "sharded_state_dict": {**sharded, KEY: template}})
    state_dict = result[0]
    if isinstance(state_dict, dict):
        state_dict.pop(KEY, None)  # requested, then ignored: an idle state is never restored
    return result

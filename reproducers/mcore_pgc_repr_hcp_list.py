"""Reproducer for mcore_pgc_repr_hcp_list: megatron-core's ``ProcessGroupCollection.__repr__``
calls ``.size()`` on every field, but ``hcp`` (hierarchical context parallelism) holds a list of
process groups, one per level. ``str()`` of a collection that has it, or of anything that
prints one (a model config during a checkpoint save, NVIDIA/Megatron-LM#3723), raises
``AttributeError: 'list' object has no attribute 'size'``. Upstream (#3753, in 0.18.0) prints
the list's sizes. Real gloo groups of this case's world.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # a repr: the lane's backend only builds the groups
WORLD_SIZES = (1,)


def run(ctx: ReproContext) -> None:
    import torch.distributed as dist
    from megatron.core.process_groups_config import ProcessGroupCollection

    written = inspect.unwrap(ProcessGroupCollection.__repr__).__code__.co_filename
    if written.startswith("<"):
        # up to 0.15 the dataclass writes __repr__ (no source file): the method this entry
        # patches, and its bug, come with 0.16's own __repr__
        raise AttributeError("ProcessGroupCollection.__repr__ is dataclass-generated in this "
                             "release: the target does not exist here")

    with ctx.process_group() as world:
        levels = [dist.new_group([0]), dist.new_group([0])]  # two hierarchy levels
        groups = ProcessGroupCollection()
        groups.tp = world
        groups.hcp = levels
        try:
            shown = repr(groups)
        except AttributeError as exc:  # the bug's symptom, from upstream's own __repr__
            raise AssertionError(f"repr() of a ProcessGroupCollection with a list-typed hcp "
                                 f"raises: {exc}") from None
        assert shown.startswith("ProcessGroupCollection(") and "tp(1)" in shown, shown
        assert "hcp([1, 1])" in shown, f"the hcp levels' sizes are missing: {shown}"
        assert str(groups) == shown

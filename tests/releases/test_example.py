"""The README's example on real megatron-core: trains, checkpoints with a run stamp, reads it
back; and the checkpoint helpers on a real dist checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from patchlane.common.errors import PatchlaneError
from patchlane.training.checkpoint import read_run_stamp

from .conftest import ROOT, release_for, requires_megatron

pytestmark = [pytest.mark.upstream, pytest.mark.slow, requires_megatron]


def test_example_trains_and_its_checkpoint_carries_the_stamp(tmp_path: Path) -> None:
    _, release = release_for("mcore_rerun_sentinel")  # a release the example's patch covers
    env = {k: v for k, v in (release or os.environ).items() if not k.startswith("PATCHLANE_")}
    env["PYTHONWARNINGS"] = "ignore"
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_tiny_megatron.py"),
                          "--out", str(tmp_path / "run")], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "weights reloaded identical: True" in out.stdout
    # every entry whose gate admits the release: the example's own patch, and the two config
    # and repr fixes of 0.16-0.17
    assert ("applied ['mcore_rerun_sentinel', 'mcore_moe_ffn_mixed_dense', "
            "'mcore_pgc_repr_hcp_list']") in out.stdout
    # read back independently, from the Megatron --save root and from the iteration dir
    receipt = read_run_stamp(tmp_path / "run")
    assert receipt == read_run_stamp(tmp_path / "run" / "iter_0000006")
    assert receipt["kind"] == "patchlane.run_stamp"
    entry = next(e for e in receipt["entries"] if e["id"] == "mcore_rerun_sentinel")
    assert entry["outcome"] == "applied"
    assert entry["hits"] >= 1 and entry["fingerprint"].startswith("sha256-v2:")
    assert receipt["versions"]["megatron-core"] == entry["installed"]
    printed = json.loads(out.stderr.strip().splitlines()[-1])
    assert printed["stamp"]["patch_set"] == receipt["patch_set"]


def test_a_checkpoint_without_a_stamp_says_so(tmp_path: Path) -> None:
    code = (
        "import torch, torch.distributed as dist, sys\n"
        "from patchlane.testing.cpu import cpu_stand_ins\n"
        f"dist.init_process_group('gloo', init_method='{(tmp_path / 's').as_uri()}', "
        "rank=0, world_size=1)\n"
        "from megatron.core import dist_checkpointing\n"
        "from megatron.core.dist_checkpointing.mapping import ShardedTensor\n"
        "sd = {'w': ShardedTensor.from_rank_offsets('w', torch.ones(2)), 'note': 'x'}\n"
        "with cpu_stand_ins():\n"
        f"    dist_checkpointing.save(sd, '{tmp_path / 'ckpt'}')\n"
    )
    (tmp_path / "ckpt").mkdir()
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    with pytest.raises(PatchlaneError, match="carries no patchlane run stamp"):
        read_run_stamp(tmp_path / "ckpt")

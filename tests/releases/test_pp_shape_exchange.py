"""The PP variable-sequence-length compat gate says that ``batch_p2p_comm=False`` does not
reach the shape exchange: ``P2PCommunicator._communicate_shapes`` posts its sends and receives
in one ``batch_isend_irecv`` whatever that setting says. Run on the installed megatron-core
(0.16.1 on Python 3.11, 0.19.2 on 3.12) with two gloo ranks on the CPU: the claim is measured,
not read. (The hang itself needs four GPU pipeline ranks and is not shown here.)"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.upstream]

RANK = r"""
import json, os, sys
import torch
import torch.distributed as dist
from megatron.core.model_parallel_config import ModelParallelConfig
from megatron.core.pipeline_parallel.p2p_communication import P2PCommunicator
from patchlane.testing.cpu import current_device, synchronize

rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method=sys.argv[2], rank=rank, world_size=2)
torch.cuda.current_device = current_device  # the exchange allocates on "the" device
torch.cuda.synchronize = synchronize  # and waits for it (nothing in flight on the CPU)
calls = []
real = dist.batch_isend_irecv
def counting(ops):
    calls.append(len(ops))
    return real(ops)
dist.batch_isend_irecv = counting
config = ModelParallelConfig(pipeline_model_parallel_size=2, variable_seq_lengths=True,
                             batch_p2p_comm=False, pipeline_dtype=torch.float32)
comm = P2PCommunicator(dist.group.WORLD, config)
shapes = comm._communicate_shapes(
    tensor_send_next=torch.zeros(5, 1, 8) if rank == 0 else None, tensor_send_prev=None,
    recv_prev=rank == 1, recv_next=False)
dist.barrier()
print(json.dumps({"rank": rank, "batched_calls": calls,
                  "recv_prev_shape": shapes[0]}))
dist.destroy_process_group()
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_batch_p2p_comm_false_still_batches_the_shape_exchange(tmp_path: Path) -> None:
    pytest.importorskip("megatron.core.pipeline_parallel.p2p_communication")
    from megatron.core.pipeline_parallel import p2p_communication

    if not hasattr(p2p_communication, "P2PCommunicator"):
        pytest.skip("before 0.14 the exchange is a module function (read, not run here)")
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    init = f"tcp://127.0.0.1:{_port()}"
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, str(script), str(r), init], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-3000:]
    results = {d["rank"]: d for d in (json.loads(o.strip().splitlines()[-1]) for o, _ in outs)}
    # every stage's shape exchange went through batch_isend_irecv, with batch_p2p_comm=False
    assert results[0]["batched_calls"] == [1] and results[1]["batched_calls"] == [1], results
    assert results[1]["recv_prev_shape"] == [5, 1, 8], results

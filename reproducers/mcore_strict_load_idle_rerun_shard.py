"""Reproducer: a strict (``raise_all``) resume of a checkpoint saved while the rerun state
machine was idle must load (Megatron-LM issue #7428, PR #7222).

A real save and load through ``megatron.training.checkpointing`` (``save_checkpoint`` then
``load_checkpoint(strict=True)``), ``torch_dist``, ``dist_ckpt_strictness='raise_all'``, rerun
mode ``validate_results`` in both jobs, the same topology, optimizer and RNG state off (as the
upstream test isolates it). The model is a one-layer ``GPTModel`` from megatron's local layer
spec; megatron's arguments come from its own ``parse_args`` + ``validate_args``. On affected
setups (megatron-core >= 0.18.0, or an older tree with the ``mcore_rerun_sentinel`` backport)
the load fails with ``Missing keys (for all ranks): {'rerun_state_machine_state'}``. The
loaded weights must equal the saved ones, and the loading job's machine stays idle in its own
mode.

CPU lane (gloo): ``patchlane.testing.cpu`` stands in for the GPU-only calls of the save path
(``torch.cuda.synchronize`` / ``current_device`` / ``get_rng_state``) and puts the load
path's one-element bookkeeping tensors on the CPU (``read_metadata`` makes them on
``device='cuda'``). Nothing in what is saved, requested or validated changes. Needs
``megatron.training`` (in megatron-core wheels from 0.18, or a Megatron-LM tree).

CUDA lane: the model's weights are initialised on the GPU, under megatron's CUDA RNG tracker
(``_initialize_affine_weight_gpu`` forks its ``model-parallel-rng`` state), which a job seeds
with ``model_parallel_cuda_manual_seed`` as ``initialize_megatron`` does; each job here seeds
it before building its model. The CPU lane initialises on the CPU and never needs it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1, 2)


def _arguments(ctx: ReproContext) -> Any:
    from megatron.training.arguments import parse_args, validate_args

    ckpt = str(ctx.workdir / "ckpt")
    argv = ["reproducer", "--num-layers", "1", "--hidden-size", "8",
            "--num-attention-heads", "2", "--seq-length", "8", "--max-position-embeddings", "8",
            "--micro-batch-size", "1", "--vocab-size", "16", "--tokenizer-type",
            "NullTokenizer", "--train-iters", "10", "--lr", "0.1", "--save-interval", "1",
            "--save", ckpt, "--load", ckpt, "--ckpt-format", "torch_dist",
            "--dist-ckpt-strictness", "raise_all", "--rerun-mode", "validate_results",
            "--no-save-optim", "--no-save-rng", "--no-load-optim", "--no-load-rng",
            "--transformer-impl", "local", "--no-gradient-accumulation-fusion"]
    if ctx.lane == "cpu":
        argv.append("--use-cpu-initialization")
    saved, sys.argv = sys.argv, argv
    try:
        args = parse_args(ignore_unknown_args=True)
    finally:
        sys.argv = saved
    validate_args(args, {})
    return args


def _model(ctx: ReproContext) -> Any:
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(num_layers=1, hidden_size=8, num_attention_heads=2,
                               use_cpu_initialization=ctx.lane == "cpu")
    model = GPTModel(config=config, transformer_layer_spec=get_gpt_layer_local_spec(),
                     vocab_size=16, max_sequence_length=8)
    return model.to(ctx.device)


def _seed(ctx: ReproContext, seed: int) -> None:
    """Seed the job as megatron's initialisation does: the CPU generator, and on the GPU the
    CUDA RNG tracker's model-parallel states (GPU weight initialisation forks them)."""
    import torch

    torch.manual_seed(seed)
    if ctx.lane == "cuda":
        from megatron.core import tensor_parallel

        tensor_parallel.model_parallel_cuda_manual_seed(seed)


def run(ctx: ReproContext) -> None:
    with ctx.process_group():
        _run(ctx)


def _run(ctx: ReproContext) -> None:
    import torch
    from megatron.core import num_microbatches_calculator as microbatches
    from megatron.core import parallel_state
    from megatron.core import rerun_state_machine as rsm
    from megatron.training import checkpointing, global_vars

    from patchlane.testing.cpu import cpu_stand_ins, cuda_requests_on_cpu

    parallel_state.initialize_model_parallel(1, 1)
    try:
        args = _arguments(ctx)
        global_vars.set_args(args)
        # What megatron's initialize_megatron sets up and load_checkpoint updates.
        microbatches.init_num_microbatches_calculator(
            ctx.rank, None, args.global_batch_size, args.micro_batch_size,
            args.data_parallel_size)
        rsm.destroy_rerun_state_machine()
        rsm.initialize_rerun_state_machine(mode=rsm.RerunMode.VALIDATE_RESULTS)
        _seed(ctx, 1234)
        saved_model = _model(ctx)
        with cpu_stand_ins():
            checkpointing.save_checkpoint(1, [saved_model], None, None, 0)
        saved = {k: v.detach().clone() for k, v in saved_model.state_dict().items()
                 if isinstance(v, torch.Tensor)}

        # A fresh job: a new machine (idle, its own mode) and differently initialised weights.
        rsm.destroy_rerun_state_machine()
        rsm.initialize_rerun_state_machine(mode=rsm.RerunMode.VALIDATE_RESULTS)
        _seed(ctx, 99)
        loaded_model = _model(ctx)
        on_cpu = cuda_requests_on_cpu() if ctx.lane == "cpu" else contextlib.nullcontext()
        try:
            with cpu_stand_ins(), on_cpu:
                iteration, _ = checkpointing.load_checkpoint([loaded_model], None, None,
                                                             strict=True)
        except BaseException as exc:  # CheckpointingException is not an AssertionError
            text = str(exc)
            if "Missing keys" in text and "rerun_state_machine_state" in text:
                raise AssertionError("strict load rejected the idle rerun-state shard the "
                                     "checkpoint holds (issue #7428): " +
                                     " ".join(text.split())[:300]) from exc
            raise
        assert iteration == 1, f"loaded iteration {iteration}, saved 1"
        for name, tensor in loaded_model.state_dict().items():
            if name in saved:
                assert torch.equal(tensor, saved[name]), f"{name} did not round-trip"
        machine = rsm.get_rerun_state_machine()
        assert machine.state == rsm.RerunState.NOT_RUNNING_YET, machine.state
        assert machine.mode == rsm.RerunMode.VALIDATE_RESULTS, machine.mode
    finally:
        rsm.destroy_rerun_state_machine()
        microbatches.destroy_num_microbatches_calculator()
        parallel_state.destroy_model_parallel()

"""One training step through a real DSA attention layer, for tests/releases/test_dsa_layer.py,
run in a child interpreter (the startup's controls are read at startup): ``import patchlane``
first, as a training script does, then megatron-core's own DSA module spec on CPU, one eager
step (the warm-up a capture needs) and the same step inside ``capture_check``.

    python tests/releases/dsa_layer_step.py RESULT.json TENSORS.pt

What is megatron's own: the module spec (``get_dsa_module_spec_for_backend``), MLA self
attention (``AbsorbedMLASelfAttention`` from 0.19, ``MLASelfAttention`` before), ``DSAttention``,
``DSAIndexer``, the indexer loss and its auto-scaler, rotary embeddings, parallel state. What
stands in, and why (none of it is on the path an overlay changes):

- the Hadamard transform: ``fast_hadamard_transform`` is a CUDA-only extension; a pure-torch
  Walsh-Hadamard (``x @ H * scale`` over the last dim, a power of two here) replaces the
  module's ``hadamard_transform`` name;
- the spec's backend: ``LocalSpecProvider`` has no ``linear()`` (the DSA spec asks for TE's
  ``TELinear`` in ``parallel_mode="duplicated"``); the MLA down projections get megatron's
  ``ColumnParallelLinear`` (MLA accepts it) and the indexer's three linears a
  ``ColumnParallelLinear`` that accepts the duplicated mode, at TP=1 the same math;
- ``multi_latent_attention.HAVE_TE`` is set from whether TE is really there: without TE,
  megatron's extension module hands out a MagicMock for ``TELinear`` (0.16.1), which MLA's
  ``isinstance`` check cannot take;
- ``patchlane.testing.cpu``'s stand-ins answer the CUDA device queries of rotary embeddings
  and the loss tracker with the CPU.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import patchlane

SEQ, BATCH, HIDDEN = 32, 2, 64
DSA = "megatron.core.transformer.experimental_attention_variant.dsa"


def _hadamard(x: Any, scale: float = 1.0) -> Any:
    import torch

    n, h = x.shape[-1], torch.ones(1, 1)
    while h.shape[0] < n:  # Sylvester's construction
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return (x.float() @ h.to(x.device)).mul(scale).to(x.dtype)


def _layer() -> Any:
    import importlib

    import torch
    from megatron.core.models.backends import LocalSpecProvider
    from megatron.core.models.gpt.experimental_attention_variant_module_specs import (
        get_dsa_module_spec_for_backend,
    )
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear
    from megatron.core.transformer import multi_latent_attention
    from megatron.core.transformer.spec_utils import build_module
    from megatron.core.transformer.transformer_config import MLATransformerConfig

    importlib.import_module(DSA).hadamard_transform = _hadamard
    multi_latent_attention.HAVE_TE = isinstance(multi_latent_attention.TELinear, type)

    class DuplicatedLinear(ColumnParallelLinear):
        def __init__(self, input_size: int, output_size: int, *, parallel_mode: str,
                     **kwargs: Any) -> None:
            assert parallel_mode == "duplicated", parallel_mode
            super().__init__(input_size, output_size, gather_output=False, **kwargs)

    class Backend(LocalSpecProvider):
        def linear(self) -> type:
            return ColumnParallelLinear

    config = MLATransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=4, add_bias_linear=False,
        use_cpu_initialization=True, bf16=True, params_dtype=torch.bfloat16,
        q_lora_rank=32, kv_lora_rank=32, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
        rope_type="rope", rotary_base=10000, rotary_percent=1.0,
        dsa_indexer_n_heads=8, dsa_indexer_head_dim=16, dsa_indexer_topk=8,
        dsa_indexer_loss_coeff=1.0, dsa_indexer_use_sparse_loss=False,
        experimental_attention_variant="dsa")
    spec = get_dsa_module_spec_for_backend(config, backend=Backend())
    indexer = spec.submodules.core_attention.submodules.indexer.submodules
    for name in ("linear_wq_b", "linear_wk", "linear_weights_proj"):
        setattr(indexer, name, DuplicatedLinear)
    torch.manual_seed(0)
    return build_module(spec, config=config, layer_number=1)


def main(result_path: str, tensors_path: str) -> int:
    import importlib

    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state

    from patchlane.testing.capture import capture_check
    from patchlane.testing.cpu import cpu_stand_ins, cuda_requests_on_cpu

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", os.environ.get("PATCHLANE_TEST_PORT", "29533"))
    dist.init_process_group("gloo", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    try:
        with cpu_stand_ins(), cuda_requests_on_cpu():
            layer = _layer()
            x = torch.randn(SEQ, BATCH, HIDDEN, generator=torch.Generator().manual_seed(1))
            x = x.bfloat16().requires_grad_(True)

            def step() -> Any:
                x.grad = None
                layer.zero_grad(set_to_none=True)
                out, _ = layer(x, attention_mask=None)
                out.float().sum().backward()
                return out.detach()

            out = step()
            grads = {"x": x.grad.clone()} | {n: p.grad.clone()
                                           for n, p in layer.named_parameters()
                                           if p.grad is not None}
            # as in a fresh process: nothing in these releases sets a loss scale
            importlib.import_module(DSA).DSAIndexerLossAutoScaler.main_loss_backward_scale = None
            with capture_check(lane="cpu") as report:
                step()
    finally:
        parallel_state.destroy_model_parallel()
        dist.destroy_process_group()
    torch.save({"out": out, "grads": grads}, tensors_path)
    entries = {e["id"]: {"outcome": e["decision"]["outcome"], "hits": e["hits"],
                         "paths": e["paths"]}
               for e in patchlane.report()["entries"] if "dsa" in e["id"]}
    result = {"layer": type(layer).__name__, "core_attention": type(layer.core_attention).__name__,
              "violations": [{"op": v.op, "rule": v.rule, "frame": v.frame}
                             for v in report.violations],
              "entries": entries}
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))

"""Reproducer: a compiled per-layer function must stay compiled for every layer of a model
with more layers than Dynamo's default ``recompile_limit`` (8).

Dynamo guards a layer's Python ints (Megatron's ``layer_number`` and the like) as constants, so
one compiled function called with each layer in turn recompiles once per layer. Past the
limit the frame silently falls back to eager for the remaining layers: no error, only a
slower step. The case without the entry runs on upstream's default (torch 2.7+:
``recompile_limit = 8``); with it, the entry raises the limit when ``torch._dynamo.config`` is
imported. The assertion counts the graphs the backend was given: one per layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu", "cuda")
WORLD_SIZES = (1,)

LAYERS = 12  # more than the default limit of 8, well within the entry's 64


def run(ctx: ReproContext) -> None:
    import torch
    import torch._dynamo

    compiled: list[Any] = []

    def backend(gm: Any, example_inputs: Any) -> Any:
        compiled.append(gm)
        return gm.forward

    class Layer(torch.nn.Module):
        def __init__(self, number: int) -> None:
            super().__init__()
            self.layer_number = number
            self.linear = torch.nn.Linear(8, 8)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.linear(x)) / (self.layer_number + 1)

    layers = [Layer(i).to(ctx.device) for i in range(LAYERS)]

    @torch.compile(backend=backend)
    def step(layer: Any, x: Any) -> Any:
        return layer(x)

    torch._dynamo.reset()
    x = torch.randn(2, 8, device=ctx.device)
    for layer in layers:
        x = step(layer, x)
    limit = torch._dynamo.config.recompile_limit
    assert len(compiled) == LAYERS, (
        f"{len(compiled)} of {LAYERS} layers compiled with recompile_limit={limit}: the rest "
        "fell back to eager without an error")

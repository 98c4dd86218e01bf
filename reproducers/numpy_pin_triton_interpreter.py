"""Reproducer: liger-kernel's fused linear cross-entropy must run under Triton's CPU
interpreter (``TRITON_INTERPRET=1``), as the CPU lane runs every liger kernel.

Triton's interpreter before 3.7 converts a one-element numpy array to a Python scalar with
``int()``/``float()``, which numpy 2.4 refuses ("only 0-dimensional arrays can be converted to
Python scalars"; triton-lang/triton #9171, fixed by PR #9172 in triton 3.7.0). The case without
the pin runs on the bad side of it, ``BAD_SIDE`` installed side by side (numpy 2.4.1: 2.4.0 is
yanked on PyPI); the case with it runs on the environment's own numpy, inside the pin. On
triton >= 3.7 the entry's ``when.installed`` excludes the environment and only the bad side
runs: passing there is the evidence that retires the pin.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from patchlane.reproducer import ReproContext

LANES = ("cpu",)  # the interpreter is the CPU lane's; a GPU compiles the kernels instead
WORLD_SIZES = (1,)
REQUIRES = ("triton", "liger_kernel")  # a megatron-only stack has neither: skipped there
BAD_SIDE = ("numpy==2.4.1",)

SCALAR_ERROR = "only 0-dimensional arrays can be converted to Python scalars"


def run(ctx: ReproContext) -> None:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
    import numpy
    import torch
    import triton
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    g = torch.Generator().manual_seed(0)
    x = torch.randn(16, 32, generator=g).requires_grad_(True)
    weight = torch.randn(64, 32, generator=g).requires_grad_(True)
    target = torch.randint(0, 64, (16,), generator=g)
    try:
        loss = liger_fused_linear_cross_entropy(x, weight, target)
        loss.backward()
    except Exception as exc:  # triton wraps it: InterpreterError(TypeError(...))
        if SCALAR_ERROR not in str(exc):
            raise
        raise AssertionError(
            f"liger's fused linear cross-entropy fails under TRITON_INTERPRET=1 with numpy "
            f"{numpy.__version__} and triton {triton.__version__}: {SCALAR_ERROR} "
            "(triton-lang/triton #9171)") from None
    assert x.grad is not None and torch.isfinite(x.grad).all(), "no finite input gradient"

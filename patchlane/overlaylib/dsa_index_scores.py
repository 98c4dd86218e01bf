"""DSA's indexer scores without upstream's ``[sq, b, h, sk]`` fp32 intermediate:
``relu(q @ k^T) * weights`` summed over heads, ``[b, sq, sk]``, forward and backward.

Shared by ``mcore_dsa_streamed_index_scores`` (megatron-core 0.16, the ``DSAIndexer`` method)
and ``mcore_dsa_streamed_index_scores_fn`` (0.17-0.19, the module function): the same
arithmetic behind two targets; each entry still retires alone.

Three paths compute the same function; every call records which one ran and why (the overlays
pass both to ``patchlane.hit_path``; ``patchlane.report()`` and the sweep's receipts show them),
and the first time a CUDA call cannot take the kernel, why is also logged:

- ``kernel`` (``kernel-autograd`` under autograd): the Triton kernels of
  :mod:`.dsa_index_scores_kernel`, on CUDA tensors when Triton imports. The per-head scores live
  in registers; nothing of size ``h * sq * sk`` is ever written, forward or backward, and the
  work is one pass of tensor-core products (see that module for the arithmetic).
- ``streamed`` (``streamed-autograd``): torch ops over tiles of (query rows, heads), each
  tile's weighted head sum added into one ``[sq, b, sk]`` buffer. Tiles are sized for the
  device: about 4 MiB of scores on a CPU (its cache), :func:`tile_elements` of the device's
  memory on a GPU, so a GPU launches a few large products, not thousands of small ones. Runs
  where the kernel cannot: CPU tensors, no Triton, fp64 weights, a head dim over 256, fp16
  under autograd (see :func:`kernel_refusal`), or ``PATCHLANE_DSA_KERNEL`` off.
- ``zero-size``: a zero-size sq, b, h or sk: upstream's own arithmetic, whose intermediate is
  then empty, so shapes, dtypes and gradients are upstream's by construction.

Failures surface where upstream's do: a NaN in q, k, weights or the gradient reaches the
result and the gradients that upstream's reach (ReLU keeps a NaN, and its backward passes the
gradient through one, as ``torch.relu`` does), and a double backward runs the torch path's
differentiable backward.

Both return upstream's dtype, shape and strides (the ``[b, sq, sk]`` transpose view of a
``[sq, b, sk]`` buffer); sums run in another order than upstream's (fp32 rounding, not
bitwise). Under autograd both save only q, weights and k and recompute the scores in backward.
"""

from __future__ import annotations

import functools
import logging
import os
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from .. import switch_values

__all__ = ["KERNEL_SWITCH", "KernelConfig", "Scores", "autograd_function", "forward_scores",
           "kernel_config", "kernel_on", "kernel_refusal", "scores", "streamed",
           "tile_elements", "tiles"]

_LOG = logging.getLogger("patchlane")
CPU_TILE_ELEMENTS = 1 << 20
"""fp32 scores per tile on a CPU (4 MiB): what its cache holds."""
GPU_TILE_FRACTION = 1 / 512
"""fp32 scores per tile on a GPU, as a share of its memory: 160 MiB on an 80 GB card (40M
elements: 10 heads of sq=sk=2048, or one head of 6,300 rows at sk=6,300), few launches."""
MAX_KERNEL_DIM = 256
"""The largest head dim the kernel takes: its tiles hold ``[block, d]`` operands in registers."""


@dataclass(frozen=True)
class KernelConfig:
    """Block sizes and launch options of the three kernels. The defaults are the fastest of
    those ``benchmarks/tune_gpu_kernels.py`` timed on an H100 (sm_90, Triton 3.6) at h=64,
    d=128, sq=sk=4096 and 8192 (``gpu-runs/`` holds the figures)."""

    fwd_m: int = 64
    fwd_n: int = 128
    fwd_launch: dict[str, int] = field(default_factory=lambda: {"num_warps": 4,
                                                                "num_stages": 3})
    bwd_q_m: int = 64
    bwd_q_n: int = 64
    bwd_q_launch: dict[str, int] = field(default_factory=lambda: {"num_warps": 4,
                                                                  "num_stages": 3})
    bwd_k_m: int = 64
    bwd_k_n: int = 64
    bwd_k_launch: dict[str, int] = field(default_factory=lambda: {"num_warps": 4,
                                                                  "num_stages": 3})
    bwd_k_programs: int = 528
    """Programs the ``dk`` kernel aims for (4 per SM on a 132-SM Hopper): key blocks times
    head groups; more groups cost one more fp32 partial of grad k each."""


INTERPRETER_CONFIG = KernelConfig(fwd_m=16, fwd_n=16, fwd_launch={}, bwd_q_m=16, bwd_q_n=16,
                                  bwd_q_launch={}, bwd_k_m=16, bwd_k_n=16, bwd_k_launch={},
                                  bwd_k_programs=4)
"""Small blocks for Triton's CPU interpreter (tests): odd sizes cross several blocks."""


def kernel_config(device: Any) -> KernelConfig:
    """The kernel's configuration for ``device`` (a ``torch.device``); CPU tensors get the
    interpreter's."""
    if device.type != "cuda":
        return INTERPRETER_CONFIG
    return KernelConfig()


def tile_elements(device: Any, out_elements: int | None = None) -> int:
    """fp32 scores per tile of the torch path on ``device``: a CPU's cache; on a GPU a share
    of its memory, but no more than the result's own size (``out_elements``), so the peak
    stays a small multiple of the result."""
    if device.type != "cuda":
        return CPU_TILE_ELEMENTS
    import torch

    total = torch.cuda.get_device_properties(device).total_memory
    budget = int(total * GPU_TILE_FRACTION) // 4
    if out_elements is not None:
        budget = min(budget, out_elements)
    return max(CPU_TILE_ELEMENTS, budget)


KERNEL_SWITCH = "PATCHLANE_DSA_KERNEL"
"""Switches the Triton kernel off (the torch path everywhere): read at each call, with the
grammar of every ``PATCHLANE_*`` yes/no setting (:mod:`patchlane.switch_values`)."""


def kernel_on() -> bool:
    """``PATCHLANE_DSA_KERNEL``: unset or empty is on; a value that is neither a yes nor a no
    raises :class:`patchlane.common.errors.ControlsError` naming the accepted spellings (a typo must
    not leave the kernel silently on, or off)."""
    raw = os.environ.get(KERNEL_SWITCH)
    value = switch_values.flag(raw, True)
    if value is None:
        from ..common.errors import ControlsError

        raise ControlsError(
            f"{KERNEL_SWITCH}={raw!r}: expected one of {', '.join(switch_values.TRUE)} (on) "
            f"or {', '.join(switch_values.FALSE)} (off), or unset (on); fix or unset it")
    return value


def kernel_refusal(q: Any, weights: Any, k: Any, grad: bool = False) -> str | None:
    """Why the kernel cannot compute these inputs (None: it can). ``grad``: the call runs
    under autograd (its backward will run too)."""
    import torch

    if not kernel_on():
        return f"{KERNEL_SWITCH}={os.environ.get(KERNEL_SWITCH)!r} switches the kernel off"
    if q.device.type != "cuda":
        return f"tensors on {q.device.type}, not CUDA"
    if not (q.device == weights.device == k.device):
        return "inputs on different devices"
    if q.dtype not in (torch.bfloat16, torch.float16, torch.float32) or k.dtype != q.dtype:
        return f"q {q.dtype}, k {k.dtype}: the kernel takes one of bf16, fp16, fp32 for both"
    if not weights.dtype.is_floating_point or weights.dtype == torch.float64:
        return f"weights {weights.dtype}: upstream's result would not be fp32"
    if q.shape[-1] > MAX_KERNEL_DIM:
        return f"head dim {q.shape[-1]} > {MAX_KERNEL_DIM}"
    if q.dim() != 4 or k.dim() != 3 or weights.dim() != 3:
        return "not the [sq, b, h, d] / [sq, b, h] / [sk, b, d] layout"
    if grad and q.dtype == torch.float16:
        # The backward's fp32 score gradient goes to the tensor cores as two parts in the
        # operands' dtype: fp16 overflows above 65504 (upstream's fp32 does not) and falls
        # into subnormals below about 6e-5 (2-15x less accurate than upstream there).
        return ("q torch.float16 under autograd: the kernel's backward would split the fp32 "
                "score gradient into fp16 parts (overflow above 65504, subnormals below 6e-5); "
                "the torch path keeps upstream's fp32")
    if _triton_missing() is not None:
        return _triton_missing()
    return None


@functools.cache
def _triton_missing() -> str | None:
    try:
        import triton  # noqa: F401
    except ImportError as exc:
        return f"Triton is not importable ({exc})"
    return None


def _kernel_module() -> Any:
    from . import dsa_index_scores_kernel

    return dsa_index_scores_kernel


_REFUSALS_LOGGED: set[str] = set()


def _note_refusal(reason: str) -> None:
    if reason not in _REFUSALS_LOGGED:  # once per reason and process: a step runs thousands
        _REFUSALS_LOGGED.add(reason)
        _LOG.info("DSA index scores on the torch path, not the Triton kernel: %s",
                  reason)


def tiles(q: Any, k: Any, block_elements: int) -> list[tuple[slice, slice]]:
    """(query rows, heads) tiles of about ``block_elements`` scores each: whole head blocks
    while one head fits, else one head and as many query rows as fit (at least one)."""
    sq, b, heads, _ = q.shape
    per_row_head = b * k.shape[0]
    n_heads = max(1, min(heads, block_elements // max(1, sq * per_row_head)))
    n_rows = max(1, sq) if n_heads > 1 else max(1, min(sq, block_elements // max(1, per_row_head)))
    return [(slice(r, min(sq, r + n_rows)), slice(h, min(heads, h + n_heads)))
            for r in range(0, sq, n_rows) for h in range(0, heads, n_heads)]


def forward_scores(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> Any:
    """``[b, sq, sk]``: ``relu(q @ k^T) * weights`` summed over heads, one tile at a time."""
    import torch

    sq, b, _, _ = q.shape
    sk = k.shape[0]
    # upstream scores in fp32 (`q.float() @ k.float()`, inf where that overflows) and
    # multiplies them by `weights` as given: the product fp32 unless weights are wider
    dtype = torch.promote_types(torch.float32, weights.dtype)
    k32 = k.float()
    out = torch.zeros(sq, b, sk, dtype=dtype, device=q.device)
    for rows, heads in tiles(q, k, block_elements):
        scores = torch.einsum("sbhd,tbd->sbht", q[rows, :, heads].float(), k32)
        if use_relu:
            scores.relu_()
        scores = scores.to(dtype)  # fp64 weights: the fp32 scores widened, as upstream's
        n = scores.shape[0] * b
        # the weighted head sum as one batched product added into `out`: no weighted copy
        # of the tile and no [sq, b, sk] temporary (reshape copies the tile only where einsum
        # returned it permuted, b > 1)
        out[rows].view(n, 1, sk).baddbmm_(weights[rows, :, heads].to(dtype).reshape(n, 1, -1),
                                          scores.reshape(n, -1, sk))
        del scores
    return out.transpose(0, 1)


def _streamed_backward(q: Any, weights: Any, k: Any, grad_out: Any, use_relu: bool,
                       block_elements: int, needs: tuple[bool, bool, bool]) -> tuple[Any, ...]:
    """The gradients in torch ops over tiles, as upstream's autograd computes them: grad
    weights in the forward's dtype (fp64 weights: fp64, as upstream's promoted product), the
    score gradient in fp32. Differentiable (a double backward runs through it)."""
    import torch

    need_q, need_w, need_k = needs
    grad_q = torch.empty_like(q) if need_q else None
    grad_w = torch.empty_like(weights) if need_w else None
    grad_k = torch.zeros(k.shape, dtype=torch.float32, device=k.device) if need_k else None
    wide = torch.promote_types(torch.float32, weights.dtype)  # the forward's dtype
    g = grad_out.transpose(0, 1).to(wide)  # [sq, b, sk], a view when already that dtype
    k32 = k.float()
    for rows, heads in tiles(q, k, block_elements):
        q32 = q[rows, :, heads].float()
        g_rows = g[rows]
        scores = torch.einsum("sbhd,tbd->sbht", q32, k32)
        # torch.relu's backward passes the gradient where the score is not <= 0: a NaN
        # score passes it, as upstream's does
        passed = torch.logical_not(scores <= 0) if use_relu else None
        if grad_w is not None:
            if use_relu:
                scores.relu_()  # keeps a NaN, as upstream's relu does
            grad_w[rows, :, heads] = torch.einsum("sbt,sbht->sbh", g_rows, scores.to(wide))
        del scores
        if grad_q is None and grad_k is None:
            continue
        # d(scores): the head-sum's gradient times each head's weight (then ReLU's)
        grad_s = (g_rows.unsqueeze(2) * weights[rows, :, heads, None].to(wide)).float()
        if passed is not None:
            grad_s = torch.where(passed, grad_s, 0.0)
        del passed
        if grad_q is not None:
            grad_q[rows, :, heads] = torch.einsum("sbht,tbd->sbhd", grad_s, k32)
        if grad_k is not None:
            grad_k += torch.einsum("sbht,sbhd->tbd", grad_s, q32)
        del grad_s
    if grad_k is not None:
        grad_k = grad_k.to(k.dtype)
    return grad_q, grad_w, grad_k


def _upstream_arithmetic(q: Any, weights: Any, k: Any, use_relu: bool) -> Any:
    """The scores as upstream writes them, through the ``[sq, b, h, sk]`` product: only for
    a zero-size sq, b, h or sk, where that product is empty."""
    import torch

    s = torch.einsum("sbhd,tbd->sbht", q.float(), k.float())
    if use_relu:
        s = torch.relu(s)
    return (s * weights.unsqueeze(-1)).sum(dim=2).transpose(0, 1)


def _kernel_forward(q: Any, weights: Any, k: Any, use_relu: bool, config: KernelConfig) -> Any:
    return _kernel_module().forward(q, weights, k, use_relu, config).transpose(0, 1)


@functools.cache
def autograd_function() -> Any:
    """The autograd.Function, built on first use (torch is imported by the target by then).

    ``apply(q, weights, k, use_relu, block_elements, config)``: ``config`` a
    :class:`KernelConfig` runs the kernel, None the torch path with ``block_elements`` tiles.
    """
    import torch

    class IndexScores(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, weights: Any, k: Any, use_relu: bool,
                    block_elements: int, config: KernelConfig | None) -> Any:
            ctx.save_for_backward(q, weights, k)
            ctx.use_relu, ctx.block_elements, ctx.config = use_relu, block_elements, config
            if config is not None:
                return _kernel_forward(q, weights, k, use_relu, config)
            return forward_scores(q, weights, k, use_relu, block_elements)

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            q, weights, k = ctx.saved_tensors
            needs = tuple(ctx.needs_input_grad[:3])
            # Grad mode is on in backward only under create_graph: a double backward needs
            # differentiable ops, which the kernel is not; the torch path's backward is.
            if ctx.config is not None and not torch.is_grad_enabled():
                grads = _kernel_module().backward(q, weights, k, grad_out, ctx.use_relu, needs,
                                                  ctx.config)
            else:
                block = ctx.block_elements
                if ctx.config is not None:
                    _note_refusal("a double backward (create_graph=True): the torch path's "
                                  "differentiable backward runs instead of the kernel's")
                grads = _streamed_backward(q, weights, k, grad_out, ctx.use_relu, block, needs)
            return (*grads, None, None, None)

    return IndexScores


class Scores(NamedTuple):
    """What :func:`scores` returns: the scores, the path that computed them, and why."""

    scores: Any
    path: str
    """``kernel``, ``streamed`` or ``zero-size``; ``-autograd`` appended under autograd."""
    reason: str
    """Why this path: what the kernel could not take, or what asked for the path."""


def _zero_size(q: Any, weights: Any, k: Any) -> str | None:
    if q.dim() != 4 or k.dim() != 3:
        return None
    sq, b, heads, _ = q.shape
    sk = k.shape[0]
    if 0 in (sq, b, heads, sk):
        return (f"a zero-size dimension (sq={sq}, b={b}, h={heads}, sk={sk}): upstream's own "
                "arithmetic, whose [sq, b, h, sk] product is empty")
    return None


def scores(q: Any, weights: Any, k: Any, use_relu: bool = True,
           block_elements: int | None = None, *, kernel: bool | None = None,
           config: KernelConfig | None = None) -> Scores:
    """The scores, the path taken (``kernel``, ``streamed``, ``zero-size``, each
    ``-autograd`` when an input requires grad under grad mode) and why that path.

    ``kernel``: None picks it where it can run (:func:`kernel_refusal`), True insists (tests on
    Triton's interpreter), False takes the torch path. ``block_elements``: the torch path's
    tile (default :func:`tile_elements` of the device); giving one also means the torch path
    unless ``kernel=True``. ``config``: the kernel's blocks (default :func:`kernel_config`).
    """
    import torch

    grad = torch.is_grad_enabled() and (q.requires_grad or weights.requires_grad
                                        or k.requires_grad)
    suffix = "-autograd" if grad else ""
    empty = _zero_size(q, weights, k)
    if empty is not None:
        return Scores(_upstream_arithmetic(q, weights, k, use_relu), "zero-size" + suffix,
                      empty)
    if kernel is None:
        if block_elements is not None:
            kernel, reason = False, f"tiles of {block_elements} scores asked for"
        else:
            refusal = kernel_refusal(q, weights, k, grad)
            if refusal is not None and q.device.type == "cuda":
                _note_refusal(refusal)
            kernel = refusal is None
            reason = refusal or (f"the kernel takes these inputs ({q.device.type}, {q.dtype}, "
                                 f"head dim {q.shape[-1]})")
    else:
        reason = f"kernel={kernel} asked for"
    if kernel and config is None:
        config = kernel_config(q.device)
    if not kernel:
        config = None
    if block_elements is None:
        block_elements = tile_elements(q.device, q.shape[0] * q.shape[1] * k.shape[0])
    path = ("kernel" if config is not None else "streamed") + suffix
    if grad:
        out = autograd_function().apply(q, weights, k, use_relu, block_elements, config)
    elif config is not None:
        out = _kernel_forward(q, weights, k, use_relu, config)
    else:
        out = forward_scores(q, weights, k, use_relu, block_elements)
    return Scores(out, path, reason)


def streamed(q: Any, weights: Any, k: Any, use_relu: bool, block_elements: int) -> Scores:
    """The torch path with ``block_elements`` tiles: ``scores(..., kernel=False)``."""
    return scores(q, weights, k, use_relu, block_elements, kernel=False)

"""Parity cases for the product's kernels: each path against upstream and against float64.

    TRITON_INTERPRET=1 python -m patchlane.overlaylib.kernel_parity      # CPU: Triton's interpreter
    python -m patchlane.overlaylib.kernel_parity --device cuda           # a GPU: compiled kernels

Run by tests/patches/test_kernel_parity.py (CPU, in a child interpreter: ``TRITON_INTERPRET``
must be set before Triton is imported) and by ``scripts/gpu-check`` on a GPU. Prints one JSON
object: case -> "ok", "skip: why" or why not; ``--only NAME`` runs some. Needs torch, Triton,
and megatron-core for the DSA cases (upstream's own function); exit 2 when it cannot run.

The rule, for every tensor a case compares (the output, each gradient):
- dtype and shape equal to upstream's; the output's strides equal to upstream's, each
  gradient's to its input's (the layout ``AccumulateGrad`` keeps in ``.grad``: upstream's
  gradients come in whatever order its einsum's backward permuted them to);
- NaN and inf exactly where upstream has them (a path gains or loses none);
- on the finite elements, its error against a float64 evaluation of upstream's arithmetic
  within 2x upstream's own error plus one unit of the tensor's dtype at its largest value.

On a CPU, Triton's interpreter computes ``maximum`` with numpy, which keeps a NaN; a GPU's
``maximum`` (PTX ``max.f32``) returns the number. And it converts fp32 to bf16 by truncation,
where a GPU rounds to nearest (``cvt.rn.bf16.f32``: a value above bf16's largest rounds to inf). The
interpreter is given the GPU's rules here, so a kernel that relies on either fails as it
would on the GPU.

Upstream: DSA, the installed megatron-core's own ``_compute_index_scores`` (0.16's method or
0.17+'s function); FLCE, ``torch.nn.functional.cross_entropy`` of ``linear``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from functools import partial
from typing import Any

import torch

from patchlane.loading import load_file
from patchlane.overlaylib import cross_entropy_rows_kernel as rows_kernel
from patchlane.overlaylib import dsa_index_scores as dsa_scores
from patchlane.startup import default_registry_path

FLCE: Any = load_file("liger_flce_weighted_none", "overlay",
                 default_registry_path().parent / "patches" / "liger_flce_weighted_none.py")
DEVICE = torch.device("cpu")
"""Where the paths run (``--device``); upstream runs there too, float64 on the CPU."""


def _give_interpreter_gpu_rules() -> None:
    """Triton's interpreter with a GPU's ``maximum`` and fp32 -> bf16 rounding."""
    import numpy as np
    from triton.runtime import interpreter

    def maxnum(self: Any, lhs: Any, rhs: Any) -> Any:
        return self.binary_op(lhs, rhs, np.fmax)  # fmax: the number wins over a NaN

    truncating_cast = interpreter.InterpreterBuilder.cast_impl

    def cast(self: Any, src: Any, dst_type: Any) -> Any:
        import triton.language as tl

        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            rounded = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.bfloat16)
            return interpreter.TensorHandle(rounded.view(torch.int16).numpy().view(np.uint16),
                                            dst_type.scalar)
        return truncating_cast(self, src, dst_type)

    interpreter.InterpreterBuilder.create_maxnumf = maxnum
    interpreter.InterpreterBuilder.cast_impl = cast


class Skip(Exception):
    pass


# -- the rule -------------------------------------------------------------------------------

def _ulp(dtype: Any, value: float) -> float:
    """One unit in the last place of ``dtype`` at ``value``."""
    if value == 0 or not math.isfinite(value):
        return 0.0
    bits = {torch.bfloat16: 8, torch.float16: 11, torch.float32: 24, torch.float64: 53}[dtype]
    return 2.0 ** (math.floor(math.log2(abs(value))) - bits + 1)


ANY_LAYOUT = object()


def check(name: str, got: Any, upstream: Any, exact: Any, layout: Any = None) -> None:
    """``got`` (a path's tensor) against ``upstream``'s and a float64 ``exact``; ``layout``:
    another tensor whose strides ``got`` may have instead of upstream's, or ``ANY_LAYOUT``
    (a second-order gradient: no consumer reads its layout)."""
    if upstream is None or got is None:
        assert got is None and upstream is None, f"{name}: {got is None=} {upstream is None=}"
        return
    assert got.dtype == upstream.dtype, f"{name}: dtype {got.dtype}, upstream {upstream.dtype}"
    assert got.shape == upstream.shape, f"{name}: shape {tuple(got.shape)}, upstream " \
        f"{tuple(upstream.shape)}"
    allowed_strides = {upstream.stride()} | ({layout.stride()} if layout is not None
                                             and layout is not ANY_LAYOUT else set())
    if got.numel() > 1 and layout is not ANY_LAYOUT:
        assert got.stride() in allowed_strides, \
            f"{name}: strides {got.stride()}, expected one of {sorted(allowed_strides)}"
    for what, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
        mine, theirs = test(got), test(upstream)
        assert torch.equal(mine, theirs), \
            f"{name}: {int(mine.sum())} {what} where upstream has {int(theirs.sum())}"
    finite = torch.isfinite(upstream)
    if not bool(finite.any()):
        return
    exact = exact.double()[finite]
    err = float((got.double()[finite] - exact).abs().max())
    err_up = float((upstream.double()[finite] - exact).abs().max())
    allowed = 2 * err_up + _ulp(got.dtype, float(exact.abs().max()))
    assert err <= allowed, f"{name}: error {err:.3g} against float64, upstream's {err_up:.3g} " \
        f"(allowed {allowed:.3g})"


# -- DSA index scores -------------------------------------------------------------------------

def dsa_upstream() -> Callable[..., Any]:
    try:
        from megatron.core.transformer.experimental_attention_variant import dsa
    except ImportError as exc:
        raise Skip(f"megatron-core's dsa is not importable: {exc}") from None
    function = vars(dsa).get("_compute_index_scores")
    if function is not None:  # 0.17+
        original = inspect.unwrap(function)
        relu_arg = "use_relu" in inspect.signature(original).parameters

        def call(q: Any, w: Any, k: Any, use_relu: bool) -> Any:
            if not use_relu and not relu_arg:
                raise Skip("this release has no use_relu")
            return original(q, w, k, use_relu=use_relu) if relu_arg else original(q, w, k)
        return call
    method = inspect.unwrap(vars(dsa.DSAIndexer)["_compute_index_scores"])

    def call16(q: Any, w: Any, k: Any, use_relu: bool) -> Any:
        if not use_relu:
            raise Skip("0.16 has no use_relu")
        return method(None, q, w, k)
    return call16


def _dsa_exact(q: Any, w: Any, k: Any, use_relu: bool) -> Any:
    s = torch.einsum("sbhd,tbd->sbht", q, k)
    if use_relu:
        s = torch.relu(s)
    return (s * w.unsqueeze(-1)).sum(dim=2).transpose(0, 1)


PATHS: dict[str, dict[str, Any]] = {"kernel": {"kernel": True}, "streamed": {"kernel": False},
         "streamed-tiles": {"block_elements": 64}}


def _run(fn: Callable[..., Any], inputs: tuple[Any, ...], grad: Any,
         double: bool = False) -> list[Any]:
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    grads = torch.autograd.grad(out, leaves, grad, create_graph=double, allow_unused=True)
    if double:  # a double backward: the gradient of the gradients' weighted sum
        second: Any = sum((g.float() * (i + 1)).sum() for i, g in enumerate(grads)
                          if g is not None)
        grads = torch.autograd.grad(second, leaves, allow_unused=True)
    return [t.cpu() if t is not None else None for t in (out.detach(), *grads)]


def dsa_case(shape: tuple[int, ...], dtype: Any, use_relu: bool = True, *,
             w_dtype: Any = None, edit: Callable[..., tuple[Any, ...]] | None = None,
             double: bool = False, paths: tuple[str, ...] = tuple(PATHS), seed: int = 0) -> None:
    sq, sk, b, h, d = shape
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(sq, b, h, d, generator=gen).to(dtype)
    k = torch.randn(sk, b, d, generator=gen).to(dtype)
    w = torch.randn(sq, b, h, generator=gen).to(w_dtype or dtype)
    grad = torch.randn(b, sq, sk, generator=gen, dtype=torch.promote_types(torch.float32,
                                                                             w.dtype))
    if edit is not None:
        q, w, k, grad = edit(q, w, k, grad)
    upstream = dsa_upstream()
    exact = _run(lambda q_, w_, k_: _dsa_exact(q_, w_, k_, use_relu),
                 (q.double(), w.double(), k.double()), grad.double(), double)
    q, w, k, grad = (t.to(DEVICE) for t in (q, w, k, grad))
    want = _run(lambda *t: upstream(*t, use_relu), (q, w, k), grad, double)
    for path in paths:
        options: dict[str, Any] = PATHS[path]
        got = _run(lambda q_, w_, k_, o=options: dsa_scores.scores(q_, w_, k_, use_relu,
                                                                   **o).scores,
                   (q, w, k), grad, double)
        layouts = (None, q, w, k) if not double else (None, *[ANY_LAYOUT] * 3)
        for name, g_, u, e, lay in zip(("out", "grad q", "grad w", "grad k"), got, want,
                                       exact, layouts, strict=True):
            check(f"{path} {name}", g_, u, e, lay)


def _nan(where: str) -> Callable[..., Any]:
    def edit(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, ...]:
        q, w, k, grad = q.clone(), w.clone(), k.clone(), grad.clone()
        {"q": lambda: q.__setitem__((3, 0, 1, 2), float("nan")),
         "k": lambda: k.__setitem__((5, 0, 1), float("nan")),
         "w": lambda: w.__setitem__((2, 0, 0), float("nan")),
         "grad": lambda: grad.__setitem__((0, 4, 6), float("nan")),
         "q-inf": lambda: q.__setitem__((3, 0, 1, 2), float("inf"))}[where]()
        return q, w, k, grad
    return edit


def _scaled(w_scale: float, g_scale: float) -> Callable[..., Any]:
    def edit(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, ...]:
        return q, (w.float() * w_scale).to(w.dtype), k, grad * g_scale
    return edit


def _near_fp32_max(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, ...]:
    """Score gradients of 3.40e38: finite in fp32, above bf16's largest finite value (3.39e38),
    with q and k small enough that every gradient's exact sum stays finite."""
    return ((q.float() * 1e-3).to(q.dtype), torch.full_like(w, 1.1333e38),
            (k.float() * 1e-3).to(k.dtype), torch.full_like(grad, 3.0))


def _inf_beside_padding(where: str) -> Callable[..., Any]:
    """Every value positive, so each sum holding an infinity is inf, never NaN; an infinite q
    (or, without ReLU, weight) meets a last key block that sk does not fill."""
    def edit(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, ...]:
        q, w, k, grad = (t.abs() + 0.1 for t in (q, w, k, grad))
        if where == "q":
            q[1, 0, 0, 2] = float("inf")
        else:
            w[1, 0, 0] = float("inf")
        return q, w, k, grad
    return edit


def _past_fp32(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, ...]:
    """fp32 q and k whose scores (about 1e39) overflow fp32, and small fp64 weights: upstream
    scores in fp32 (inf) before it multiplies by the weights, and so must every path."""
    return q.abs() * 1e19 + 1e19, w.abs() * 1e-10, k.abs() * 1e19 + 1e19, grad


def dsa_kernel_offsets_past_int32() -> None:
    """A gradient whose rows lie 2**28 elements apart, in an 8 GiB buffer of which only the
    16 rows read are touched: row 8 starts past 2**31, where a 32-bit offset wraps (on a GPU:
    sq * b * sk > 2**31, such as sq = sk = 64k at b = 1)."""
    if dsa_scores._triton_missing() is not None:
        raise Skip("Triton is not importable")
    from . import dsa_index_scores_kernel as kernel

    sq, sk, row = 16, 4, 1 << 28
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(sq, 1, 1, 8, generator=gen), torch.randn(sk, 1, 8, generator=gen)
    w = torch.randn(sq, 1, 1, generator=gen)
    grad = torch.empty(sq * row, dtype=torch.bfloat16, device=DEVICE).as_strided(
        (1, sq, sk), (sq * row, row, 1))
    rows = torch.randn(sq, sk, generator=gen).bfloat16()
    for r in range(sq):
        grad[0, r] = rows[r].to(DEVICE)
    q, w, k = (t.to(DEVICE) for t in (q, w, k))
    scores = torch.einsum("sbhd,tbd->sbht", q, k).relu()
    want = torch.einsum("bst,sbht->sbh", grad.float(), scores)
    config = dsa_scores.kernel_config(q.device) if DEVICE.type == "cuda" \
        else dsa_scores.INTERPRETER_CONFIG
    _, dw, _ = kernel.backward(q, w, k, grad, True, (False, True, False), config)
    torch.testing.assert_close(dw, want, rtol=1e-5, atol=1e-5)


def dsa_kernel_refuses_fp16_under_autograd() -> None:
    class OnCuda:  # only the device is read before the dtype checks
        def __init__(self, t: Any) -> None:
            self.t = t

        def __getattr__(self, name: str) -> Any:
            return torch.device("cuda") if name == "device" else getattr(self.t, name)

    q = OnCuda(torch.zeros(4, 1, 2, 8, dtype=torch.float16))
    w = OnCuda(torch.zeros(4, 1, 2, dtype=torch.float16))
    k = OnCuda(torch.zeros(4, 1, 8, dtype=torch.float16))
    if dsa_scores._triton_missing() is not None:
        raise Skip("Triton is not importable")
    assert dsa_scores.kernel_refusal(q, w, k, grad=False) is None
    reason = dsa_scores.kernel_refusal(q, w, k, grad=True)
    assert reason is not None and "float16" in reason and "65504" in reason, reason


def dsa_every_path_says_why() -> None:
    if DEVICE.type != "cpu":
        raise Skip("the CPU's reasons")
    q, w, k = torch.randn(5, 1, 2, 8), torch.randn(5, 1, 2), torch.randn(6, 1, 8)
    for kwargs, path, words in (({}, "streamed", "not CUDA"),
                                ({"kernel": True}, "kernel", "kernel=True"),
                                ({"block_elements": 8}, "streamed", "tiles of 8")):
        result = dsa_scores.scores(q, w, k, **kwargs)
        assert result.path == path and words in result.reason, result[1:]
    empty = dsa_scores.scores(q[:0], w[:0], k)
    assert empty.path == "zero-size" and "sq=0" in empty.reason, empty[1:]


# -- FLCE rows ----------------------------------------------------------------------------------

def _flce_upstream(x: Any, w: Any, t: Any, b: Any) -> Any:
    return torch.nn.functional.cross_entropy(torch.nn.functional.linear(x, w, b), t,
                                             ignore_index=-100, reduction="none")


def _flce_ours(kernel: bool) -> Callable[..., Any]:
    def call(x: Any, w: Any, t: Any, b: Any) -> Any:
        original = FLCE._rows_kernel
        FLCE._rows_kernel = (lambda x_: rows_kernel) if kernel else (lambda x_: None)
        try:
            return FLCE.linear_cross_entropy(x, w, t, b, -100, 40 * 37, 0)
        finally:
            FLCE._rows_kernel = original
    return call


def _flce_grads(fn: Callable[..., Any], x: Any, w: Any, t: Any, b: Any,
                scale: Any) -> list[Any]:
    leaves = [v.detach().clone().requires_grad_(True) for v in (x, w, b)]
    loss = fn(leaves[0], leaves[1], t, leaves[2])
    grads = torch.autograd.grad((scale.to(loss.dtype) * loss).sum(), leaves)
    return [v.cpu() for v in (loss.detach(), *grads)]


def flce_case(tokens: int = 23, hidden: int = 12, vocab: int = 37, *, logit_scale: float = 1.0,
              edit: Callable[..., Any] | None = None, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=gen)
    w = torch.randn(vocab, hidden, generator=gen) * (logit_scale / math.sqrt(hidden))
    b = torch.randn(vocab, generator=gen) * 0.1
    t = torch.randint(0, vocab, (tokens,), generator=gen)
    t[::5] = -100
    scale = torch.rand(tokens, generator=gen) * 2
    if edit is not None:
        x, w, b, t = edit(x, w, b, t)
    exact = _flce_grads(_flce_upstream, x.double(), w.double(), t, b.double(), scale.double())
    x, w, b, t, scale = (v.to(DEVICE) for v in (x, w, b, t, scale))
    want = _flce_grads(_flce_upstream, x, w, t, b, scale)
    for kernel in (True, False):
        got = _flce_grads(_flce_ours(kernel), x, w, t, b, scale)
        for name, g_, u, e, lay in zip(("loss", "grad x", "grad w", "grad b"), got, want,
                                       exact, (None, x, w, b), strict=True):
            check(f"{'kernel' if kernel else 'torch'} rows {name}", g_, u, e, lay)


def _flce_target_column(x: Any, w: Any, b: Any, t: Any) -> tuple[Any, ...]:
    """The targets as the second column of a ``[tokens, 2]`` table: stride 2."""
    return x, w, b, torch.stack([torch.zeros_like(t), t], dim=1)[:, 1]


def _flce_target_broadcast(x: Any, w: Any, b: Any, t: Any) -> tuple[Any, ...]:
    """One label for every token, broadcast: stride 0 over a one-element storage."""
    return x, w, b, torch.tensor([3]).expand(t.shape[0])


def _flce_nonfinite(x: Any, w: Any, b: Any, t: Any) -> tuple[Any, ...]:
    b = b.clone()
    b[3] = float("nan")  # every row's logit 3: NaN for every token
    return x, w, b, t


def flce_out_of_range(bad: int) -> None:
    if DEVICE.type == "cuda":
        return _flce_out_of_range_on_cuda(bad)
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(6, 8, generator=gen), torch.randn(11, 8, generator=gen)
    t = torch.tensor([1, 2, bad, -100, 4, 0])
    try:
        _flce_upstream(x, w, t, None)
    except (IndexError, RuntimeError) as exc:
        torch_says = f"{type(exc).__name__}: {exc}"
    else:
        raise AssertionError(f"torch took target {bad}")
    for kernel in (True, False):
        try:
            _flce_ours(kernel)(x, w, t, None)
        except IndexError as exc:
            assert str(exc) == f"Target {bad} is out of bounds.", (str(exc), torch_says)
        else:
            raise AssertionError(f"target {bad} of vocab 11 was taken (torch: {torch_says})")
    # the kernel on its own (what a GPU runs, where the host check does not): never reads
    # outside the row, and a row it cannot score is NaN, never a loss
    logits = x @ w.T
    shift, logsum, loss = torch.empty(6), torch.empty(6), torch.empty(6)
    kept = torch.empty(6, 11)
    rows_kernel.rows(logits, t, -100, shift, logsum, loss, kept)
    assert bool(loss[2].isnan()) and bool(kept[2].isnan().all()), (loss, kept[2])
    assert bool(torch.isfinite(loss[[0, 1, 3, 4, 5]]).all()), loss


def _flce_out_of_range_on_cuda(bad: int) -> None:
    """On a GPU the rows kernel's device-side assert ends the CUDA context, as torch's own
    do: a child process must die of it, naming it, where torch's ``cross_entropy`` also does."""
    code = ("import sys, torch; from patchlane.overlaylib import kernel_parity as p; "
            "p.DEVICE = torch.device('cuda'); kernel = sys.argv[1] == 'kernel'; "
            "x = torch.randn(6, 8, device='cuda'); w = torch.randn(11, 8, device='cuda'); "
            f"t = torch.tensor([1, 2, {bad}, -100, 4, 0], device='cuda'); "
            "loss = p._flce_upstream(x, w, t, None) if sys.argv[1] == 'torch' "
            "else p._flce_ours(kernel)(x, w, t, None); "
            "print(float(loss.sum())); torch.cuda.synchronize()")
    for who in ("torch", "kernel"):
        out = subprocess.run([sys.executable, "-c", code, who], capture_output=True, text=True,
                             timeout=300)
        said = (out.stdout + out.stderr).lower()
        assert out.returncode != 0 and "assert" in said, \
            f"{who}: exit {out.returncode}, {said[-600:]}"


# -- the cases ----------------------------------------------------------------------------------

SHAPES = [(20, 36, 1, 3, 8), (33, 17, 2, 5, 24), (17, 50, 1, 4, 40)]  # sq, sk, b, h, d


def cases() -> dict[str, Callable[[], None]]:
    table: dict[str, Callable[[], None]] = {}
    for shape in SHAPES:
        label = "x".join(map(str, shape))
        for dtype in (torch.bfloat16, torch.float16, torch.float32):
            for relu in (True, False):
                table[f"dsa-{str(dtype)[6:]}-{'relu' if relu else 'no-relu'}-{label}"] = (
                    partial(dsa_case, shape, dtype, relu))
    for where in ("q", "k", "w", "grad", "q-inf"):
        for dtype in (torch.bfloat16, torch.float32):
            table[f"dsa-nan-{where}-{str(dtype)[6:]}"] = (
                partial(dsa_case, (20, 18, 2, 3, 8), dtype, edit=_nan(where)))
    # |g * w| above fp16's 65504; the score gradient near fp32's largest (bf16 rounds it up)
    table["dsa-overflow-fp16"] = partial(dsa_case, (20, 18, 1, 3, 8), torch.float16,
                                         edit=_scaled(300.0, 300.0))
    table["dsa-overflow-bf16"] = partial(dsa_case, (20, 18, 1, 3, 8), torch.bfloat16,
                                         w_dtype=torch.float32, edit=_near_fp32_max)
    # |g * w| below fp16's smallest normal (6e-5): 1e-5 and 1e-6
    for small in (1e-5, 1e-6):
        table[f"dsa-small-fp16-{small:g}"] = partial(dsa_case, (20, 18, 1, 3, 8), torch.float16,
                                                     edit=_scaled(1.0, small))
    for zero, label in enumerate(("sq", "sk", "b", "h", "d")):
        sizes = [12, 10, 2, 3, 8]
        sizes[zero] = 0
        table[f"dsa-zero-{label}"] = partial(dsa_case, tuple(sizes), torch.float32)
    for dtype in (torch.bfloat16, torch.float32):
        table[f"dsa-double-backward-{str(dtype)[6:]}"] = (
            partial(dsa_case, (12, 10, 2, 3, 8), dtype, double=True))
    table["dsa-fp64-weights"] = partial(dsa_case, (20, 18, 2, 3, 8), torch.float32,
                                        w_dtype=torch.float64,
                                        paths=("streamed", "streamed-tiles"))
    for where in ("q", "w"):  # sk = 18: its last key block of 16 holds 2 columns
        table[f"dsa-inf-beside-padding-{where}"] = partial(
            dsa_case, (20, 18, 1, 2, 8), torch.float32, where == "q",
            edit=_inf_beside_padding(where))
    table["dsa-fp64-weights-past-fp32"] = partial(dsa_case, (12, 10, 1, 2, 8), torch.float32,
                                                  w_dtype=torch.float64, edit=_past_fp32,
                                                  paths=("streamed", "streamed-tiles"))
    table["dsa-offsets-past-int32"] = dsa_kernel_offsets_past_int32
    table["dsa-fp16-refused-under-autograd"] = dsa_kernel_refuses_fp16_under_autograd
    table["dsa-paths-say-why"] = dsa_every_path_says_why
    table["flce-fp32"] = flce_case
    for scale in (30.0, 100.0):  # logits N(0, scale^2): lse rounded to fp32 loses ulp(max)
        table[f"flce-fp32-logits-{scale:g}"] = partial(flce_case, logit_scale=scale)
    table["flce-odd-vocab"] = partial(flce_case, tokens=9, hidden=5, vocab=2053)
    table["flce-nan-logit"] = partial(flce_case, edit=_flce_nonfinite)
    table["flce-target-column"] = partial(flce_case, edit=_flce_target_column)
    table["flce-target-broadcast"] = partial(flce_case, edit=_flce_target_broadcast)
    for bad in (11, 40, -5):
        table[f"flce-target-out-of-range-{bad}"] = partial(flce_out_of_range, bad)
    return table


def main(argv: list[str] | None = None) -> int:
    global DEVICE
    parser = argparse.ArgumentParser(prog="python -m patchlane.overlaylib.kernel_parity")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--only", action="append", default=[], metavar="NAME")
    args = parser.parse_args(argv)
    DEVICE = torch.device(args.device)
    if args.device == "cpu":
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("kernel_parity: on the CPU the kernels run on Triton's interpreter: set "
                  "TRITON_INTERPRET=1 (before Triton is imported)", file=sys.stderr)
            return 2
        _give_interpreter_gpu_rules()
    elif not torch.cuda.is_available():
        print("kernel_parity: --device cuda, but torch sees no CUDA device", file=sys.stderr)
        return 2
    only = set(args.only)
    table = {name: fn for name, fn in cases().items() if not only or name in only}
    print(json.dumps(run_cases(table)))
    return 0


def run_cases(table: dict[str, Callable[[], None]]) -> dict[str, str]:
    """Run each case: name -> "ok", "skip: why" (:class:`Skip`), or the failure's traceback."""
    results: dict[str, str] = {}
    for name, fn in table.items():
        try:
            fn()
        except Skip as exc:
            results[name] = f"skip: {exc}"
        except Exception:
            results[name] = traceback.format_exc()[-1500:]
        else:
            results[name] = "ok"
    return results


if __name__ == "__main__":
    sys.exit(main())

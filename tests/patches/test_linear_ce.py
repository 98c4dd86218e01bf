"""The routed path of liger_flce_weighted_none: patchlane's own chunked linear cross-entropy,
against plain PyTorch (real torch; no liger needed), and the overlay's routing rules."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from patchlane.loading import load_file

ROOT = Path(__file__).resolve().parents[2]
torch = pytest.importorskip("torch")
F = torch.nn.functional


@pytest.fixture(scope="module")
def overlay() -> Any:
    return load_file("liger_flce_weighted_none", "overlay",
                      ROOT / "patches" / "liger_flce_weighted_none.py")


def inputs(tokens: int, hidden: int, vocab: int, bias: bool, seed: int = 0) -> tuple[Any, ...]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, hidden, generator=g)
    w = torch.randn(vocab, hidden, generator=g) * 0.1
    b = torch.randn(vocab, generator=g) * 0.1 if bias else None
    t = torch.randint(0, vocab, (tokens,), generator=g)
    t[::7] = -100
    weights = torch.rand(tokens, generator=g) * 3.0
    return x, w, b, t, weights


def grads(fn: Any, x: Any, w: Any, b: Any, t: Any, weights: Any) -> tuple[Any, list[Any]]:
    leaves = [v.detach().clone().requires_grad_(True) if v is not None else None
              for v in (x, w, b)]
    loss = fn(leaves[0], leaves[1], t, leaves[2])
    (weights * loss).sum().backward()
    return loss.detach(), [v.grad for v in leaves if v is not None]


def reference(x: Any, w: Any, t: Any, b: Any) -> Any:
    return F.cross_entropy(F.linear(x, w, b), t, ignore_index=-100, reduction="none")


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("chunk_elements", [1, 64 * 5, 1 << 23])  # 1 row, uneven, all rows
@pytest.mark.parametrize("save_limit", [0, 37 * 25 * 4, 1 << 30],
                         ids=["recompute", "keep-25-columns", "keep-all"])
def test_matches_pytorch_in_fp32(overlay: Any, bias: bool, chunk_elements: int,
                                 save_limit: int) -> None:
    x, w, b, t, weights = inputs(37, 16, 64, bias)

    def ours(x_: Any, w_: Any, t_: Any, b_: Any) -> Any:
        return overlay.linear_cross_entropy(x_, w_, t_, b_, -100, chunk_elements, save_limit)

    loss, got = grads(ours, x, w, b, t, weights)
    ref_loss, want = grads(reference, x, w, b, t, weights)
    assert loss.dtype == torch.float32 and loss.shape == (37,)
    assert torch.allclose(loss, ref_loss, atol=1e-5)
    assert (loss[t == -100] == 0).all()
    for g, r in zip(got, want, strict=True):
        assert torch.allclose(g, r, rtol=1e-5, atol=1e-5), (g - r).abs().max()


def test_uses_each_tokens_own_upstream_gradient(overlay: Any) -> None:
    # the bug being fixed: a per-row weight must not collapse into weights[0]
    x, w, _, t, weights = inputs(8, 4, 10, False)
    t[:] = 1
    _, (gx, gw) = grads(lambda a, bb, tt, c: overlay.linear_cross_entropy(a, bb, tt, c),
                        x, w, None, t, weights)
    _, (gx0, gw0) = grads(lambda a, bb, tt, c: overlay.linear_cross_entropy(a, bb, tt, c),
                          x, w, None, t, torch.full_like(weights, float(weights[0])))
    assert not torch.allclose(gw, gw0)
    assert torch.allclose(gx[0], gx0[0], atol=1e-6)


def test_bf16_inputs_accumulate_in_fp32(tmp_path: Path) -> None:
    # bf16 matmul on this CPU needs oneDNN kept below AMX (a SIGILL otherwise): own process
    path = ROOT / "patches" / "liger_flce_weighted_none.py"
    code = f"""
import pathlib, torch, torch.nn.functional as F
from patchlane.loading import load_file
o = load_file("liger_flce_weighted_none", "overlay", pathlib.Path({str(path)!r}))
g = torch.Generator().manual_seed(0)
x = torch.randn(24, 32, generator=g).bfloat16().requires_grad_(True)
w = (torch.randn(128, 32, generator=g) * 0.1).bfloat16().requires_grad_(True)
t = torch.randint(0, 128, (24,), generator=g); t[5] = -100
weights = torch.rand(24, generator=g)
loss = o.linear_cross_entropy(x, w, t, None, -100, 128 * 5)
(weights * loss).sum().backward()
xr = x.detach().float().requires_grad_(True); wr = w.detach().float().requires_grad_(True)
ref = F.cross_entropy(F.linear(xr, wr), t, ignore_index=-100, reduction="none")
(weights * ref).sum().backward()
assert loss.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
assert (loss - ref).abs().max() < 1e-4, (loss - ref).abs().max()
for g_, r_ in ((x.grad, xr.grad), (w.grad, wr.grad)):
    rel = (g_.float() - r_).abs().max() / r_.abs().max()
    assert rel < 1e-2, rel
# a GPU's half-precision products (the operands in bf16, softmax - onehot kept in bf16, all of
# it or a part), taken here on the CPU: the arithmetic of the CUDA path, not its kernels
o._operand_dtype = lambda t: t.dtype
for keep in (1 << 40, 24 * 50 * 2):
    xs, ws = (v.detach().clone().requires_grad_(True) for v in (x, w))
    loss = o.linear_cross_entropy(xs, ws, t, None, -100, 128 * 5, keep)
    (weights * loss).sum().backward()
    assert (loss - ref).abs().max() < 2e-2, (keep, (loss - ref).abs().max())
    assert xs.grad.dtype == torch.bfloat16 and ws.grad.dtype == torch.bfloat16
    for g_, r_ in ((xs.grad, xr.grad), (ws.grad, wr.grad)):
        rel = (g_.float() - r_).abs().max() / r_.abs().max()
        assert rel < 2e-2, (keep, rel)
print("ok")
"""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX512_CORE_BF16")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("keep", [1 << 40, 0], ids=["keep-all", "recompute"])
def test_fp16_under_a_loss_scale_overflows_only_where_torch_does(overlay: Any,
                                                                 keep: int) -> None:
    # A GPU's fp16 products, taken here on the CPU (the arithmetic of the CUDA path), under
    # GradScaler's loss scale on a summed loss: each token's upstream gradient is 8192. The
    # true gradients (below 65504) fit fp16, and torch's own fp16 backward has no inf.
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(16, 32, generator=g) * 2).half()
    w = (torch.randn(64, 32, generator=g) * 0.5).half()
    b = (torch.randn(64, generator=g) * 0.1).half()
    t = F.linear(x.float(), w.float(), b.float()).argmax(1)
    t[3] = -100
    scale = torch.full((16,), 8192.0)

    def run(fn: Any, *leaves: Any) -> list[Any]:
        leaves = tuple(v.clone().requires_grad_(True) for v in leaves)
        (scale.to(leaves[0].dtype) * fn(*leaves).to(leaves[0].dtype)).sum().backward()
        return [v.grad for v in leaves]

    exact = run(lambda *v: reference(v[0], v[1], t, v[2]), x.double(), w.double(), b.double())
    theirs = run(lambda *v: reference(v[0], v[1], t, v[2]), x, w, b)
    monkey = pytest.MonkeyPatch()
    monkey.setattr(overlay, "_operand_dtype", lambda v: v.dtype)
    try:
        mine = run(lambda *v: overlay.linear_cross_entropy(v[0], v[1], t, v[2], -100, 1 << 23,
                                                           keep), x, w, b)
    finally:
        monkey.undo()
    for name, m, r, e in zip(("grad x", "grad w", "grad b"), mine, theirs, exact, strict=True):
        assert m.dtype == torch.float16, name
        assert not bool(r.isinf().any()), name  # the case: torch's fp16 has no inf here
        assert int(m.isinf().sum()) == 0, (name, int(m.isinf().sum()))
        rel = float((m.double() - e).abs().max() / e.abs().max())
        assert rel < 1e-2, (name, rel)


class FakeFunction:
    """Only the signature matters to the routing: liger 0.8.1's forward, verbatim names."""

    @staticmethod
    def forward(ctx: Any, _input: Any, weight: Any, target: Any, bias: Any = None,
                ce_weight: Any = None, ignore_index: int = -100, lse_square_scale: float = 0.0,
                label_smoothing: float = 0.0, reduction: str = "mean", softcap: Any = None,
                return_z_loss: bool = False, accum_dtype: Any = None,
                use_token_scaling: bool = False, return_token_accuracy: bool = False,
                return_predicted_tokens: bool = False) -> Any:
        raise AssertionError("never called")


def test_routing_keeps_scalar_reductions_on_the_wrapped_path(overlay: Any) -> None:
    x, w, _, t, _ = inputs(6, 4, 8, False)
    calls = []

    def wrapped(*args: Any, **kwargs: Any) -> str:
        calls.append((args, kwargs))
        return "fused"

    assert overlay.overlay(wrapped, FakeFunction, (x, w, t), {"reduction": "mean"}) == "fused"
    assert overlay.overlay(wrapped, FakeFunction, (x, w, t, None, None, -100, 0.0, 0.0, "sum"),
                           {}) == "fused"
    out = overlay.overlay(wrapped, FakeFunction, (x, w, t), {"reduction": "none"})
    assert len(calls) == 2
    assert isinstance(out, tuple) and len(out) == 4 and out[1:] == (None, None, None)
    assert torch.allclose(out[0], reference(x, w, t, None), atol=1e-5)


@pytest.mark.parametrize(("name", "value"), [("label_smoothing", 0.1), ("softcap", 30.0),
                                             ("return_z_loss", True),
                                             ("lse_square_scale", 1e-4),
                                             ("return_token_accuracy", True)])
def test_unsupported_arguments_raise_naming_them(overlay: Any, name: str, value: Any) -> None:
    x, w, _, t, _ = inputs(6, 4, 8, False)
    with pytest.raises(ValueError, match=rf"{name}={value!r} is not supported"):
        overlay.overlay(lambda *a, **k: None, FakeFunction, (x, w, t),
                        {"reduction": "none", name: value})


def test_return_arity_follows_the_release_signature(overlay: Any) -> None:
    class Release063:
        @staticmethod
        def forward(ctx: Any, _input: Any, weight: Any, target: Any, bias: Any = None,
                    ce_weight: Any = None, ignore_index: int = -100,
                    reduction: str = "mean") -> Any:
            raise AssertionError

    x, w, _, t, _ = inputs(6, 4, 8, False)
    out = overlay.overlay(lambda *a, **k: None, Release063, (x, w, t), {"reduction": "none"})
    assert len(out) == 2
    assert "return_token_accuracy" not in inspect.signature(Release063.forward).parameters


def test_device_budgets(overlay: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    class Props:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Props())
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert overlay.chunk_elements_for(cpu) == overlay.CPU_CHUNK_ELEMENTS
    assert overlay.chunk_elements_for(cuda) == int(80 * 2**30 * overlay.GPU_CHUNK_FRACTION) // 4
    assert overlay.save_limit_for(cpu) == 0  # a CPU recomputes: its memory is the limit
    assert overlay.save_limit_for(cuda) == int(80 * 2**30 * overlay.GPU_SAVE_FRACTION)


def test_rows_kernel_on_the_interpreter() -> None:
    """The Triton rows kernel (log-sum-exp, loss, softmax - onehot of the first columns) on
    Triton's CPU interpreter, against torch, in a child started with TRITON_INTERPRET=1 (Triton
    decorates its own library at import)."""
    pytest.importorskip("triton")
    code = """
import torch
from patchlane.overlaylib import cross_entropy_rows_kernel as k
g = torch.Generator().manual_seed(0)
for n, vocab, saved in ((5, 3000, 2500), (3, 17, 0), (4, 4096, 4096)):
    logits = torch.randn(n, vocab, generator=g) * 4
    target = torch.randint(0, vocab, (n,), generator=g); target[1] = -100
    shift, logsum, loss = torch.empty(n), torch.empty(n), torch.empty(n)
    kept = torch.empty(n, saved)
    k.rows(logits, target, -100, shift, logsum, loss, kept)
    lse = shift + logsum
    assert torch.equal(shift, logits.amax(1))
    want_lse = torch.logsumexp(logits, 1)
    safe = target.clamp_min(0)
    want_loss = torch.where(target != -100, want_lse - logits[torch.arange(n), safe], 0.0)
    want_g = torch.softmax(logits, 1)
    want_g[torch.arange(n), safe] -= 1
    assert torch.allclose(lse, want_lse, rtol=1e-5, atol=1e-5), (lse, want_lse)
    assert torch.allclose(loss, want_loss, rtol=1e-5, atol=1e-5)
    assert torch.allclose(kept, want_g[:, :saved], atol=1e-6)
print("ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]

"""The DSA kernel cases, run by tests/patches/test_dsa_kernel.py in a child interpreter with
``TRITON_INTERPRET=1`` set before Triton is imported: Triton decorates its own library
functions (``tl.zeros``, ``tl.sum``, ``tl.cdiv``) at import, so a process that imported it
without the variable cannot interpret the kernels. Prints one JSON object: case -> "ok" or why
not.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from patchlane.overlaylib import dsa_index_scores  # noqa: E402
from patchlane.overlaylib import dsa_index_scores_kernel as kernel  # noqa: E402
from patchlane.overlaylib.kernel_parity import dsa_upstream, run_cases  # noqa: E402

BF16_STEP = 2.0**-7


def _inputs(sq: int, sk: int, b: int, h: int, d: int, dtype: Any, seed: int = 0) -> tuple:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(sq, b, h, d, generator=g).to(dtype)
    k = torch.randn(sk, b, d, generator=g).to(dtype)
    w = torch.randn(sq, b, h, generator=g).to(dtype)
    grad = torch.randn(b, sq, sk, generator=g)
    return q, w, k, grad


def _kink_slack(q: Any, w: Any, k: Any, grad: Any) -> tuple[Any, Any]:
    """What ReLU's kink lets grad q and grad k differ by: the terms whose exact score lies
    within fp32 summation error of 0 (the same rule as the entry's reproducer)."""
    q64, k64 = q.double(), k.double()
    exact = torch.einsum("sbhd,tbd->sbht", q64, k64)
    bound = torch.einsum("sbhd,tbd->sbht", q64.abs(), k64.abs()) * (2 * q.shape[-1] * 2.0**-24)
    terms = (exact.abs() <= bound) * grad.double().abs().transpose(0, 1).unsqueeze(2) \
        * w.double().abs().unsqueeze(-1)
    return (torch.einsum("sbht,tbd->sbhd", terms, k64.abs()).float(),
            torch.einsum("sbht,sbhd->tbd", terms, q64.abs()).float())


def _assert_close(got: Any, want: Any, rtol: float, slack: Any = 0.0) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    diff = (got.float() - want.float()).abs()
    scale = want.float().abs()
    bad = diff > rtol * scale + 1e-5 * scale.max() + slack
    assert not bool(bad.any()), (int(bad.sum()), float(diff.max()))


SHAPES = [  # sq, sk, b, h, d
    (20, 36, 1, 3, 8),
    (33, 17, 2, 5, 24),
    (40, 40, 3, 2, 16),
    (17, 50, 1, 4, 40),
]


def case_upstream(shape: tuple[int, ...], use_relu: bool, dtype: str) -> None:
    upstream = dsa_upstream()
    q, w, k, grad = _inputs(*shape, getattr(torch, dtype))
    want = upstream(q, w, k, use_relu)
    got, path, _ = dsa_index_scores.scores(q, w, k, use_relu, kernel=True)
    assert path == "kernel", path
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride()  # upstream's [b, sq, sk] view of [sq, b, sk]
    _assert_close(got, want, 1e-5)

    leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
    out, path, _ = dsa_index_scores.scores(*leaves, use_relu, kernel=True)
    assert path == "kernel-autograd"
    out.backward(grad)
    ref = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
    upstream(*ref, use_relu).backward(grad)
    rtol = 1e-5 if dtype == "float32" else BF16_STEP
    slack_q, slack_k = _kink_slack(q, w, k, grad) if use_relu else (0.0, 0.0)
    for got_t, ref_t, slack in zip(leaves, ref, (slack_q, 0.0, slack_k), strict=True):
        assert got_t.grad.dtype == ref_t.grad.dtype
        _assert_close(got_t.grad, ref_t.grad, rtol, slack)


def case_only_asked() -> None:
    q, w, k, grad = _inputs(20, 24, 2, 3, 16, torch.float32)
    dq, dw, dk = kernel.backward(q, w, k, grad.transpose(1, 2).contiguous().transpose(1, 2),
                                      True, (False, True, False),
                                      dsa_index_scores.INTERPRETER_CONFIG)
    assert dq is None and dk is None and dw.shape == w.shape
    leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
    dsa_index_scores.scores(*leaves, True, kernel=False)[0].backward(grad)
    _assert_close(dw, leaves[1].grad, 1e-5)  # a non-contiguous gradient read by its strides


def case_head_groups() -> None:
    q, w, k, grad = _inputs(24, 40, 1, 7, 16, torch.float32)
    one = dsa_index_scores.KernelConfig(**{**vars(dsa_index_scores.INTERPRETER_CONFIG),
                                           "bwd_k_programs": 1})
    many = dsa_index_scores.KernelConfig(**{**vars(dsa_index_scores.INTERPRETER_CONFIG),
                                            "bwd_k_programs": 64})
    _, _, dk_one = kernel.backward(q, w, k, grad, True, (False, False, True), one)
    _, _, dk_many = kernel.backward(q, w, k, grad, True, (False, False, True), many)
    torch.testing.assert_close(dk_one, dk_many, rtol=1e-6, atol=1e-5)


def main() -> int:
    cases: dict[str, Any] = {"only-asked": case_only_asked, "head-groups": case_head_groups}
    for shape in SHAPES:
        for use_relu in (True, False):
            for dtype in ("bfloat16", "float32"):
                name = f"upstream-{dtype}-{'relu' if use_relu else 'no-relu'}-" \
                    + "x".join(map(str, shape))
                cases[name] = (lambda s=shape, r=use_relu, d=dtype: case_upstream(s, r, d))
    print(json.dumps(run_cases(cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

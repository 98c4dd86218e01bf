"""On a GPU: check the DSA index-score kernels against upstream's arithmetic, time their block
configurations, and time the FLCE routed path's variants, side by side in one run.

The notebook behind the configurations in ``patchlane/overlaylib/dsa_index_scores.py``
(``KernelConfig``) and the chunk budgets of ``patches/liger_flce_weighted_none.py``: rerun it on
a new card and read the table. Upstream's DSA arithmetic is written out here (the einsum of
``_compute_index_scores``) so no megatron-core is needed. Prints a table per part and writes
every figure as JSON to ``--out``. Asserts nothing; exit 0 unless it could not run at all.

    python benchmarks/tune_gpu_kernels.py --out tune.json [--quick]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def upstream_scores(q: Any, w: Any, k: Any, relu: bool = True) -> Any:
    import torch

    s = torch.einsum("sbhd,tbd->sbht", q.float(), k.float())
    if relu:
        s = torch.relu(s)
    return (s * w.unsqueeze(-1)).sum(dim=2).transpose(0, 1)


def bench(fn: Any, reps: int = 10) -> float:
    """Median milliseconds over ``reps`` calls after two warm-ups (CUDA events)."""
    import torch

    fn()
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def peak_mib(fn: Any) -> float:
    import torch

    fn()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def inputs(sq: int, sk: int, b: int, h: int, d: int, dtype: Any, seed: int = 0) -> tuple:
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(sq, b, h, d, generator=g, device="cuda").to(dtype)
    k = torch.randn(sk, b, d, generator=g, device="cuda").to(dtype)
    w = torch.randn(sq, b, h, generator=g, device="cuda").to(dtype)
    grad = torch.randn(b, sq, sk, generator=g, device="cuda")
    return q, w, k, grad


def check_dsa(report: dict[str, Any]) -> None:
    import torch

    from patchlane.overlaylib import dsa_index_scores as m

    rows = []
    for sq, sk, b, h, d, relu, dtype in [
            (1024, 1024, 1, 16, 64, True, torch.bfloat16),
            (333, 517, 2, 5, 96, True, torch.bfloat16),
            (333, 517, 2, 5, 96, False, torch.bfloat16),
            (200, 300, 3, 7, 32, True, torch.float16),
            (130, 70, 1, 3, 48, True, torch.float32),
            (4096, 4096, 1, 64, 128, True, torch.bfloat16)]:
        q, w, k, grad = inputs(sq, sk, b, h, d, dtype)
        out, path, _ = m.scores(q, w, k, relu, kernel=True)
        want = upstream_scores(q, w, k, relu)
        fwd = float((out - want).abs().max() / want.abs().max())
        layout = out.dtype == want.dtype and out.stride() == want.stride()
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
        m.scores(*leaves, relu, kernel=True)[0].backward(grad)
        ref = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
        upstream_scores(*ref, relu).backward(grad)
        errs, outside = [], []
        for a, r in zip(leaves, ref, strict=True):
            diff = (a.grad.float() - r.grad.float()).abs()
            scale = r.grad.float().abs()
            errs.append(float(diff.max() / scale.max()))
            step = 2.0**-7 if dtype != torch.float32 else 1e-5
            outside.append(int((diff > step * scale + 1e-5 * scale.max()).sum()))
        row = {"shape": [sq, sk, b, h, d], "relu": relu, "dtype": str(dtype), "path": path,
               "fwd_err": fwd, "grad_err": errs, "grad_outside_one_step": outside,
               "layout_ok": layout, "finite": bool(torch.isfinite(out).all())}
        rows.append(row)
        print(f"check {row['shape']} relu={relu} {dtype}: fwd {fwd:.1e} grads "
              f"{' '.join(f'{e:.1e}' for e in errs)} outside-one-step {outside} layout {layout}",
              flush=True)
    report["dsa_check"] = rows


def tune_dsa(report: dict[str, Any], quick: bool) -> None:
    import torch

    from patchlane.overlaylib import dsa_index_scores as m

    base = m.KernelConfig()
    # (block m, block n, warps, stages): the ones that compile for sm_90 without spills
    fwd_configs = [(128, 128, 8, 3), (128, 128, 8, 2), (64, 128, 4, 3), (128, 64, 4, 3),
                   (64, 64, 4, 3), (128, 128, 8, 4), (64, 128, 4, 4)]
    bwd_q_configs = [(64, 64, 4, 3), (64, 64, 4, 2), (64, 128, 4, 3), (128, 64, 8, 3),
                     (64, 64, 4, 4), (32, 64, 4, 3), (64, 32, 4, 3)]
    bwd_k_configs = [(64, 64, 4, 2, 528), (64, 64, 4, 3, 528), (128, 128, 8, 2, 528),
                     (64, 128, 8, 2, 528), (64, 64, 4, 2, 264), (64, 64, 4, 2, 1056),
                     (32, 64, 4, 2, 528)]
    if quick:
        fwd_configs, bwd_q_configs, bwd_k_configs = (fwd_configs[:2], bwd_q_configs[:2],
                                                     bwd_k_configs[:2])
    rows: list[dict[str, Any]] = []
    for seq in (4096, 8192):
        _tune_size(seq, rows, base, fwd_configs, bwd_q_configs, bwd_k_configs)
        torch.cuda.empty_cache()
    report["dsa_tune"] = rows


def _tune_size(seq: int, rows: list[dict[str, Any]], base: Any, fwd_configs: list[Any],
               bwd_q_configs: list[Any], bwd_k_configs: list[Any]) -> None:
    import torch

    from patchlane.overlaylib import dsa_index_scores as m
    from patchlane.overlaylib import dsa_index_scores_kernel as kern

    if True:
        q, w, k, grad = inputs(seq, seq, 1, 64, 128, torch.bfloat16)
        flop = 2 * seq * seq * 64 * 128
        up_fwd = bench(lambda: upstream_scores(q, w, k), 5)
        print(f"seq {seq}: upstream-arithmetic forward {up_fwd:.2f} ms", flush=True)
        rows.append({"seq": seq, "part": "upstream-fwd", "ms": up_fwd})
        for bm, bn, nw, ns in fwd_configs:
            cfg = m.KernelConfig(fwd_m=bm, fwd_n=bn,
                                 fwd_launch={"num_warps": nw, "num_stages": ns})
            try:
                ms = bench(lambda cfg=cfg: kern.forward(q, w, k, True, cfg))
            except Exception as exc:  # a config the card refuses is a row
                ms, err = None, f"{type(exc).__name__}: {str(exc)[:120]}"
            else:
                err = None
            tf = flop / (ms * 1e-3) / 1e12 if ms else None
            rows.append({"seq": seq, "part": "fwd", "cfg": [bm, bn, nw, ns], "ms": ms,
                         "tflops": tf, "error": err})
            print(f"  fwd {bm}x{bn} w{nw} s{ns}: {ms and round(ms, 3)} ms "
                  f"{tf and round(tf)} TFLOP/s {err or ''}", flush=True)
        for bm, bn, nw, ns in bwd_q_configs:
            cfg = m.KernelConfig(bwd_q_m=bm, bwd_q_n=bn,
                                 bwd_q_launch={"num_warps": nw, "num_stages": ns})
            try:
                ms = bench(lambda cfg=cfg: kern.backward(q, w, k, grad, True,
                                                         (True, True, False), cfg))
            except Exception as exc:
                ms, err = None, f"{type(exc).__name__}: {str(exc)[:120]}"
            else:
                err = None
            rows.append({"seq": seq, "part": "bwd_q", "cfg": [bm, bn, nw, ns], "ms": ms,
                         "error": err})
            print(f"  bwd_q {bm}x{bn} w{nw} s{ns}: {ms and round(ms, 3)} ms {err or ''}",
                  flush=True)
        for bm, bn, nw, ns, progs in bwd_k_configs:
            cfg = m.KernelConfig(bwd_k_m=bm, bwd_k_n=bn, bwd_k_programs=progs,
                                 bwd_k_launch={"num_warps": nw, "num_stages": ns})
            try:
                ms = bench(lambda cfg=cfg: kern.backward(q, w, k, grad, True,
                                                         (False, False, True), cfg))
            except Exception as exc:
                ms, err = None, f"{type(exc).__name__}: {str(exc)[:120]}"
            else:
                err = None
            rows.append({"seq": seq, "part": "bwd_k", "cfg": [bm, bn, nw, ns, progs],
                         "ms": ms, "error": err})
            print(f"  bwd_k {bm}x{bn} w{nw} s{ns} p{progs}: {ms and round(ms, 3)} ms "
                  f"{err or ''}", flush=True)
        # the whole autograd call with today's defaults, and its peak above the inputs
        def fwd_bwd(fn: Any) -> Any:
            leaves = [t.detach().requires_grad_(True) for t in (q, w, k)]
            fn(*leaves).backward(grad)

        ours = lambda *a: m.scores(*a, kernel=True, config=base)[0]  # noqa: E731
        streamed = lambda *a: m.scores(*a, kernel=False)[0]  # noqa: E731
        for name, fn in (("kernel", ours), ("streamed-gpu-tiles", streamed),
                         ("upstream", upstream_scores)):
            try:
                fms = bench(lambda fn=fn: fn(q, w, k), 5)
                fpk = peak_mib(lambda fn=fn: fn(q, w, k))
                bms = bench(lambda fn=fn: fwd_bwd(fn), 3)
                bpk = peak_mib(lambda fn=fn: fwd_bwd(fn))
            except torch.OutOfMemoryError:
                fms = fpk = bms = bpk = None
                torch.cuda.empty_cache()
            rows.append({"seq": seq, "part": "call", "variant": name, "fwd_ms": fms,
                         "fwd_peak_mib": fpk, "fwd_bwd_ms": bms, "fwd_bwd_peak_mib": bpk})
            print(f"  {name}: fwd {fms} ms peak {fpk} MiB; fwd+bwd {bms} ms peak {bpk} MiB",
                  flush=True)


def flce(report: dict[str, Any]) -> None:
    import torch
    import torch.nn.functional as F

    from patchlane.loading import load_file

    o = load_file("liger_flce_weighted_none", "overlay",
                  ROOT / "patches" / "liger_flce_weighted_none.py")
    tokens, hidden, vocab = 8192, 4096, 128256
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(tokens, hidden, generator=g, device="cuda").bfloat16()
    w = (torch.randn(vocab, hidden, generator=g, device="cuda") * 0.02).bfloat16()
    t = torch.randint(0, vocab, (tokens,), generator=g, device="cuda")
    t[::17] = -100
    weights = torch.rand(tokens, generator=g, device="cuda")
    variants: dict[str, Any] = {
        "torch": lambda a, b: F.cross_entropy(F.linear(a, b), t, ignore_index=-100,
                                              reduction="none"),
        "ours-default": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100),
        "ours-keep-1.0W": lambda a, b: o.linear_cross_entropy(
            a, b, t, None, -100, save_limit=b.numel() * b.element_size()),
        "ours-keep-all": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100,
                                                             save_limit=1 << 40),
        "ours-recompute": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100,
                                                              save_limit=0),
        "ours-chunks-x4": lambda a, b: o.linear_cross_entropy(
            a, b, t, None, -100, chunk_elements=4 * o.chunk_elements_for(a.device)),
    }
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

        def liger(a: Any, b: Any) -> Any:
            out = liger_fused_linear_cross_entropy(a, b, t, None, ignore_index=-100,
                                                   reduction="none")
            return getattr(out, "loss", out[0] if isinstance(out, tuple) else out)

        variants["liger"] = liger
    except ImportError as exc:
        print(f"liger-kernel not importable: {exc}")
    results: dict[str, Any] = {}

    def step(fn: Any) -> Any:
        a = x.detach().requires_grad_(True)
        b = w.detach().requires_grad_(True)
        loss = fn(a, b)
        (weights * loss.float()).sum().backward()
        return loss.detach(), a.grad, b.grad

    ref = None
    for name, fn in variants.items():
        try:
            ms = bench(lambda fn=fn: step(fn), 5)
            pk = peak_mib(lambda fn=fn: step(fn))
            loss, gx, gw = step(fn)
        except Exception as exc:
            print(f"flce {name}: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            results[name] = {"error": str(exc)[:300]}
            torch.cuda.empty_cache()
            continue
        if ref is None:
            ref = (loss.float(), gx.float(), gw.float())
        errs = [float((a.float() - r).abs().max() / r.abs().max())
                for a, r in zip((loss, gx, gw), ref, strict=True)]
        results[name] = {"ms": ms, "peak_mib": pk, "rel_err_vs_torch": errs}
        print(f"flce {name}: {ms:.1f} ms, peak {pk:.0f} MiB, err vs torch "
              f"{' '.join(f'{e:.1e}' for e in errs)}", flush=True)
        del loss, gx, gw
        torch.cuda.empty_cache()
    results["mm_out_dtype"] = list(getattr(o, "_MM_OUT_DTYPE", []))
    report["flce"] = results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--parts", default="check,tune,flce")
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: nothing to tune")
        return 0
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    import triton

    report["triton"] = triton.__version__
    print(report, flush=True)
    parts = {"check": check_dsa, "tune": lambda r: tune_dsa(r, args.quick), "flce": flce}
    for name in args.parts.split(","):
        started = time.monotonic()
        try:
            parts[name](report)
        except Exception:  # one part failing must not hide the others
            report[f"{name}_error"] = traceback.format_exc()[-3000:]
            print(report[f"{name}_error"], flush=True)
        print(f"== {name}: {time.monotonic() - started:.0f} s", flush=True)
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

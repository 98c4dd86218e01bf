"""Peak memory and time of the DSA indexer scores, forward and forward+backward: upstream vs the
streamed overlay, side by side in one run, at h=64, b=1, d=128, sq=sk=4096 (upstream's
``[sq, b, h, sk]`` fp32 intermediate is 4 GiB).

megatron-core 0.17-0.19: ``dsa._compute_index_scores`` against
``mcore_dsa_streamed_index_scores_fn``; 0.16: ``DSAIndexer._compute_index_scores`` against
``mcore_dsa_streamed_index_scores``. Each measurement runs in its own child interpreter (a clean
high-water mark; an upstream child killed for memory is reported and the next smaller size
tried). Peak: the PyTorch profiler's memory records (``patchlane.testing.memprofile``), in a
call of its own; time: best of ``--repeat`` calls without the profiler. Forward+backward:
``out = f(q, w, k); out.backward(g)`` with q, weights, k requiring grad. Goals: peak >= 50x
lower, time <= 1.0x upstream. Prints ratios; asserts nothing.

``--device cuda``: every variant in this process on the GPU (the caching allocator's
``max_memory_allocated`` above the inputs of a warm call is a clean high-water mark; an
out-of-memory is caught and reported), at sq=sk 4096, 8192 and 16384 (where upstream's 128 GiB
intermediate does not fit an 80 GB card): upstream; the overlay as a training job gets it (the
Triton kernel); the overlay's torch path with GPU-sized tiles (where the kernel cannot run);
and megatron-core's own opt-in TileLang indexer (``dsa_kernel_backend: tilelang``, forward
only, b=1) where ``tilelang`` is installed. Time: median of ``--repeat`` warm calls. Goals:
forward <= 0.5x upstream's time at >= 50x lower peak; forward+backward <= 1.0x at >= 30x
lower; at a size upstream cannot fit, peak <= 4x the result.

    python benchmarks/bench_dsa_streamed_fn.py [--seq 4096 ...] [--repeat 3]
    python benchmarks/bench_dsa_streamed_fn.py --device cuda
"""

from __future__ import annotations

import argparse
import inspect
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HEADS, BATCH, DIM = 64, 1, 128
DSA = "megatron.core.transformer.experimental_attention_variant.dsa"


def _functions() -> tuple[str, Any, Any]:
    """(megatron-core version, upstream's function, the overlay's) as f(q, weights, k)."""
    import importlib
    from importlib import metadata

    from patchlane.loading import load_file

    dsa = importlib.import_module(DSA)
    if "_compute_index_scores" in vars(dsa):  # 0.17 and later: a module-level function
        entry, upstream = "mcore_dsa_streamed_index_scores_fn", vars(dsa)["_compute_index_scores"]
        up = inspect.unwrap(upstream)
    else:  # 0.16: a DSAIndexer method that never reads self
        entry = "mcore_dsa_streamed_index_scores"
        method = inspect.unwrap(vars(dsa.DSAIndexer)["_compute_index_scores"])

        def up(q: Any, w: Any, k: Any) -> Any:
            return method(None, q, w, k)
    from patchlane.startup import default_registry_path

    overlay = load_file(entry, "overlay", default_registry_path().parent / "patches" /
                        f"{entry}.py")
    return metadata.version("megatron-core"), up, overlay.streamed_index_scores


def _child(variant: str, mode: str, seq: int, repeat: int, save: str) -> int:
    import torch

    from patchlane.testing.memprofile import peak_bytes

    version, up, ours = _functions()
    fn = up if variant == "upstream" else ours
    g = torch.Generator().manual_seed(0)
    q = torch.randn(seq, BATCH, HEADS, DIM, generator=g).bfloat16()
    k = torch.randn(seq, BATCH, DIM, generator=g).bfloat16()
    w = torch.randn(seq, BATCH, HEADS, generator=g).bfloat16()
    grad = torch.randn(BATCH, seq, seq, generator=g)

    def call() -> Any:
        if mode == "forward":
            with torch.no_grad():
                return fn(q, w, k), []
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, w, k)]
        out = fn(*leaves)
        out.backward(grad)
        return out.detach(), [t.grad for t in leaves]

    peak, (out, grads) = peak_bytes(call)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    torch.save({"out": out, "grads": grads}, save)
    print("CHILD " + json.dumps({"version": version, "peak": peak, "time": min(times)}))
    return 0


def _measure(variant: str, mode: str, seq: int, repeat: int, save: Path) -> dict[str, Any] | None:
    cmd = [sys.executable, __file__, "--child", variant, mode, str(seq), "--repeat", str(repeat),
           "--save", str(save)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("CHILD ")]
    if out.returncode != 0 or not lines:
        tail = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
        print(f"  {variant} {mode} sq=sk={seq}: did not run ({tail[0][:160]})")
        return None
    result: dict[str, Any] = json.loads(lines[-1][6:])
    return result


def _error(a: Any, b: Any) -> float:
    """max |a - b| / max |b| (normwise: head sums cancel elementwise)."""
    return float((a.float() - b.float()).abs().max() / b.float().abs().max())


def _row(mode: str, seq: int, repeat: int, tmp: Path) -> dict[str, Any] | None:
    import torch

    files = {v: tmp / f"{v}-{mode}-{seq}.pt" for v in ("upstream", "streamed")}
    up = _measure("upstream", mode, seq, repeat, files["upstream"])
    if up is None:
        return None
    ours = _measure("streamed", mode, seq, repeat, files["streamed"])
    if ours is None:
        return None
    want, got = (torch.load(files[v]) for v in ("upstream", "streamed"))
    errors = [_error(got["out"], want["out"])]
    errors += [_error(a, b) for a, b in zip(got["grads"], want["grads"], strict=True)]
    same = got["out"].dtype == want["out"].dtype and got["out"].stride() == want["out"].stride()
    row = {"mode": mode, "seq": seq, "heads": HEADS, "batch": BATCH, "dim": DIM,
           "version": up["version"],
           "upstream_peak_mib": round(up["peak"] / 2**20, 1),
           "streamed_peak_mib": round(ours["peak"] / 2**20, 1),
           "peak_ratio": round(up["peak"] / max(1, ours["peak"]), 1),
           "upstream_s": round(up["time"], 3), "streamed_s": round(ours["time"], 3),
           "time_ratio": round(ours["time"] / up["time"], 3),
           "max_rel_err": errors, "same_dtype_layout": same}
    names = ("out", "grad q", "grad w", "grad k")[:len(errors)]  # grads in the inputs' bf16
    err = ", ".join(f"{n} {e:.1e}" for n, e in zip(names, errors, strict=True))
    print(f"{mode:>16} sq=sk={seq}: peak {row['upstream_peak_mib']} -> "
          f"{row['streamed_peak_mib']} MiB ({row['peak_ratio']}x lower, goal >= 50x); time "
          f"{row['upstream_s']} -> {row['streamed_s']} s ({row['time_ratio']}x, goal <= 1.0x); "
          f"max err / max|ref|: {err}; same dtype/layout {same}")
    return row


def _tilelang() -> Any:
    """megatron-core's TileLang indexer forward as f(q, w, k), or None where it cannot run."""
    try:
        import tilelang  # noqa: F401
        from megatron.core.transformer.experimental_attention_variant.ops import (
            tilelang_indexer_fwd,
        )
    except ImportError:
        return None
    import torch

    def forward(q: Any, w: Any, k: Any) -> Any:
        sq, b = q.shape[:2]
        if b != 1:
            raise ValueError("the TileLang indexer takes b=1 (packed sequences)")
        starts = torch.zeros(sq, dtype=torch.int32, device=q.device)
        ends = torch.full((sq,), k.shape[0], dtype=torch.int32, device=q.device)
        return tilelang_indexer_fwd.indexer_fwd_interface(
            q[:, 0].contiguous(), k[:, 0].contiguous(), w[:, 0], starts, ends,
            clean_logits=False)
    return forward


def _cuda(seqs: list[int], repeat: int) -> int:
    """Every variant in this process on the GPU (see the module docstring)."""
    import statistics
    import time

    import torch

    from patchlane.overlaylib import dsa_index_scores

    version, up, ours = _functions()

    def torch_path(q: Any, w: Any, k: Any) -> Any:
        return dsa_index_scores.scores(q, w, k, kernel=False)[0]

    variants: dict[str, Any] = {"upstream": up, "overlay (kernel)": ours,
                                "overlay (torch path)": torch_path}
    tile = _tilelang()
    if tile is None:
        print("tilelang: not installed here (megatron-core's dsa_kernel_backend: tilelang "
              "needs it): not measured")
    device = torch.cuda.get_device_name()
    print(f"{device}, torch {torch.__version__}, megatron-core {version}: h={HEADS}, "
          f"b={BATCH}, d={DIM}, bf16 inputs")

    def measure(fn: Any, call: Any) -> dict[str, Any]:
        try:
            call(fn)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            result = call(fn)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            times = []
            for _ in range(repeat):
                start = time.perf_counter()
                call(fn)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
            return {"oom": True}
        return {"peak": peak, "time": statistics.median(times), "result": result}

    rows = []
    for seq in seqs:
        g = torch.Generator().manual_seed(0)
        q = torch.randn(seq, BATCH, HEADS, DIM, generator=g).bfloat16().cuda()
        k = torch.randn(seq, BATCH, DIM, generator=g).bfloat16().cuda()
        w = torch.randn(seq, BATCH, HEADS, generator=g).bfloat16().cuda()
        grad = torch.randn(BATCH, seq, seq, generator=g).cuda()
        out_bytes = seq * seq * BATCH * 4

        def forward(fn: Any, q: Any = q, w: Any = w, k: Any = k) -> Any:
            with torch.no_grad():
                return fn(q, w, k), []

        def forward_backward(fn: Any, q: Any = q, w: Any = w, k: Any = k,
                             grad: Any = grad) -> Any:
            leaves = [t.detach().requires_grad_(True) for t in (q, w, k)]
            out = fn(*leaves)
            out.backward(grad)
            return out.detach(), [t.grad for t in leaves]

        for mode, call in (("forward", forward), ("forward+backward", forward_backward)):
            these = dict(variants)
            if tile is not None and mode == "forward":
                these["tilelang (megatron-core)"] = tile
            got = {name: measure(fn, call) for name, fn in these.items()}
            ref = got["upstream"]
            for name, m in got.items():
                row: dict[str, Any] = {"device": device, "version": version, "mode": mode,
                                       "seq": seq, "variant": name}
                if m.get("oom"):
                    row["oom"] = True
                    print(f"{mode:>16} sq=sk={seq:>5} {name:>24}: out of memory")
                    rows.append(row)
                    continue
                row.update(peak_mib=round(m["peak"] / 2**20, 1), ms=round(m["time"] * 1e3, 3),
                           peak_vs_result=round(m["peak"] / out_bytes, 2))
                text = (f"{mode:>16} sq=sk={seq:>5} {name:>24}: {row['ms']:9.2f} ms, peak "
                        f"{row['peak_mib']:9.1f} MiB ({row['peak_vs_result']}x the result)")
                if name != "upstream" and not ref.get("oom"):
                    row["time_ratio"] = round(m["time"] / ref["time"], 3)
                    row["peak_ratio"] = round(ref["peak"] / max(1, m["peak"]), 1)
                    out, grads = m["result"]
                    want, want_grads = ref["result"]
                    errors = [_error(out, want)] + [_error(a, b) for a, b in
                                                    zip(grads, want_grads, strict=True)]
                    row["max_rel_err"] = errors
                    text += (f"; {row['time_ratio']}x upstream's time, {row['peak_ratio']}x "
                             f"lower peak; err/max {' '.join(f'{e:.1e}' for e in errors)}")
                print(text, flush=True)
                rows.append(row)
            del got, ref
            torch.cuda.empty_cache()
    print("goals: forward <= 0.5x time at >= 50x lower peak; forward+backward <= 1.0x at >= "
          "30x lower; where upstream does not fit, peak <= 4x the result")
    print("RESULT " + json.dumps({"bench": "dsa_streamed_fn", "device": device, "rows": rows}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--seq", type=int, nargs="+",
                        help="sizes; cpu: tried largest first per mode, the first that fits "
                        "counts (default 4096 3072 2048); cuda: each (default 4096 8192 16384)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "MODE", "SEQ"))
    parser.add_argument("--save")
    args = parser.parse_args(argv)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("--device cuda: no CUDA device here", file=sys.stderr)
            return 2
        return _cuda(args.seq or [4096, 8192, 16384], args.repeat)
    args.seq = args.seq or [4096, 3072, 2048]
    if args.child:
        variant, mode, seq = args.child
        return _child(variant, mode, int(seq), args.repeat, args.save)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("forward", "forward+backward"):
            for seq in args.seq:
                row = _row(mode, seq, args.repeat, Path(tmp))
                if row is not None:
                    rows.append(row)
                    break
    print("RESULT " + json.dumps({"bench": "dsa_streamed_fn", "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

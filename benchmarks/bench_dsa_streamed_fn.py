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

    python benchmarks/bench_dsa_streamed_fn.py [--seq 4096 ...] [--repeat 3]
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
    overlay = load_file(entry, "overlay", ROOT / "patches" / f"{entry}.py")
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, nargs="+", default=[4096, 3072, 2048],
                        help="sizes to try, largest first, per mode: the first that fits counts")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "MODE", "SEQ"))
    parser.add_argument("--save")
    args = parser.parse_args(argv)
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

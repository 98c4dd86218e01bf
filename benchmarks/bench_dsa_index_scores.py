"""Peak memory and time of DSAIndexer._compute_index_scores: upstream (megatron-core 0.16.x) vs
the streamed overlay, side by side in one run, at h=64, b=1, sq=sk=2048, d=128 and a smaller
shape. Peak memory: the PyTorch profiler's memory accounting (patchlane.testing.memprofile). Goals:
>= 32x lower peak, time <= 1.5x upstream (CPU). Prints ratios; asserts nothing.

    python benchmarks/bench_dsa_index_scores.py
"""

from __future__ import annotations

import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def best_time(fn: Any, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    import torch
    from megatron.core.transformer.experimental_attention_variant.dsa import DSAIndexer

    from patchlane.loading import load_file
    from patchlane.testing.memprofile import peak_bytes

    overlay = load_file("mcore_dsa_streamed_index_scores", "overlay",
                         ROOT / "patches" / "mcore_dsa_streamed_index_scores.py")
    upstream = inspect.unwrap(vars(DSAIndexer)["_compute_index_scores"])
    results = []
    for heads, batch, seq, dim in ((64, 1, 2048, 128), (16, 2, 512, 64)):
        g = torch.Generator().manual_seed(0)
        q = torch.randn(seq, batch, heads, dim, generator=g).bfloat16()
        k = torch.randn(seq, batch, dim, generator=g).bfloat16()
        w = torch.randn(seq, batch, heads, generator=g).bfloat16()
        def up(q: Any = q, w: Any = w, k: Any = k) -> Any:
            return upstream(None, q, w, k)

        def ours(q: Any = q, w: Any = w, k: Any = k) -> Any:
            return overlay.streamed_index_scores(q, w, k)

        up_peak, want = peak_bytes(up)
        our_peak, got = peak_bytes(ours)
        rel = float((got - want).abs().max() / want.abs().max())  # normwise: sums cancel
        up_t, our_t = best_time(up), best_time(ours)
        row = {"heads": heads, "batch": batch, "seq": seq, "dim": dim,
               "upstream_peak_mib": round(up_peak / 2**20, 1),
               "streamed_peak_mib": round(our_peak / 2**20, 1),
               "peak_ratio": round(up_peak / our_peak, 2),
               "upstream_s": round(up_t, 3), "streamed_s": round(our_t, 3),
               "time_ratio": round(our_t / up_t, 3), "max_rel_err": rel,
               "same_layout": got.stride() == want.stride() and got.dtype == want.dtype}
        results.append(row)
        print(f"h={heads} b={batch} sq=sk={seq} d={dim}: peak {row['upstream_peak_mib']} -> "
              f"{row['streamed_peak_mib']} MiB ({row['peak_ratio']}x lower, goal >= 32x); "
              f"time {up_t:.3f} -> {our_t:.3f} s ({row['time_ratio']}x, goal <= 1.5x); "
              f"max err / max|ref| {rel:.1e}; same dtype/layout {row['same_layout']}")
    print("RESULT " + json.dumps({"bench": "dsa_index_scores", "rows": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

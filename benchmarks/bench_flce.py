"""Peak memory and time: the routed path of liger_flce_weighted_none (patchlane's chunked linear
cross-entropy) vs the materialised-logits PyTorch reference, side by side in one run.

Shape: tokens x vocab >= 1.3e8 (default 4096 x 32768, hidden 1024, fp32, CPU). Each variant runs
in its own interpreter; peak memory is the growth of the process's peak RSS (ru_maxrss) over its
value once the inputs exist, so torch's own footprint cancels out. Gradients of both are compared
(goal: within 1e-4) and the ratio of peaks printed (goal: >= 4x lower). Never asserts.

    python benchmarks/bench_flce.py [--tokens 4096 --vocab 32768 --hidden 1024]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, resource, sys, time
import torch, torch.nn.functional as F
from pathlib import Path
variant, tokens, vocab, hidden, out = sys.argv[1], *map(int, sys.argv[2:5]), Path(sys.argv[5])
torch.manual_seed(0)
x = torch.randn(tokens, hidden).requires_grad_(True)
w = (torch.randn(vocab, hidden) * 0.02).requires_grad_(True)
t = torch.randint(0, vocab, (tokens,)); t[::17] = -100
weights = torch.rand(tokens)
if variant == "ours":
    from patchlane.loading import load_file
    o = load_file("liger_flce_weighted_none", "overlay",
                   Path(sys.argv[6]) / "patches" / "liger_flce_weighted_none.py")
    fn = lambda: o.linear_cross_entropy(x, w, t, None, -100)
else:
    fn = lambda: F.cross_entropy(F.linear(x, w), t, ignore_index=-100, reduction="none")
torch.set_num_threads(torch.get_num_threads())
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
loss = fn()
(weights * loss).sum().backward()
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
torch.save({"gx": x.grad, "gw": w.grad, "loss": loss.detach()}, out)
print(json.dumps({"seconds": seconds, "peak_mib": (peak - base) / 1024}))
"""


def run(variant: str, args: argparse.Namespace, out: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, "-c", CHILD, variant, str(args.tokens),
                           str(args.vocab), str(args.hidden), str(out), str(ROOT)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{proc.stderr[-2000:]}")
    data: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return data


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--hidden", type=int, default=1024)
    args = parser.parse_args()
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        ref = run("reference", args, Path(tmp) / "ref.pt")
        ours = run("ours", args, Path(tmp) / "ours.pt")
        a, b = torch.load(Path(tmp) / "ref.pt"), torch.load(Path(tmp) / "ours.pt")
        err = {k: float((a[k] - b[k]).abs().max()) for k in ("loss", "gx", "gw")}
    ratio = ref["peak_mib"] / max(ours["peak_mib"], 1e-9)
    print(f"tokens x vocab = {args.tokens} x {args.vocab} = {args.tokens * args.vocab:.3g}, "
          f"hidden {args.hidden}, fp32, {torch.get_num_threads()} threads")
    print(f"  reference (materialised logits): peak +{ref['peak_mib']:.0f} MiB, "
          f"{ref['seconds']:.2f} s")
    print(f"  patchlane chunked (routed path): peak +{ours['peak_mib']:.0f} MiB, "
          f"{ours['seconds']:.2f} s")
    print(f"  peak memory ratio {ratio:.2f}x lower (goal >= 4x); time ratio "
          f"{ours['seconds'] / ref['seconds']:.2f}x")
    print(f"  max abs error: loss {err['loss']:.2e}, grad_x {err['gx']:.2e}, "
          f"grad_W {err['gw']:.2e} (goal <= 1e-4)")
    print("RESULT " + json.dumps({"bench": "flce", **vars(args), "ref": ref, "ours": ours,
                                  "peak_ratio": round(ratio, 3), "errors": err}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

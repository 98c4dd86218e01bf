"""Peak memory and time: the routed path of liger_flce_weighted_none (patchlane's chunked linear
cross-entropy) vs the materialised-logits PyTorch reference, side by side in one run.

CPU (default): tokens x vocab >= 1.3e8 (4096 x 32768, hidden 1024, fp32). Each variant runs in
its own interpreter; peak memory is the growth of the process's peak RSS (ru_maxrss) over its
value once the inputs exist, so torch's own footprint cancels out. Gradients of both are
compared (goal: within 1e-4) and the ratio of peaks printed (goal: >= 4x lower).

``--device cuda``: a weighted ``'none'`` loss, forward+backward, at 8192 tokens x hidden 4096 x
vocab 128256 in bf16 (a Llama-3 head), in one process: plain PyTorch (``F.linear`` +
``F.cross_entropy``, the logits materialised), the routed path, and liger-kernel's own
``reduction='none'`` when the installed release is fixed (0.8.2+, PR #1298). Peak:
``max_memory_allocated`` above the inputs, of a warm call; time: median of ``--repeat`` warm
calls. Goals: time <= 1.2x PyTorch's and <= 1.0x fixed liger's, peak <= 0.5x PyTorch's.

Never asserts.

    python benchmarks/bench_flce.py [--tokens 4096 --vocab 32768 --hidden 1024]
    python benchmarks/bench_flce.py --device cuda
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
    from patchlane.startup import default_registry_path
    o = load_file("liger_flce_weighted_none", "overlay",
                   default_registry_path().parent / "patches" / "liger_flce_weighted_none.py")
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


def _cuda(args: argparse.Namespace) -> int:
    """All variants in this process, on the GPU (see the module docstring)."""
    import statistics
    import time
    from importlib import metadata
    from typing import Any

    import torch
    import torch.nn.functional as F

    from patchlane.loading import load_file
    from patchlane.startup import default_registry_path

    o = load_file("liger_flce_weighted_none", "overlay",
                  default_registry_path().parent / "patches" / "liger_flce_weighted_none.py")
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(args.tokens, args.hidden, generator=g, device="cuda").bfloat16()
    w = (torch.randn(args.vocab, args.hidden, generator=g, device="cuda") * 0.02).bfloat16()
    t = torch.randint(0, args.vocab, (args.tokens,), generator=g, device="cuda")
    t[::17] = -100
    weights = torch.rand(args.tokens, generator=g, device="cuda")
    variants: dict[str, Any] = {
        "torch": lambda a, b: F.cross_entropy(F.linear(a, b), t, ignore_index=-100,
                                              reduction="none"),
        "patchlane": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100),
        "patchlane, recompute all": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100,
                                                                        save_limit=0),
        "patchlane, keep all": lambda a, b: o.linear_cross_entropy(a, b, t, None, -100,
                                                                   save_limit=1 << 62),
    }
    try:
        liger_version = metadata.version("liger-kernel")
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except (metadata.PackageNotFoundError, ImportError):
        liger_version = None
    if liger_version is not None and o.probe(__import__(
            "liger_kernel.ops.fused_linear_cross_entropy", fromlist=["x"])):
        def liger(a: Any, b: Any) -> Any:
            out = liger_fused_linear_cross_entropy(a, b, t, None, ignore_index=-100,
                                                   reduction="none")
            return getattr(out, "loss", out[0] if isinstance(out, tuple) else out)
        variants[f"liger {liger_version}"] = liger
    else:
        print(f"liger-kernel {liger_version or 'not installed'}: no fixed 'none' path to "
              "compare (0.8.2+ has one)")

    def step(fn: Any) -> Any:
        a = x.detach().requires_grad_(True)
        b = w.detach().requires_grad_(True)
        loss = fn(a, b)
        (weights * loss.float()).sum().backward()
        return loss.detach(), a.grad, b.grad

    results: dict[str, dict[str, Any]] = {}
    ref = None
    for name, fn in variants.items():
        try:
            step(fn)
            torch.cuda.synchronize()
            base = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            loss, gx, gw = step(fn)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                step(fn)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - start)
        except torch.OutOfMemoryError:
            print(f"  {name}: out of memory")
            torch.cuda.empty_cache()
            continue
        if ref is None:
            ref = (loss.float(), gx.float(), gw.float())
        err = [float((a.float() - r).abs().max() / r.abs().max())
               for a, r in zip((loss, gx, gw), ref, strict=True)]
        results[name] = {"ms": statistics.median(times) * 1e3, "peak_mib": peak / 2**20,
                         "rel_err_vs_torch": err}
        del loss, gx, gw
        torch.cuda.empty_cache()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: weighted 'none' "
          f"forward+backward, {args.tokens} tokens x {args.hidden} hidden x {args.vocab} vocab, "
          "bf16")
    torch_row = results.get("torch")
    liger_row = next((r for n, r in results.items() if n.startswith("liger")), None)
    for name, row in results.items():
        ratios = ""
        if torch_row and name != "torch":
            ratios = (f" time {row['ms'] / torch_row['ms']:.2f}x torch, peak "
                      f"{row['peak_mib'] / torch_row['peak_mib']:.2f}x torch")
            if liger_row and not name.startswith("liger"):
                ratios += f", time {row['ms'] / liger_row['ms']:.2f}x fixed liger"
        print(f"  {name:>26}: {row['ms']:8.1f} ms, peak {row['peak_mib']:7.0f} MiB;{ratios}; "
              f"max err / max|torch| loss {row['rel_err_vs_torch'][0]:.1e}, grad x "
              f"{row['rel_err_vs_torch'][1]:.1e}, grad W {row['rel_err_vs_torch'][2]:.1e}")
    print("  goals: time <= 1.2x torch and <= 1.0x fixed liger; peak <= 0.5x torch")
    print("RESULT " + json.dumps({"bench": "flce", "device": torch.cuda.get_device_name(),
                                  "tokens": args.tokens, "hidden": args.hidden,
                                  "vocab": args.vocab, "variants": results}, sort_keys=True))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--tokens", type=int)
    parser.add_argument("--vocab", type=int)
    parser.add_argument("--hidden", type=int)
    parser.add_argument("--repeat", type=int, default=5, help="timed calls (cuda)")
    args = parser.parse_args()
    cuda = args.device == "cuda"
    for name, cpu, gpu in (("tokens", 4096, 8192), ("vocab", 32768, 128256),
                           ("hidden", 1024, 4096)):
        if getattr(args, name) is None:
            setattr(args, name, gpu if cuda else cpu)
    if cuda:
        import torch

        if not torch.cuda.is_available():
            print("--device cuda: no CUDA device here", file=sys.stderr)
            return 2
        return _cuda(args)
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
    print("RESULT " + json.dumps({"bench": "flce", "tokens": args.tokens, "vocab": args.vocab,
                                  "hidden": args.hidden, "ref": ref, "ours": ours,
                                  "peak_ratio": round(ratio, 3), "errors": err}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())

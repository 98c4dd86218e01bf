"""Provenance: what exactly ran, so a receipt can be compared only with its own kind.

Everything here is gathered in the process that ran the case (the reproducer already imported
torch there); the sweep process itself never imports torch.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from .._version import __version__
from ..common.redaction import ENV_ALLOW, environment_overlay, looks_secret, redact_text
from ..registry import Registry

__all__ = [
    "ENV_ALLOW",
    "build",
    "comparison_key",
    "environment_overlay",
    "git_revision",
    "host_class",
    "host_class_here",
    "looks_secret",
    "patch_set_digest",
    "redact_text",
    "runtime",
]

def git_revision(path: Path) -> dict[str, Any] | None:
    try:
        rev = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(path), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": rev, "dirty": bool(dirty)}


_PACKAGE = Path(__file__).resolve().parents[1]


@cache
def build() -> dict[str, Any]:
    """Which build of patchlane is running: ``{"commit", "clean", "from"}``. From an installed
    wheel, what its build recorded (``patchlane/_build.json``, written by ``hatch_build.py``:
    ``from: wheel``); from a checkout, :func:`git_revision` asked now (``from: checkout``);
    else ``from: unknown`` with commit and clean None."""
    unknown: dict[str, Any] = {"commit": None, "clean": None, "from": "unknown"}
    recorded = _PACKAGE / "_build.json"
    if recorded.is_file():
        try:
            data = json.loads(recorded.read_text(encoding="utf-8"))
            return {"commit": data.get("commit"), "clean": data.get("clean"), "from": "wheel"}
        except (OSError, ValueError, AttributeError):
            return unknown
    if (_PACKAGE.parent / ".git").exists():
        revision = git_revision(_PACKAGE.parent)
        if revision is not None:
            return {"commit": revision["commit"], "clean": not revision["dirty"],
                    "from": "checkout"}
    return unknown


def patch_set_digest(registry: Registry) -> str:
    """Hash of what would run: each active entry's content (:func:`entry_content`: its
    behaviour in the registry, and the overlay with the library code it imports, the
    reproducer, the check). Shards of one night that ran other code differ here, and
    ``merge`` refuses them."""
    from ..registry.content import entry_content

    digest = hashlib.sha256()
    for entry in sorted(registry.entries, key=lambda e: e.id):
        if not entry.active:
            continue
        parts = entry_content(entry)
        digest.update(entry.id.encode() + b"\0")
        for part in sorted(parts):
            digest.update(f"{part}={parts[part]}\0".encode())
    return "sha256:" + digest.hexdigest()


def _memory_gib() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def _nvidia_driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.strip().splitlines()
    return lines[0].strip() if lines else None


def _torch_info() -> dict[str, Any] | None:
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    info: dict[str, Any] = {"version": str(torch.__version__),
                            "cuda": getattr(torch.version, "cuda", None)}
    try:
        info["cudnn"] = torch.backends.cudnn.version() if torch.cuda.is_available() else None
    except Exception:  # a broken cuDNN install is itself provenance worth recording
        info["cudnn"] = "unavailable"
    if torch.cuda.is_available():
        try:
            nccl = torch.cuda.nccl.version()
            info["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
        except Exception:
            info["nccl"] = None
        devices = []
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append({"name": props.name, "capability": f"{props.major}.{props.minor}",
                            "memory_gib": round(props.total_memory / 2**30, 1)})
        info["gpus"] = devices
        info["driver"] = _nvidia_driver()
    return info


def host_class(torch_info: Mapping[str, Any] | None) -> str:
    """A coarse, stable name for the hardware: ``cpu-2c-24g`` or ``gpu-8xNVIDIA-H200``."""
    gpus = (torch_info or {}).get("gpus") or []
    if gpus:
        name = re.sub(r"\s+", "-", str(gpus[0]["name"]).strip())
        return f"gpu-{len(gpus)}x{name}"
    mem = _memory_gib()
    return f"cpu-{os.cpu_count()}c-{round(mem) if mem else '?'}g"


def host_class_here() -> str | None:
    """This machine's :func:`host_class` as a case's rank will record it, told without
    importing torch (the sweep process never does): the CPU class as is; GPUs as
    ``nvidia-smi`` names them (the name torch reports), those ``CUDA_VISIBLE_DEVICES`` leaves
    visible. None when it cannot be told (``nvidia-smi`` present but failing)."""
    if "torch" in sys.modules:  # a pytest session that imported it: ask torch itself
        return host_class(_torch_info())
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=20)
    except FileNotFoundError:
        return host_class(None)  # no NVIDIA driver: a CPU host
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    gpus = [[part.strip() for part in line.split(",", 2)] for line in out.stdout.splitlines()
            if line.count(",") >= 2]
    return host_class({"gpus": [{"name": name} for _, _, name in
                                _visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))]})


def _visible(gpus: list[list[str]], mask: str | None) -> list[list[str]]:
    """The ``[index, uuid, name]`` rows CUDA would show under ``mask``: every one when unset;
    else those named, by index or UUID prefix, in the mask's order, up to the first entry
    that names none (CUDA stops there too)."""
    if mask is None:
        return gpus
    shown = []
    for token in (t.strip() for t in mask.split(",")):
        found = [g for g in gpus if token and (g[0] == token or g[1].startswith(token))]
        if len(found) != 1:
            break
        shown.append(found[0])
    return shown


def runtime(distributions: Iterable[str]) -> dict[str, Any]:
    """Versions and hardware as seen from inside the process that ran the case."""
    from ..installed.gates import resolve_version

    versions: dict[str, str | None] = {}
    sources: dict[str, str] = {}
    for name in distributions:
        # the copy this process imports: a source tree on PYTHONPATH shadowing a wheel is
        # reported with the tree's declared version, as the gate saw it
        versions[name], sources[name] = resolve_version(name)
    torch_info = _torch_info()
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "torch": torch_info,
        "host_class": host_class(torch_info),
        "patchlane": __version__,
        "distributions": versions,
        "version_sources": sources,
    }


def comparison_key(lane: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """Two verdicts are comparable only when this key is equal: same lane, same hardware
    class, same upstream versions (target distributions and torch)."""
    torch_info = run.get("torch") or {}
    return {
        "lane": lane,
        "host_class": run.get("host_class"),
        "torch": torch_info.get("version"),
        "distributions": dict(sorted((run.get("distributions") or {}).items())),
    }

"""Provenance: what exactly ran, so a receipt can be compared only with its own kind.

Everything here is gathered in the process that ran the case (the reproducer already imported
torch there); the sweep process itself never imports torch.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .._version import __version__
from ..registry import Registry

__all__ = [
    "ENV_ALLOW",
    "comparison_key",
    "environment_overlay",
    "git_revision",
    "host_class",
    "looks_secret",
    "patch_set_digest",
    "redact_text",
    "runtime",
]

# Environment variables that change what a case does, and nothing else: a receipt never
# records the whole environment (tokens live there).
ENV_ALLOW = ("PATCHLANE_", "CUDA_VISIBLE_DEVICES", "NCCL_", "TORCH_", "PYTORCH_", "OMP_NUM_THREADS",
             "MKL_NUM_THREADS", "TRITON_", "CUBLAS_", "CUDNN_", "NVTE_", "PYTHONHASHSEED",
             "MASTER_ADDR", "WORLD_SIZE")
# A name that looks like it holds a secret. Deliberately a plain substring match: redacting a
# harmless ``MONKEY=1`` costs nothing, missing an ``APIKEY=`` leaks a credential.
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|PASS|KEY|CREDENTIAL|AUTH", re.I)
REDACTED = "***"


def looks_secret(name: str) -> bool:
    """Whether an environment variable or setting called ``name`` probably holds a secret."""
    return _SECRET.search(name) is not None


def environment_overlay(env: Mapping[str, str] | None = None) -> dict[str, str]:
    env = os.environ if env is None else env
    return {k: env[k] for k in sorted(env)
            if k.startswith(ENV_ALLOW) and not looks_secret(k)}


# Secret values of the environment are replaced wherever they appear, but a value this short
# ("1", "true", "gloo") is a flag, not a credential, and would blank out ordinary text.
_MIN_ENV_SECRET = 6
# scheme://user:password@host -> scheme://user:***@host (pip index URLs, git remotes).
_URL_CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*):"
                              r"(?P<secret>[^\s/@'\"]+)@")
# PyPI's token user without a scheme, as in a .pypirc or a keyring dump.
_TOKEN_USER = re.compile(r"\b__token__:[^\s/@'\"]+@")
# GitHub tokens by their documented prefixes; the prefix stays, so the kind is still visible.
_GITHUB_TOKEN = re.compile(r"\b(?P<prefix>gh[pousr]_|github_pat_)[A-Za-z0-9_]{16,}")
_HTTP_AUTH = re.compile(r"\b(?P<scheme>Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}")
# NAME=value, NAME: value, "name": "value", --name=value. The value is one quoted string or
# one unquoted word; ``==``, ``<=`` and the like are comparisons, not assignments.
_ASSIGNMENT = re.compile(
    r"""(?<![\w.])(?P<name>[A-Za-z_][\w.-]*)(?P<close>["']?)"""
    r"""(?P<sep>[ \t]*(?:(?<![=!<>])=(?!=)|:)[ \t]*)"""
    r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"',;&)}\]]+)""")
# "KeyError: 'x'" is an exception and its message, not a key and its value.
_EXCEPTION_NAME = re.compile(r"(Error|Exception|Warning|Exit|Interrupt|Fault)$")


def _redact_assignment(match: re.Match[str]) -> str:
    name, sep, value = match["name"], match["sep"], match["value"]
    if not looks_secret(name) or (":" in sep and _EXCEPTION_NAME.search(name)):
        return match[0]
    # Already redacted by an earlier rule (a URL, ``Bearer ***``): keep what that rule kept.
    if value.lstrip("'\"").startswith(REDACTED) or value in ("Bearer", "Basic"):
        return match[0]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{name}{match['close']}{sep}{quote}{REDACTED}{quote}"


def redact_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` (a log tail, a traceback, an error message) with credentials replaced by ``***``:
    the values of environment variables whose names look secret (from ``env``, by default this
    process's), passwords in URLs, ``__token__:…@``, GitHub tokens, HTTP ``Bearer`` / ``Basic``
    credentials, and the value of every ``NAME=value`` / ``NAME: value`` whose name looks
    secret. Meant for anything a receipt or a report shows; the raw rank logs stay as written."""
    env = os.environ if env is None else env
    values = {v for k, v in env.items() if looks_secret(k) and len(v) >= _MIN_ENV_SECRET}
    # Longest first, so a secret that contains another is replaced whole.
    for value in sorted(values, key=len, reverse=True):
        text = text.replace(value, REDACTED)
    text = _URL_CREDENTIALS.sub(lambda m: f"{m['head']}:{REDACTED}@", text)
    text = _TOKEN_USER.sub(f"__token__:{REDACTED}@", text)
    text = _GITHUB_TOKEN.sub(lambda m: f"{m['prefix']}{REDACTED}", text)
    text = _HTTP_AUTH.sub(lambda m: f"{m['scheme']} {REDACTED}", text)
    return _ASSIGNMENT.sub(_redact_assignment, text)


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


def patch_set_digest(registry: Registry) -> str:
    """Hash of what would be applied: each active entry's id, gate, fingerprints and overlay."""
    digest = hashlib.sha256()
    for entry in sorted(registry.entries, key=lambda e: e.id):
        if not entry.active:
            continue
        digest.update(f"{entry.id}\0{entry.kind.value}\0{entry.applies_to}\0".encode())
        if entry.fingerprint is not None:
            digest.update("\0".join(entry.fingerprint.sha256).encode())
        if entry.overlay is not None:
            digest.update(entry.overlay.read_bytes())
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


def runtime(distributions: Iterable[str]) -> dict[str, Any]:
    """Versions and hardware as seen from inside the process that ran the case."""
    from ..gates import resolve_version

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

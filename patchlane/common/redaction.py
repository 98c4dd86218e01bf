"""Keeping credentials out of everything patchlane records or shows.

Used by the evidence side (receipts, reports, the sweep's error reasons) and by training jobs
(run receipts in checkpoints), so it sits below both: standard library only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["ENV_ALLOW", "REDACTED", "environment_overlay", "looks_secret", "redact_text"]

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
    """The allow-listed variables of ``env``, for a receipt: secret-looking names are left
    out, and credentials inside the values kept (``https://user:pw@host`` in an index URL, a
    ``__token__:…@``, a GitHub token, an HTTP credential) are redacted."""
    env = os.environ if env is None else env
    return {k: _redact_value(env[k]) for k in sorted(env)
            if k.startswith(ENV_ALLOW) and not looks_secret(k)}


def _redact_value(value: str) -> str:
    value = _URL_CREDENTIALS.sub(lambda m: f"{m['head']}:{REDACTED}@", value)
    value = _TOKEN_USER.sub(f"__token__:{REDACTED}@", value)
    value = _GITHUB_TOKEN.sub(lambda m: f"{m['prefix']}{REDACTED}", value)
    return _HTTP_AUTH.sub(lambda m: f"{m['scheme']} {REDACTED}", value)


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

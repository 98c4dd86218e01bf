"""The typed ledger on real installed packages: each kind fires (and passes) for real."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.ledger import CompatGateError, check, check_config
from patchlane.registry import Kind, load_registries

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "registry.yaml"


def entry_dict(entry_id: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {"id": entry_id, "kind": kind, "summary": f"test {kind}",
            "upstream": {"issue": "https://github.com/example/x/issues/1", "forwarded": "no"},
            "retire_when": {"upstream_released": True}, "owner": "tests",
            "added": "2026-11-22", "status": "active", **extra}


def write(tmp_path: Path, *entries: dict[str, Any]) -> Path:
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump({"schema": 1, "entries": list(entries)}, sort_keys=False))
    return path


def run_python(code: str, registry: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full.update({"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(registry),
                 "PYTHONWARNINGS": "ignore", **env})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=300, cwd=registry.parent)


# -- version_floor -----------------------------------------------------------------------------

def test_version_floor_on_real_torch(tmp_path: Path) -> None:
    ok = entry_dict("floor_ok", "version_floor", target={"distribution": "torch"},
                    requires=">=2.6.0", policy="error")
    bad = entry_dict("floor_bad", "version_floor", target={"distribution": "torch"},
                     requires=">=99", policy="warn")
    registry = load_registries([write(tmp_path, ok, bad)])
    results = {e.id: check(e) for e in registry.entries}
    assert results["floor_ok"].ok and results["floor_ok"].found.startswith("2.13")
    assert not results["floor_bad"].ok and not results["floor_bad"].blocking
    assert "below the floor torch>=99" in results["floor_bad"].message


@pytest.mark.slow
def test_error_floor_makes_the_protected_import_fail(tmp_path: Path) -> None:
    bad = entry_dict("floor_bad", "version_floor",
                     target={"distribution": "torch", "object": "torch"},
                     requires=">=99", policy="error")
    out = run_python("import patchlane\nimport torch\n", write(tmp_path, bad))
    assert out.returncode != 0
    assert "LedgerError" in out.stderr and "torch>=99" in out.stderr
    assert "https://github.com/example/x/issues/1" in out.stderr
    status = run_python("import json, patchlane\n"
                        "print(json.dumps(patchlane.report()['entries']))",
                        write(tmp_path, bad))
    (entry,) = json.loads(status.stdout)
    assert entry["decision"]["outcome"] == "ledger: violation"


# -- packaging_pin -----------------------------------------------------------------------------

def test_packaging_pin_version_on_real_numpy(tmp_path: Path) -> None:
    good = entry_dict("pin_ok", "packaging_pin", target={"distribution": "numpy"}, pin="<2.3")
    bad = entry_dict("pin_bad", "packaging_pin", target={"distribution": "numpy"}, pin="<2.0")
    registry = load_registries([write(tmp_path, good, bad)])
    results = {e.id: check(e) for e in registry.entries}
    assert results["pin_ok"].ok, results["pin_ok"]
    assert not results["pin_bad"].ok and "does not match the pin numpy<2.0" in \
        results["pin_bad"].message


def test_packaging_pin_source_uses_direct_url_json(tmp_path: Path) -> None:
    from importlib import metadata

    text = metadata.distribution("patchlane").read_text("direct_url.json")
    if not text:
        pytest.skip("patchlane is not installed from a direct URL here")
    url = json.loads(text)["url"]
    right = entry_dict("pin_src_ok", "packaging_pin", target={"distribution": "patchlane"},
                       pin=">=0.1", source=url)
    wrong = entry_dict("pin_src_bad", "packaging_pin", target={"distribution": "patchlane"},
                       pin=">=0.1", source="https://example.com/patchlane-0.1.0.tar.gz")
    registry = load_registries([write(tmp_path, right, wrong)])
    results = {e.id: check(e) for e in registry.entries}
    assert results["pin_src_ok"].ok, results["pin_src_ok"]
    assert not results["pin_src_bad"].ok and url in results["pin_src_bad"].message


# -- compat_gate -------------------------------------------------------------------------------

def default_entries() -> list[Any]:
    return list(load_registries([DEFAULT]).entries)


@pytest.mark.upstream
def test_compat_gate_on_a_real_megatron_config() -> None:
    pytest.importorskip("megatron.core")
    import torch
    from megatron.core.model_parallel_config import ModelParallelConfig

    safe = ModelParallelConfig(pipeline_model_parallel_size=4, variable_seq_lengths=True,
                               batch_p2p_comm=False, pipeline_dtype=torch.float32)
    assert all(r.ok for r in check_config(safe, default_entries()))
    # megatron-core itself accepts the deadlocking combination: only the gate stops it
    bad = ModelParallelConfig(pipeline_model_parallel_size=4, variable_seq_lengths=True,
                              batch_p2p_comm=True, pipeline_dtype=torch.float32)
    with pytest.raises(CompatGateError) as info:
        check_config(bad, default_entries())
    assert "issues/5100" in str(info.value)
    assert "batch_p2p_comm=False" in str(info.value)


def test_compat_gate_on_a_megatron_args_namespace() -> None:
    args = argparse.Namespace(pipeline_model_parallel_size=8, variable_seq_lengths=True,
                              batch_p2p_comm=True)
    with pytest.raises(CompatGateError, match="pipeline_model_parallel_size=8"):
        check_config(args, default_entries())
    args.pipeline_model_parallel_size = 2
    assert all(r.ok for r in check_config(args, default_entries()))


@pytest.mark.slow
def test_patchlane_check_config_is_public(tmp_path: Path) -> None:
    out = run_python(
        "import argparse, patchlane\n"
        "a = argparse.Namespace(pipeline_model_parallel_size=4, variable_seq_lengths=True)\n"
        "patchlane.check_config(a)\n", DEFAULT, PATCHLANE_DEFAULT_REGISTRY="1",
        PATCHLANE_REGISTRY="")
    assert out.returncode != 0 and "CompatGateError" in out.stderr


# -- config ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_config_settings_are_applied_early_and_audited(tmp_path: Path) -> None:
    entry = entry_dict("dyn", "config", settings={"torch._dynamo.config.recompile_limit": 32},
                       target={"distribution": "torch"}, applies_to=">=2.6")
    code = ("import json, patchlane\nimport torch._dynamo.config as c\n"
            "e = patchlane.report()['entries'][0]\n"
            "print(json.dumps([c.recompile_limit, e['decision']]))")
    value, decision = json.loads(run_python(code, write(tmp_path, entry)).stdout)
    assert value == 32
    assert decision["outcome"] == "config: applied"
    assert "recompile_limit: 8 -> 32" in decision["reason"]
    # disabled: left alone and says so
    value, decision = json.loads(run_python(code, write(tmp_path, entry),
                                            PATCHLANE_DISABLE="dyn").stdout)
    assert value == 8 and decision["outcome"] == "skipped: disabled"
    # upstream default already there: upstream-fixed (the config entry's probe)
    entry["settings"] = {"torch._dynamo.config.recompile_limit": 8}
    value, decision = json.loads(run_python(code, write(tmp_path, entry)).stdout)
    assert decision["outcome"] == "upstream-fixed"


def test_default_registry_ships_one_real_entry_of_each_kind() -> None:
    kinds = {e.kind for e in default_entries()}
    assert kinds == set(Kind)
    for e in default_entries():
        # a link to upstream, or an honest "not forwarded" for a fix upstream has no thread for
        assert e.upstream.issue or e.upstream.pr or e.upstream.forwarded == "no", e.id
        assert e.owner and e.retire_when

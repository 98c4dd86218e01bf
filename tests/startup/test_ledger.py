"""The typed ledger on real installed packages: each kind fires (and passes) for real; and
when floors and pins are checked (on their module's import, under their `when:` condition),
on fake modules."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.specifiers import SpecifierSet

from patchlane.common.errors import RegistryError, StrictModeError
from patchlane.deciding.audit import AuditLog, Outcome
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.deciding.ledger import CompatGateError, LedgerError, check, check_config
from patchlane.registry import Kind, When, load_registries

from ..conftest import FakeTarget

ROOT = Path(__file__).resolve().parents[2]
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
    # decided on `import torch`, not at `import patchlane`: pending until then
    status = run_python("import json, patchlane\n"
                        "before = patchlane.report()['entries'][0]['decision']\n"
                        "try:\n    import torch\nexcept patchlane.PatchlaneError:\n    pass\n"
                        "after = patchlane.report()['entries'][0]['decision']\n"
                        "print(json.dumps([before, after]))",
                        write(tmp_path, bad))
    before, after = json.loads(status.stdout)
    assert before["outcome"] == "pending" and before["reason"] == "waiting for `import torch`"
    assert after["outcome"] == "ledger: violation"


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

    # fixed lengths: no shape exchange, nothing to hang in
    safe = ModelParallelConfig(pipeline_model_parallel_size=4, variable_seq_lengths=False,
                               batch_p2p_comm=True, pipeline_dtype=torch.float32)
    assert all(r.ok for r in check_config(safe, default_entries()))
    # megatron-core itself accepts the reported combination: only the gate stops it, with
    # batch_p2p_comm either way (the shape exchange never reads it)
    for batched in (True, False):
        bad = ModelParallelConfig(pipeline_model_parallel_size=4, variable_seq_lengths=True,
                                  batch_p2p_comm=batched, pipeline_dtype=torch.float32)
        with pytest.raises(CompatGateError) as info:
            check_config(bad, default_entries())
        assert "issues/5100" in str(info.value)
        assert "set variable_seq_lengths=False" in str(info.value)
        assert "batch_p2p_comm does not reach" in str(info.value)


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
    # what it is for, as a source patch's decision says (they were null)
    assert (decision["distribution"], decision["applies_to"]) == ("torch", ">=2.6")
    pending = json.loads(run_python("import json, patchlane\n"
                                    "print(json.dumps(patchlane.report()['entries'][0]"
                                    "['decision']))", write(tmp_path, entry)).stdout)
    assert pending["outcome"] == "pending"
    assert (pending["distribution"], pending["applies_to"]) == ("torch", ">=2.6")
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


# -- when a floor or pin is checked: on its module's import, and only where it applies ---------

def _decider(fake: FakeTarget, *entries: dict[str, Any], strict: bool = False) -> Decider:
    fake.registry.write_text(yaml.safe_dump({"schema": 1, "entries": list(entries)},
                                            sort_keys=False))
    env = {"PATCHLANE_STRICT": "1"} if strict else {}
    decider = Decider(load_registries([fake.registry]), Controls.from_env(env), AuditLog())
    decider.start()
    return decider


@pytest.fixture
def metadata_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every distribution whose metadata is looked up (importlib.metadata.version and
    .distribution both go through Distribution.from_name)."""
    calls: list[str] = []
    original = metadata.Distribution.from_name

    def spy(cls: type, name: str) -> metadata.Distribution:
        calls.append(name)
        return original(name)

    monkeypatch.setattr(metadata.Distribution, "from_name", classmethod(spy))
    return calls


def test_floors_and_pins_read_no_metadata_until_their_module_is_imported(
        fake_target: FakeTarget, metadata_reads: list[str]) -> None:
    floor = entry_dict("lazy_floor", "version_floor", requires=">=1.0", policy="error",
                       target={"distribution": fake_target.distribution,
                               "object": fake_target.module})
    pin = entry_dict("lazy_pin", "packaging_pin", pin="<2.0",
                     target={"distribution": fake_target.distribution})
    decider = _decider(fake_target, floor, pin, strict=True)
    assert metadata_reads == []  # a fresh Decider start reads nothing
    latest = decider.audit.latest()
    assert latest["lazy_floor"].outcome is Outcome.PENDING
    assert latest["lazy_floor"].reason == f"waiting for `import {fake_target.module}`"
    # no object: the distribution's import name (plfake-<tag> -> plfake_<tag>, the package)
    assert latest["lazy_pin"].reason == f"waiting for `import {fake_target.package}`"
    fake_target.import_target()  # imports the package, then the target module
    assert metadata_reads and set(metadata_reads) == {fake_target.distribution}
    assert latest["lazy_floor"].outcome is Outcome.LEDGER_OK
    assert latest["lazy_floor"].installed == "1.2.0"
    assert latest["lazy_pin"].outcome is Outcome.LEDGER_OK


@pytest.mark.slow
def test_import_patchlane_reads_no_ledger_metadata() -> None:
    code = ("import json, importlib.metadata as m\n"
            "calls = []\n"
            "orig = m.Distribution.from_name\n"
            "m.Distribution.from_name = classmethod(lambda cls, n: (calls.append(n), orig(n))[1])\n"
            "import patchlane\n"
            "at_import = list(calls)\n"
            "import numpy\n"
            "after_numpy = list(calls)\n"
            "import torch\n"
            "print(json.dumps([at_import, after_numpy, calls,"
            " patchlane.report()['entries']]))\n")
    out = run_python(code, DEFAULT, PATCHLANE_DEFAULT_REGISTRY="1", PATCHLANE_REGISTRY="")
    assert out.returncode == 0, out.stderr
    at_import, after_numpy, after_torch, entries = json.loads(out.stdout)
    assert at_import == [] and after_numpy == []  # the numpy pin waits for triton
    assert "torch" in after_torch and "numpy" not in after_torch
    decisions = {e["id"]: e["decision"] for e in entries}
    assert decisions["torch_floor_a2a_overlap"]["outcome"] == "ledger: ok"
    assert decisions["numpy_pin_triton_interpreter"]["outcome"] == "pending"


def test_an_error_floor_fails_the_import_it_names(fake_target: FakeTarget) -> None:
    named = entry_dict("named_floor", "version_floor", requires=">=99", policy="error",
                       target={"distribution": fake_target.distribution,
                               "object": fake_target.module})
    decider = _decider(fake_target, named)
    with pytest.raises(LedgerError, match=rf"below the floor {fake_target.distribution}>=99"):
        fake_target.import_target()
    decision = decider.audit.latest()["named_floor"]
    assert decision.outcome is Outcome.LEDGER_VIOLATION and "Fix: install" in decision.reason


def test_an_error_floor_on_a_derived_module_records_without_failing_the_import(
        fake_target: FakeTarget) -> None:
    derived = entry_dict("derived_floor", "version_floor", requires=">=99", policy="error",
                         target={"distribution": fake_target.distribution})
    decider = _decider(fake_target, derived)
    importlib.import_module(fake_target.package)  # no LedgerError: the entry names no module
    assert decider.audit.latest()["derived_floor"].outcome is Outcome.LEDGER_VIOLATION


def _interpreter_pins(fake: FakeTarget) -> tuple[str, list[dict[str, Any]]]:
    """A fake "triton" module and two pins (met, violated) that concern only its interpreter."""
    triton = f"{fake.package}_triton"
    (fake.root / f"{triton}.py").write_text("")
    when = {"imported": triton, "env": {"PLFAKE_INTERPRET": "1"}}
    return triton, [
        entry_dict("pin_met", "packaging_pin", pin="<2.0", when=when,
                   target={"distribution": fake.distribution}),
        entry_dict("pin_broken", "packaging_pin", pin="<1.0", when=when,
                   target={"distribution": fake.distribution}),
    ]


def test_pin_with_when_is_pending_until_its_import(fake_target: FakeTarget,
                                                   metadata_reads: list[str]) -> None:
    triton, pins = _interpreter_pins(fake_target)
    decider = _decider(fake_target, *pins, strict=True)
    decision = decider.audit.latest()["pin_broken"]
    assert decision.outcome is Outcome.PENDING
    assert decision.reason == f"waiting for `import {triton}` with PLFAKE_INTERPRET=1"
    fake_target.import_target()  # the distribution's own module is not the trigger
    assert decider.audit.latest()["pin_broken"].outcome is Outcome.PENDING
    assert metadata_reads == []


@pytest.mark.parametrize("value", [None, "0"], ids=["unset", "other-value"])
def test_pin_with_when_is_not_applicable_without_its_environment(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch,
        metadata_reads: list[str], value: str | None) -> None:
    triton, pins = _interpreter_pins(fake_target)
    if value is None:
        monkeypatch.delenv("PLFAKE_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("PLFAKE_INTERPRET", value)
    decider = _decider(fake_target, *pins, strict=True)
    importlib.import_module(triton)  # strict mode: not applicable is no problem, no raise
    decision = decider.audit.latest()["pin_broken"]
    assert decision.outcome is Outcome.SKIPPED_NOT_APPLICABLE
    assert not decision.outcome.is_problem
    assert f"checked only on `import {triton}` with PLFAKE_INTERPRET=1" in decision.reason
    assert ("PLFAKE_INTERPRET is unset" if value is None else "PLFAKE_INTERPRET is '0'") \
        in decision.reason
    assert metadata_reads == []  # not applicable: the installed numpy is never looked at
    assert "skipped: not applicable: pin_broken (not applicable" in decider.summary()


def test_pin_with_when_is_checked_with_its_environment(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    triton, pins = _interpreter_pins(fake_target)
    monkeypatch.setenv("PLFAKE_INTERPRET", "1")
    decider = _decider(fake_target, *pins)
    importlib.import_module(triton)
    latest = decider.audit.latest()
    assert latest["pin_met"].outcome is Outcome.LEDGER_OK
    assert latest["pin_broken"].outcome is Outcome.LEDGER_VIOLATION
    assert f"does not match the pin {fake_target.distribution}<1.0" in latest["pin_broken"].reason
    # and in strict mode the violation raises, at that import
    monkeypatch.delitem(sys.modules, triton)
    _decider(fake_target, *pins, strict=True)
    with pytest.raises(StrictModeError, match="pin_broken"):
        importlib.import_module(triton)


def test_default_numpy_pin_concerns_only_the_triton_interpreter() -> None:
    # the interpreter of a triton before the fix (3.7.0): measured, see the entry's evidence
    (pin,) = [e for e in default_entries() if e.id == "numpy_pin_triton_interpreter"]
    assert pin.when == When("triton", {"TRITON_INTERPRET": "1"},
                            {"triton": SpecifierSet("<3.7")})
    assert pin.when.describe() == "`import triton` with TRITON_INTERPRET=1 and triton<3.7"
    (floor,) = [e for e in default_entries() if e.id == "torch_floor_a2a_overlap"]
    assert floor.when == When("torch", {}) and floor.names_its_import


def test_status_checks_pending_floors_and_pins_eagerly(fake_target: FakeTarget) -> None:
    floor = entry_dict("eager_floor", "version_floor", requires=">=1.0", policy="error",
                       target={"distribution": fake_target.distribution,
                               "object": f"{fake_target.package}.never_imported"})
    _, pins = _interpreter_pins(fake_target)
    path = write(fake_target.root, floor, *pins)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    env.update({"PATCHLANE_DEFAULT_REGISTRY": "0", "PATCHLANE_REGISTRY": str(path),
                "PYTHONPATH": str(fake_target.root), "PYTHONWARNINGS": "ignore",
                "PLFAKE_INTERPRET": "1"})
    out = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "status", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    decisions = {e["id"]: e["decision"] for e in json.loads(out.stdout)["entries"]}
    assert decisions["eager_floor"]["outcome"] == "ledger: ok"
    assert "(checked eagerly; a run checks on `import" in decisions["eager_floor"]["reason"]
    assert decisions["pin_broken"]["outcome"] == "ledger: violation"
    no_import = subprocess.run([sys.executable, "-m", "patchlane.cli.main", "status", "--json",
                                "--no-import"], capture_output=True, text=True, env=env,
                               timeout=120)
    assert {e["decision"]["outcome"] for e in json.loads(no_import.stdout)["entries"]} == \
        {"pending"}


# -- `when:` validation --------------------------------------------------------------------

@pytest.mark.parametrize(("kind", "when", "message", "key", "found", "expected"), [
    ("packaging_pin", "triton", "wrong type", "when", "triton", "a mapping such as"),
    ("packaging_pin", {}, "empty condition", "when", {}, "a mapping such as"),
    ("packaging_pin", {"imported": "triton", "envs": {"A": "1"}}, "unknown key in when",
     "when.envs", "envs", "one of ['env', 'imported', 'installed']"),
    ("version_floor", {"imported": "triton-lang"}, "invalid module name", "when.imported",
     "triton-lang", "a dotted module path"),
    ("packaging_pin", {"imported": "triton", "env": {"TRITON_INTERPRET": 1}}, "wrong type",
     "when.env.TRITON_INTERPRET", 1, 'a quoted string such as "1"'),
    ("packaging_pin", {"env": {"TRITON-INTERPRET": "1"}}, "invalid environment variable name",
     "when.env", "TRITON-INTERPRET", "a name such as TRITON_INTERPRET"),
    ("packaging_pin", {"env": {}}, "empty condition", "when.env", {}, "at least one"),
    ("compat_gate", {"imported": "triton"}, "unknown key in a compat_gate entry", "when",
     "when", "one of"),
], ids=["not-a-mapping", "empty", "unknown-key", "bad-module", "env-int", "env-name",
        "env-empty", "not-for-gates"])
def test_when_is_validated(tmp_path: Path, kind: str, when: object, message: str, key: str,
                           found: object, expected: str) -> None:
    extra: dict[str, Any] = {
        "packaging_pin": {"target": {"distribution": "numpy"}, "pin": "<2.3"},
        "version_floor": {"target": {"distribution": "torch"}, "requires": ">=2",
                          "policy": "warn"},
        "compat_gate": {"check": "patches/bad_when.py:check"},
    }[kind]
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "bad_when.py").write_text("def check(config):\n    return None\n")
    path = write(tmp_path, entry_dict("bad_when", kind, when=when, **extra))
    with pytest.raises(RegistryError) as info:
        load_registries([path])
    error = info.value
    assert error.path == str(path.resolve()) and error.entry_id == "bad_when"
    assert error.key == key and error.found == found
    assert message in str(error) and error.expected is not None and expected in error.expected


def test_the_startup_decides_floors_through_the_one_ledger_sequence(
        fake_target: FakeTarget, monkeypatch: pytest.MonkeyPatch) -> None:
    import patchlane.deciding.ledger as ledger

    floor = {"id": "floor_fake", "kind": "version_floor", "summary": "needs a newer fake",
             "upstream": {"issue": "https://github.com/example/x/issues/1", "forwarded": "no"},
             "retire_when": {"upstream_released": True}, "owner": "tests",
             "added": "2026-11-22", "status": "active", "requires": ">=1.0", "policy": "warn",
             "target": {"distribution": fake_target.distribution,
                        "object": fake_target.module}}
    fake_target.write_registry(floor)
    seen: list[str] = []
    real = ledger.evaluate

    def spy(entry: Any, *args: Any) -> Any:
        seen.append(entry.id)
        return real(entry, *args)

    monkeypatch.setattr(ledger, "evaluate", spy)
    decider = fake_target.decider()
    fake_target.import_target()
    assert seen == ["floor_fake"]
    decided = decider.audit.latest()["floor_fake"]
    assert decided.outcome is Outcome.LEDGER_OK and decided.installed == "1.2.0"
    # disabled: the audit records the bare reason, doctor's sentence says it in words
    decider = fake_target.decider({"PATCHLANE_DISABLE": "floor_fake"})
    result = real(decider.registry.get("floor_fake"), decider.left_out("floor_fake"))
    assert result is not None and result.skip_reason == "listed in PATCHLANE_DISABLE"
    assert result.message == "skipped: disabled (listed in PATCHLANE_DISABLE)"

"""PATCHLANE_DISABLE / PATCHLANE_ONLY govern every kind of entry, under strict mode too, and an
id that names no loaded entry is said out loud. Mechanics on fake modules and distributions."""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from patchlane.common.errors import ControlsError, StrictModeError
from patchlane.deciding.audit import AuditLog, Outcome
from patchlane.deciding.controls import Controls
from patchlane.deciding.decider import Decider
from patchlane.deciding.ledger import CompatGateError, LedgerError, check_config
from patchlane.registry import load_registries

from ..conftest import FakeTarget

ROOT = Path(__file__).resolve().parents[2]
FLOOR, PIN, GATE, CONFIG = "ctl_floor", "ctl_pin", "ctl_gate", "ctl_config"


def common(entry_id: str, kind: str) -> dict[str, Any]:
    return {"id": entry_id, "kind": kind, "summary": f"test {kind}",
            "upstream": {"issue": "https://github.com/example/x/issues/1", "forwarded": "no"},
            "retire_when": {"upstream_released": True}, "owner": "tests",
            "added": "2026-11-22", "status": "active"}


def violated_entries(fake: FakeTarget) -> list[dict[str, Any]]:
    """One entry of each non-patch kind, every one of which fails (or would assign) on the fake
    distribution (version 1.2.0): strict mode raises for each unless it is disabled."""
    (fake.root / f"{fake.package}_cfg.py").write_text("limit = 8\n")
    (fake.root / "patches" / f"{GATE}.py").write_text(
        "def check(config):\n    return 'always unsafe' if config.bad else None\n")
    return [
        {**common(FLOOR, "version_floor"), "requires": ">=99", "policy": "error",
         "target": {"distribution": fake.distribution, "object": fake.module}},
        {**common(PIN, "packaging_pin"), "pin": "<1.0", "policy": "error",
         "target": {"distribution": fake.distribution, "object": fake.module}},
        {**common(GATE, "compat_gate"), "check": f"patches/{GATE}.py:check", "policy": "error"},
        {**common(CONFIG, "config"), "settings": {f"{fake.package}_cfg.limit": 64}},
    ]


OTHER = "ctl_other"


def decider_for(fake: FakeTarget, env: dict[str, str]) -> Decider:
    # OTHER: an entry PATCHLANE_ONLY can keep while it leaves the four above out (its module
    # is never imported, so it stays pending and never raises)
    other = {**common(OTHER, "config"), "settings": {f"{fake.package}_never.limit": 1}}
    fake.registry.write_text(yaml.safe_dump(
        {"schema": 1, "entries": [*violated_entries(fake), other]}, sort_keys=False))
    decider = Decider(load_registries([fake.registry]), Controls.from_env(env), AuditLog())
    decider.start()
    return decider


@pytest.mark.parametrize("env", [
    {"PATCHLANE_DISABLE": f"{FLOOR},{PIN},{GATE},{CONFIG}"},
    {"PATCHLANE_ONLY": OTHER},
], ids=["disable", "only"])
def test_every_kind_disabled_is_skipped_and_never_raises_in_strict_mode(
        fake_target: FakeTarget, env: dict[str, str]) -> None:
    decider = decider_for(fake_target, {"PATCHLANE_STRICT": "1", **env})
    latest = decider.audit.latest()
    for entry_id in (FLOOR, PIN, GATE, CONFIG):
        decision = latest[entry_id]
        assert decision.outcome is Outcome.SKIPPED_DISABLED, decision
        assert "PATCHLANE_" in decision.reason, decision  # says which control did it
    # the floor's and pin's module imports cleanly: nothing was checked, nothing refuses
    fake_target.import_target()
    cfg = importlib.import_module(f"{fake_target.package}_cfg")
    assert cfg.limit == 8  # the setting was left alone
    # the compat gate is skipped by check_config, with the reason, and does not raise
    (result,) = check_config(argparse.Namespace(bad=True), list(decider.registry.entries),
                             decider.left_out)
    assert result.ok and result.skipped == "disabled" and "PATCHLANE_" in result.message
    assert decider.audit.latest()[FLOOR].outcome is Outcome.SKIPPED_DISABLED  # still, after import


@pytest.mark.parametrize("only", ["ctl_flor", f"{OTHER},ctl_flor"], ids=["none-known", "one-known"])
def test_strict_mode_refuses_an_unknown_id_in_only_before_deciding_anything(
        fake_target: FakeTarget, only: str) -> None:
    # A typo in PATCHLANE_ONLY leaves out the entry it meant (every entry, when it names none
    # that is known): a strict test run would pass without the fix. Refused at the start, with
    # the closest id, before any record or hook.
    with pytest.raises(ControlsError, match=r"'ctl_flor' in PATCHLANE_ONLY \(did you mean "
                                            r"'ctl_floor'\?\).*strict mode refuses.*fix: "):
        decider_for(fake_target, {"PATCHLANE_STRICT": "1", "PATCHLANE_ONLY": only})
    decider = decider_for(fake_target, {"PATCHLANE_ONLY": only})  # not strict: logged only
    assert decider.unknown_control_ids == {"ctl_flor": ["PATCHLANE_ONLY"]}
    assert decider.audit.latest()[FLOOR].outcome is Outcome.SKIPPED_DISABLED


def test_strict_mode_lets_an_unknown_id_in_disable_pass(fake_target: FakeTarget) -> None:
    # it changes nothing: every entry is decided as without it (logged, not raised)
    decider = decider_for(fake_target, {"PATCHLANE_STRICT": "1", "PATCHLANE_DISABLE": "ctl_flor"})
    assert decider.unknown_control_ids == {"ctl_flor": ["PATCHLANE_DISABLE"]}
    assert decider.audit.latest()[FLOOR].outcome is Outcome.PENDING


def test_the_same_entries_enabled_do_raise_in_strict_mode(fake_target: FakeTarget) -> None:
    decider = decider_for(fake_target, {"PATCHLANE_STRICT": "1"})
    assert decider.audit.latest()[FLOOR].outcome is Outcome.PENDING
    with pytest.raises(StrictModeError, match=FLOOR):
        fake_target.import_target()
    with pytest.raises(CompatGateError, match="always unsafe"):
        check_config(argparse.Namespace(bad=True), list(decider.registry.entries), decider.left_out)


def test_an_id_in_the_wrong_case_gets_the_known_one_suggested(
        fake_target: FakeTarget, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="patchlane"):
        decider_for(fake_target, {"PATCHLANE_DISABLE": PIN.upper()})
    (record,) = [r for r in caplog.records if "unknown entry id" in r.getMessage()]
    assert f"{PIN.upper()!r} in PATCHLANE_DISABLE (did you mean {PIN!r}?)" in record.getMessage()


def test_unknown_control_ids_warn_with_the_closest_known_id(
        fake_target: FakeTarget, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="patchlane"):
        decider = decider_for(fake_target, {"PATCHLANE_DISABLE": f"ctl_flor,{PIN}",
                                      "PATCHLANE_ONLY": f"{PIN},{GATE},nothing_like_it"})
    assert decider.unknown_control_ids == {"ctl_flor": ["PATCHLANE_DISABLE"],
                                        "nothing_like_it": ["PATCHLANE_ONLY"]}
    (record,) = [r for r in caplog.records if "unknown entry id" in r.getMessage()]
    message = record.getMessage()
    assert record.levelno == logging.WARNING
    assert "'ctl_flor' in PATCHLANE_DISABLE (did you mean 'ctl_floor'?)" in message
    assert "'nothing_like_it' in PATCHLANE_ONLY" in message
    assert f"Known ids: {CONFIG}, {FLOOR}, {GATE}, {OTHER}, {PIN}" in message
    assert "unknown control ids: ctl_flor, nothing_like_it" in decider.summary()
    assert "PATCHLANE_ONLY's other ids still apply" in message
    # the logger's name says whose it is: no "patchlane: patchlane:" where a handler names it
    assert message.startswith("unknown entry id(s) ")
    # known ids still work as asked; the unknown ones change nothing and raise nothing
    assert decider.audit.latest()[PIN].outcome is Outcome.SKIPPED_DISABLED
    assert decider.audit.latest()[FLOOR].outcome is Outcome.SKIPPED_DISABLED  # not in ONLY


@pytest.mark.parametrize(("only", "left_out"), [("nothing_like_it", True), ("", False),
                                                 (" , ", False)],
                         ids=["unknown-id", "empty", "only-commas"])
def test_an_only_that_names_no_entry_says_what_it_does(
        fake_target: FakeTarget, caplog: pytest.LogCaptureFixture, only: str,
        left_out: bool) -> None:
    """PATCHLANE_ONLY naming no loaded entry leaves every entry out, and the warning says so
    (it used to say the ids changed nothing); set to nothing, it is ignored, and said so."""
    with caplog.at_level(logging.WARNING, logger="patchlane"):
        decider = decider_for(fake_target, {"PATCHLANE_ONLY": only})
    messages = " ".join(r.getMessage() for r in caplog.records)
    outcomes = {decider.audit.latest()[e].outcome for e in (PIN, FLOOR, GATE, CONFIG)}
    if left_out:
        assert outcomes == {Outcome.SKIPPED_DISABLED}
        assert "PATCHLANE_ONLY names no loaded entry, so every entry is left out" in messages
        assert "change nothing" not in messages
    else:
        assert Outcome.SKIPPED_DISABLED not in outcomes
        assert "PATCHLANE_ONLY is set but names no id: ignored" in messages


def test_known_ids_do_not_warn(fake_target: FakeTarget,
                               caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="patchlane"):
        decider = decider_for(fake_target, {"PATCHLANE_DISABLE": FLOOR})
    assert decider.unknown_control_ids == {}
    assert not [r for r in caplog.records if "unknown entry id" in r.getMessage()]


def test_the_controls_warnings_follow_the_headline(fake_target: FakeTarget,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """What the controls say of the entries is read when the decider is built, and said by
    start(): after the startup's headline and before any decision, in a training log as in the
    order the startup (patchlane.startup.start) logs them. Building the decider logs nothing."""
    fake_target.registry.write_text(yaml.safe_dump(
        {"schema": 1, "entries": violated_entries(fake_target)}, sort_keys=False))
    with caplog.at_level(logging.INFO, logger="patchlane"):
        decider = Decider(load_registries([fake_target.registry]),
                          Controls.from_env({"PATCHLANE_DISABLE": "ctl_flor",
                                             "PATCHLANE_ONLY": ""}), AuditLog())
        assert not caplog.records
        logging.getLogger("patchlane").info("%s", decider.headline())
        decider.start()
        with pytest.raises(LedgerError):  # the floor (policy: error) is decided: its line follows
            fake_target.import_target()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == decider.headline()
    assert "unknown entry id(s) 'ctl_flor' in PATCHLANE_DISABLE" in messages[1]
    assert messages[2].startswith("PATCHLANE_ONLY is set but names no id: ignored")
    assert any(m.startswith(f"{FLOOR} ") for m in messages[3:]), messages


# -- through `import patchlane` (the process-wide decider, in a fresh interpreter) ---------------

def run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PATCHLANE_")}
    full.update({"PYTHONWARNINGS": "ignore", **env})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full, timeout=120, cwd="/")


def test_report_lists_unknown_control_ids() -> None:
    out = run("import json, patchlane; r = patchlane.report()\n"
              "print(json.dumps([r['unknown_control_ids'], r['summary']]))",
              PATCHLANE_DISABLE="torch_floor_a2a_overlapp,dynamo_recompile_limit",
              PATCHLANE_STRICT="1")
    assert out.returncode == 0, out.stderr
    unknown, summary = json.loads(out.stdout)
    assert unknown == ["torch_floor_a2a_overlapp"]
    assert "did you mean 'torch_floor_a2a_overlap'?" in out.stderr
    assert "skipped: disabled: dynamo_recompile_limit" in summary


def test_public_check_config_skips_a_disabled_gate_in_strict_mode() -> None:
    code = ("import argparse, json, patchlane\n"
            "a = argparse.Namespace(pipeline_model_parallel_size=4, variable_seq_lengths=True,"
            " batch_p2p_comm=True)\n"
            "print(json.dumps([r.as_dict() for r in patchlane.check_config(a)]))\n")
    out = run(code, PATCHLANE_DISABLE="mcore_pp_variable_seq_deadlock", PATCHLANE_STRICT="1")
    assert out.returncode == 0, out.stderr
    (result,) = json.loads(out.stdout)
    assert result["entry_id"] == "mcore_pp_variable_seq_deadlock"
    assert result["skipped"] == "disabled" and result["ok"]
    assert "listed in PATCHLANE_DISABLE" in result["message"]
    # enabled, the same configuration raises (the gate itself works)
    assert "CompatGateError" in run(code).stderr


def test_a_control_that_cannot_be_read_ends_the_script_with_one_line_and_exit_2() -> None:
    out = run("import patchlane\nprint('the script ran')", PATCHLANE_STRICT="maybe",
              PATCHLANE_REGISTRY_CACHE="0")
    assert out.returncode == 2, out.stderr  # ControlsError, as on the command line
    (line,) = out.stderr.splitlines()
    assert line.startswith("patchlane: ControlsError: PATCHLANE_STRICT='maybe'")
    assert out.stdout == ""


@pytest.mark.parametrize("name", ["PATCHLANE_VERIFY_RANKS", "PATCHLANE_DEFAULT_REGISTRY",
                                  "PATCHLANE_ENTRY_POINTS"])
def test_an_unreadable_setting_applies_nothing_and_is_the_startup_error(name: str) -> None:
    # Like a rejected registry: `import patchlane` does not raise by default; nothing is
    # applied, an ERROR line says why, and the report carries it.
    out = run("import json, patchlane; r = patchlane.report()\n"
              "print(json.dumps([r['startup_error'], len(r['entries'])]))", **{name: "maybe"})
    assert out.returncode == 0, out.stderr
    error, entries = json.loads(out.stdout)
    assert error.startswith(f"{name}='maybe': expected one of 1, true, yes, on, 0, false, no, "
                            "off; fix:"), error
    assert entries == 0
    assert f"a setting cannot be read, nothing applied: {name}='maybe'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("env", [{"PATCHLANE_VERIFY_RANKS": "maybe", "PATCHLANE_STRICT": "1"},
                                 {"PATCHLANE_STRICT": "maybe"}])
def test_in_strict_mode_an_unreadable_setting_raises(env: dict[str, str]) -> None:
    # An unreadable PATCHLANE_STRICT counts as strict: a job that asked for strict mode (with
    # a typo) must not start unchecked.
    out = run("import patchlane", **env)
    # uncaught, it ends the script as the command line would: one line, exit 2 (bad setting)
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith("patchlane: ControlsError: "), line

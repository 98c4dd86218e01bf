"""Secrets never reach a receipt or a report: the environment allow-list and ``redact_text``."""

from __future__ import annotations

import pytest

from patchlane.sweep.provenance import environment_overlay, looks_secret, redact_text

GH_TOKEN = "ghp_" + "A1b2C3d4" * 5
GH_PAT = "github_pat_11ABCDEFG0_" + "x9Y8z7" * 8


@pytest.mark.parametrize("name", ["GITHUB_TOKEN", "MY_API_TOKEN", "aws_secret_access_key",
                                  "DB_PASSWORD", "PGPASSWD", "PIP_PASS", "TORCH_API_KEY",
                                  "APIKEY", "GOOGLE_APPLICATION_CREDENTIALS", "NCCL_AUTH",
                                  "x-api-key"])
def test_names_that_look_secret(name: str) -> None:
    assert looks_secret(name)


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "PATH", "HOME",
                                  "MASTER_ADDR", "OMP_NUM_THREADS"])
def test_names_that_do_not(name: str) -> None:
    assert not looks_secret(name)


def test_environment_overlay_keeps_the_allow_list_and_drops_secrets() -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_AUTH_TOKEN": "x", "TORCH_API_KEY": "x",
           "PATCHLANE_PASSWORD": "x", "HOME": "/root", "GITHUB_TOKEN": "x"}
    assert environment_overlay(env) == {"NCCL_DEBUG": "INFO"}


@pytest.mark.parametrize(("text", "expected"), [
    ("pip: https://user:hunter2@pypi.example.invalid/simple",
     "pip: https://user:***@pypi.example.invalid/simple"),
    ("git+ssh://git:s3cr3t@host/repo.git", "git+ssh://git:***@host/repo.git"),
    ("https://__token__:pypi-AgEIcHlwaS5vcmc@upload.pypi.org/legacy/",
     "https://__token__:***@upload.pypi.org/legacy/"),
    ("in .pypirc: __token__:pypi-AgEIcHlwaS5vcmc@upload.pypi.org",
     "in .pypirc: __token__:***@upload.pypi.org"),
    ("MY_API_TOKEN=s3cr3t-value and more", "MY_API_TOKEN=*** and more"),
    ("export DB_PASSWORD='a b c'", "export DB_PASSWORD='***'"),
    ("Password: hunter2", "Password: ***"),
    ('{"api_key": "abc123", "n": 1}', '{"api_key": "***", "n": 1}'),
    ("{'secret': 'xyz', 'ok': 2}", "{'secret': '***', 'ok': 2}"),
    ("run.sh --password=pw123 --verbose", "run.sh --password=*** --verbose"),
    ("x-api-key: abc", "x-api-key: ***"),
    ("Authorization: Bearer eyJhbGciOi.J9.abc", "Authorization: Bearer ***"),
    (f"cloned with {GH_TOKEN} ok", "cloned with ghp_*** ok"),
    (f"token {GH_PAT}", "token github_pat_***"),
    (f"https://{GH_TOKEN}@github.com/o/r", "https://ghp_***@github.com/o/r"),
])
def test_redact_text(text: str, expected: str) -> None:
    assert redact_text(text, env={}) == expected


@pytest.mark.parametrize("text", [
    "KeyError: 'weight'",
    "patchlane.common.errors.PasswordError: the message stays",
    "RuntimeError: bootstrap exploded: marker-4711",
    'if key == "x":',
    "http://localhost:8080/path@v2",
    '  File "/srv/auth.py", line 3, in <module>',
    "NCCL_DEBUG=INFO",
    "token=",
])
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text, env={}) == text


def test_secret_environment_values_are_redacted_wherever_they_appear() -> None:
    env = {"MY_API_TOKEN": "s3cr3t-value", "SERVICE_SECRET": "s3cr3t-value-longer",
           "HOME": "/home/someone", "SKIP_AUTH": "1"}
    text = ("retrying with s3cr3t-value-longer, then s3cr3t-value\n"
            "home is /home/someone; 1 retry")
    assert redact_text(text, env) == "retrying with ***, then ***\nhome is /home/someone; 1 retry"


def test_default_environment_is_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLTEST_CREDENTIAL", "very-private-value")
    assert redact_text("saw very-private-value") == "saw ***"


def test_redaction_is_idempotent() -> None:
    text = (f"https://u:p4ss@h/ MY_TOKEN=abc {GH_TOKEN} Authorization: Bearer abcdefghij "
            "password: 'x'")
    once = redact_text(text, env={})
    assert redact_text(once, env={}) == once
    assert "p4ss" not in once and "abc " not in once and "abcdefghij" not in once


def test_credentials_inside_allowed_variables_never_reach_a_receipt() -> None:
    """Issue 14 item 11: allow-listed names can still carry a credential in their value."""
    from patchlane.common.redaction import environment_overlay

    env = {"PATCHLANE_PYPI_URL": "https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example/simple",
           "TRITON_CACHE_URL": "https://bob:hunter2pass@cache.example/triton",
           "NCCL_IB_PASS": "opensesame42", "NCCL_DEBUG": "INFO",
           "TORCH_HUB_AUTH": "Bearer abcdefghijklmnop", "HOME": "/root"}
    overlay = environment_overlay(env)
    text = repr(overlay)
    for secret in ("pypi-AgEIcHlwaS5vcmc", "hunter2pass", "opensesame42", "abcdefghijklmnop"):
        assert secret not in text
    assert overlay["TRITON_CACHE_URL"] == "https://bob:***@cache.example/triton"
    assert overlay["PATCHLANE_PYPI_URL"] == "https://__token__:***@pypi.example/simple"
    assert overlay["NCCL_DEBUG"] == "INFO" and "HOME" not in overlay

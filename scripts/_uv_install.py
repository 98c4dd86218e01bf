"""Run by scripts/_venv.sh: ``uv pip install ARGS...`` for the venv whose python runs this,
with the package sources pip is configured with, since uv reads none of pip's configuration.

    python scripts/_uv_install.py UV ARGS...

pip's settings come from ``pip config list`` (its config files and ``PIP_*`` variables):
``index-url``, ``extra-index-url``, ``find-links``, ``no-index`` and ``cert``. pip weighs every
index alike and takes the best match; uv's default takes a package from the first index that
has it, which refused this workplace's local extra index (an older wrapt there), so uv is told
to weigh them alike too. A local index or find-links folder that is not there is skipped, as
pip skips it.
Exits with uv's status; scripts/_venv.sh has pip install instead when it is not 0.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys


def pip_settings() -> dict[str, list[str]]:
    """``option -> values`` from ``pip config list``: each value split on whitespace, as pip
    splits a list option; an environment variable's value first (pip gives it precedence)."""
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                         text=True, check=False).stdout
    settings: dict[str, list[str]] = {}
    for line in sorted(out.splitlines(), key=lambda text: not text.startswith(":env:")):
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            continue
        option = key.rpartition(".")[2]
        for word in str(value).split():
            if word not in settings.setdefault(option, []):
                settings[option].append(word)
    return settings


def there(place: str) -> bool:
    """Whether an index or find-links ``place`` may be given to uv: a remote URL always; a
    local folder (``file://`` or a bare path) only where it is there: pip skips one that is
    not, uv would stop."""
    local = place.removeprefix("file://")
    return "://" in local or os.path.isdir(local)


def uv_options(settings: dict[str, list[str]]) -> list[str]:
    options = ["--index-strategy", "unsafe-best-match"]
    index = [url for url in settings.get("index-url", []) if there(url)]
    if index:
        options += ["--index-url", index[0]]
    for url in settings.get("extra-index-url", []):
        if there(url):
            options += ["--extra-index-url", url]
    for place in settings.get("find-links", []):
        if there(place):
            options += ["--find-links", place.removeprefix("file://")]
    if settings.get("no-index", ["false"])[0].lower() in ("1", "true", "yes", "on"):
        options.append("--no-index")
    return options


def main(argv: list[str]) -> int:
    uv, *args = argv
    settings = pip_settings()
    env = dict(os.environ)
    if settings.get("cert"):
        env["SSL_CERT_FILE"] = settings["cert"][0]
    command = [uv, "pip", "install", "--python", sys.executable, *uv_options(settings), *args]
    return subprocess.run(command, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

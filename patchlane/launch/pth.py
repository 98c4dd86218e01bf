"""Activation for a whole environment: a ``.pth`` file in site-packages (``patchlane activate``).

``patchlane run`` reaches the interpreters its command starts through ``PYTHONPATH``, which some
never see: ``python -E`` and ``-I`` ignore it, and launchers and schedulers that scrub the
environment drop it. ``site`` processes a ``.pth`` file in site-packages in every interpreter
of that environment, whatever its flags and environment (all but ``python -S``), and runs a
line of it that starts with ``import``. For a container image or a shared venv, one such line
doing ``import patchlane`` puts patchlane in every process, through the same lazy path as a
script's own ``import patchlane``: a process that imports no target pays for a watch list read and
one import hook.

Off by default; written and removed only by ``patchlane activate --pth`` / ``--remove``, both
idempotent. The file is named to be processed last in its directory (``site`` reads them in
name order): the lazy start keys its watch list on ``sys.path``, which the other ``.pth``
files of the environment (editable installs) extend. The line

- imports patchlane (the lazy path, or the full startup when no fresh watch list says what to
  watch);
- stops the interpreter with the error's one line and exit code when strict mode refuses at
  import (``site`` would print a traceback and run the command anyway), as the ``patchlane
  run`` bootstrap does;
- says, on stderr, when patchlane is no longer installed: the file outlived it (``pip
  uninstall`` does not know about it) and should be removed.

It prints nothing else: unlike ``patchlane run``, it does not add a line at each process's exit.
"""

from __future__ import annotations

import os
import site
import sysconfig
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FILE_NAME", "Activation", "content", "find", "remove", "site_dir", "write"]

FILE_NAME = "zz-patchlane-activate.pth"
"""Last in name order among a site directory's ``.pth`` files (see the module docstring)."""

_CODE = (
    # Once per interpreter: `site` reads a site directory reached by two paths (lib64 -> lib,
    # a symlinked prefix) twice, and the notice below would print twice.
    "if not getattr(sys, '_patchlane_pth_done', False):\n"
    "  sys._patchlane_pth_done = True\n"
    "  try:\n"
    "    import patchlane\n"
    "  except ModuleNotFoundError as e:\n"
    "    if e.name != 'patchlane':\n"
    "        raise\n"
    "    sys.stderr.write('patchlane: ' + {where!r} + ' activates patchlane, which this '\n"
    "                     'interpreter cannot import: remove that file (patchlane activate '\n"
    "                     '--remove), or install patchlane\\n')\n"
    "  except Exception as e:\n"
    "    code = getattr(e, 'exit_code', None)\n"
    "    if code is None:\n"
    "        raise\n"
    "    sys.stderr.write('patchlane: ' + type(e).__name__ + ': ' + str(e).replace('\\n', ' ')\n"
    "                     + ' (stopped at ' + {where!r} + ', exit ' + str(int(code)) + ')\\n')\n"
    "    sys.stderr.flush()\n"
    "    import os\n"
    "    os._exit(int(code))\n"
)


def content(where: Path) -> str:
    """The file's text for ``where`` (its own path, named in what it prints)."""
    code = _CODE.format(where=str(where))
    return ("# Written by `patchlane activate --pth`: every interpreter of this environment does "
            "`import patchlane`.\n# `patchlane activate --remove` takes it away.\n"
            f"import sys; exec({code!r})\n")


def site_dir() -> Path:
    """This interpreter's site-packages (a venv's own when run from one)."""
    return Path(sysconfig.get_paths()["purelib"])


@dataclass(frozen=True)
class Activation:
    """One ``.pth`` activation found: where, and whether it is what this patchlane writes."""

    path: Path
    current: bool

    def as_dict(self) -> dict[str, object]:
        return {"path": str(self.path), "current": self.current}


def find() -> list[Activation]:
    """The activation files in this interpreter's site directories."""
    dirs = [Path(d) for d in (*site.getsitepackages(), site.getusersitepackages())]
    dirs.append(site_dir())
    found: list[Activation] = []
    seen: set[Path] = set()
    for folder in dirs:
        path = folder / FILE_NAME
        real = Path(os.path.realpath(path))
        if real in seen or not path.is_file():
            continue
        seen.add(real)
        try:
            current = path.read_text(encoding="utf-8") == content(path)
        except (OSError, UnicodeDecodeError):
            current = False
        found.append(Activation(path, current))
    return found


def write(folder: Path | None = None) -> tuple[Path, bool]:
    """Write the activation into ``folder`` (default :func:`site_dir`); ``(path, changed)``."""
    from ..common.files import atomic_write

    path = (folder or site_dir()) / FILE_NAME
    text = content(path)
    try:
        if path.read_text(encoding="utf-8") == text:
            return path, False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return path, True


def remove(folder: Path | None = None) -> tuple[Path, bool]:
    """Remove the activation from ``folder`` (default :func:`site_dir`); ``(path, removed)``."""
    path = (folder or site_dir()) / FILE_NAME
    try:
        path.unlink()
    except FileNotFoundError:
        return path, False
    return path, True

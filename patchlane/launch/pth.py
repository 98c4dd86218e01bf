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

- imports patchlane once ``site`` has finished (every site directory on ``sys.path``: see
  :data:`_CODE`), the lazy path, or the full startup when no fresh watch list says what to
  watch;
- stops the interpreter with the error's one line and exit code when strict mode refuses at
  import (``site`` would print a traceback and run the command anyway), as the ``patchlane
  run`` bootstrap does; a requirement of patchlane that is missing is said in one line and
  the interpreter runs on without it (pip among them);
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
    "  def _activate():\n"
    "    try:\n"
    "      import patchlane\n"
    "    except ModuleNotFoundError as e:\n"
    "      if e.name != 'patchlane':\n"
    "        raise\n"
    "      sys.stderr.write('patchlane: ' + {where!r} + ' activates patchlane, which this '\n"
    "                       'interpreter cannot import: remove that file (patchlane activate '\n"
    "                       '--remove), or install patchlane\\n')\n"
    "    except Exception as e:\n"
    "      code = getattr(e, 'exit_code', None)\n"
    "      if code is None:\n"
    "        raise\n"
    "      line = type(e).__name__ + ': ' + str(e).replace('\\n', ' ')\n"
    "      if int(code) == 69:\n"
    "        sys.stderr.write('patchlane: ' + line + ' (' + {where!r} + ' left it off: this '\n"
    "                         'interpreter runs without patchlane)\\n')\n"
    "        return\n"
    "      sys.stderr.write('patchlane: ' + line + ' (stopped at ' + {where!r} + ', exit '\n"
    "                       + str(int(code)) + ')\\n')\n"
    "      sys.stderr.flush()\n"
    "      import os\n"
    "      os._exit(int(code))\n"
    # Never taken off sys.meta_path: the import system walks that list as it asks, and a
    # finder removed during a lookup makes it skip the next one (sitecustomize's own finder).
    "  class _AfterSite:\n"
    "    done = False\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    "      if not self.done and name in ('sitecustomize', 'usercustomize'):\n"
    "        type(self).done = True\n"
    "        _activate()\n"
    "      return None\n"
    # At startup `site` is still running (its spec's `_initializing`): wait for its end. A
    # program's own site.addsitedir() later reads this file with site done: at once.
    "  _site = getattr(sys.modules.get('site'), '__spec__', None)\n"
    "  if getattr(_site, '_initializing', False):\n"
    "    sys.meta_path.insert(0, _AfterSite())\n"
    "  else:\n"
    "    _activate()\n"
)
"""Run by ``site`` while it reads the site directories: it only arms a one-shot finder.
patchlane is imported once ``site`` has put every site directory on ``sys.path`` and asks for
``sitecustomize`` (it always does, last): imported at once, from the ``.pth`` line, patchlane
and its requirements were looked up before the user site, a ``--system-site-packages`` base
and any ``.pth`` after this one were on ``sys.path``, and every interpreter of the
environment, pip included, stopped with exit 69. A requirement missing for good is said and
the interpreter runs on without patchlane, never stopped: pip must stay able to install it."""


def content(where: Path) -> str:
    """The file's text for ``where`` (its own path, named in what it prints)."""
    code = _CODE.format(where=str(where))
    return ("# Written by `patchlane activate --pth`: every interpreter of this environment does "
            "`import patchlane`.\n# `patchlane activate --remove` takes it away.\n"
            # its own namespace: the functions it defines find each other as globals
            f"import sys; exec({code!r}, {{'sys': sys}})\n")


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

# Put first on PYTHONPATH by `patchlane run` (patchlane/launch/command.py); `site` runs this in
# every interpreter the command starts. Kept tiny: the work is in patchlane.launch.activate.
# No module docstring on purpose: this module takes the name `sitecustomize`.
import os as _os
import sys as _sys


def _patchlane_bootstrap() -> None:
    here = _os.path.dirname(_os.path.abspath(__file__))
    try:
        # Importing the package is `import patchlane`: the decider starts here.
        from patchlane.launch.activate import activate, chain
    except ImportError as exc:
        if getattr(exc, "name", None) not in ("patchlane", "patchlane.launch",
                                               "patchlane.launch.activate"):
            _stop(exc)  # patchlane is there but something it needs is not
        # This interpreter has no patchlane: say so and let the command run, or stop it in
        # strict mode (read by hand: patchlane.deciding.controls cannot be imported here; the same
        # true values as its _TRUE).
        if _os.environ.get("PATCHLANE_STRICT", "").strip().lower() in ("1", "true", "yes", "on"):
            _stop(exc, hint="install patchlane in the environment the command runs")
        _sys.stderr.write(f"patchlane run: warning: {_sys.executable} cannot import patchlane "
                          f"({exc}): no entries are decided in this process\n")
        return
    except Exception as exc:  # strict mode: the registry was rejected at `import patchlane`
        _stop(exc)
    activate()
    chain(here)


def _stop(exc: BaseException, hint: str = "") -> None:
    # Raising from sitecustomize only prints "Error in sitecustomize" and runs the command
    # anyway; SystemExit becomes a fatal `site` error. A clean exit with the error's own code:
    code = int(getattr(exc, "exit_code", 3))
    _sys.stderr.write(f"patchlane run: {type(exc).__name__}: {exc}\n"
                      + (f"patchlane run: fix: {hint}\n" if hint else "")
                      + f"patchlane run: {_sys.executable} stops before the command runs "
                      f"(exit {code})\n")
    _sys.stderr.flush()
    _os._exit(code)


_patchlane_bootstrap()
del _patchlane_bootstrap

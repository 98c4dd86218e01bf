"""The ``patchlane`` command's first step: ``patchlane run`` with well-formed options goes
straight to ``exec``; everything else goes to the full parser (:mod:`patchlane.cli.main`).

``patchlane run`` is in front of every job, so it parses its few options by hand, builds the
command's environment (:mod:`patchlane.launch.environment`) and ``exec``s it without importing
argparse, the rest of the command line, or the startup (``import patchlane`` here only arms the
lazy start). Anything it does not recognise exactly (``--help``, an abbreviation, ``--opt=value``,
a missing value or command, a file that is not there, a command that cannot be executed) is
handed unchanged to the full parser, which answers as it always did: one parser decides every
message and exit code, this one only decides when it is not needed.
"""

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

_VALUED = {"--registry": "registry", "--reports": "reports", "--evidence": "evidence"}


def _fast_run(args: "Sequence[str]") -> "tuple[dict[str, object], list[str]] | None":
    """``(options, command)`` for ``patchlane run ARGS`` when every argument is one this
    parser reads exactly as argparse would; None otherwise."""
    registries: list[str] = []
    options: dict[str, object] = {"registry": registries, "strict": False, "reports": None,
                                  "evidence": None}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            command = list(args[i + 1:])
            break
        if arg == "--strict":
            options["strict"] = True
            i += 1
            continue
        if arg in _VALUED:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return None
            if arg == "--registry":  # repeatable: each file is added
                registries.append(args[i + 1])
            else:
                options[_VALUED[arg]] = args[i + 1]
            i += 2
            continue
        if arg.startswith("-"):
            return None  # --help, --registry=FILE, an abbreviation, a typo: argparse's to say
        command = list(args[i:])  # argparse.REMAINDER: the command starts at the first word
        break
    else:
        return None
    if not command:
        return None
    evidence = options["evidence"]
    if not all(os.path.isfile(path) for path in registries):
        return None
    if evidence is not None and not os.path.isdir(str(evidence)):
        return None
    return options, command


def _settings_readable(evidence: object = None) -> bool:
    """Whether `import patchlane` read every setting: the lazy start read them all to arm; a
    startup that ran at once says whether they could not be read (its startup error).
    ``evidence``: ``run --evidence``'s runs root, which the command's processes get as
    ``PATCHLANE_EVIDENCE``: settings that need it (``PATCHLANE_REQUIRE_EVIDENCE``) are read
    with it."""
    from ..lazy import arm

    if arm.why_not() is None:
        return True
    from .. import startup
    from ..common.errors import ControlsError

    if not isinstance(startup.startup_error(), ControlsError):
        return True
    from ..deciding.controls import readable_with_evidence

    return evidence is not None and readable_with_evidence(os.environ, str(evidence))


def main(argv: "Sequence[str] | None" = None) -> int:
    try:
        return _main(argv)
    except ImportError as error:  # wrapt, PyYAML, packaging... missing: one line, not a traceback
        from ..common.dependencies import say_missing

        code = say_missing(error)
        if code is None:
            raise
        return code


def _version_asked(args: "Sequence[str]") -> bool:
    """``patchlane --version`` (among the global options, before any command): answered here,
    as argparse would, since it needs nothing but the package: it still works when a
    dependency is missing, which is when a bug report asks for it."""
    for arg in args:
        if arg == "--version":
            return True
        if arg != "--full-width":
            return False
    return False


def _main(argv: "Sequence[str] | None" = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if _version_asked(args):
        from .._version import __version__

        sys.stdout.write(f"patchlane {__version__}\n")
        return 0
    if args[:1] == ["run"]:
        fast = _fast_run(args[1:])
        if fast is not None:
            options, command = fast
            from ..launch.activate import hand_over, summary_setting

            # settings that do not read (the exit line's switch included): the full parser
            # refuses them, as for every command
            if _settings_readable(options["evidence"]) and summary_setting() is not None:
                from ..launch.environment import launch_env

                env = launch_env(os.environ, **options)  # type: ignore[arg-type]
                hand_over(env)  # a nested `patchlane run`: the command prints the rank's line
                try:  # noqa: SIM105 - contextlib costs ~3 ms to import, in front of every job
                    os.execvpe(command[0], command, env)
                except OSError:
                    pass  # the full parser tries again and names what is wrong, with its code
    from .main import main as full

    return full(args)

"""patchlane: declared, gated, proven and tracked local fixes for upstream training-stack bugs.

``import patchlane`` at the top of a training script arms the startup: when a fresh index says which
top-level modules matter (patchlane.lazy), it installs one import hook for them and nothing
else; the registry, the gates and the post-import hooks load at the first import of one of
them, and each overlay is applied when its target module is imported. Without a fresh index
they load at once. It never imports torch or megatron itself.
"""

import os as _os  # loaded by the interpreter before any script: free here
import sys as _sys  # built in: free here

from .lazy import arm as _lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ._version import __version__
    from .common.errors import (
        ControlsError,
        DriftError,
        OverlayError,
        PatchlaneError,
        RegistryError,
        ReproducerError,
        StrictModeError,
        StrictOverlayError,
        UnknownEntryError,
        UsageError,
    )
    from .deciding.audit import Decision, Outcome
    from .deciding.ledger import CompatGateError, LedgerError
    from .deciding.reporting import EntryReport, Report
    from .loading import entry_id
    from .training.ranks import RankMismatchError

__all__ = [
    "CompatGateError",
    "ControlsError",
    "Decision",
    "DriftError",
    "EntryReport",
    "LedgerError",
    "Outcome",
    "OverlayError",
    "PatchlaneError",
    "RankMismatchError",
    "RegistryError",
    "Report",
    "ReproducerError",
    "StrictModeError",
    "StrictOverlayError",
    "UnknownEntryError",
    "UsageError",
    "__version__",
    "apply",
    "check_config",
    "entry_id",
    "hit_path",
    "hits",
    "report",
    "revert",
    "run_stamp",
    "verify_ranks",
]

# Every public name but the calls below is imported on first access: `import patchlane` in a
# process that imports no target loads nothing but the lazy start (patchlane.lazy), and naming
# an error or a record type costs nothing until it is used.
_LAZY = {
    "__version__": "_version",
    "CompatGateError": "deciding.ledger",
    "ControlsError": "common.errors",
    "Decision": "deciding.audit",
    "DriftError": "common.errors",
    "EntryReport": "deciding.reporting",
    "LedgerError": "deciding.ledger",
    "Outcome": "deciding.audit",
    "OverlayError": "common.errors",
    "PatchlaneError": "common.errors",
    "RankMismatchError": "training.ranks",
    "RegistryError": "common.errors",
    "Report": "deciding.reporting",
    "ReproducerError": "common.errors",
    "StrictModeError": "common.errors",
    "StrictOverlayError": "common.errors",
    "UnknownEntryError": "common.errors",
    "UsageError": "common.errors",
    "entry_id": "loading",
}
_SUBMODULES = frozenset({"startup"})
"""Submodules code reaches as attributes (``patchlane.startup.current()``) once loaded."""


def __getattr__(name: str) -> "Any":
    module = _LAZY.get(name)
    if module is None and name not in _SUBMODULES:
        # Also how `from . import x` asks for a submodule not imported yet: answered before
        # importlib is imported (the lazy start's modules are imported that way).
        raise AttributeError(f"module 'patchlane' has no attribute {name!r}")
    import importlib

    if module is None:
        return importlib.import_module(f".{name}", __name__)
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later lookups are plain module attributes
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def apply() -> None:
    """Re-walk the registry: idempotent; re-applies overlays lost to a reload or a revert."""
    from . import startup

    startup.current().apply()


def revert(entry_id: str) -> "Decision":
    """Restore the original target of ``entry_id`` in this process."""
    from . import startup

    return startup.current().revert(entry_id)


def hits(entry_id: str, path: str | None = None) -> int:
    """How many times the overlay of ``entry_id`` ran in this process; with ``path``, how many
    of those calls took that branch (as the overlay records with :func:`hit_path`)."""
    from . import startup

    audit = startup.current().audit
    return audit.hits[entry_id] if path is None else audit.paths[(entry_id, path)]


def hit_path(entry_id: str, path: str, reason: str | None = None) -> None:
    """Called by an overlay to record which branch a call took (e.g. "fused" vs "routed") and,
    with ``reason``, why: the latest reason per branch is in :func:`report` (``path_reasons``)
    and so in the sweep's receipts."""
    from . import startup

    audit = startup.current().audit
    audit.paths[(entry_id, path)] += 1
    if reason is not None:
        audit.path_reasons[(entry_id, path)] = reason


def verify_ranks(group: "Any" = None) -> str:
    """Compare the patch set across all ranks (a collective); raises on any difference.
    Runs by itself after ``torch.distributed.init_process_group`` unless
    ``PATCHLANE_VERIFY_RANKS=0``."""
    from .training.ranks import verify_ranks as _verify

    return _verify(group)


def run_stamp() -> "dict[str, Any]":
    """This process's run stamp: a JSON-serialisable record of its patch set, to store with
    checkpoints (:mod:`patchlane.training.checkpoint`). A stamp, not a receipt: a receipt is
    what a sweep case leaves in its run directory."""
    from .training.ranks import run_stamp as _stamp

    return _stamp()



def check_config(config: "Any") -> "list[Any]":
    """Run every compat gate on a run's configuration (a Megatron args namespace or a
    TransformerConfig); raises :class:`patchlane.deciding.ledger.CompatGateError` naming the
    upstream issue when a known-bad combination is configured. A gate disabled by
    PATCHLANE_DISABLE / PATCHLANE_ONLY is skipped (its result says so). Returns the per-gate
    results."""
    from . import startup
    from .deciding.ledger import check_config as _check

    decider = startup.current()
    return _check(config, list(decider.registry.entries), decider.left_out)


def report() -> "Report":
    """Everything decided in this process, as JSON-ready data (shape:
    :class:`patchlane.deciding.reporting.Report`)."""
    from . import startup
    from .deciding.reporting import build_report

    return build_report(startup.current(), startup.startup_error())


_SETTINGS = dict(_os.environ)
"""The environment as it was at `import patchlane`: what the startup reads its settings from, also
when it loads later, at a target's first import (a script that changes PATCHLANE_DISABLE after
its first line changes nothing, lazily or not)."""


def _load_lane() -> None:
    """The whole startup: registry, gates, hooks (patchlane.startup). At `import patchlane` unless
    the lazy start may wait (patchlane.lazy.arm), else at the first import of a target."""
    from .common.errors import PatchlaneError, exit_if_uncaught

    try:
        from . import startup

        startup.start(env=_SETTINGS, command=_COMMAND)
    except PatchlaneError as error:  # strict mode: uncaught, one line and the error's exit code
        exit_if_uncaught(error)
        raise
    except ImportError as error:  # wrapt, PyYAML or packaging missing: one line naming it
        from .common.dependencies import missing_dependency

        missing = missing_dependency(error)
        if missing is None:
            raise
        if _command_module() == "patchlane":
            # The command, through its first step: `--version` needs none of them, and a
            # command that does meets the same ImportError and says it in the same line, exit
            # 69 (patchlane.cli.entry). A bug report's first question is the version.
            return
        exit_if_uncaught(missing)
        raise missing from None


def _command_module() -> str:
    """Which way this process runs the ``patchlane`` command: ``"patchlane"`` for its script
    (``bin/patchlane``) or ``python -m patchlane``, both through its first step
    (patchlane.cli.entry); ``"patchlane.cli.main"`` for ``-m`` of the full parser; ``""``
    when it is not the command. While ``-m`` imports the package, ``sys.argv[0]`` is ``"-m"``:
    the interpreter's own arguments say which module runs."""
    argv: list[str] = getattr(_sys, "argv", None) or [""]  # an embedded one may have none
    if argv[0] != "-m":
        return "patchlane" if _os.path.basename(argv[0]) == "patchlane" else ""
    # The module's name is the interpreter's argument just before the script's own ones:
    # `-m patchlane`, `-Im patchlane`, or joined to its flags, `-mpatchlane`, `-Bmpatchlane`.
    original: list[str] = getattr(_sys, "orig_argv", [])
    module = original[-len(argv)] if len(original) > len(argv) else ""
    if module.startswith("-"):
        module = module[1:].partition("m")[2]
    return module if module in ("patchlane", "patchlane.cli.main") else ""


def _is_the_command() -> bool:
    """Whether this process is the ``patchlane`` command (:func:`_command_module`)."""
    return bool(_command_module())


_COMMAND = next((word for word in _sys.argv[1:] if not word.startswith("-")), "") \
    if _is_the_command() else None
"""This process is the ``patchlane`` command: its first word not an option (``--full-width``
takes no value; ``""`` for none), else None. The
command says a setting it cannot read itself; ``run``'s job says a refused registry file."""

if _COMMAND is not None and "logging" in _sys.modules:
    # The command's stdout is its output (`status --json` must parse). Logging this process set
    # up on stdout before now (a sitecustomize's `basicConfig(stream=sys.stdout)`) would carry
    # the startup's first line, logged below, and a target's lines there: stderr, from the start.
    from .deciding.logs import off_stdout as _off_stdout

    _off_stdout()

if not _lazy.arm(_load_lane):
    _load_lane()

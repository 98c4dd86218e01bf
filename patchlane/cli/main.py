"""Parse and dispatch; each command lives in its own module and returns an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from ..errors import PatchlaneError

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="patchlane", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("status", help="entries and the decision taken for each")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--no-import", action="store_true",
                   help="do not import target modules (show gates and pending hooks only)")

    p = sub.add_parser("show", help="everything the registry says about one entry")
    p.add_argument("id")

    p = sub.add_parser("fingerprint", help="print the current fingerprint of an entry's target")
    p.add_argument("id")
    p.add_argument("--source", type=Path, metavar="FILE",
                   help="fingerprint the target module's source file instead of importing it "
                   "(for releases that cannot be installed here)")

    p = sub.add_parser("reproduce", help="run one entry's reproducer")
    p.add_argument("id")
    p.add_argument("--without-overlay", action="store_true",
                   help="run against the unpatched upstream (expected to fail while guarding)")
    p.add_argument("--lane", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--world-size", type=int, action="append",
                   help="repeatable; default: every size the reproducer declares")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per case")

    p = sub.add_parser("sweep", help="run every reproducer both ways and print verdicts")
    p.add_argument("--lane", action="append", choices=("cpu", "cuda"),
                   help="repeatable; default: cpu, plus cuda when a GPU is present")
    p.add_argument("--only", action="append", metavar="ID", help="repeatable: limit to ids")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per case")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "status":
            from .status import run_status
            return run_status(args.json, not args.no_import)
        if args.command == "show":
            from .show import run_show
            return run_show(args.id)
        if args.command == "fingerprint":
            from .fingerprint import run_fingerprint
            return run_fingerprint(args.id, args.source)
        if args.command == "reproduce":
            from .reproduce import run_reproduce
            return run_reproduce(args.id, args.without_overlay, args.lane, args.world_size,
                                 args.timeout)
        if args.command == "sweep":
            from .sweep import run_sweep
            return run_sweep(args.lane, args.only, args.timeout, args.json)
    except PatchlaneError as exc:
        print(f"patchlane: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyError as exc:
        print(f"patchlane: error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    raise AssertionError(f"unhandled command {args.command!r}")


if __name__ == "__main__":
    sys.exit(main())

"""The entry point of `deltamerge`: parse, run the command, print its result or a one-line error."""

from __future__ import annotations

import sys
import traceback

from .parser import build_parser

EXIT_ERROR = 1  # the command could not do what was asked (argparse exits with 2 on usage errors)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from deltalake.exceptions import DeltaError  # imported after parsing: `--help` stays fast

    from ..errors import DeltaMergeError
    from ..model.secrets import command_line_secrets, redact_text
    from .catalog_names import with_catalog_table
    from .commands import COMMANDS
    from .render import print_json, render

    secrets = command_line_secrets(sys.argv[1:] if argv is None else argv)
    try:
        result = COMMANDS[args.command](with_catalog_table(args))
    except (DeltaMergeError, DeltaError, OSError) as exc:
        print(f"deltamerge {args.command}: error: {redact_text(str(exc), secrets)}", file=sys.stderr)
        return EXIT_ERROR
    except Exception:  # Spark's, a source's, or a bug: the traceback, without the command line's secrets
        print(redact_text(traceback.format_exc(), secrets), file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        print_json(result)
    else:
        render(args.command, result)
    return 0


def run() -> None:
    """`deltamerge` as a process: main()'s exit code, without the interpreter's own exit, where deltalake
    can abort a finished command (submit/process_exit.py)."""
    from ..submit.process_exit import exit_with

    exit_with(main)

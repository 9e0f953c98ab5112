"""The ``asicsim`` command. Nothing imports this module; it only calls the library."""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``asicsim`` parser with every command (``argv`` None), or for this command line: the
    command it names in full, the other layers' commands as their one-line help only."""
    from . import __version__
    from ._src.cli_catalog import add_cli as add_catalog_cli
    from ._src.cli_commands import LAYER_COMMANDS, command_help
    from ._src.cli_types import Parser

    parser = Parser(
        prog="asicsim", description="Reduced-precision accelerator emulator and cost model."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    add_catalog_cli(sub)
    # other layers register their own commands (options live beside their models); only the one
    # that runs is imported, the rest are listed from asicsim.cli_commands (a light --help)
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for module in dict.fromkeys(m for m, _ in LAYER_COMMANDS.values()):
        names = [n for n, (m, _) in LAYER_COMMANDS.items() if m == module]
        if chosen is None or chosen in names:
            importlib.import_module(module).add_cli(sub)
        else:
            for name in names:
                sub.add_parser(name, help=command_help(name))
    return parser


def _warning_line(message, category, filename, lineno, line=None) -> str:
    return f"asicsim: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser(argv).parse_args(argv)
    warnings.formatwarning = _warning_line  # one line a user reads, not our source line
    try:
        return args.func(args)
    except (ValueError, TypeError, OSError) as err:  # OSError: e.g. --out in a folder not writable
        print(f"asicsim {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

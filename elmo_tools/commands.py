"""Where the console commands of the tools start: `elmo-embed`, `elmo-analyze`, `elmo-convert` and `elmo-app`.

Each parses its command line first, with the parsers of `command_options` (standard library only), so that `--help`
and a mistyped option answer at once, and `elmo-embed` and `elmo-analyze` refuse a missing input or an unwritable
output as quickly (`early_checks`); then it imports the command's module, which imports torch and transformers
(seconds), and runs its `main` with the same arguments (`main` parses them again, for `python -m elmo_tools.embed`
and callers in Python). A signal during those seconds ends the command with one line, not a traceback.

The commands' modules are named here as strings, as console scripts name their functions: importing them is the
work a command's start does, after its options are known to be good.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from . import command_options, early_checks, export_options
from .interrupts import one_line_if_interrupted_while_starting

# command -> (the parser of its options, the module whose `main` runs it, the paths it refuses before that import)
COMMANDS: dict[str, tuple[Callable, str, Callable | None]] = {
    "elmo-embed": (command_options.embed_parser, "elmo_tools.embed", early_checks.check_embed_paths),
    "elmo-analyze": (command_options.analyze_parser, "elmo_tools.analysis", early_checks.check_analyze_paths),
    "elmo-convert": (command_options.convert_parser, "elmo_tools.convert", None),
    "elmo-app": (command_options.app_parser, "elmo_tools.app.server", None),
    "elmo-export": (export_options.export_parser, "elmo_tools.onnx_export", None),
}


def run(command: str, argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line) with `command`'s parser, which exits for `--help` and for usage
    errors (status 2), and refuse a bad path in one line (status 2, `early_checks`); then import the command's module
    and run its `main` on the same arguments."""
    parser, module, check_paths = COMMANDS[command]
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    if check_paths is not None:
        try:
            check_paths(args)
        except ValueError as error:  # the line the command's own logger writes (`LEVEL name: message`)
            sys.stderr.write(f"ERROR {command}: {error}\n")
            return 2
    with one_line_if_interrupted_while_starting():
        main = importlib.import_module(module).main
    return main(argv)


def embed(argv: Sequence[str] | None = None) -> int:
    return run("elmo-embed", argv)


def analyze(argv: Sequence[str] | None = None) -> int:
    return run("elmo-analyze", argv)


def convert(argv: Sequence[str] | None = None) -> int:
    return run("elmo-convert", argv)


def app(argv: Sequence[str] | None = None) -> int:
    return run("elmo-app", argv)


def export(argv: Sequence[str] | None = None) -> int:
    return run("elmo-export", argv)

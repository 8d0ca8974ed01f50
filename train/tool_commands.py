"""Where the console commands of the tools start: `elmo-embed`, `elmo-analyze`, `elmo-convert` and `elmo-app`.

Their code lives in `modeling_elmo/tools/`, and importing anything there first runs `modeling_elmo/__init__.py`,
which registers the Elmo classes with transformers' Auto classes and so imports torch and transformers (seconds).
Each command here parses its options first, with the parsers of `modeling_elmo/tools/command_options.py` loaded as
a lone file (it imports only the standard library), so that `--help` and a mistyped option answer at once; then it
runs the command's own `main`, which parses the same options again (for `python -m modeling_elmo.tools.embed` and
callers in Python) and does the work. A signal during the seconds of those imports ends the command with one line,
not a traceback (`finetune_cli.one_line_if_interrupted_while_starting`); `main` installs its own handling. The
training commands need no such door: `train/` imports nothing heavy at its top.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType


def _command_options() -> ModuleType:
    """`modeling_elmo/tools/command_options.py`, executed by its path: its package's `__init__` is not run."""
    package = importlib.util.find_spec("modeling_elmo")  # finds a top-level package without importing it
    path = Path(package.submodule_search_locations[0]) / "tools" / "command_options.py"
    spec = importlib.util.spec_from_file_location("_elmo_command_options", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _checked(argv: Sequence[str] | None, parser_name: str) -> list[str]:
    """The command line, after a parse that exits for `--help` and for usage errors (status 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    getattr(_command_options(), parser_name)().parse_args(argv)
    return argv


def _main_of(module: str):
    """The command's `main`, imported (torch and transformers: seconds) with SIGINT/SIGTERM meanwhile ending the
    command in one line. finetune_cli is imported here, not at the top: `--help` need not wait for it."""
    from .finetune_cli import one_line_if_interrupted_while_starting

    with one_line_if_interrupted_while_starting():
        return importlib.import_module(module).main


def embed(argv: Sequence[str] | None = None) -> int:
    argv = _checked(argv, "embed_parser")
    return _main_of("modeling_elmo.tools.embed")(argv)


def analyze(argv: Sequence[str] | None = None) -> int:
    argv = _checked(argv, "analyze_parser")
    return _main_of("modeling_elmo.tools.analysis")(argv)


def convert(argv: Sequence[str] | None = None) -> int:
    argv = _checked(argv, "convert_parser")
    return _main_of("modeling_elmo.tools.convert")(argv)


def app(argv: Sequence[str] | None = None) -> int:
    argv = _checked(argv, "app_parser")
    return _main_of("modeling_elmo.tools.app.server")(argv)

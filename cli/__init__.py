"""The command layer: every console command of the project is a row of `COMMANDS` (`table.py`), and runs in one
frame (`frame.py`): options parsed once, checked before torch is imported, logging, the interrupt guard and the exit
status done the same way for all.

    elmo-embed corpus.txt out.hdf5 --model MODEL        # a console script: pyproject.toml names `elmo_hf.cli:embed`
    python -m elmo_hf.cli embed corpus.txt out.hdf5 ...    # the same (and `torchrun ... -m elmo_hf.cli embed ...`)

    from elmo_hf.cli import run
    status = run("elmo-embed", ["corpus.txt", "out.hdf5", "--model", "tiny"])   # in this process: the exit status

This is the top layer of the project (docs/architecture.md, "Package layout"): it names the runs of `train` and
`elmo_hf.tools`; nothing below names it. Importing it imports the standard library and the option dataclasses only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from . import frame
from .table import COMMANDS

__all__ = ["COMMANDS", "main", "run"]


def run(name: str, argv: Sequence[str] | None = None) -> int:
    """Run the command `name` ("elmo-embed", or "embed") with `argv` (default: the process's command line) in this
    process; returns its exit status."""
    return frame.run(COMMANDS[_full_name(name)], argv)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m elmo_hf.cli NAME [options]`: the command NAME ("embed" or "elmo-embed")."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help") or _full_name(argv[0]) not in COMMANDS:
        listing = "\n".join(f"  {name[len('elmo-'):]:<28} {row.help}" for name, row in COMMANDS.items())
        stream = sys.stdout if argv and argv[0] in ("-h", "--help") else sys.stderr
        stream.write(f"usage: python -m elmo_hf.cli COMMAND [options]   (COMMAND --help: its options)\n\n{listing}\n")
        return 0 if stream is sys.stdout else 2
    return run(argv[0], argv[1:])


def _full_name(name: str) -> str:
    return name if name.startswith("elmo-") else f"elmo-{name}"


def __getattr__(attribute: str) -> Callable[[Sequence[str] | None], int]:
    """The console scripts' entry points: `elmo_hf.cli:finetune_ner` runs the row "elmo-finetune-ner"."""
    name = _full_name(attribute.replace("_", "-"))
    if name not in COMMANDS:
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")

    def entry_point(argv: Sequence[str] | None = None) -> int:
        return run(name, argv)

    entry_point.__name__ = attribute
    return entry_point

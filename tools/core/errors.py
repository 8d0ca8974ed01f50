"""The two ways a command's run ends in failure that it anticipated, as every command reports them (`elmo_hf.cli`'s
frame), and the two guards that turn a failed read of an input or write of an output into one of them:

* `InputError`: bad input (a file, a model name, an option's value). One line naming what was wrong, exit status 2,
  and nothing written. Every tool's own error for bad input is one (`EmbedError`, `ConversionError`,
  `ModelLoadError`, `OutputPathError`, the readers' `FileFormatError`, ...), so a caller in Python catches them all as
  `InputError` (or `ValueError`, which it is).
* `RunFailed`: the input was good but the run could not go on (a worker that dies at every try, a push that the Hub
  refused, a disk that filled up); one line saying what was kept, exit status 1.

The rule: only these two are one line, and only where the code raised them on purpose, at the place that knows what
went wrong. Any other exception (a plain `ValueError`, an `OSError`, a shape error inside the model) is a fault of
the program, not of its input: it ends the command with its traceback and exit status 1, so that a bug is never
reported as bad input. An `OSError` is the input's or the output's fault only while the command reads a file it was
given or writes one it was asked for: those places say so with `reading(path, option)` (an `InputError` naming the
path) and `writing(path, option)` (a `RunFailed` naming it). With `--verbose` the one line of an `InputError` or a
`RunFailed` is followed by its traceback.

An interruption (SIGINT, SIGTERM) is `elmo_hf.tools.core.interrupts.Interrupted`, not an error. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


class InputError(ValueError):
    """Bad input to a command: reported as one line (the message), exit status 2, nothing written."""


class FileFormatError(InputError):
    """An input file that is not what its reader expects (its columns, its records, its tags, its brackets), raised by
    the reader at the place that knows: the message names the file, or the line, and what is wrong. A caller turns
    it into its command's one line (naming the option that gave the file); any other exception from a reader is a
    bug, with its traceback."""


class RunFailed(RuntimeError):
    """A run that could not go on though its input was good: one line, exit status 1."""


@contextlib.contextmanager
def reading(path: str | os.PathLike, option: str = "") -> Iterator[None]:
    """An `OSError` in the block, which reads the input `path` the user gave (`option`: the option that names it,
    "--config_file"), becomes an `InputError` naming it: a file gone, unreadable, or not what it should be."""
    try:
        yield
    except OSError as error:
        raise InputError(f"{_named(path, option)}: cannot be read ({_reason(error)})") from error


@contextlib.contextmanager
def writing(path: str | os.PathLike, option: str = "") -> Iterator[None]:
    """An `OSError` in the block, which writes into the output `path` the user asked for, becomes a `RunFailed`
    naming it: the path was checked before the run, so a failure now is the disk's (full, gone, read-only)."""
    try:
        yield
    except OSError as error:
        raise RunFailed(f"could not write {_named(path, option)}: {_reason(error)}") from error


def _named(path, option: str) -> str:
    return f"{option} {path}" if option else str(path)


def _reason(error: OSError) -> str:
    """What went wrong, with the file the system named when it is not the path already said."""
    reason = error.strerror or str(error) or type(error).__name__
    return f"{reason}: {error.filename}" if error.strerror and error.filename else reason

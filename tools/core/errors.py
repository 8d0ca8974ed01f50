"""The two ways a command's run ends in failure, as every command reports them (`elmo_hf.cli`'s frame):

* `InputError`: bad input (a file, a model name, an option's value). One line naming what was wrong, exit status 2,
  and nothing written. Every tool's own error for bad input is one (`EmbedError`, `ConversionError`,
  `ModelLoadError`, `OutputPathError`, ...), so a caller in Python catches them all as `InputError` (or
  `ValueError`, which it is).
* `RunFailed`: the input was good but the run could not go on (a worker that dies at every try, a push that the Hub
  refused); one line saying what was kept, exit status 1.

An interruption (SIGINT, SIGTERM) is `elmo_hf.tools.core.interrupts.Interrupted`, not an error. Standard library only.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input to a command: reported as one line (the message), exit status 2, nothing written."""


class RunFailed(RuntimeError):
    """A run that could not go on though its input was good: one line, exit status 1."""

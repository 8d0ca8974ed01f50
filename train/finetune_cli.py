"""The doors of the fine-tuning commands (`elmo-finetune-classification`, `elmo-finetune-ner`, one per row of
`elmo_tools.tasks.TASKS`), and their frame: one line with exit status 2 for bad input, 130/143 for SIGINT/SIGTERM.

A door answers `--help` from the option dataclasses (`train.finetune_arguments`) and the task's row, in the time
Python takes to start; otherwise it imports its task's module (`row.module`, which imports torch, transformers and
datasets: seconds) and runs that module's `main` on the same arguments. Importing this module imports neither torch
nor transformers.
"""

from __future__ import annotations

import gc
import importlib
import logging
import sys
from collections.abc import Callable, Sequence

from elmo_tools.interrupts import Interrupted, InterruptGuard, one_line_if_interrupted_while_starting
from elmo_tools.tasks import TASKS

from .finetune_arguments import short_help, wants_help


class InputError(ValueError):
    """Bad input to a fine-tuning command (a file, a model name, an option's value): `run_command_line` reports it
    as one line and exits with status 2, before anything is written."""


class HelpShown(Exception):
    """--help was answered: nothing else to do."""


def command(task: str, argv: Sequence[str] | None = None) -> int:
    """The console script of `task` (a key of `TASKS`): `--help` from the dataclasses alone; anything else runs the
    task module's `main` through `run_command_line` (exit status 0, 2 or 130/143)."""
    row = TASKS[task]
    argv = sys.argv[1:] if argv is None else list(argv)
    if wants_help(argv) == "short":
        sys.stdout.write(short_help(row))
        return 0
    with one_line_if_interrupted_while_starting():
        module = importlib.import_module(row.module)
    return run_command_line(module.main, logging.getLogger(row.module), argv)


def classification(argv: Sequence[str] | None = None) -> int:
    """`elmo-finetune-classification`."""
    return command("sequence-classification", argv)


def ner(argv: Sequence[str] | None = None) -> int:
    """`elmo-finetune-ner`."""
    return command("token-classification", argv)


def qa(argv: Sequence[str] | None = None) -> int:
    """`elmo-finetune-qa`."""
    return command("question-answering", argv)


def run_command_line(main: Callable, logger: logging.Logger, argv: Sequence[str] | None = None) -> int:
    """Run a fine-tuning command's `main`: bad input is one line on stderr (no traceback) and exit status 2;
    SIGINT/SIGTERM one line saying what was kept and how to resume, exit status 130/143."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if wants_help(argv):
        try:
            main(argv)
        except HelpShown:
            pass
        return 0
    guard = InterruptGuard()
    try:
        with guard.installed():
            main(argv, guard=guard)
    except InputError as error:
        logger.error("%s", error)
        return 2
    except Interrupted as interrupted:
        logger.error("%s", getattr(interrupted, "report", None)
                     or f"interrupted by {interrupted.name} before training started: nothing was written")
        return interrupted.exit_code
    finally:
        end_distributed()
    return 0


def end_distributed() -> None:
    """Destroy torch.distributed's process group, if any, once the Trainer and its DDP wrapper are gone (call it
    after `main` returns): then the group's destructor runs while the interpreter is fully alive and with the GIL
    released, not at interpreter exit, where a gloo worker thread still freeing tensors can hang or crash it (the
    same teardown deadlock that `train.pretrain` avoids). Nothing to do where torch was never imported."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return
    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

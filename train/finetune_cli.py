"""The command-line frame of the fine-tuning commands: `--help` without torch, parsing with the commands' own
defaults, a quiet console, and one line with exit status 2 (bad input) or 130/143 (SIGINT/SIGTERM).

Importing this module imports neither torch nor transformers: `--help` answers at once, and the heavy imports
happen inside the functions once the help is not what was asked.
"""

from __future__ import annotations

import logging
import os
import sys

from elmo_tools.interrupts import Interrupted, InterruptGuard

from .finetune_arguments import TRAINING_DEFAULTS, short_help, wants_help


class InputError(ValueError):
    """Bad input to a fine-tuning command (a file, a model name, an option's value): `run_command_line` reports it
    as one line and exits with status 2, before anything is written."""


class HelpShown(Exception):
    """--help was answered: nothing else to do."""


PROGRAMS = {"classification": "elmo-finetune-classification", "tagging": "elmo-finetune-ner"}


def parse_arguments(dataclass_types, argv, task: str, description: str, logger) -> tuple:
    """Parse the command line (or a single JSON file) into the dataclasses and a `TrainingArguments` (last),
    with the command's defaults (`TRAINING_DEFAULTS[task]`) where the user gave none; set up a quiet, rank-aware
    console. `--help` is answered from the dataclasses alone (`HelpShown`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    asked = wants_help(argv)
    if asked == "short":
        sys.stdout.write(short_help(PROGRAMS[task], description, dataclass_types, task))
        raise HelpShown
    import torch
    from transformers import HfArgumentParser, TrainingArguments

    dataclass_types = (*dataclass_types, TrainingArguments)
    parser = HfArgumentParser(dataclass_types, prog=PROGRAMS[task], description=description)
    # No accelerator: pinned memory has nothing to speed up, and torch warns about it on every data loader.
    defaults = {**TRAINING_DEFAULTS[task], "dataloader_pin_memory": torch.cuda.is_available()}
    parser.set_defaults(**defaults)
    if asked == "all":
        parser.print_help()
        raise HelpShown
    if len(argv) == 1 and argv[0].endswith(".json"):
        import json

        with open(os.path.abspath(argv[0]), encoding="utf-8") as f:
            parsed = parser.parse_dict({**defaults, **json.load(f)})
    else:
        parsed = parser.parse_args_into_dataclasses(argv)
    _check_encoding(parsed)
    _set_up_logging(parsed[-1], any(getattr(p, "verbose", False) for p in parsed), logger)
    return tuple(parsed)


def _check_encoding(parsed) -> None:
    import argparse

    from elmo_tools.text_files import checked_encoding

    for arguments in parsed:
        if hasattr(arguments, "encoding"):
            try:
                arguments.encoding = checked_encoding(arguments.encoding)
            except argparse.ArgumentTypeError as error:
                raise InputError(f"--encoding: {error}") from None


def _set_up_logging(training_args, verbose: bool, logger) -> None:
    """INFO lines from the commands; transformers and torch say only what a user can act on, unless `verbose`.
    Several processes: each line names its rank, and every process says its rank and the world size."""
    import warnings

    import transformers

    several = training_args.world_size > 1
    rank = f" [rank {training_args.process_index}]" if several else ""
    logging.basicConfig(
        format=f"%(asctime)s %(levelname)s{rank} %(name)s: %(message)s",
        level=logging.DEBUG if verbose else logging.INFO if training_args.should_log else logging.WARNING,
        force=True,
    )
    if verbose:
        transformers.logging.set_verbosity_info()
    else:
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()  # loading and writing a small model: no bar needed
        # Trainer sets transformers' verbosity from --log_level ("passive" keeps the one set here).
        warnings.filterwarnings("ignore", message=".*pin_memory.*")
    if several:
        logger.warning("Process rank %d of world size %d (device %s)",
                       training_args.process_index, training_args.world_size, training_args.device)
    else:
        logger.debug("one process, device %s", training_args.device)


def run_command_line(main, logger, argv: list[str] | None = None) -> int:
    """Run a fine-tuning command's `main`: bad input is one line on stderr (no traceback) and exit status 2;
    SIGINT/SIGTERM one line saying what was kept and how to resume, exit status 130/143."""
    argv = sys.argv[1:] if argv is None else argv
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
    same teardown deadlock that `train.pretrain` avoids)."""
    if "torch" not in sys.modules:
        return
    import gc

    import torch.distributed as dist

    gc.collect()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()

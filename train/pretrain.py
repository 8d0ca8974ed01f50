"""Pretrain an ELMo biLM on a text corpus with Accelerate: CPU, one GPU, or many (DDP).

    elmo-pretrain --train_file 'corpus/*.txt' --validation_file valid.txt --output_dir out \\
        --preset small --max_steps 10000
    accelerate launch -m train.pretrain ...        # or: torchrun --nproc_per_node N -m train.pretrain ...

The output folder is a Hugging Face model folder (`AutoModel` gives the feature model,
`AutoModelForPreTraining` the biLM with its softmax) with the tokenizer and the word vocabulary,
`eval_results.json`, `train_results.json`, `train_log.jsonl` and `checkpoints/`. Ctrl-C (SIGINT) or SIGTERM
writes a checkpoint of the step reached and ends with exit status 130/143; `--resume_from_checkpoint latest`
goes on from it.

This module is the command's door: it parses the arguments (`train/pretrain_args.py`, the standard library only) and
sets up the console, so that `--help`, a bad option and a corpus or output folder that is not there answer without
loading torch; then it imports the run
(`train/pretrain_run.py`, torch and Accelerate) and hands it the arguments.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

from elmo_tools.interrupts import one_line_if_interrupted_while_starting
from elmo_tools.output_paths import check_writable_folder
from elmo_tools.text_files import resolve_files

from .arguments import parse_dataclass
from .pretrain_args import PretrainArguments

__all__ = ["PretrainArguments", "main"]

logger = logging.getLogger("train.pretrain")

# Libraries whose INFO lines and progress bars are shown only with --verbose.
_LIBRARIES = ("accelerate", "datasets", "transformers", "huggingface_hub", "modeling_elmo", "elmo_tools")


def _configure_logging(verbose: bool) -> None:
    """INFO lines of this command on the first process (the others say only what goes wrong); the libraries' INFO
    lines and progress bars with --verbose only."""
    first_process = os.environ.get("RANK", "0") == "0"
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        level=logging.INFO if first_process else logging.WARNING)
    if verbose:
        logging.getLogger("train").setLevel(logging.DEBUG if first_process else logging.WARNING)
        return
    for name in _LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING)
    logging.getLogger("elmo_tools.loading").setLevel(logging.INFO)  # what --init_from loaded, in a line


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse_dataclass(PretrainArguments, argv, prog="elmo-pretrain",
                               description="Pretrain an ELMo biLM on a text corpus (docs/pretraining.md).")
    except (ValueError, OSError) as error:
        _configure_logging(verbose=False)
        logger.error("%s", error)
        return 2
    _configure_logging(args.verbose)
    try:  # a mistyped path answers now, not after the seconds of importing torch; the run checks them again
        resolve_files(args.train_file + (args.validation_file or []))
        check_writable_folder(args.output_dir, "--output_dir")
    except (ValueError, OSError) as error:
        logger.error("%s", error)
        return 2
    with one_line_if_interrupted_while_starting():  # importing torch takes seconds
        run = importlib.import_module("train.pretrain_run")
    return run.main(args)


if __name__ == "__main__":
    sys.exit(main())

"""Pretrain an ELMo biLM on a text corpus with Accelerate: CPU, one GPU, or many (DDP).

    elmo-pretrain --train_file 'corpus/*.txt' --validation_file valid.txt --output_dir out \\
        --preset small --max_steps 10000
    accelerate launch -m train.pretrain ...        # or: torchrun --nproc_per_node N -m train.pretrain ...

The output folder is a Hugging Face model folder (`AutoModel` gives the feature model,
`AutoModelForPreTraining` the biLM with its softmax) with the tokenizer and the word vocabulary,
`eval_results.json`, `train_results.json`, `train_log.jsonl` and `checkpoints/`. Ctrl-C (SIGINT) or SIGTERM
writes a checkpoint of the step reached and ends with exit status 130/143; `--resume_from_checkpoint latest`
goes on from it.

This module is the command line: the arguments are `train/pretrain_args.py`, the run `train/pretrain_run.py`,
imported once the arguments are parsed, so that `--help` answers without loading torch.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from .arguments import parse_dataclass
from .pretrain_args import PretrainArguments

__all__ = ["PretrainArguments", "main", "train"]

logger = logging.getLogger("train.pretrain")

# Libraries whose INFO lines and progress bars are shown only with --verbose.
_LIBRARIES = ("accelerate", "datasets", "transformers", "huggingface_hub", "modeling_elmo", "elmo_tools")


def train(args: PretrainArguments, guard: Any = None) -> dict:
    """Pretrain, evaluate and save the model folder (and push it); return the run's summary and its perplexities.
    `guard`: the `checkpoints.StopGuard` that `main` installs, so that SIGINT/SIGTERM stop the run at a step
    boundary after a checkpoint (without one, Ctrl-C raises KeyboardInterrupt as usual)."""
    from .pretrain_run import train as run_training

    return run_training(args, guard)


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
    if not args.verbose:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # "Writing model shards" and the like
    from elmo_tools.hub_utils import HubPushError
    from elmo_tools.interrupts import Interrupted

    from .checkpoints import StopGuard
    from .pretrain_run import NonFiniteLossError

    guard = StopGuard()
    try:
        with guard.installed():
            train(args, guard)
    except Interrupted as stop:  # `train` has said what it kept, on the first process
        return stop.exit_code
    except (FileNotFoundError, FileExistsError, IsADirectoryError, ValueError, NonFiniteLossError) as error:
        logger.error("%s", error)
        return 2
    except HubPushError as error:
        logger.error("the model folder is in %s, but the push failed: %s", args.output_dir, error)
        return 2
    except Exception:
        # Another process was stopped by the signal while this one waited for it in a collective (gloo then fails
        # here with "connection closed"): the first process says what was kept.
        if guard.received:
            return 128 + guard.received
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Every console command of the project, a row each: its options, the checks before torch is imported, its run.

    elmo-embed, elmo-analyze, elmo-convert, elmo-app      the tools (`elmo_hf.tools`)
    elmo-export                                          the ONNX graph of a saved model
                                                         (`elmo_hf.tools.export.onnx_export`)
    elmo-pretrain, elmo-demo                             pretraining (`elmo_hf.train.pretrain_run`,
                                                         `elmo_hf.train.demo_run`)
    elmo-finetune TASK                                   fine-tuning, for every task of `elmo_hf.train.tasks.TASKS`
    elmo-finetune-classification, -ner, -qa              the same for the tasks that have a command of their own

pyproject.toml's console scripts name these rows (`elmo_hf.cli:embed` is the row "elmo-embed"; tests/test_commands.py
checks that the two lists agree). A command's run is named by a string, "module:function", imported only after its
options are parsed and checked, so that `--help` and a bad path answer before torch is. The layers below this one
never name it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence

from elmo_hf.tools.core import early_checks
from elmo_hf.tools.core.arguments import parse_options
from elmo_hf.tools.core.command_options import AnalyzeOptions, AppOptions, ConvertOptions
from elmo_hf.tools.core.export_options import ExportOptions
from elmo_hf.tools.embedding.embed_plan import EmbedOptions, check_options
from elmo_hf.train.demo_args import DemoArguments
from elmo_hf.train.finetune_arguments import parse_finetune
from elmo_hf.train.pretrain_args import PretrainArguments
from elmo_hf.train.tasks import TASKS, module_name

from .frame import Command


def _parser(options: type, prog: str, description: str | None = None) -> Callable[[Sequence[str]], object]:
    description = description or inspect.cleandoc(options.__doc__ or "").split(": ", 1)[-1]
    return lambda argv: parse_options(options, argv, prog=prog, description=description)


def _finetune(argv: Sequence[str]):
    """`elmo-finetune TASK ...`: the task first, then its command's options."""
    argv = list(argv)
    helps = ("-h", "--help", "--help_all", "--help-all")  # --help_all: each task's own lists its TrainingArguments
    if not argv or argv[0] in helps or argv[0] not in TASKS:
        tasks = ", ".join(TASKS)
        if argv and argv[0] not in helps:
            sys.stderr.write(f"elmo-finetune: unknown task {argv[0]!r}: one of {tasks}\n")
            raise SystemExit(2)
        sys.stdout.write(f"usage: elmo-finetune TASK [options]   (elmo-finetune TASK --help: the task's options)\n\n"
                         f"Fine-tune an ELMo task head with transformers.Trainer. TASK is one of: {tasks}.\n")
        raise SystemExit(0 if argv else 2)
    return parse_finetune(argv[0], argv[1:])


def _embed_checks(options: EmbedOptions) -> None:
    check_options(options)  # the options taken together: --batch_tokens against --max_tokens, Ray's ...
    early_checks.check_embed_paths(options)


def _finetune_checks(options) -> None:
    for option in ("train_file", "validation_file", "test_file"):
        early_checks.check_input_file(getattr(options.data, option, None), option)
    if options.command.output_dir is not None:
        early_checks.check_writable_folder(options.command.output_dir, "--output_dir")


def _task_command(task: str) -> Command:
    return Command(
        TASKS[task].command, parse=lambda argv: parse_finetune(task, argv), run="elmo_hf.train.finetune_run:run",
        logger=module_name(task), checks=_finetune_checks, timestamps=True,
        help=f"elmo-finetune {task}",
    )


COMMANDS: dict[str, Command] = {row.name: row for row in (
    Command("elmo-embed", parse=_parser(EmbedOptions, "elmo-embed"), run="elmo_hf.tools.embedding.embed:run",
            logger="elmo-embed",
            checks=_embed_checks, help="ELMo vectors of every line of a corpus"),
    Command("elmo-analyze", parse=_parser(AnalyzeOptions, "elmo-analyze"), run="elmo_hf.tools.analysis:run",
            logger="elmo-analyze", checks=early_checks.check_analyze_paths, help="how contextual each layer is"),
    Command("elmo-convert", parse=_parser(ConvertOptions, "elmo-convert"), run="elmo_hf.tools.conversion.convert:run",
            logger="elmo_hf.tools.conversion.convert", checks=early_checks.check_convert_paths, quiet=True,
            download_bars=True,
            help="original ELMo weights to a Hugging Face folder"),
    Command("elmo-app", parse=_parser(AppOptions, "elmo-app"), run="elmo_hf.tools.app.server:run", logger="elmo-app",
            help="the demo page"),
    Command("elmo-export", parse=_parser(ExportOptions, "elmo-export"), run="elmo_hf.tools.export.onnx_export:run",
            logger="elmo-export", checks=early_checks.check_model_path,
            help="the ONNX graph of a saved model (ONNX Runtime, OpenVINO)"),
    Command("elmo-pretrain", parse=_parser(PretrainArguments, "elmo-pretrain",
                                           "Pretrain an ELMo biLM on a text corpus (docs/pretraining.md)."),
            run="elmo_hf.train.pretrain_run:run", logger="elmo-pretrain", timestamps=True,
            checks=lambda args: early_checks.check_corpus_paths(args.train_file, args.validation_file,
                                                                args.output_dir),
            help="pretrain a biLM"),
    Command("elmo-demo", parse=_parser(DemoArguments, "elmo-demo",
                                       "Train a small ELMo and show what contextual vectors are for."),
            run="elmo_hf.train.demo_run:run", logger="elmo-demo", timestamps=True,
            checks=lambda args: early_checks.check_corpus_paths(args.train_file, args.validation_file,
                                                                args.output_dir),
            help="train a small ELMo on a generated corpus and show its senses"),
    Command("elmo-finetune", parse=_finetune, run="elmo_hf.train.finetune_run:run", logger="elmo_hf.train.finetune_run",
            checks=_finetune_checks, timestamps=True, help="fine-tune a task head: elmo-finetune TASK ..."),
    *(_task_command(task) for task in TASKS if TASKS[task].command),
)}

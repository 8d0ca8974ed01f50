"""The options of the fine-tuning commands, parsed before torch or transformers is imported, and their `--help`.

A command's options are `ModelArguments`, its task's head option (`head_arguments`, from its `FineTuningTask`), its
task's data options (the task's `data_options`, in its module under `train/tasks/`), `CommandArguments`, and
transformers' `TrainingArguments`, which only `transformers.HfArgumentParser` parses (in the run, once transformers
is imported: `elmo_hf.train.finetune_run.training_arguments`). `parse_finetune` parses the first four
(`elmo_hf.tools.core.arguments`) and keeps the rest of the command line for `TrainingArguments`, so that `--help`, a
mistyped option of ours and a missing file answer in the time Python takes to start. `--help_all` lists every
`TrainingArguments` option (it imports transformers, so it takes seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from elmo_hf.tools.core.arguments import at_least, check_fields, options_parser, parse_options
from elmo_hf.tools.core.command_options import encoding_option
from elmo_hf.tools.core.config_choices import CHOICES, choices_text

from .tasks import TASKS, FineTuningTask
from .time_budget import max_train_time_option
from .training_fields import TrainingField, imported_fields, source_fields

# The TrainingArguments options worth listing in the short --help (every other one is accepted too), with
# transformers' own help and default (`training_fields`), the task's default where it has one.
COMMON_TRAINING_OPTIONS = (
    "do_predict", "num_train_epochs", "max_steps", "learning_rate", "lr_scheduler_type", "warmup_steps",
    "per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps", "eval_strategy",
    "save_strategy", "save_steps", "resume_from_checkpoint", "seed", "use_cpu", "logging_steps", "disable_tqdm",
    "report_to",
)
# Every task's defaults for transformers' options, beside the task's own (`training_defaults`): transformers' bar
# (its default hides it where its logging is quieter than warnings, as the commands set it) and a loss line every
# 10 steps, not 500 (and at least every 30 s: `loss_lines_callback`); a CPU run went minutes without a line.
# transformers evaluates every logging_steps where eval_steps is not given (--eval_strategy steps): 500, as before.
COMMAND_TRAINING_DEFAULTS = {"disable_tqdm": False, "logging_steps": 10, "eval_steps": 500}


def training_defaults(row: FineTuningTask) -> dict:
    """The defaults of transformers' options in `row`'s command."""
    return {**COMMAND_TRAINING_DEFAULTS, **row.training_defaults}


# What an option does in these commands beyond transformers' help (which speaks of Trainer).
MEANING_HERE = {
    "do_predict": "Here: write the predicted labels of --test_file (with no --train_file: of an already fine-tuned "
                  "model).",
    "eval_strategy": "Here: no evaluates once, at the end.",
    "resume_from_checkpoint": "Here: a checkpoint folder, OUTPUT_DIR/checkpoint-N.",
}


@dataclass
class ModelArguments:
    """Which biLM to start from and how the head uses it. Options left unset keep the model's saved config."""

    model_name_or_path: str = field(
        metadata={"help": "A model folder (converted, pretrained or already fine-tuned), a Hub id, or a preset name "
                  "(tiny, small, medium, original) for a randomly initialised biLM.", "aliases": ["--model"]}
    )
    tokenizer_name: str | None = field(default=None,
                                       metadata={"help": "Tokenizer folder or Hub id, if not the model's."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow the model's own code from the Hub."})
    freeze_bilm: bool | None = field(default=None, metadata={"help": "Keep the biLM fixed (default) or fine-tune it."})
    scalar_mix: str | None = field(default=None, metadata={"help": f"{choices_text('scalar_mix')}.",
                                                           "choices": CHOICES["scalar_mix"]})
    scalar_mix_parameters: list[float] | None = field(
        default=None, metadata={"help": "L + 1 pre-softmax layer weights for --scalar_mix fixed."}
    )
    scalar_mix_layer_norm: bool | None = field(default=None, metadata={"help": "Layer norm before mixing."})
    scalar_mix_l2_coef: float | None = field(default=None, metadata={"help": "L2 on the mix weights (0.001)."})
    representation_dropout: float | None = field(default=None, metadata={"help": "Dropout on the ELMo vectors (0.5)."})
    keep_sentence_boundaries: bool | None = field(default=None, metadata={"help": "Pool over <S>/</S> too."})
    word_embedding_dim: int | None = field(default=None, metadata={
        "help": "Concatenate a trainable hashed word embedding of this size (0 = none).", "type": at_least(0)})
    word_embedding_buckets: int | None = field(default=None, metadata={
        "help": "Rows of the hashed word embedding.", "type": at_least(1)})
    head_hidden_size: int | None = field(default=None, metadata={
        "help": "Size of the head's biLSTM / attention.", "type": at_least(1)})
    bilm_dropout: float | None = field(default=None, metadata={"help": "biLM dropout while fine-tuning it."})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Re-initialise saved weights of other shapes than the model's. Not needed "
                                         "for other labels: a saved head goes on by label name."}
    )

    def config_overrides(self) -> dict:
        names = ("freeze_bilm", "scalar_mix", "scalar_mix_parameters", "scalar_mix_layer_norm", "scalar_mix_l2_coef",
                 "representation_dropout", "keep_sentence_boundaries", "word_embedding_dim",
                 "word_embedding_buckets", "head_hidden_size")
        overrides = {name: getattr(self, name) for name in names if getattr(self, name) is not None}
        if self.scalar_mix is not None and self.scalar_mix != "fixed" and self.scalar_mix_parameters is None:
            overrides["scalar_mix_parameters"] = None  # a saved fixed mix does not leak into another kind
        if self.bilm_dropout is not None:
            overrides["dropout"] = self.bilm_dropout
        return overrides


@dataclass
class CommandArguments:
    """What every fine-tuning command reads besides the model, the data and the training loop."""

    output_dir: str | None = field(default=None, metadata={
        "help": "Where the model, tokenizer, metrics, checkpoints and predictions are written (a predict-only run "
                "with --predictions_file needs none)."})
    encoding: str = encoding_option("the input files")
    train_encoding: str | None = encoding_option(default=None, help="Encoding of --train_file alone, where the "
                                                 "files of a run differ (default: --encoding).")
    validation_encoding: str | None = encoding_option(default=None, help="Encoding of --validation_file alone "
                                                      "(default: --encoding).")
    test_encoding: str | None = encoding_option(default=None, help="Encoding of --test_file alone (default: "
                                                "--encoding).")
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace what --output_dir holds (another run's model, metrics, checkpoints), or an existing "
                "predictions file; without it such a folder is refused."})
    predictions_file: str | None = field(
        default=None, metadata={"help": "Where --do_predict writes (default OUTPUT_DIR/predictions.txt)."}
    )
    verbose: bool = field(default=False, metadata={"help": "Show transformers' own warnings and load reports."})
    max_train_time: str | None = max_train_time_option(
        "with a checkpoint of that step; then save, evaluate and predict as at the end. Counted over the whole run, "
        "resumed runs included (train/time_budget_callback.py).")

    def __post_init__(self):
        check_fields(self)  # the fields' converters (--encoding ..., --max_train_time) for a caller in Python


# A task's data options (its `data_options`). Every command reads DATA_FIELDS (train/finetune_run.py), and
# `min_train_steps` where the dataclass has it; the task's own module reads the others.
DATA_FIELDS = ("train_file", "validation_file", "test_file", "word_split", "max_train_samples", "max_eval_samples")


@dataclass
class FineTuneOptions:
    """A fine-tuning command's options, parsed: ours, and the words of the command line (or the JSON file's fields)
    left for transformers' `TrainingArguments`."""

    task: str
    model: ModelArguments
    head: object  # the dataclass of `head_arguments(row)`
    data: object  # the task's `data_options`
    command: CommandArguments
    training: list[str] | dict

    @property
    def verbose(self) -> bool:
        return self.command.verbose


@functools.cache  # one class per task: its option specs are read once (elmo_hf.tools.core.arguments.option_specs)
def head_arguments(row: FineTuningTask) -> type:
    """The dataclass of the task's head option (`row.head_option`, e.g. `--classifier_pooling`): None unless
    given, and then `row.head_default` for a new head and the saved value for a fine-tuned folder."""
    help_text = (f"{row.head_help} (default: {row.head_default} for a new head, the saved one for a fine-tuned "
                 "folder).")
    if row.new_head_defaults:
        help_text += " A new head also gets " + ", ".join(f"--{key} {value}" for key, value in
                                                          row.new_head_defaults.items()) + " unless given."
    # the configuration's values, refused when the command line is parsed (a task's own head option may have none)
    choices = {"choices": CHOICES[row.head_option]} if row.head_option in CHOICES else {}
    return dataclasses.make_dataclass(
        f"{row.name.title().replace('-', '')}HeadArguments",
        [(row.head_option, str | None, field(default=None, metadata={"help": help_text, **choices}))],
        namespace={"__module__": __name__},
    )


def command_dataclasses(row: FineTuningTask) -> tuple[type, ...]:
    """The option dataclasses of the task's command, in the order `--help` lists them and parsing returns them:
    model, head, data, command (`TrainingArguments` follows them in the run)."""
    return ModelArguments, head_arguments(row), row.data_options, CommandArguments


def command_name(row: FineTuningTask) -> str:
    return row.command or f"elmo-finetune {row.name}"


def parse_finetune(task: str, argv: Sequence[str]) -> FineTuneOptions:
    """The options of `task`'s command from `argv`, or from a single JSON file. `--help` prints the short help and
    `--help_all` every option (SystemExit(0)); a usage error of our options (an encoding too) is a one-line
    `UsageError`, before torch is imported. What is left (transformers' `TrainingArguments` options, and any
    mistyped one) is parsed by the run."""
    row = TASKS[task]
    argv = list(argv)
    asked = wants_help(argv)
    if asked is not None:
        sys.stdout.write(short_help(row) if asked == "short" else full_help(row))
        raise SystemExit(0)
    (model, head, data, command), rest = parse_options(
        command_dataclasses(row), argv, known_only=True, prog=command_name(row), description=row.description,
        allow_abbrev=False)
    return FineTuneOptions(task, model, head, data, command, rest)


def training_parser(row: FineTuningTask):
    """transformers' `HfArgumentParser` of `TrainingArguments`, with the task's defaults. Imports transformers
    (seconds)."""
    from transformers import HfArgumentParser, TrainingArguments

    parser = HfArgumentParser(TrainingArguments, prog=command_name(row), description=row.description)
    parser.set_defaults(**training_defaults(row))
    return parser


def wants_help(argv: list[str]) -> str | None:
    """"short" for -h/--help, "all" for --help_all, None otherwise."""
    if "--help_all" in argv or "--help-all" in argv:
        return "all"
    return "short" if "-h" in argv or "--help" in argv else None


def short_help(row: FineTuningTask) -> str:
    """The --help text: the command's own options and the common training options, read from transformers' source
    (no import: seconds saved)."""
    read = source_fields(COMMON_TRAINING_OPTIONS)
    common = [read.get(name, TrainingField(name, None, None)) for name in COMMON_TRAINING_OPTIONS]
    return _help(row, common, "Every other transformers TrainingArguments option is accepted too: --help_all lists "
                              "them.")


def full_help(row: FineTuningTask) -> str:
    """The --help_all text: the command's own options and every `TrainingArguments` option. Imports transformers
    (seconds)."""
    ours = {item.name for cls in command_dataclasses(row) for item in dataclasses.fields(cls)}
    every = [declared for name, declared in imported_fields().items() if name not in ours]
    return _help(row, every, f"Transformers {_version('transformers')}'s TrainingArguments; {command_name(row)} "
                             "--help lists the common ones.")


def _help(row: FineTuningTask, training: Sequence[TrainingField], epilog: str) -> str:
    """The help text of `row`'s command: its own options (from the dataclasses), then the `TrainingArguments`
    fields `training`, each with transformers' help, what it means here, and its default in this command (the
    task's, else transformers'; None or "" is not shown)."""
    prog = command_name(row)
    parser = options_parser(
        command_dataclasses(row), prog=prog, description=row.description,
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        usage=f"{prog} --model_name_or_path MODEL [--train_file FILE] [--validation_file FILE] "
              "[--do_predict --test_file FILE] --output_dir DIR [options]",
        epilog=epilog,
    )
    group = parser.add_argument_group("training (transformers TrainingArguments)")
    for name, text, default in training:
        default = training_defaults(row).get(name, getattr(default, "value", default))  # an enum: its value
        shown = " ".join(part for part in (text, MEANING_HERE.get(name)) if part)
        if isinstance(default, float):
            shown += f" (default {default:g}{row.epochs_note if name == 'num_train_epochs' else ''})"
        elif default not in (None, "", []):
            shown += f" (default {default})"
        group.add_argument(f"--{name}", metavar=name.upper(), help=shown.strip().replace("%", "%%"))
    group.add_argument("-h", "--help", action="store_true", help="This help.")
    group.add_argument("--help_all", action="store_true", help="Every option (imports transformers: slower).")
    return parser.format_help()


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)

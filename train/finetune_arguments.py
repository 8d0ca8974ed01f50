"""The options of the fine-tuning commands, parsed before torch or transformers is imported, and their `--help`.

A command's options are `ModelArguments`, its task's head option (`head_arguments`, from its `FineTuningTask`), its
task's data options (the task's `data_options`, in its module under `train/tasks/`), `CommandArguments`, and
transformers' `TrainingArguments`, which only `transformers.HfArgumentParser` parses (in the run, once transformers
is imported: `elmo_hf.train.finetune_run.training_arguments`). `parse_finetune` parses the first four (`elmo_hf.tools.core.arguments`)
and keeps the rest of the command line for `TrainingArguments`, so that `--help`, a mistyped option of ours and a
missing file answer in the time Python takes to start. `--help_all` lists every `TrainingArguments` option (it
imports transformers, so it takes seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from elmo_hf.tools.core.arguments import options_parser, parse_options

from .tasks import TASKS, FineTuningTask
from .time_budget import parse_duration

# The TrainingArguments options worth listing in the short --help (every other one is accepted too).
COMMON_TRAINING_OPTIONS = (
    ("do_predict", "Write the predicted labels of --test_file (with no --train_file: of an already fine-tuned "
                   "model)."),
    ("num_train_epochs", "Epochs (default {num_train_epochs:g}{epochs_note})."),
    ("max_steps", "Stop after this many optimizer steps (overrides the epochs)."),
    ("learning_rate", "Peak learning rate (default {learning_rate:g})."),
    ("lr_scheduler_type", "linear (default), cosine, constant, ..."),
    ("warmup_steps", "Warm-up: steps, or a fraction of the steps below 1 (default {warmup_steps:g})."),
    ("per_device_train_batch_size", "Sentences per step and process (default {per_device_train_batch_size})."),
    ("per_device_eval_batch_size", "Sentences per evaluation or prediction batch."),
    ("gradient_accumulation_steps", "Steps whose gradients are summed before an update."),
    ("eval_strategy", "no (default: evaluate once at the end), steps or epoch."),
    ("save_strategy", "steps (default, every --save_steps), epoch or no: checkpoints to resume from."),
    ("save_steps", "Steps between checkpoints (default 500)."),
    ("resume_from_checkpoint", "A checkpoint folder (OUTPUT_DIR/checkpoint-N) to continue from."),
    ("seed", "Seed of the head's initialisation and of the data order (default 42)."),
    ("use_cpu", "Train on the CPU even when a GPU is there."),
    ("logging_steps", "Steps between loss lines."),
    ("disable_tqdm", "No progress bars."),
    ("report_to", "none (default), tensorboard, wandb, ..."),
)


@dataclass
class ModelArguments:
    """Which biLM to start from and how the head uses it. Options left unset keep the model's saved config."""

    model_name_or_path: str = field(
        metadata={"help": "A model folder (converted, pretrained or already fine-tuned), a Hub id, or a preset name "
                  "(tiny, small, medium, original) for a randomly initialised biLM.", "aliases": ["--model"]}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer folder or Hub id, if not the model's."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow the model's own code from the Hub."})
    freeze_bilm: bool | None = field(default=None, metadata={"help": "Keep the biLM fixed (default) or fine-tune it."})
    scalar_mix: str | None = field(default=None, metadata={"help": "learned, top, average or fixed."})
    scalar_mix_parameters: list[float] | None = field(
        default=None, metadata={"help": "L + 1 pre-softmax layer weights for --scalar_mix fixed."}
    )
    scalar_mix_layer_norm: bool | None = field(default=None, metadata={"help": "Layer norm before mixing."})
    scalar_mix_l2_coef: float | None = field(default=None, metadata={"help": "L2 on the mix weights (0.001)."})
    representation_dropout: float | None = field(default=None, metadata={"help": "Dropout on the ELMo vectors (0.5)."})
    keep_sentence_boundaries: bool | None = field(default=None, metadata={"help": "Pool over <S>/</S> too."})
    word_embedding_dim: int | None = field(
        default=None, metadata={"help": "Concatenate a trainable hashed word embedding of this size (0 = none)."}
    )
    word_embedding_buckets: int | None = field(default=None, metadata={"help": "Rows of the hashed word embedding."})
    head_hidden_size: int | None = field(default=None, metadata={"help": "Size of the head's biLSTM / attention."})
    bilm_dropout: float | None = field(default=None, metadata={"help": "biLM dropout while fine-tuning it."})
    ignore_mismatched_sizes: bool = field(
        default=False, metadata={"help": "Re-initialise a saved classifier whose number of labels differs."}
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
    encoding: str = field(
        default="utf-8", metadata={"help": "Encoding of the input files (default utf-8; e.g. gb18030, big5, latin-1). "
                                   "Bytes that do not decode are refused, naming the file, line and byte."}
    )
    train_encoding: str | None = field(
        default=None, metadata={"help": "Encoding of --train_file alone, where the files of a run differ (default: "
                                "--encoding)."}
    )
    validation_encoding: str | None = field(
        default=None, metadata={"help": "Encoding of --validation_file alone (default: --encoding)."}
    )
    test_encoding: str | None = field(default=None, metadata={"help": "Encoding of --test_file alone (default: "
                                                             "--encoding)."})
    overwrite_output_dir: bool = field(default=False, metadata={
        "help": "Replace what --output_dir holds (another run's model, metrics, checkpoints), or an existing "
                "predictions file; without it such a folder is refused."})
    predictions_file: str | None = field(
        default=None, metadata={"help": "Where --do_predict writes (default OUTPUT_DIR/predictions.txt)."}
    )
    verbose: bool = field(default=False, metadata={"help": "Show transformers' own warnings and load reports."})
    max_train_time: str | None = field(default=None, metadata={
        "help": "Stop training at the first step boundary once this much time is spent (90s, 20m, 1h30m, 2:30:00, or "
                "seconds), with a checkpoint of that step; then save, evaluate and predict as at the end. Counted "
                "over the whole run, resumed runs included (train/time_budget_callback.py)."})

    def __post_init__(self):
        if self.max_train_time is not None:
            parse_duration(self.max_train_time)  # a ValueError in one line


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


def head_arguments(row: FineTuningTask) -> type:
    """The dataclass of the task's head option (`row.head_option`, e.g. `--classifier_pooling`): None unless
    given, and then `row.head_default` for a new head and the saved value for a fine-tuned folder."""
    help_text = (f"{row.head_help} (default: {row.head_default} for a new head, the saved one for a fine-tuned "
                 "folder).")
    return dataclasses.make_dataclass(
        f"{row.name.title().replace('-', '')}HeadArguments",
        [(row.head_option, str | None, field(default=None, metadata={"help": help_text}))],
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
    `--help_all` every option (argparse's SystemExit(0)); a usage error of our options exits 2 (argparse). What is
    left (transformers' `TrainingArguments` options, and any mistyped one) is parsed by the run."""
    row = TASKS[task]
    argv = list(argv)
    asked = wants_help(argv)
    if asked == "short":
        sys.stdout.write(short_help(row))
        raise SystemExit(0)
    if asked == "all":
        training_parser(row, with_ours=True).print_help()
        raise SystemExit(0)
    (model, head, data, command), rest = parse_options(
        command_dataclasses(row), argv, known_only=True, prog=command_name(row), description=row.description,
        allow_abbrev=False)
    return FineTuneOptions(task, model, head, data, command, rest)


def training_parser(row: FineTuningTask, with_ours: bool = False):
    """transformers' `HfArgumentParser` of `TrainingArguments` (and of our option dataclasses too, `with_ours`: the
    help of --help_all), with the task's defaults. Imports transformers (seconds)."""
    from transformers import HfArgumentParser, TrainingArguments

    classes = (*command_dataclasses(row), TrainingArguments) if with_ours else TrainingArguments
    parser = HfArgumentParser(classes, prog=command_name(row), description=row.description)
    parser.set_defaults(**row.training_defaults)
    return parser


def wants_help(argv: list[str]) -> str | None:
    """"short" for -h/--help, "all" for --help_all, None otherwise."""
    if "--help_all" in argv or "--help-all" in argv:
        return "all"
    return "short" if "-h" in argv or "--help" in argv else None


def short_help(row: FineTuningTask) -> str:
    """The --help text: the command's own options and the common training options, from the dataclasses alone."""
    prog = command_name(row)
    parser = options_parser(
        command_dataclasses(row), prog=prog, description=row.description,
        formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        usage=f"{prog} --model_name_or_path MODEL [--train_file FILE] [--validation_file FILE] "
              "[--do_predict --test_file FILE] --output_dir DIR [options]",
        epilog="Every other transformers TrainingArguments option is accepted too: --help_all lists them.",
    )
    group = parser.add_argument_group("training (transformers TrainingArguments)")
    for name, text in COMMON_TRAINING_OPTIONS:
        group.add_argument(f"--{name}", metavar=name.upper(),
                           help=text.format(**row.training_defaults, epochs_note=row.epochs_note))
    group.add_argument("-h", "--help", action="store_true", help="This help.")
    group.add_argument("--help_all", action="store_true", help="Every option (imports transformers: slower).")
    return parser.format_help()

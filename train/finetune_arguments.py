"""The options of the fine-tuning commands, and their `--help`, without importing torch or transformers.

`--help` answers from these dataclasses and a short list of the `TrainingArguments` options a fine-tuning run
usually sets, in the time Python takes to start; `--help_all` lists every `TrainingArguments` option (it imports
transformers, so it takes seconds). Parsing proper goes through `transformers.HfArgumentParser`
(`train/finetune_cli.py`).
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

# The command's defaults where `TrainingArguments`' own (learning rate 5e-5, 3 epochs) are made for a fine-tuned
# transformer and leave a head on a frozen biLM almost untrained; measured in benchmarks/bench_finetune.md.
TRAINING_DEFAULTS = {
    "classification": {"learning_rate": 1e-2, "num_train_epochs": 10.0, "per_device_train_batch_size": 16,
                       "warmup_steps": 0.1},
    # a tagger's biLSTM needs more updates before it tags anything but O: 20 epochs of 8 sentences
    "tagging": {"learning_rate": 1e-2, "num_train_epochs": 20.0, "per_device_train_batch_size": 8,
                "warmup_steps": 0.1},
}
# A biLSTM tagger predicts only O until it has had some thousand updates (benchmarks/bench_finetune.md): on a small
# training set the epochs are raised until it has (`--min_train_steps`).
MIN_TAGGING_STEPS = 2000
EPOCHS_NOTE = {"classification": "", "tagging": "; more on a small training set: --min_train_steps"}  # in --help
# The head a fresh classifier or tagger gets when the option is not given (a fine-tuned folder keeps its own).
HEAD_DEFAULTS = {"classification": "lstm", "tagging": "lstm"}

# The TrainingArguments options worth listing in the short --help (every other one is accepted too).
COMMON_TRAINING_OPTIONS = (
    ("output_dir", "Where the model, tokenizer, metrics, checkpoints and predictions are written."),
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

    encoding: str = field(
        default="utf-8", metadata={"help": "Encoding of the input files (default utf-8; e.g. gb18030, big5, latin-1). "
                                   "Bytes that do not decode are refused, naming the file, line and byte."}
    )
    predictions_file: str | None = field(
        default=None, metadata={"help": "Where --do_predict writes (default OUTPUT_DIR/predictions.txt)."}
    )
    verbose: bool = field(default=False, metadata={"help": "Show transformers' own warnings and load reports."})


@dataclass
class ClassificationDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "TSV (label<TAB>text, header line), CSV or JSON "
                                                            "lines."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; accuracy is reported on it."})
    test_file: str | None = field(
        default=None, metadata={"help": "Sentences to label with --do_predict: one a line (.txt or any other suffix "
                                "but .tsv/.csv/.json/.jsonl), or the training formats, labels not needed."}
    )
    text_column: str | None = field(default=None, metadata={"help": "Text column (default: text/sentence/content)."})
    label_column: str | None = field(default=None, metadata={"help": "Label column (default: label)."})
    word_split: str | None = field(
        default=None, metadata={"help": "whitespace (pre-tokenized text such as SST-2), punctuation, or another "
                                "split registered in tokenization.WORD_SPLITTERS; default: the tokenizer's own."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Longest input in tokens, <S> and </S> included."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation examples."})


@dataclass
class ClassificationHeadArguments:
    classifier_pooling: str | None = field(
        default=None, metadata={"help": "mean, max, lstm or attention (default: lstm for a new head, the saved one "
                                "for a fine-tuned folder)."}
    )


@dataclass
class TaggingDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "CoNLL columns or JSON lines with tokens/tags."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; entity F1 is reported on it."})
    test_file: str | None = field(
        default=None, metadata={"help": "Sentences to tag with --do_predict: CoNLL columns (the word first; tags not "
                                "needed), JSON lines with tokens, or one sentence a line (.txt)."}
    )
    word_split: str | None = field(
        default=None, metadata={"help": "How a .txt --test_file's lines are cut into words (a name in "
                                "tokenization.WORD_SPLITTERS); default: the tokenizer's own."}
    )
    max_seq_length: int = field(default=256, metadata={"help": "Longest input in tokens, <S> and </S> included."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training sentences."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation sentences."})
    min_train_steps: int = field(
        default=MIN_TAGGING_STEPS, metadata={"help": "Train at least this many optimizer steps: when the epochs give "
                                             "fewer (a small training set), more whole epochs, as few as reach it "
                                             f"(default {MIN_TAGGING_STEPS}; 0: the epochs alone; --max_steps "
                                             "overrides both)."}
    )
    strict_iob2: bool = field(default=False, metadata={"help": "Score entities in seqeval's strict IOB2 mode."})


@dataclass
class TaggingHeadArguments:
    token_classifier_encoder: str | None = field(
        default=None, metadata={"help": "none (linear) or lstm (biLSTM) (default: lstm for a new head, the saved "
                                "one for a fine-tuned folder)."}
    )


def wants_help(argv: list[str]) -> str | None:
    """"short" for -h/--help, "all" for --help_all, None otherwise."""
    if "--help_all" in argv or "--help-all" in argv:
        return "all"
    return "short" if "-h" in argv or "--help" in argv else None


def short_help(prog: str, description: str, dataclass_types, task: str) -> str:
    """The --help text: the command's own options and the common training options, from the dataclasses alone."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        usage=f"{prog} --model_name_or_path MODEL [--train_file FILE] [--validation_file FILE] "
              "[--do_predict --test_file FILE] --output_dir DIR [options]",
        epilog="Every other transformers TrainingArguments option is accepted too: --help_all lists them.",
    )
    for kind in dataclass_types:
        group = parser.add_argument_group(kind.__name__)
        for item in dataclasses.fields(kind):
            required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
            default = "" if required or item.default is None else f" (default: {item.default})"
            text = item.metadata.get("help", "")
            group.add_argument(f"--{item.name}", *item.metadata.get("aliases", ()), required=required,
                               metavar=item.name.upper(),
                               help=text + ("" if "default" in text else default))
    defaults = TRAINING_DEFAULTS[task]
    group = parser.add_argument_group("training (transformers TrainingArguments)")
    for name, text in COMMON_TRAINING_OPTIONS:
        group.add_argument(f"--{name}", metavar=name.upper(), help=text.format(**defaults, epochs_note=EPOCHS_NOTE[task]))
    group.add_argument("-h", "--help", action="store_true", help="This help.")
    group.add_argument("--help_all", action="store_true", help="Every option (imports transformers: slower).")
    return parser.format_help()

"""The options of the fine-tuning commands, and their `--help`, without importing torch or transformers.

A command's options are `ModelArguments`, its task's head option (`head_arguments`, from its row of
`elmo_tools.tasks.TASKS`), its task's data options (the row's `data_arguments`: `ClassificationDataArguments`,
`TaggingDataArguments`), `CommandArguments` and transformers' `TrainingArguments`. `--help` answers from these
dataclasses and a short list of the `TrainingArguments` options a fine-tuning run usually sets, in the time Python
takes to start; `--help_all` lists every `TrainingArguments` option (it imports transformers, so it takes seconds).
Parsing proper goes through `transformers.HfArgumentParser` (`train/finetune_run.py`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from dataclasses import dataclass, field

from elmo_tools.tasks import FineTuningTask

# A biLSTM tagger predicts only O until it has had some thousand updates (benchmarks/bench_finetune.md): on a small
# training set the epochs are raised until it has (`--min_train_steps`).
MIN_TAGGING_STEPS = 2000

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
    train_encoding: str | None = field(
        default=None, metadata={"help": "Encoding of --train_file alone, where the files of a run differ (default: "
                                "--encoding)."}
    )
    validation_encoding: str | None = field(
        default=None, metadata={"help": "Encoding of --validation_file alone (default: --encoding)."}
    )
    test_encoding: str | None = field(default=None, metadata={"help": "Encoding of --test_file alone (default: "
                                                             "--encoding)."})
    predictions_file: str | None = field(
        default=None, metadata={"help": "Where --do_predict writes (default OUTPUT_DIR/predictions.txt)."}
    )
    verbose: bool = field(default=False, metadata={"help": "Show transformers' own warnings and load reports."})


# A task's data options (its row's `data_arguments`). Every command reads DATA_FIELDS (train/finetune_run.py), and
# `min_train_steps` where the dataclass has it; the task's own module reads the others.
DATA_FIELDS = ("train_file", "validation_file", "test_file", "word_split", "max_train_samples", "max_eval_samples")


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
    text_pair_column: str | None = field(
        default=None, metadata={"help": "Second sentence of a pair (default: text_pair, or GLUE's sentence2, "
                                "hypothesis, sentence after question, question2 beside their first column): the "
                                "head reads each sentence on its own and classifies the pair."}
    )
    problem_type: str | None = field(
        default=None, metadata={"help": "regression (a number per example, STS-B style: Pearson and Spearman "
                                "reported) or single_label_classification; default: regression when every label is "
                                "a number and some are not integers."}
    )
    label_column: str | None = field(default=None, metadata={"help": "Label column (default: label)."})
    column_names: str | None = field(
        default=None, metadata={"help": "The columns of a TSV or CSV file without a header line, in order, separated "
                                "by commas (e.g. label,question1,question2,id); a file whose first line looks like "
                                "data is refused without it."}
    )
    word_split: str | None = field(
        default=None, metadata={"help": "whitespace (pre-tokenized text such as SST-2), punctuation, or another "
                                "split registered in tokenization.WORD_SPLITTERS; default: the tokenizer's own."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Longest input in tokens, <S> and </S> included."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation examples."})


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
                                "tokenization.WORD_SPLITTERS); default: the tokenizer's own. Checked against the "
                                "training file's words."}
    )
    test_format: str | None = field(
        default=None, metadata={"help": "How --test_file is read: conll (a word a line, a blank line between "
                                "sentences) or lines (a sentence a line); default: told from the file, and said."}
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
    use_crf: bool | None = field(
        default=None, metadata={"help": "End the tagger in a linear-chain CRF (Viterbi decoding, transitions the tags' "
                                "scheme forbids never taken); default: none for a new head, the saved one's choice "
                                "for a fine-tuned folder.", "aliases": ["--crf"]}
    )
    crf_constraints: str | None = field(
        default=None, metadata={"help": "Transitions the CRF never takes: auto (from the tag names: BIO or BIOES; the "
                                "default), bio, bioes or none (IOB1 tags, where I- may open an entity)."}
    )


@dataclass
class QuestionAnsweringDataArguments:
    train_file: str | None = field(default=None, metadata={"help": "SQuAD v1.1/v2.0 JSON, or JSON lines with id, "
                                                            "question, context, answers {text, answer_start}."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; exact match and F1 are "
                                                                 "reported on it."})
    test_file: str | None = field(
        default=None, metadata={"help": "Questions to answer with --do_predict (same formats, answers not needed): "
                                "writes predictions.json, id -> answer text."}
    )
    word_split: str | None = field(
        default=None, metadata={"help": "How questions and passages are cut into words (a name in "
                                "tokenization.WORD_SPLITTERS); default: the tokenizer's own."}
    )
    max_seq_length: int = field(default=256, metadata={"help": "Tokens of a window: the question, a run of the "
                                                        "passage's words, and 4 <S>/</S>."})
    doc_stride: int = field(default=32, metadata={"help": "Words that consecutive windows of a long passage share."})
    max_question_length: int = field(default=64, metadata={"help": "Words of a question kept (its first)."})
    max_answer_length: int = field(default=30, metadata={"help": "Longest answer predicted, in words."})
    scoring: str | None = field(
        default=None, metadata={"help": "How answers are scored: words (SQuAD's rule) or characters (CMRC 2018's, for "
                                "text without spaces between words); default auto: characters when the validation "
                                "passages are mostly CJK characters. Said in the results (eval_scoring)."}
    )
    version_2_with_negative: bool | None = field(
        default=None, metadata={"help": "Let \"no answer\" compete with the best span (SQuAD 2.0); default: when the "
                                "training data has unanswerable questions, or the fine-tuned head was trained so."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training questions."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation questions."})


def wants_help(argv: list[str]) -> str | None:
    """"short" for -h/--help, "all" for --help_all, None otherwise."""
    if "--help_all" in argv or "--help-all" in argv:
        return "all"
    return "short" if "-h" in argv or "--help" in argv else None


def head_arguments(row: FineTuningTask) -> type:
    """The dataclass of the task's head option (`row.head_option`, e.g. `--classifier_pooling`): None unless
    given, and then `row.head_default` for a new head and the saved value for a fine-tuned folder."""
    help_text = (f"{row.head_help} (default: {row.head_default} for a new head, the saved one for a fine-tuned "
                 "folder).")
    return dataclasses.make_dataclass(
        f"{row.head_name.title()}HeadArguments",
        [(row.head_option, str | None, field(default=None, metadata={"help": help_text}))],
        namespace={"__module__": __name__},
    )


def data_arguments(row: FineTuningTask) -> type:
    """The dataclass of the task's data options, named by `row.data_arguments` ("module:Class"; a module that
    imports only the standard library)."""
    module, _, name = row.data_arguments.partition(":")
    return getattr(importlib.import_module(module), name)


def command_dataclasses(row: FineTuningTask) -> tuple[type, ...]:
    """The option dataclasses of the task's command, in the order `--help` lists them and parsing returns them:
    model, head, data, command (`TrainingArguments` follows them when parsing)."""
    return ModelArguments, head_arguments(row), data_arguments(row), CommandArguments


def short_help(row: FineTuningTask) -> str:
    """The --help text: the command's own options and the common training options, from the dataclasses alone."""
    prog = row.command
    parser = argparse.ArgumentParser(
        prog=prog, description=row.description, formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
        usage=f"{prog} --model_name_or_path MODEL [--train_file FILE] [--validation_file FILE] "
              "[--do_predict --test_file FILE] --output_dir DIR [options]",
        epilog="Every other transformers TrainingArguments option is accepted too: --help_all lists them.",
    )
    for kind in command_dataclasses(row):
        group = parser.add_argument_group(kind.__name__)
        for item in dataclasses.fields(kind):
            required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
            default = "" if required or item.default is None else f" (default: {item.default})"
            text = item.metadata.get("help", "")
            group.add_argument(f"--{item.name}", *item.metadata.get("aliases", ()), required=required,
                               metavar=item.name.upper(),
                               help=text + ("" if "default" in text else default))
    group = parser.add_argument_group("training (transformers TrainingArguments)")
    for name, text in COMMON_TRAINING_OPTIONS:
        group.add_argument(f"--{name}", metavar=name.upper(),
                           help=text.format(**row.training_defaults, epochs_note=row.epochs_note))
    group.add_argument("-h", "--help", action="store_true", help="This help.")
    group.add_argument("--help_all", action="store_true", help="Every option (imports transformers: slower).")
    return parser.format_help()

"""Fine-tune an ELMo sentence classifier (`ElmoForSequenceClassification`) with `transformers.Trainer`, and label new
sentences with it: the task "sequence-classification" (`TASK`, its options, and `PARTS`, its `Task`).

    elmo-finetune-classification --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file sst2/train.tsv --validation_file sst2/dev.tsv --output_dir out/sst2
    elmo-finetune-classification --model_name_or_path out/sst2 --do_predict --test_file new.txt --output_dir out/new
    torchrun --nproc_per_node 2 -m elmo_hf.cli finetune-classification ... --use_cpu     # DDP, also on CPU

Files: TSV with a header (`label<TAB>sentence`, SST-2), CSV or JSON lines with `text` and `label` columns; a test
file may also hold one sentence a line. Sentence pairs (NLI, paraphrase, STS): a second text column (`text_pair`, or
GLUE's `sentence1`/`sentence2`, `premise`/`hypothesis`, `question`/`sentence`, `question1`/`question2`) trains the
pair head (`ElmoConfig.pair_combination`), which reads each sentence on its own. Labels that are numbers, not all
integers (or `--problem_type regression`), train a regression (STS-B), reported by Pearson and Spearman. Writes the
model and tokenizer (they load with `AutoModelForSequenceClassification` / `AutoTokenizer`, also as remote code),
`train_results.json`, `eval_results.json` (accuracy), `all_results.json`, and with `--do_predict` one label per line of
the test file (`predictions.txt`; a blank line of a one-sentence-a-line file gives a blank line) to `--output_dir`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least
from elmo_hf.tools.core.errors import FileFormatError, InputError

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .common_data import (
    PAIR_COLUMNS,
    accuracy,
    folded_label,
    label_list,
    pearson,
    read_classification_file,
    read_texts_file,
    spearman,
    split_text,
    warn_if_cut,
)

logger = logging.getLogger(__name__)


@dataclass
class SequenceClassificationDataArguments:
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
    max_seq_length: int = field(default=128, metadata={
        "help": "Longest input in tokens, <S> and </S> included.", "type": at_least(MIN_SEQ_LENGTH)})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training examples.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation examples.", "type": at_least(1)})



TASK = FineTuningTask(
    name="sequence-classification",
    data_options=SequenceClassificationDataArguments,
    labels="labels",
    examples="examples",
    head_option="classifier_pooling",
    head_default="lstm",
    head_help="mean, max, lstm or attention",
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 10.0,
                                        "per_device_train_batch_size": 16, "warmup_steps": 0.1}),
    description="Fine-tune an ELMo sentence (or sentence-pair) classifier (`ElmoForSequenceClassification`) with "
                "`transformers.Trainer`,\nand label new sentences with it. A second text column (text_pair, "
                "sentence2, hypothesis, ...) trains\nthe pair head; numeric labels a regression.",
    command="elmo-finetune-classification",
)
# The one output of a regression head, as its label is named (id2label {0: "score"}): examples of scores all carry it
# as their label, and their number as "score".
SCORE_LABEL = "score"
PROBLEM_TYPES = ("regression", "single_label_classification")


def warn_of_labels_alike(examples: list[dict], path: str) -> None:
    """One warning for each set of labels that differ only in case or spaces ("pos", "Pos", "pos "), with their
    counts and first lines: each is a class of its own, which is rarely meant."""
    spelled: dict[str, dict[str, list]] = {}  # the label folded -> its spellings -> their examples
    for example in examples:
        spelled.setdefault(folded_label(example["label"]), {}).setdefault(example["label"], []).append(example)
    for spellings in spelled.values():
        if len(spellings) > 1:
            logger.warning("%s: the labels %s differ only in case or spaces: they are trained as %d classes; write "
                           "them alike if they are one", path, _spellings_said(spellings), len(spellings))


def _spellings_said(spellings: dict[str, list]) -> str:
    """The spellings of one label, each with its count of examples and the first one's place, for a warning."""
    return ", ".join(f"{label!r} ({len(found)} example{'s' * (len(found) != 1)}, first at {found[0].where()})"
                     for label, found in spellings.items())


_DECIMAL = re.compile(r"[+-]?\d+(?:\.\d+)?")


def one_spelling_per_number(examples: list[dict], path: str) -> None:
    """Labels that are all decimal numbers are classes by value: where one whole number is written in several ways
    ("1" and "1.0", "0" and "00"), its spellings are one class, spelled as the number ("1"), in place, with one
    warning each. They were two classes (a 4-class head from a 2-class file). A number written one way keeps its
    spelling ("01" stays "01"); numbers with a fraction are left as written."""
    labels = [example["label"] for example in examples]
    if not all(_DECIMAL.fullmatch(label) for label in labels):
        return  # not all numbers: names, compared as written (`warn_of_labels_alike`)
    spelled: dict[int, dict[str, list]] = {}  # a whole number -> the file's spellings of it -> their examples
    for example in examples:
        value = Decimal(example["label"])
        if value == value.to_integral_value():
            spelled.setdefault(int(value), {}).setdefault(example["label"], []).append(example)
    for number, spellings in spelled.items():
        if len(spellings) < 2:
            continue
        logger.warning("%s: the labels %s are one number: read as the class %r", path, _spellings_said(spellings),
                       str(number))
        for found in spellings.values():
            for example in found:
                example["label"] = str(number)


def is_regression(labels: list[str], problem_type: str | None) -> bool:
    """`--problem_type regression`, or none given and every label a number, not all of them integers (STS-B's
    "3.800"; SST-2's "0"/"1" stay classes)."""
    if problem_type not in (None, *PROBLEM_TYPES):
        raise ValueError(f"--problem_type must be one of {PROBLEM_TYPES}, got {problem_type!r}")
    numbers = []
    for number, label in enumerate(labels, start=1):
        try:
            numbers.append(float(label))
        except ValueError:
            if problem_type == "regression":
                raise FileFormatError(f"example {number}: --problem_type regression needs a number, got "
                                      f"{label!r}") from None
            return False
    return problem_type == "regression" or (problem_type is None and any(not x.is_integer() for x in numbers))


def compute_metrics(eval_prediction) -> dict[str, float]:
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": accuracy(logits.argmax(axis=-1).tolist(), eval_prediction.label_ids.tolist())}


def regression_metrics(eval_prediction) -> dict[str, float]:
    """Pearson and Spearman correlations of the scores (GLUE's STS-B metrics), and the mean squared error."""
    predictions = eval_prediction.predictions
    predictions = (predictions[0] if isinstance(predictions, tuple) else predictions).reshape(-1).tolist()
    references = eval_prediction.label_ids.reshape(-1).tolist()
    mse = sum((p - r) ** 2 for p, r in zip(predictions, references)) / max(len(references), 1)
    return {"pearson": pearson(predictions, references), "spearmanr": spearman(predictions, references), "mse": mse}


def check_test_kind(model, texts: list, where: str = "", data_args=None) -> None:
    pairs = bool(texts) and isinstance(texts[0], tuple)
    if pairs != (model.config.pair_combination is not None):
        head = "pairs of sentences" if not pairs else "single sentences"
        held = ("pairs (a second text column: " + ", ".join(b for _, b in PAIR_COLUMNS) + ")" if pairs
                else "single sentences")
        raise InputError(f"{where}the head classifies {head}, the file holds {held}; give a file of "
                         f"{head}" + (_pair_hint(data_args) if not pairs else ""))


def _pair_hint(data_args) -> str:
    """How a file of pairs names its second sentence's column: --text_pair_column names it in every file of a run,
    so a run that trains too (its training file read with it) needs the test file's header to name it alike."""
    named = getattr(data_args, "text_pair_column", None)
    if named:
        return f" (with the column {named!r} that --text_pair_column names, as every file of the run does)"
    if getattr(data_args, "train_file", None):
        return (" (its second sentence's column named as a pair's second column is in --train_file: "
                + ", ".join(b for _, b in PAIR_COLUMNS) + ")")
    return " (with a header naming both sentences' columns, or --text_pair_column)"


class SequenceClassification(Task):
    """Examples are sentences or sentence pairs, each with a label: a class, or a score (regression)."""

    row = TASK

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        """`[{"text": ..., "label": ...}, ...]` of a TSV, CSV or JSON-lines file (`read_classification_file`), with
        `"text_pair"` for sentence pairs; for a regression, `"label"` is `SCORE_LABEL` and `"score"` the number."""
        examples = read_classification_file(path, data_args.text_column, data_args.label_column, encoding,
                                            data_args.text_pair_column, data_args.column_names)
        if is_regression([example["label"] for example in examples], data_args.problem_type):
            for example in examples:
                example["score"], example["label"] = float(example["label"]), SCORE_LABEL
        else:
            one_spelling_per_number(examples, path)
            warn_of_labels_alike(examples, path)
        return examples

    def labels_of(self, example: dict) -> Sequence[str]:
        return (example["label"],)

    def check_training_examples(self, config, examples: list[dict], data_args, tokenizer=None) -> None:
        """A new classifier needs two labels or more: from a training file of one label (a filter gone wrong, another
        column than meant) it became a one-label head, which transformers trains as a regression towards 0, with exit
        status 0. A saved head of more labels may go on learning from such a file."""
        labels = sorted({example["label"] for example in examples})
        if len(labels) == 1 and labels != [SCORE_LABEL] and config.num_labels < 2:
            raise InputError(f"--train_file {data_args.train_file}: every example has the label {labels[0]!r}: a "
                             "classifier learns to tell two labels or more apart (a file of scores trains a "
                             "regression: --problem_type regression)")

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        words = split_text(example["text"], tokenizer, data_args.word_split)
        if "text_pair" in example:
            words = words + split_text(example["text_pair"], tokenizer, data_args.word_split)
        return words

    def sorted_labels(self, labels: Iterable[str]) -> list[str]:
        """Numerically when they all are integers (SST-2's "0", "1"), else as strings (`label_list`)."""
        return label_list(labels)

    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
        """Examples -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask`, `labels` (via
        `map`)."""
        import datasets

        pairs, scores = "text_pair" in examples[0], "score" in examples[0]
        room = data_args.max_seq_length - (4 if pairs else 2)  # words beside each sentence's <S> and </S>
        if room < (2 if pairs else 1):
            raise InputError(f"--max_seq_length {data_args.max_seq_length} leaves no room for words: <S> and </S> take "
                             f"{4 if pairs else 2} tokens{' (two of each for a pair)' if pairs else ''}; give at least "
                             f"{6 if pairs else 3} (default 128)")
        lengths = []

        def tokenize(batch):
            words = [[split_text(text, tokenizer, data_args.word_split) for text in batch[column]]
                     for column in (("text", "text_pair") if pairs else ("text",))]
            lengths.extend(sum(len(column[i]) for column in words) for i in range(len(words[0])))
            # pairs: longest_first truncation, both sentences counted in max_seq_length
            encoded = tokenizer(*words, is_split_into_words=True, truncation=True, max_length=data_args.max_seq_length)
            return {
                "input_ids": encoded["input_ids"],
                "attention_mask": encoded["attention_mask"],
                **({"token_type_ids": encoded["token_type_ids"]} if pairs else {}),
                "labels": batch["score"] if scores else [label2id[label] for label in batch["label"]],
            }

        features = datasets.Features(
            {
                "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),  # character (and word) ids
                "attention_mask": datasets.Sequence(datasets.Value("int8")),
                **({"token_type_ids": datasets.Sequence(datasets.Value("int8"))} if pairs else {}),
                "labels": datasets.Value("float32" if scores else "int64"),
            }
        )
        dataset = datasets.Dataset.from_list(examples)
        dataset = dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                              desc="Tokenizing", load_from_cache_file=False)
        warn_if_cut(examples, lengths, room, "the longer sentence of each pair loses its last words until the two hold "
                    "{room}" if pairs else "each is cut to its first {room} words")
        return dataset

    def collator(self, tokenizer):
        from .common_collators import ElmoDataCollatorForSequenceClassification

        return ElmoDataCollatorForSequenceClassification(tokenizer)

    def metrics(self, config, data_args):
        """Accuracy from the logits; Pearson and Spearman for a regression."""
        return (regression_metrics if config.problem_type == "regression" else compute_metrics), None

    def read_test_file(self, path: str, encoding: str, data_args) -> list[str] | list[tuple[str, str]]:
        """Sentences one a line (a blank line stays, as ""), or the text column of the training formats (pairs as
        `(first, second)`)."""
        return read_texts_file(path, data_args.text_column, encoding, data_args.text_pair_column,
                               data_args.column_names)

    def prediction_lines(self, model, tokenizer, texts: list, data_args, batch_size: int) -> tuple[list[str], int]:
        """One label per text or pair ("" for a blank one; a regression's score), and how many were labelled."""
        from .common_predict import predict_logits

        pairs = bool(texts) and isinstance(texts[0], tuple)
        check_test_kind(model, texts)
        kept = [i for i, text in enumerate(texts) if (all(text) if pairs else text)]
        columns = zip(*(texts[i] for i in kept)) if pairs else [[texts[i] for i in kept]]
        words = [[split_text(text, tokenizer, data_args.word_split) for text in column] for column in columns]
        lines = [""] * len(texts)
        logits = predict_logits(model, tokenizer, words[0], batch_size, words[1] if pairs else None) if kept else []
        for i, row in zip(kept, logits):
            if model.config.problem_type == "regression":
                lines[i] = f"{row[0]:.6g}"
            else:
                lines[i] = str(model.config.id2label[max(range(len(row)), key=row.__getitem__)])
        return lines, sum(1 for line in lines if line.strip())

    def head_settings(self, examples: list[dict], data_args) -> dict:
        """What the training examples call for in a new head: the pair head for pairs, a regression for scores."""
        settings = {}
        if "text_pair" in examples[0]:
            settings["pair_combination"] = "concat_diff_product"
        if "score" in examples[0]:
            settings["problem_type"] = "regression"
        return settings

    def prepare_test(self, model, tokenizer, texts: list, data_args) -> list:
        """A pair head predicts pairs and a single-sentence head single sentences: one line naming the test file
        otherwise, before anything is trained or written."""
        check_test_kind(model, texts, f"--test_file {data_args.test_file}: ", data_args)
        return texts


PARTS = SequenceClassification()

"""Fine-tune an ELMo sentence classifier (`ElmoForSequenceClassification`) with `transformers.Trainer`, and label new
sentences with it: the parts of the task "sequence-classification" (`train.finetune_run.TaskParts`; its row of
`elmo_tools.tasks.TASKS` holds its names and defaults).

    elmo-finetune-classification --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file sst2/train.tsv --validation_file sst2/dev.tsv --output_dir out/sst2
    elmo-finetune-classification --model_name_or_path out/sst2 --do_predict --test_file new.txt --output_dir out/new
    torchrun --nproc_per_node 2 -m train.finetune_classification ... --use_cpu     # DDP, also on CPU

Files: TSV with a header (`label<TAB>sentence`, SST-2), CSV or JSON lines with `text` and `label` columns; a test
file may also hold one sentence a line. Writes the model and tokenizer (they load with
`AutoModelForSequenceClassification` / `AutoTokenizer`, also as remote code), `train_results.json`,
`eval_results.json` (accuracy), `all_results.json`, and with `--do_predict` one label per line of the test file
(`predictions.txt`; a blank line of a one-sentence-a-line file gives a blank line) to `--output_dir`.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterable, Sequence

import datasets
import numpy as np

from .collators import ElmoDataCollatorForSequenceClassification
from .finetune_cli import run_command_line
from .finetune_data import accuracy, label_list, read_classification_file, read_texts_file, split_text
from .finetune_run import run
from .predict import predict_labels

logger = logging.getLogger("train.finetune_classification")  # also as __main__ (python -m)
TASK = "sequence-classification"


def read_file(path: str, encoding: str, data_args) -> list[dict]:
    """`[{"text": ..., "label": ...}, ...]` of a TSV, CSV or JSON-lines file (`read_classification_file`)."""
    return read_classification_file(path, data_args.text_column, data_args.label_column, encoding)


def labels_of(example: dict) -> Sequence[str]:
    return (example["label"],)


def words_of(example: dict, tokenizer, data_args) -> Sequence[str]:
    return split_text(example["text"], tokenizer, data_args.word_split)


def sorted_labels(labels: Iterable[str]) -> list[str]:
    """Numerically when they all are integers (SST-2's "0", "1"), else as strings (`label_list`)."""
    return label_list(labels)


def encode(examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
    """Examples -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask`, `labels` (via `map`)."""

    def tokenize(batch):
        words = [split_text(text, tokenizer, data_args.word_split) for text in batch["text"]]
        encoded = tokenizer(words, is_split_into_words=True, truncation=True, max_length=data_args.max_seq_length)
        return {
            "input_ids": encoded["input_ids"],
            "attention_mask": encoded["attention_mask"],
            "labels": [label2id[label] for label in batch["label"]],
        }

    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),  # character (and word) ids
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Value("int64"),
        }
    )
    dataset = datasets.Dataset.from_list(examples)
    return dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                       desc="Tokenizing")


def collator(tokenizer) -> ElmoDataCollatorForSequenceClassification:
    return ElmoDataCollatorForSequenceClassification(tokenizer)


def compute_metrics(eval_prediction) -> dict[str, float]:
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": accuracy(np.argmax(logits, axis=-1).tolist(), eval_prediction.label_ids.tolist())}


def metrics(config, data_args):
    """Accuracy, from the logits."""
    return compute_metrics, None


def read_test_file(path: str, encoding: str, data_args) -> list[str]:
    """Sentences one a line (a blank line stays, as ""), or the text column of the training formats."""
    return read_texts_file(path, data_args.text_column, encoding)


def prediction_lines(model, tokenizer, texts: list[str], data_args, batch_size: int) -> tuple[list[str], int]:
    """One label per text ("" for a blank one), and how many texts were labelled."""
    kept = [i for i, text in enumerate(texts) if text]
    words = [split_text(texts[i], tokenizer, data_args.word_split) for i in kept]
    lines = [""] * len(texts)
    for i, label in zip(kept, predict_labels(model, tokenizer, words, batch_size)):
        lines[i] = str(model.config.id2label[label])
    return lines, sum(1 for line in lines if line.strip())


def main(argv: list[str] | None = None, guard=None) -> dict:
    """The command in this process (`python -m train.finetune_classification`, tests, benchmarks)."""
    return run(TASK, argv, guard)


def cli() -> int:
    """The command line: bad input is one line on stderr and exit status 2; SIGINT/SIGTERM one line, 130/143.
    (The console script starts at `train.finetune_cli.classification`, which answers --help before torch loads.)"""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())

"""Fine-tune an ELMo sentence classifier (`ElmoForSequenceClassification`) with `transformers.Trainer`.

    python -m train.finetune_classification --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file sst2/train.tsv --validation_file sst2/dev.tsv --output_dir out/sst2 \\
        --classifier_pooling max --num_train_epochs 3 --per_device_train_batch_size 32 --learning_rate 1e-3
    torchrun --nproc_per_node 2 -m train.finetune_classification ... --use_cpu     # DDP, also on CPU

Files: TSV with a header (`label<TAB>sentence`, SST-2), CSV or JSON lines with `text` and `label` columns.
Writes the model and tokenizer (they load with `AutoModelForSequenceClassification` / `AutoTokenizer`, also as
remote code), `train_results.json`, `eval_results.json` (accuracy) and `all_results.json` to `--output_dir`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

import datasets
import numpy as np
from transformers import (
    Trainer,
    TrainingArguments,
    set_seed,
)

from tokenization import check_word_split

from .collators import ElmoDataCollatorForSequenceClassification
from .finetune_data import (
    InputError,
    ModelArguments,
    accuracy,
    label_list,
    limit,
    load_task_model,
    parse_arguments,
    read_classification_file,
    read_input_file,
    run_command_line,
    split_text,
    train_and_evaluate,
)

logger = logging.getLogger("train.finetune_classification")


@dataclass
class ClassificationDataArguments:
    train_file: str = field(metadata={"help": "TSV (label<TAB>text, header line), CSV or JSON lines."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; accuracy is reported on it."})
    text_column: str | None = field(default=None, metadata={"help": "Text column (default: text/sentence/content)."})
    label_column: str | None = field(default=None, metadata={"help": "Label column (default: label)."})
    word_split: str | None = field(
        default=None, metadata={"help": "whitespace (pre-tokenized text such as SST-2), punctuation, or another "
                                "split registered in tokenization.WORD_SPLITTERS; default: the tokenizer's rule."}
    )
    max_seq_length: int = field(default=128, metadata={"help": "Longest input in tokens, <S> and </S> included."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training examples."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation examples."})


@dataclass
class ClassificationHeadArguments:
    classifier_pooling: str | None = field(default=None, metadata={"help": "mean, max, lstm or attention."})


def encode(examples: list[dict], tokenizer, label2id: dict[str, int], data_args) -> datasets.Dataset:
    """Examples -> a `datasets.Dataset` of `input_ids` [tokens, 50], `attention_mask`, `labels` (via `map`)."""

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
            "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int16"))),  # char ids < 262
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Value("int64"),
        }
    )
    dataset = datasets.Dataset.from_list(examples)
    return dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                       desc="Tokenizing")


def compute_metrics(eval_prediction) -> dict[str, float]:
    logits = eval_prediction.predictions[0] if isinstance(eval_prediction.predictions, tuple) else eval_prediction.predictions
    predictions = np.argmax(logits, axis=-1)
    return {"accuracy": accuracy(predictions.tolist(), eval_prediction.label_ids.tolist())}


def main(argv: list[str] | None = None) -> dict:
    model_args, head_args, data_args, training_args = parse_arguments(
        (ModelArguments, ClassificationHeadArguments, ClassificationDataArguments, TrainingArguments), argv, logger
    )
    set_seed(training_args.seed)
    if data_args.word_split is not None:
        try:
            check_word_split(data_args.word_split, "--word_split")
        except ValueError as error:
            raise InputError(str(error)) from None

    def read(path: str, option: str) -> list[dict]:
        return read_input_file(
            lambda p: read_classification_file(p, data_args.text_column, data_args.label_column), path, option
        )

    train_examples = limit(read(data_args.train_file, "train_file"), data_args.max_train_samples)
    eval_examples = []
    if data_args.validation_file:
        eval_examples = limit(read(data_args.validation_file, "validation_file"), data_args.max_eval_samples)
    labels = label_list(e["label"] for e in train_examples + eval_examples)
    label2id = {label: i for i, label in enumerate(labels)}
    logger.info("%d training and %d validation examples, labels %s", len(train_examples), len(eval_examples), labels)

    model, tokenizer = load_task_model(model_args, training_args, "sequence-classification", label2id,
                                       "classifier_pooling", head_args.classifier_pooling, logger)

    with training_args.main_process_first(desc="tokenizing"):
        train_dataset = encode(train_examples, tokenizer, label2id, data_args)
        eval_dataset = encode(eval_examples, tokenizer, label2id, data_args) if eval_examples else None

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=ElmoDataCollatorForSequenceClassification(tokenizer),
        compute_metrics=compute_metrics,
    )
    return train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, logger)


def cli() -> int:
    """The console script: bad input is one line on stderr and exit status 2."""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())

"""Fine-tune an ELMo sentence classifier (`ElmoForSequenceClassification`) with `transformers.Trainer`, and label
new sentences with it.

    elmo-finetune-classification --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file sst2/train.tsv --validation_file sst2/dev.tsv --output_dir out/sst2
    elmo-finetune-classification --model_name_or_path out/sst2 --do_predict --test_file new.txt --output_dir out/new
    torchrun --nproc_per_node 2 -m train.finetune_classification ... --use_cpu     # DDP, also on CPU

Files: TSV with a header (`label<TAB>sentence`, SST-2), CSV or JSON lines with `text` and `label` columns; a test
file may also hold one sentence a line. Writes the model and tokenizer (they load with
`AutoModelForSequenceClassification` / `AutoTokenizer`, also as remote code), `train_results.json`,
`eval_results.json` (accuracy), `all_results.json`, and with `--do_predict` one label per line of the test file
(`predictions.txt`) to `--output_dir`.
"""

from __future__ import annotations

import logging
import sys

from .finetune_arguments import (
    ClassificationDataArguments,
    ClassificationHeadArguments,
    CommandArguments,
    ModelArguments,
)
from .finetune_cli import parse_arguments, run_command_line

logger = logging.getLogger("train.finetune_classification")
TASK = "sequence-classification"


def encode(examples: list[dict], tokenizer, label2id: dict[str, int], data_args):
    """Examples -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask`, `labels` (via `map`)."""
    import datasets

    from .finetune_data import split_text

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


def compute_metrics(eval_prediction) -> dict[str, float]:
    import numpy as np

    from .finetune_data import accuracy

    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": accuracy(np.argmax(logits, axis=-1).tolist(), eval_prediction.label_ids.tolist())}


def read_examples(data_args, encoding: str) -> tuple[list[dict], list[dict]]:
    """The training and validation examples (each file checked before anything is written)."""
    from .finetune_data import limit, read_classification_file, read_input_file

    def read(path: str | None, option: str, count: int | None) -> list[dict]:
        if not path:
            return []
        reader = lambda p, e: read_classification_file(p, data_args.text_column, data_args.label_column, e)  # noqa: E731
        return limit(read_input_file(reader, path, option, encoding), count)

    return (read(data_args.train_file, "train_file", data_args.max_train_samples),
            read(data_args.validation_file, "validation_file", data_args.max_eval_samples))


def main(argv: list[str] | None = None, guard=None) -> dict:
    model_args, head_args, data_args, command_args, training_args = parse_arguments(
        (ModelArguments, ClassificationHeadArguments, ClassificationDataArguments, CommandArguments), argv,
        "classification", __doc__.split("\n\n")[0], logger)
    from .collators import ElmoDataCollatorForSequenceClassification
    from .finetune_data import label_list
    from .finetune_run import (
        GuardedTrainer,
        before_training,
        check_known_labels,
        load_head,
        predict_after,
        read_inputs,
        train_and_evaluate,
    )

    train_examples, eval_examples, test = read_inputs(TASK, read_examples, model_args, data_args, training_args,
                                                      command_args)
    labels = label_list(e["label"] for e in train_examples + eval_examples) if train_examples else None
    label2id = {label: i for i, label in enumerate(labels)} if labels else None
    logger.info("%d training and %d validation examples%s", len(train_examples), len(eval_examples),
                f", labels {labels}" if labels else "")

    model, tokenizer = load_head(model_args, TASK, label2id, "classifier_pooling", head_args.classifier_pooling,
                                 command_args.verbose)
    before_training(model, tokenizer, TASK, data_args, training_args)
    label2id = model.config.label2id
    check_known_labels((e["label"] for e in eval_examples), label2id, "labels", data_args.validation_file)
    with training_args.main_process_first(desc="tokenizing"):
        train_dataset = encode(train_examples, tokenizer, label2id, data_args) if train_examples else None
        eval_dataset = encode(eval_examples, tokenizer, label2id, data_args) if eval_examples else None

    trainer = GuardedTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=ElmoDataCollatorForSequenceClassification(tokenizer),
        compute_metrics=compute_metrics,
        guard=guard,
    )
    results = train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, guard)
    if test is not None:
        predict_after(trainer, TASK, test, data_args, command_args, training_args, guard)
    return results


def cli() -> int:
    """The console script: bad input is one line on stderr and exit status 2; SIGINT/SIGTERM one line, 130/143."""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())

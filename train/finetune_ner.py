"""Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with `transformers.Trainer`, and tag new
sentences with it.

    elmo-finetune-ner --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll2003/train.txt --validation_file conll2003/valid.txt --output_dir out/conll
    elmo-finetune-ner --model_name_or_path out/conll --do_predict --test_file conll2003/test.txt --output_dir out/test
    torchrun --nproc_per_node 2 -m train.finetune_ner ... --use_cpu                # DDP, also on CPU

Files: CoNLL columns (`word POS chunk NER`, blank line between sentences, `-DOCSTART-` skipped; the tag is the
last column) or JSON lines with `tokens` and `tags`. Tags in IOB1, IOB2 or IOBES. Labels are aligned to the
tokenizer's positions with `word_ids()`: `<S>`, `</S>` and padding get -100. Reports entity-level precision,
recall and F1 (conlleval rules, or strict IOB2 with `--strict_iob2`) and token accuracy. Writes the model and
tokenizer (they load with `AutoModelForTokenClassification` / `AutoTokenizer`), `train_results.json`,
`eval_results.json`, `all_results.json`, and with `--do_predict` the tags of the test file (`predictions.txt`: a
CoNLL file's lines with the predicted tag appended, or one line of tags per sentence) to `--output_dir`.
"""

from __future__ import annotations

import logging
import sys

from .finetune_arguments import CommandArguments, ModelArguments, TaggingDataArguments, TaggingHeadArguments
from .finetune_cli import parse_arguments, run_command_line

logger = logging.getLogger("train.finetune_ner")
TASK = "token-classification"


def encode(sentences: list[dict], tokenizer, tag2id: dict[str, int], max_seq_length: int):
    """Sentences -> a `datasets.Dataset` of `input_ids` [tokens, row width], `attention_mask` and aligned `labels`."""
    import datasets

    from tokenization import LABEL_PAD_ID

    def tokenize(batch):
        encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_seq_length)
        labels = []
        for row, tags in enumerate(batch["tags"]):
            word_ids = encoded.word_ids(row)  # None at <S>, </S>
            labels.append([LABEL_PAD_ID if w is None else tag2id[tags[w]] for w in word_ids])
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}

    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int32"))),  # character (and word) ids
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Sequence(datasets.Value("int64")),
        }
    )
    dataset = datasets.Dataset.from_list(sentences)
    return dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                       desc="Tokenizing")


def make_compute_metrics(id2label: dict[int, str], strict: bool):
    from tokenization import LABEL_PAD_ID

    from .finetune_data import entity_scores

    def compute_metrics(eval_prediction) -> dict[str, float]:
        predictions, labels = eval_prediction.predictions, eval_prediction.label_ids
        if predictions.ndim == 3:  # logits, unless preprocess_logits_for_metrics took the argmax
            predictions = predictions.argmax(-1)
        references, predicted = [], []
        for pred_row, label_row in zip(predictions, labels):
            keep = label_row != LABEL_PAD_ID
            references.append([id2label[int(i)] for i in label_row[keep]])
            predicted.append([id2label[int(i)] for i in pred_row[keep]])
        return entity_scores(references, predicted, strict=strict)

    return compute_metrics


def argmax_logits(logits, labels):
    """Keep only the predicted ids of the evaluation batches (not the logits) in memory."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(-1)


def read_sentences(data_args, encoding: str) -> tuple[list[dict], list[dict]]:
    """The training and validation sentences (each file checked before anything is written)."""
    from .finetune_data import limit, read_input_file, read_tagging_file

    def read(path: str | None, option: str, count: int | None) -> list[dict]:
        return limit(read_input_file(read_tagging_file, path, option, encoding), count) if path else []

    return (read(data_args.train_file, "train_file", data_args.max_train_samples),
            read(data_args.validation_file, "validation_file", data_args.max_eval_samples))


def main(argv: list[str] | None = None, guard=None) -> dict:
    model_args, head_args, data_args, command_args, training_args = parse_arguments(
        (ModelArguments, TaggingHeadArguments, TaggingDataArguments, CommandArguments), argv, "tagging",
        __doc__.split("\n\n")[0], logger)
    from .collators import ElmoDataCollatorForTokenClassification
    from .finetune_data import tag_list
    from .finetune_run import (
        GuardedTrainer,
        before_training,
        check_known_labels,
        load_head,
        predict_after,
        read_inputs,
        train_and_evaluate,
    )

    train_sentences, eval_sentences, test = read_inputs(TASK, read_sentences, model_args, data_args, training_args,
                                                        command_args)
    tags = tag_list(t for s in train_sentences + eval_sentences for t in s["tags"]) if train_sentences else None
    logger.info("%d training and %d validation sentences%s", len(train_sentences), len(eval_sentences),
                f", tags {tags}" if tags else "")

    model, tokenizer = load_head(model_args, TASK, {tag: i for i, tag in enumerate(tags)} if tags else None,
                                 "token_classifier_encoder", head_args.token_classifier_encoder, command_args.verbose)
    before_training(model, tokenizer, TASK, data_args, training_args)
    tag2id = model.config.label2id
    check_known_labels((t for s in eval_sentences for t in s["tags"]), tag2id, "tags", data_args.validation_file)
    with training_args.main_process_first(desc="tokenizing"):
        train_dataset = encode(train_sentences, tokenizer, tag2id, data_args.max_seq_length) if train_sentences \
            else None
        eval_dataset = encode(eval_sentences, tokenizer, tag2id, data_args.max_seq_length) if eval_sentences \
            else None

    trainer = GuardedTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=ElmoDataCollatorForTokenClassification(tokenizer),
        compute_metrics=make_compute_metrics(model.config.id2label, data_args.strict_iob2),
        preprocess_logits_for_metrics=argmax_logits,
        guard=guard,
    )
    results = train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, guard,
                                 min_train_steps=data_args.min_train_steps)
    if test is not None:
        predict_after(trainer, TASK, test, data_args, command_args, training_args, guard)
    return results


def cli() -> int:
    """The console script: bad input is one line on stderr and exit status 2; SIGINT/SIGTERM one line, 130/143."""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())

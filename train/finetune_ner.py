"""Fine-tune an ELMo tagger (`ElmoForTokenClassification`), e.g. for NER, with `transformers.Trainer`.

    python -m train.finetune_ner --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file conll2003/train.txt --validation_file conll2003/valid.txt --output_dir out/conll \\
        --token_classifier_encoder lstm --num_train_epochs 3 --learning_rate 1e-3
    torchrun --nproc_per_node 2 -m train.finetune_ner ... --use_cpu                # DDP, also on CPU

Files: CoNLL columns (`word POS chunk NER`, blank line between sentences, `-DOCSTART-` skipped; the tag is the
last column) or JSON lines with `tokens` and `tags`. Tags in IOB1, IOB2 or IOBES. Labels are aligned to the
tokenizer's positions with `word_ids()`: `<S>`, `</S>` and padding get -100. Reports entity-level precision,
recall and F1 (conlleval rules, or strict IOB2 with `--strict_iob2`) and token accuracy. Writes the model and
tokenizer (they load with `AutoModelForTokenClassification` / `AutoTokenizer`), `train_results.json`,
`eval_results.json` and `all_results.json` to `--output_dir`.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, field

import datasets
from transformers import (
    Trainer,
    TrainingArguments,
    set_seed,
)

from .collators import LABEL_PAD_ID, ElmoDataCollatorForTokenClassification
from .finetune_data import (
    ModelArguments,
    entity_scores,
    limit,
    load_task_model,
    parse_arguments,
    read_input_file,
    read_tagging_file,
    run_command_line,
    tag_list,
    train_and_evaluate,
)

logger = logging.getLogger("train.finetune_ner")


@dataclass
class TaggingDataArguments:
    train_file: str = field(metadata={"help": "CoNLL columns or JSON lines with tokens/tags."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; entity F1 is reported on it."})
    max_seq_length: int = field(default=256, metadata={"help": "Longest input in tokens, <S> and </S> included."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N training sentences."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only the first N validation sentences."})
    strict_iob2: bool = field(default=False, metadata={"help": "Score entities in seqeval's strict IOB2 mode."})


@dataclass
class TaggingHeadArguments:
    token_classifier_encoder: str | None = field(default=None, metadata={"help": "none (linear) or lstm (biLSTM)."})


def encode(sentences: list[dict], tokenizer, tag2id: dict[str, int], max_seq_length: int) -> datasets.Dataset:
    """Sentences -> a `datasets.Dataset` of `input_ids` [tokens, 50], `attention_mask` and aligned `labels`."""

    def tokenize(batch):
        encoded = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_seq_length)
        labels = []
        for row, tags in enumerate(batch["tags"]):
            word_ids = encoded.word_ids(row)  # None at <S>, </S>
            labels.append([LABEL_PAD_ID if w is None else tag2id[tags[w]] for w in word_ids])
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}

    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Sequence(datasets.Value("int16"))),  # char ids < 262
            "attention_mask": datasets.Sequence(datasets.Value("int8")),
            "labels": datasets.Sequence(datasets.Value("int64")),
        }
    )
    dataset = datasets.Dataset.from_list(sentences)
    return dataset.map(tokenize, batched=True, remove_columns=dataset.column_names, features=features,
                       desc="Tokenizing")


def make_compute_metrics(id2label: dict[int, str], strict: bool):
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


def main(argv: list[str] | None = None) -> dict:
    model_args, head_args, data_args, training_args = parse_arguments(
        (ModelArguments, TaggingHeadArguments, TaggingDataArguments, TrainingArguments), argv, logger
    )
    set_seed(training_args.seed)

    train_sentences = limit(read_input_file(read_tagging_file, data_args.train_file, "train_file"),
                            data_args.max_train_samples)
    eval_sentences = []
    if data_args.validation_file:
        eval_sentences = limit(read_input_file(read_tagging_file, data_args.validation_file, "validation_file"),
                               data_args.max_eval_samples)
    tags = tag_list(t for s in train_sentences + eval_sentences for t in s["tags"])
    tag2id = {tag: i for i, tag in enumerate(tags)}
    logger.info("%d training and %d validation sentences, tags %s", len(train_sentences), len(eval_sentences), tags)

    model, tokenizer = load_task_model(model_args, training_args, "token-classification", tag2id,
                                       "token_classifier_encoder", head_args.token_classifier_encoder, logger)

    with training_args.main_process_first(desc="tokenizing"):
        train_dataset = encode(train_sentences, tokenizer, tag2id, data_args.max_seq_length)
        eval_dataset = encode(eval_sentences, tokenizer, tag2id, data_args.max_seq_length) if eval_sentences else None

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        processing_class=tokenizer,
        data_collator=ElmoDataCollatorForTokenClassification(tokenizer),
        compute_metrics=make_compute_metrics(dict(enumerate(tags)), data_args.strict_iob2),
        preprocess_logits_for_metrics=argmax_logits,
    )
    return train_and_evaluate(trainer, training_args, train_dataset, eval_dataset, logger)


def cli() -> int:
    """The console script: bad input is one line on stderr and exit status 2."""
    return run_command_line(main, logger)


if __name__ == "__main__":
    sys.exit(cli())

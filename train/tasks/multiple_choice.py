"""Fine-tune ELMo to choose the ending that follows a context (`ElmoForMultipleChoice`, SWAG-style rows) with
`transformers.Trainer`, and choose for new rows: the task "multiple-choice" (`TASK`, its options, and `PARTS`, its
`Task`).

    elmo-finetune multiple-choice --model_name_or_path PATH_OR_HUB_ID_OR_PRESET \\
        --train_file swag/train.csv --validation_file swag/val.csv --output_dir out/swag
    elmo-finetune multiple-choice --model_name_or_path out/swag --do_predict --test_file new.jsonl --output_dir out/new

Files: JSON lines `{"context": ..., "endings": [...], "label": i}`, or CSV/TSV with a header: SWAG's columns (`sent1`,
`sent2`, `ending0` ... `endingN`, `label`: each ending is `sent2` followed by `endingK`, as transformers' SWAG recipe
builds them) or `context`, `ending0` ... `endingN`, `label`. Every row has the same number of endings; the label is
the index of the right one (not needed in a --test_file). Reports accuracy; `--do_predict` writes the index of the
chosen ending, one a line (`predictions.txt`).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from elmo_hf.tools.core.arguments import at_least
from elmo_hf.tools.core.errors import FileFormatError

from . import MIN_SEQ_LENGTH, FineTuningTask, Task
from .common_data import accuracy, split_text


@dataclass
class MultipleChoiceDataArguments:
    train_file: str | None = field(default=None, metadata={
        "help": "JSON lines (context, endings, label) or CSV/TSV with SWAG's columns (sent1, sent2, ending0.., label) "
                "or context, ending0.., label."})
    validation_file: str | None = field(default=None, metadata={"help": "Same format; accuracy is reported on it."})
    test_file: str | None = field(default=None, metadata={
        "help": "Rows to choose for with --do_predict (same formats, labels not needed): the chosen ending's index, "
                "one a line."})
    word_split: str | None = field(default=None, metadata={
        "help": "How contexts and endings are cut into words (a name in tokenization.WORD_SPLITTERS); default: the "
                "tokenizer's own."})
    max_seq_length: int = field(default=128, metadata={
        "help": "Longest context and ending in tokens, their <S> and </S> included (the context is cut first).",
        "type": at_least(MIN_SEQ_LENGTH)})
    max_train_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N training rows.", "type": at_least(1)})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Use only the first N validation rows.", "type": at_least(1)})


TASK = FineTuningTask(
    name="multiple-choice",
    data_options=MultipleChoiceDataArguments,
    labels="choices",
    examples="rows",
    head_option="classifier_pooling",
    # max pooling lets a linear score see whether a word of the ending repeats one of the context (its maximum is
    # then no larger than the context's alone); a mean adds the two up and cannot. That is the reasoning, not a
    # measurement: tests/test_multiple_choice.py checks only that this default learns such a generated set
    head_default="max",
    head_help="max, mean, lstm or attention (over the words of the context and the ending)",
    training_defaults=MappingProxyType({"learning_rate": 1e-2, "num_train_epochs": 10.0,
                                        "per_device_train_batch_size": 8, "warmup_steps": 0.1}),
    # the choices of a row differ in a word or two, and the frozen biLM's mixed vectors alone did not tell them apart
    # on the generated set of tests/test_multiple_choice.py (chance after 120 steps, any learning rate or pooling,
    # docs/finetuning.md has the runs); a trainable word embedding beside them, as the ELMo paper's task models
    # concatenate ELMo to word vectors, learned it
    new_head_defaults=MappingProxyType({"word_embedding_dim": 32}),
    description="Fine-tune ELMo to choose the ending that follows a context (`ElmoForMultipleChoice`, SWAG-style "
                "rows) with\n`transformers.Trainer`, and choose for new rows.",
)


def _rows(path: str, encoding: str) -> list[tuple[int, dict]]:
    """(line, record) of each record of a JSON-lines, CSV or TSV file."""
    with open(path, encoding=encoding, newline="") as handle:
        if path.endswith((".jsonl", ".json")):
            rows = []
            for number, line in enumerate(handle, start=1):
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as error:
                        raise FileFormatError(f"line {number} is not JSON ({error})") from error
                    if not isinstance(row, dict):
                        raise FileFormatError(f"line {number} is not a JSON object")
                    rows.append((number, row))
            return rows
        dialect = "excel-tab" if path.endswith(".tsv") else "excel"
        reader = csv.DictReader(handle, dialect=dialect)
        return [(reader.line_num, row) for row in reader]


def _example(row: dict, line: int, labelled: bool) -> dict:
    """`{"context", "endings", "label"}` of a record (at `line` of its file) in any of the accepted layouts. An empty
    ending is refused (SWAG's `ending3` left empty would be a choice of `sent2` alone), and so is a label that is not
    a whole number (1.7 or true would be read as choice 1)."""
    if "endings" in row:
        context, endings = row.get("context"), row["endings"]
        names = [f"ending {k + 1} of 'endings'" for k in range(len(endings))] if isinstance(endings, list) else []
        own = endings
    else:
        keys = sorted((key for key in row if key.startswith("ending") and key[6:].isdigit()), key=lambda k: int(k[6:]))
        start = row.get("sent2") or ""  # SWAG: the ending's first words
        own = [row[key] for key in keys]
        endings = [f"{start} {ending}".strip() if isinstance(ending, str) else ending for ending in own]
        names = [f"column {key!r}" for key in keys]
        context = row.get("context", row.get("sent1"))
    if not isinstance(context, str) or not isinstance(endings, list) or len(endings) < 2 or \
            not all(isinstance(ending, str) for ending in endings):
        raise FileFormatError(f"line {line}: expected a context and two or more endings (context + endings, SWAG's "
                              "sent1, sent2, ending0.., or context, ending0..)")
    empty = next((name for name, ending in zip(names, own) if not ending.strip()), None)
    if empty is not None:
        raise FileFormatError(f"line {line}: the ending ({empty}) is empty: every choice needs its words (give every "
                              "row the same number of endings, each with text)")
    label = row.get("label")
    if labelled:
        label = _choice(label, len(endings), line)
    return {"context": context, "endings": endings, "label": label}


def _choice(label, endings: int, line: int) -> int:
    """The label as the index of an ending: a whole number (an int, or a string of one: CSV), from 0 to `endings`-1."""
    if isinstance(label, str) and label.strip().lstrip("-").isdigit():
        label = int(label)
    elif isinstance(label, float) and label.is_integer():
        label = int(label)
    if not isinstance(label, int) or isinstance(label, bool):
        raise FileFormatError(f"line {line}: the label {label!r} is not the index of an ending: give a whole number "
                              f"from 0 to {endings - 1}")
    if not 0 <= label < endings:
        raise FileFormatError(f"line {line}: label {label} is not the index of one of its {endings} endings (0 to "
                              f"{endings - 1})")
    return label


def _examples(path: str, encoding: str, labelled: bool) -> list[dict]:
    """The file's examples; the first row with another number of endings than the first row's is refused naming
    both lines."""
    rows = list(_rows(path, encoding))
    examples = [_example(row, line, labelled) for line, row in rows]
    for (line, _), example in zip(rows, examples):
        if len(example["endings"]) != len(examples[0]["endings"]):
            raise FileFormatError(f"line {line}: {len(example['endings'])} endings, where the first row (line "
                                  f"{rows[0][0]}) has {len(examples[0]['endings'])}: every row needs the same number")
    return examples


class ChoicesCollator:
    """Pads a batch of rows to (batch, choices, tokens, characters) with all-zero tokens (and their attention mask
    with zeros); `labels` (batch,). Holds the tokenizer, which `Trainer` saves with the model."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, rows: list[dict]) -> dict:
        import torch

        longest = max(len(choice) for row in rows for choice in row["input_ids"])
        width = len(rows[0]["input_ids"][0][0])
        ids = torch.zeros(len(rows), len(rows[0]["input_ids"]), longest, width, dtype=torch.long)
        mask = torch.zeros(ids.shape[:3], dtype=torch.long)
        for r, row in enumerate(rows):
            for c, choice in enumerate(row["input_ids"]):
                ids[r, c, : len(choice)] = torch.tensor(choice, dtype=torch.long)
                mask[r, c, : len(choice)] = 1
        batch = {"input_ids": ids, "attention_mask": mask}
        if "labels" in rows[0]:
            batch["labels"] = torch.tensor([row["labels"] for row in rows], dtype=torch.long)
        return batch


def compute_metrics(eval_prediction) -> dict[str, float]:
    logits = eval_prediction.predictions
    logits = logits[0] if isinstance(logits, tuple) else logits
    return {"accuracy": accuracy(logits.argmax(axis=-1).tolist(), eval_prediction.label_ids.tolist())}


class MultipleChoice(Task):
    """Examples are a context and its endings; the label is the index of the one that follows."""

    row = TASK
    has_label_set = False  # the answer is the index of one of the row's own endings

    def read_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return _examples(path, encoding, labelled=True)

    def words_of(self, example: dict, tokenizer, data_args) -> Sequence[str]:
        return [word for text in (example["context"], *example["endings"])
                for word in split_text(text, tokenizer, data_args.word_split)]

    def encode(self, examples: list[dict], tokenizer, label2id: dict[str, int], data_args) -> list[dict]:
        """Each row's choices as the tokenizer encodes (context, ending) pairs: `input_ids` (choices, tokens,
        characters), `attention_mask`, and the right choice's index as `labels`."""
        encoded = []
        for example in examples:
            context = split_text(example["context"], tokenizer, data_args.word_split)
            endings = [split_text(ending, tokenizer, data_args.word_split) for ending in example["endings"]]
            pairs = tokenizer([context] * len(endings), endings, is_split_into_words=True, truncation="only_first",
                              max_length=data_args.max_seq_length)
            row = {"input_ids": pairs["input_ids"], "attention_mask": pairs["attention_mask"]}
            if example["label"] is not None:
                row["labels"] = example["label"]
            encoded.append(row)
        return encoded

    def collator(self, tokenizer) -> ChoicesCollator:
        return ChoicesCollator(tokenizer)

    def metrics(self, config, data_args):
        return compute_metrics, None

    def read_test_file(self, path: str, encoding: str, data_args) -> list[dict]:
        return _examples(path, encoding, labelled=False)

    def prediction_lines(self, model, tokenizer, examples: list[dict], data_args,
                         batch_size: int) -> tuple[list[str], int]:
        """The index of the chosen ending of each row, one a line."""
        import torch

        rows = self.encode(examples, tokenizer, {}, data_args)
        pad, chosen = ChoicesCollator(tokenizer), []
        model.eval()
        for first in range(0, len(rows), batch_size):
            batch = {key: value.to(model.device) for key, value in pad(rows[first: first + batch_size]).items()}
            with torch.no_grad():
                chosen += model(**batch).logits.argmax(-1).tolist()
        return [str(index) for index in chosen], len(chosen)


PARTS = MultipleChoice()

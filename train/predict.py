"""`--do_predict`: the labels of a file of new sentences from a fine-tuned head, written whole or not at all.

Classification: one label per line of the test file (a blank line of a one-sentence-a-line file gives a blank line).
Tagging: for a file of CoNLL columns, its lines with the predicted tag appended as a last column (CoNLL-2003's layout
plus the prediction, what conlleval reads when the file had the gold tags); for JSON lines or sentences one a line,
one line of tags per sentence, one tag per word, separated by spaces.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

from .finetune_data import read_input_file, read_texts_file, read_words_file, split_text

logger = logging.getLogger(__name__)


def _batches(items: list, size: int) -> Iterator[tuple[int, list]]:
    for start in range(0, len(items), size):
        yield start, items[start: start + size]


@torch.no_grad()
def predict_labels(model, tokenizer, sentences: list[list[str]], batch_size: int) -> list[int]:
    """The argmax class of each sentence (lists of words), by batches of `batch_size`."""
    model.eval()
    predictions = []
    for _, batch in _batches(sentences, batch_size):
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt").to(model.device)
        predictions += model(**encoded).logits.argmax(-1).tolist()
    return predictions


@torch.no_grad()
def predict_tags(model, tokenizer, sentences: list[list[str]], batch_size: int) -> list[list[int]]:
    """The argmax tag of each word of each sentence (lists of words), by batches of `batch_size`."""
    model.eval()
    predictions = []
    for _, batch in _batches(sentences, batch_size):
        encoded = tokenizer(batch, is_split_into_words=True, padding=True, return_tensors="pt")
        best = model(**encoded.to(model.device)).logits.argmax(-1).tolist()  # (B, T)
        for row, words in enumerate(batch):
            tags = [None] * len(words)
            for position, word in enumerate(encoded.word_ids(row)):
                if word is not None and tags[word] is None:
                    tags[word] = best[row][position]
            predictions.append(tags)
    return predictions


def write_atomically(path: str, lines: list[str]) -> None:
    """`lines` to `path` through a temporary file beside it: an interrupt leaves the old file or none."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{Path(path).name}.", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.writelines(line + "\n" for line in lines)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def read_test_file(task: str, data_args, encoding: str):
    """The sentences of `--test_file`, read (and checked) before anything is trained or written."""
    if task == "sequence-classification":
        return read_input_file(lambda p, e: read_texts_file(p, data_args.text_column, e), data_args.test_file,
                               "test_file", encoding)
    return read_input_file(read_words_file, data_args.test_file, "test_file", encoding)


def classification_lines(model, tokenizer, texts: list[str], word_split: str | None, batch_size: int) -> list[str]:
    """One label per text ("" for a blank one)."""
    kept = [i for i, text in enumerate(texts) if text]
    labels = predict_labels(model, tokenizer, [split_text(texts[i], tokenizer, word_split) for i in kept], batch_size)
    lines = [""] * len(texts)
    for i, label in zip(kept, labels):
        lines[i] = str(model.config.id2label[label])
    return lines


def tagging_lines(model, tokenizer, test: tuple[str, list], word_split: str | None, batch_size: int) -> list[str]:
    """The CoNLL lines with the predicted tag appended, or one line of tags per sentence (module docstring)."""
    kind, items = test
    if kind == "conll":
        groups = _conll_sentences(items)
        sentences = [[items[i].split()[0] for i in group] for group in groups]
    elif kind == "json":
        sentences = items
    else:
        sentences = [split_text(line, tokenizer, word_split) for line in items]
    tags = iter(predict_tags(model, tokenizer, [s for s in sentences if s], batch_size))
    predicted = [[model.config.id2label[t] for t in next(tags)] if words else [] for words in sentences]
    if kind != "conll":
        return [" ".join(row) for row in predicted]
    appended = {i: tag for group, row in zip(groups, predicted) for i, tag in zip(group, row)}
    return [_append_column(line, appended.get(i, "O")) if line.strip() else line for i, line in enumerate(items)]


def _conll_sentences(lines: list[str]) -> list[list[int]]:
    """Indices of the token lines of each sentence (blank lines and `-DOCSTART-` end one)."""
    groups, current = [], []
    for i, line in enumerate(lines):
        if not line.strip() or line.startswith("-DOCSTART-"):
            if current:
                groups.append(current)
            current = []
        else:
            current.append(i)
    if current:
        groups.append(current)
    return groups


def _append_column(line: str, tag: str) -> str:
    return f"{line}{chr(9) if chr(9) in line else ' '}{tag}"


def write_predictions(model, tokenizer, task: str, test, word_split: str | None, batch_size: int, path: str) -> int:
    """Predicts the sentences of `test` (from `read_test_file`) and writes them to `path` whole; returns how many
    sentences were predicted."""
    if task == "sequence-classification":
        lines = classification_lines(model, tokenizer, test, word_split, batch_size)
    else:
        lines = tagging_lines(model, tokenizer, test, word_split, batch_size)
    write_atomically(path, lines)
    count = sum(1 for line in lines if line.strip()) if task == "sequence-classification" or test[0] != "conll" \
        else len(_conll_sentences(test[1]))
    logger.info("Wrote the predictions of %d sentences to %s", count, os.path.abspath(path))
    return count

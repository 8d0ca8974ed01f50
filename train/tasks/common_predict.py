"""`--do_predict`: the labels of a file of new sentences from a fine-tuned head, written whole or not at all.

What the file holds and what is written for it is the task's (the `read_test_file` and `prediction_lines` methods of
its `Task`); the argmax of a batch of sentences or words, and the writing, which every task shares, are here.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import torch

from elmo_hf.tools.core.output_paths import as_ordinary

from .common_data import read_input_file

logger = logging.getLogger(__name__)


def _batches(items: list, size: int) -> Iterator[tuple[int, list]]:
    for start in range(0, len(items), size):
        yield start, items[start: start + size]


@torch.no_grad()
def predict_logits(model, tokenizer, sentences: list[list[str]], batch_size: int,
                   second: list[list[str]] | None = None) -> list[list[float]]:
    """The logits of each sentence (lists of words), or of each pair with the `second` sentences, by batches of
    `batch_size`."""
    model.eval()
    predictions = []
    for start, batch in _batches(sentences, batch_size):
        texts = (batch,) if second is None else (batch, second[start: start + len(batch)])
        encoded = tokenizer(*texts, is_split_into_words=True, padding=True, return_tensors="pt").to(model.device)
        predictions += model(**encoded).logits.float().tolist()
    return predictions


def predict_labels(model, tokenizer, sentences: list[list[str]], batch_size: int,
                   second: list[list[str]] | None = None) -> list[int]:
    """The argmax class of each sentence (lists of words), or of each pair with the `second` sentences."""
    logits = predict_logits(model, tokenizer, sentences, batch_size, second)
    return [max(range(len(row)), key=row.__getitem__) for row in logits]


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
        as_ordinary(temporary)  # mkstemp's file is private (0600); the predictions are an ordinary file
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def read_test_file(parts, data_args, encoding: str, encoding_option: str = "--encoding"):
    """The sentences of `--test_file`, read by the task's `parts.read_test_file` (and checked) before anything is
    trained or written."""
    return read_input_file(lambda path, e: parts.read_test_file(path, e, data_args), data_args.test_file,
                           "test_file", encoding, encoding_option)


def write_predictions(model, tokenizer, parts, test, data_args, batch_size: int, path: str,
                      examples: str = "sentences") -> int:
    """Predicts the sentences of `test` (from `read_test_file`) by the task's `parts.prediction_lines` and writes
    them to `path` whole; returns how many were predicted (`examples`: what the task calls them, for the line that
    says so)."""
    lines, count = parts.prediction_lines(model, tokenizer, test, data_args, batch_size)
    write_atomically(path, lines)
    logger.info("Wrote the predictions of %d %s to %s", count, examples, os.path.abspath(path))
    return count

"""What an encoding holds besides its character ids, and how its positions align with the input's words and characters.

`ElmoBatchEncoding` is transformers' `BatchEncoding` answering, for ELMo's rows, what a fast tokenizer's encodings
answer elsewhere: `word_ids`, `sequence_ids`, `tokens`, the character offsets of every position (`offset_mapping`,
`token_to_chars`, `char_to_token`, ...). It is built from each row's alignment, (words kept, index of the first kept
word, whether `<S>`/`</S>` were added) per sentence, and the sentences' texts, whose character spans are worked out
when first asked for. `position_outputs` builds the other outputs (`attention_mask`, `token_type_ids`,
`special_tokens_mask`, `length`, `vocab_ids`), which depend only on each row's length.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
numpy, torch, transformers and its siblings.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding
from transformers.tokenization_utils_base import CharSpan, TokenSpan
from transformers.utils import TensorType

from .padding_elmo import LABEL_PAD_ID
from .word_splits_elmo import word_spans
from .word_vocab_elmo import BOS_TOKEN, EOS_TOKEN, PAD_TOKEN

logger = logging.getLogger(__name__)


class ElmoBatchEncoding(BatchEncoding):
    """`BatchEncoding` that also knows which input word each token position comes from.

    `word_ids(i)` maps each position of row `i` to the index of its word in the input (None for `<S>`, `</S>`
    and padding), `tokens(i)` gives the token strings, `sequence_ids(i)` is 0 for the words of the first sentence,
    1 for those of the second of a pair, and None elsewhere. The words of a pair's second sentence are numbered
    from 0, as transformers' tokenizers number them. These are only available on the output of
    `ElmoTokenizer.__call__`, not after `pad()`.
    """

    def __init__(self, data=None, tensor_type=None, prepend_batch_axis=False, alignment=None, batched=True,
                 pair_alignment=None, sources=None, samples=None):
        super().__init__(data, tensor_type=tensor_type, prepend_batch_axis=prepend_batch_axis,
                         n_sequences=1 if pair_alignment is None else 2)
        # alignment[i] = (words kept, index of the first kept word, has <S>/</S>); pair_alignment[i] the same for
        # the second sentence of pair i (None: single sentences)
        self._alignment = alignment
        self._pair_alignment = pair_alignment
        self._batched = batched
        # sources[s][k] = (text or None for pre-split words, all its words) of sentence s of sample k, samples[i] the
        # sample of row i (windows of one sample are rows of their own): the character spans of its words are worked
        # out when first asked for (`_word_spans`), once per sample, not on every call
        self._sources = sources
        self._samples = samples
        self._spans: dict[tuple[int, int], list[tuple[int, int]]] = {}

    def __getstate__(self):
        return {**super().__getstate__(), "alignment": self._alignment, "batched": self._batched,
                "pair_alignment": self._pair_alignment, "sources": self._sources, "samples": self._samples}

    def __setstate__(self, state):
        super().__setstate__(state)
        self._alignment = state.get("alignment")
        self._pair_alignment = state.get("pair_alignment")
        self._batched = state.get("batched", True)
        self._sources = state.get("sources")
        self._samples = state.get("samples")
        self._spans = {}

    def _positions(self, batch_index: int) -> list[tuple[int | None, int | None, str]]:
        """(word index, sentence index, token string) of every position of row `batch_index`."""
        if self._alignment is None:
            raise ValueError(
                "word_ids()/tokens() are only available on the output of ElmoTokenizer.__call__ "
                "(not after pad() or on data rebuilt from lists)"
            )
        if not self._batched and batch_index != 0:
            raise IndexError(
                f"this encoding holds a single sequence; batch_index must be 0, got {batch_index}"
            )
        segments = [self._alignment[batch_index]]
        if self._pair_alignment is not None:
            segments.append(self._pair_alignment[batch_index])
        out: list[tuple[int | None, int | None, str]] = []
        for sequence, (words, first, special) in enumerate(segments):
            words_here = [(first + k, sequence, word) for k, word in enumerate(words)]
            out.extend([(None, None, BOS_TOKEN), *words_here, (None, None, EOS_TOKEN)] if special else words_here)
        ids = self.data["input_ids"]
        length = len(ids[batch_index]) if self._batched or not isinstance(ids, list) else len(ids)
        return out + [(None, None, PAD_TOKEN)] * (length - len(out))

    def word_ids(self, batch_index: int = 0) -> list[int | None]:
        return [word for word, _, _ in self._positions(batch_index)]

    def sequence_ids(self, batch_index: int = 0) -> list[int | None]:
        return [sequence for _, sequence, _ in self._positions(batch_index)]

    def tokens(self, batch_index: int = 0) -> list[str]:
        return [token for _, _, token in self._positions(batch_index)]

    # ----- characters: transformers' BatchEncoding methods, which read a fast tokenizer's encodings elsewhere ----
    def _word_spans(self, batch_index: int, sequence: int) -> list[tuple[int, int]]:
        """The (start, end) characters of every word of sentence `sequence` of row `batch_index` in its text
        (within each word for pre-split words)."""
        if self._sources is None:
            raise ValueError("character offsets are only available on the output of ElmoTokenizer.__call__")
        sample = batch_index if self._samples is None else self._samples[batch_index]
        key = (sample, sequence)
        if key not in self._spans:
            text, words = self._sources[sequence][sample]
            if text is None:
                self._spans[key] = [(0, len(word)) for word in words]
            else:
                self._spans[key], found_all = word_spans(text, words)
                if not found_all:
                    logger.warning("The word split changed some words of sentence %d: their character offsets "
                                   "are empty", sample)
        return self._spans[key]

    def offsets(self, batch_index: int = 0) -> list[tuple[int, int]]:
        """`offset_mapping` of row `batch_index`: each position's characters in its sentence, (0, 0) for `<S>`,
        `</S>` and padding."""
        return [(0, 0) if word is None else self._word_spans(batch_index, sequence)[word]
                for word, sequence, _ in self._positions(batch_index)]

    def _row_and(self, batch_or_index: int, index: int | None) -> tuple[int, int]:
        """transformers' convention: (batch index, index), or (0, index) when only an index is given."""
        return (0, batch_or_index) if index is None else (batch_or_index, index)

    def token_to_sequence(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        return self.sequence_ids(row)[token]

    def token_to_word(self, batch_or_token_index: int, token_index: int | None = None) -> int | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        return self.word_ids(row)[token]

    def token_to_chars(self, batch_or_token_index: int, token_index: int | None = None) -> CharSpan | None:
        row, token = self._row_and(batch_or_token_index, token_index)
        word, sequence, _ = self._positions(row)[token]
        return None if word is None else CharSpan(*self._word_spans(row, sequence)[word])

    def word_to_tokens(self, batch_or_word_index: int, word_index: int | None = None,
                       sequence_index: int = 0) -> TokenSpan | None:
        row, word = self._row_and(batch_or_word_index, word_index)
        for position, (w, sequence, _) in enumerate(self._positions(row)):
            if w == word and sequence == sequence_index:
                return TokenSpan(position, position + 1)
        return None  # a word cut off by truncation

    def word_to_chars(self, batch_or_word_index: int, word_index: int | None = None,
                      sequence_index: int = 0) -> CharSpan:
        row, word = self._row_and(batch_or_word_index, word_index)
        return CharSpan(*self._word_spans(row, sequence_index)[word])

    def char_to_word(self, batch_or_char_index: int, char_index: int | None = None,
                     sequence_index: int = 0) -> int | None:
        row, char = self._row_and(batch_or_char_index, char_index)
        for word, (start, end) in enumerate(self._word_spans(row, sequence_index)):
            if start <= char < end:
                return word
        return None  # whitespace between words, or past the text

    def char_to_token(self, batch_or_char_index: int, char_index: int | None = None,
                      sequence_index: int = 0) -> int | None:
        row, char = self._row_and(batch_or_char_index, char_index)
        word = self.char_to_word(row, char, sequence_index)
        span = None if word is None else self.word_to_tokens(row, word, sequence_index)
        return None if span is None else span.start


def sentence_length(alignment_row: tuple[list[str], int, bool]) -> int:
    """The tokens of one encoded sentence: its words kept, and its <S> and </S> when added."""
    words, _, special = alignment_row
    return len(words) + (2 if special else 0)


def sentence_sources(text, text_pair, is_split_into_words: bool, batch: list, pair_batch: list | None) -> list:
    """For each sentence of the batch (and of the pairs' second sentences): (its text, or None for pre-split words;
    all its words), from which `ElmoBatchEncoding` works out character offsets."""
    if text_pair is None and pair_batch is not None:  # a list of [first, second] pairs
        text, text_pair = [a for a, _ in text], [b for _, b in text]

    def texts(given, count: int) -> list:
        if is_split_into_words:
            return [None] * count
        return [given] if isinstance(given, str) else list(given)

    sources = [list(zip(texts(text, len(batch)), batch, strict=True))]
    if pair_batch is not None:
        sources.append(list(zip(texts(text_pair, len(pair_batch)), pair_batch, strict=True)))
    return sources


def offsets_output(offsets: list[list[tuple[int, int]]], tensor_type: TensorType | None, batched: bool):
    """`offset_mapping` in the form of the other outputs: a tensor `[batch, tokens, 2]`, an array, or lists."""
    if tensor_type == TensorType.PYTORCH:
        return torch.tensor(offsets, dtype=torch.long).reshape(len(offsets), -1, 2)
    if tensor_type == TensorType.NUMPY:
        return np.array(offsets, dtype=np.int64).reshape(len(offsets), -1, 2)
    return offsets if batched else offsets[0]



def position_outputs(
    wanted: dict[str, bool | None],
    lengths: list[int],
    target: int | None,
    special: tuple[bool, list[int] | None],
    vocab_rows: list[list[int]] | None,
    tensor_type: TensorType | None,
) -> dict[str, Any]:
    """Every output besides `input_ids`, built once for tensors and lists alike: each depends only on the
    row lengths (and the vocabulary ids), on a `[batch, width]` grid that lists then cut back to each
    row's length (padded to `target` when padding). `special`: (whether `<S>`/`</S>` were added, the lengths of
    the first sentences of pairs or None)."""
    add_special_tokens, first_lengths = special
    n = np.array(lengths, dtype=np.int64).reshape(-1, 1)
    width = max(lengths) if target is None else max(target, *lengths)
    position = np.arange(width)
    real = position < n
    # where the second sentence of a pair starts (the end of the row for single sentences)
    start = n if first_lengths is None else np.array(first_lengths, dtype=np.int64).reshape(-1, 1)
    grids: dict[str, np.ndarray | None] = {}
    if wanted["attention_mask"]:
        grids["attention_mask"] = real
    if wanted["token_type_ids"]:
        grids["token_type_ids"] = real & (position >= start)
    if wanted["special_tokens_mask"]:
        ends = (position == 0) | (position == n - 1) | (position == start - 1) | (position == start)
        grids["special_tokens_mask"] = ~real | (ends & real if add_special_tokens else False)
    if wanted["length"]:
        grids["length"] = None  # the lengths themselves, not a grid
    if vocab_rows is not None:
        padded = [ids + [LABEL_PAD_ID] * (width - len(ids)) for ids in vocab_rows]
        grids["vocab_ids"] = np.array(padded, dtype=np.int64).reshape(len(lengths), width)

    if tensor_type is not None:
        return {
            key: torch.tensor(lengths, dtype=torch.int64)
            if grid is None
            else torch.from_numpy(grid.astype(np.int64))
            for key, grid in grids.items()
        }
    keep = lengths if target is None else [max(k, target) for k in lengths]
    return {key: list(lengths) if grid is None else _grid_rows(grid, keep) for key, grid in grids.items()}


def _grid_rows(grid: np.ndarray, keep: list[int]) -> list[list[int]]:
    """The rows of a `[batch, width]` grid as lists, row i cut to `keep[i]` values."""
    grid = grid.astype(np.int64)
    if all(k == grid.shape[1] for k in keep):
        return grid.tolist()
    return [grid[i, :k].tolist() for i, k in enumerate(keep)]

"""What the tokenizer accepts as text: one sentence or a batch, raw text or pre-split words, single sentences or
pairs in transformers' forms; turned into lists of words, with a one-line error naming what is wrong.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library,
transformers and its siblings.
"""

from __future__ import annotations

from typing import Any

from transformers.utils import TensorType

from .word_splits_elmo import split_words


def refuse_unsupported(text, text_target, text_pair_target) -> None:
    if text is None:
        raise TypeError(
            "ElmoTokenizer needs text: a str, a list of str, or lists of words with is_split_into_words=True; got None"
        )
    if text_target is not None or text_pair_target is not None:
        raise ValueError(
            "ElmoTokenizer encodes the model's inputs only: text_target/text_pair_target are not supported"
        )


def check_word(word: Any, where: Any) -> str:
    if not isinstance(word, str):
        raise TypeError(f"word {where} must be a str, got {type(word).__name__}: {word!r:.50}")
    return word


def as_word_batch(text: Any, is_split_into_words: bool, rule: str) -> tuple[list[list[str]], bool]:
    """Validate the input and return (a list of word lists, whether the input was a batch)."""
    if isinstance(text, str):
        if is_split_into_words:
            raise TypeError(
                "is_split_into_words=True expects a list of words (or a list of such lists), got a str"
            )
        return [split_words(text, rule)], False
    if not isinstance(text, (list, tuple)):
        hint = ": decode bytes first" if isinstance(text, (bytes, bytearray)) else ""
        raise TypeError(f"ElmoTokenizer expects a str or a list, got {type(text).__name__}{hint}")
    if len(text) == 0:
        raise ValueError(
            'ElmoTokenizer got an empty list (a batch of zero sentences); to encode an empty sentence pass "" '
            "(or [[]] with is_split_into_words=True)"
        )
    if not is_split_into_words:
        for i, item in enumerate(text):
            if not isinstance(item, str):
                hint = (
                    " (pass is_split_into_words=True for pre-split words)"
                    if isinstance(item, (list, tuple))
                    else ""
                )
                raise TypeError(f"text[{i}] must be a str, got {type(item).__name__}{hint}")
        return [split_words(item, rule) for item in text], True
    if isinstance(text[0], str):
        return [[check_word(w, f"text[{i}]") for i, w in enumerate(text)]], False
    batch = []
    for i, words in enumerate(text):
        if not isinstance(words, (list, tuple)):
            raise TypeError(f"text[{i}] must be a list of words (str), got {type(words).__name__}")
        batch.append([check_word(w, f"text[{i}][{j}]") for j, w in enumerate(words)])
    return batch, True


def _is_pair(item: Any) -> bool:
    return isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(x, str) for x in item)


def _is_pair_of_word_lists(item: Any) -> bool:
    """`(words, words)`: a pair of pre-split sentences, as transformers batches them with is_split_into_words=True."""
    return isinstance(item, (list, tuple)) and len(item) == 2 and all(
        isinstance(side, (list, tuple)) and all(isinstance(word, str) for word in side) for side in item
    )


def as_pair_batch(
    text: Any, text_pair: Any, is_split_into_words: bool, rule: Any
) -> tuple[list[list[str]], list[list[str]] | None, bool]:
    """(word lists of the first sentences, of the second ones or None for single sentences, whether the input was a
    batch). Pairs come as `text` and `text_pair` of the same form, or as a list of `[first, second]` pairs of str
    (transformers' way of batching pairs, which the zero-shot pipeline uses), or of `(words, words)` pairs of word
    lists with `is_split_into_words=True`."""
    if text_pair is None:
        is_pair = _is_pair_of_word_lists if is_split_into_words else _is_pair
        if isinstance(text, (list, tuple)) and text and all(map(is_pair, text)):
            text, text_pair = [a for a, _ in text], [b for _, b in text]
        else:
            batch, batched = as_word_batch(text, is_split_into_words, rule)
            return batch, None, batched
    first, batched = as_word_batch(text, is_split_into_words, rule)
    second, pair_batched = as_word_batch(text_pair, is_split_into_words, rule)
    if batched != pair_batched or len(first) != len(second):
        shapes = [f"a batch of {len(b)}" if is_batch else "one sentence"
                  for b, is_batch in ((first, batched), (second, pair_batched))]
        raise ValueError(f"text is {shapes[0]} and text_pair {shapes[1]}: give one second sentence for every first one")
    return first, second, batched



def tensor_type_of(return_tensors: str | TensorType | None) -> TensorType | None:
    if return_tensors is None:
        return None
    tensor_type = TensorType(return_tensors)
    if tensor_type not in (TensorType.PYTORCH, TensorType.NUMPY):
        raise ValueError(f"ElmoTokenizer returns 'pt' or 'np' tensors, got return_tensors={return_tensors!r}")
    return tensor_type

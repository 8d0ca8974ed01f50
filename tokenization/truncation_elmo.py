"""Truncation: which words of each sentence (or of each sentence of a pair) an encoding keeps.

ELMo's tokens are whole words, so truncation keeps a run of words, `(start, stop)` of the sentence's words; `max_length`
counts tokens, the `<S>` and `</S>` the tokenizer adds around each sentence included. How many words go, and from
which sentence of a pair, is transformers' own rule: its `truncate_sequences` (the tokenizer's method) cuts lists of
word positions, honouring `truncation_side` and the strategies `longest_first` (a word at a time from the longer
sentence, from the second on a tie), `only_first` and `only_second`. What it leaves to the caller is refused here
in one line: a `max_length` without room for the added tokens, and a sentence too short to lose what `only_first` /
`only_second` would take from it.

This file travels to the Hub as remote code next to `tokenization_elmo.py`: it imports only the standard library
and transformers.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator

from transformers.tokenization_utils_base import TruncationStrategy

Span = tuple[int, int]  # (start, stop) of the words kept


def kept_spans(
    truncate: Callable, strategy: TruncationStrategy, max_length: int | None, add_special_tokens: bool,
    first_lengths: list[int], second_lengths: list[int] | None,
) -> list[tuple[Span, Span | None]]:
    """The words each sentence keeps (of each pair: both spans; single sentences: `(span, None)`), so that a row's
    tokens are at most `max_length`. `truncate` is the tokenizer's `truncate_sequences`."""
    singles = second_lengths is None
    whole = [((0, a), None if singles else (0, b))
             for a, b in zip(first_lengths, [None] * len(first_lengths) if singles else second_lengths, strict=True)]
    if strategy == TruncationStrategy.DO_NOT_TRUNCATE or max_length is None:
        return whole
    if singles and strategy == TruncationStrategy.ONLY_SECOND:
        raise ValueError("truncation='only_second' needs a pair of sequences; ElmoTokenizer encodes one")
    added = (2 if singles else 4) if add_special_tokens else 0
    room = max_length - added
    if room < 0:
        what = "<S> and </S>" if singles else "<S> and </S> of both sentences of a pair"
        raise ValueError(f"max_length={max_length} leaves no room for the {what}; use max_length >= {added}")
    with _without_the_longest_first_notice(truncate):
        return [
            spans if sum(n for n in (a, b) if n) <= room else _cut(truncate, strategy, room, i, a, b, max_length)
            for i, (spans, a, b) in enumerate(zip(whole, first_lengths, second_lengths or [None] * len(whole)))
        ]


def _cut(truncate: Callable, strategy: TruncationStrategy, room: int, pair: int, a: int, b: int | None,
         max_length: int) -> tuple[Span, Span | None]:
    """The spans of one sentence (`b` None) or pair whose `a + b` words are more than `room`."""
    over = a + (b or 0) - room
    if b is not None and strategy != TruncationStrategy.LONGEST_FIRST:
        cut = 0 if strategy == TruncationStrategy.ONLY_FIRST else 1
        if (a, b)[cut] < over:
            raise ValueError(
                f"max_length={max_length} is too short for truncation={strategy.value!r}: the "
                f"{('second', 'first')[cut]} sentence of pair {pair} alone has {(b, a)[cut]} words "
                "(truncation='longest_first' cuts both)"
            )
        if (a, b)[cut] == over:  # nothing left of it: transformers 4.x would log an error and cut nothing
            return ((0, 0), (0, b)) if cut == 0 else ((0, a), (0, 0))
    elif b is None and a == over:
        return (0, 0), None
    kept, pair_kept, _ = truncate(list(range(a)), None if b is None else list(range(b)),
                                  num_tokens_to_remove=over, truncation_strategy=strategy)
    return _span(kept), None if b is None else _span(pair_kept)


def _span(positions: list[int]) -> Span:
    return (positions[0], positions[-1] + 1) if positions else (0, 0)


@contextlib.contextmanager
def _without_the_longest_first_notice(truncate: Callable) -> Iterator[None]:
    """transformers' `truncate_sequences` warns, at every pair cut by `longest_first`, that it returns no overflowing
    tokens (its slow tokenizers never do for that strategy): true of it, not of this tokenizer, and said on every
    row. Dropped while `truncate` runs, from its own module's logger only."""
    module = inspect.getmodule(getattr(truncate, "__func__", truncate))
    target = getattr(module, "logger", None)
    if not isinstance(target, logging.Logger):
        yield
        return
    notice = _DropMessage("Be aware, overflowing tokens are not returned")
    target.addFilter(notice)
    try:
        yield
    finally:
        target.removeFilter(notice)


class _DropMessage(logging.Filter):
    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)
